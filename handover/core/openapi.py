"""Schema post-processing: document the error answers every API operation can give.

Every API error is RFC 9457 problem details as ``application/problem+json`` (``handover.core.errors``),
and some answers come from the framework rather than the view: 401 without credentials, 403 for a
person without the permission, 404 for an object they may not see or a page number past the end, 400
for a body that fails validation. drf-spectacular documents only what each view declares, so this hook
(``SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]``) adds those answers where they are missing and
offers ``application/problem+json`` beside any other media type an error answer already has (PagerDuty-
format senders keep PagerDuty's own JSON shape).
"""

from __future__ import annotations

from typing import Any

PROBLEM = "application/problem+json"
PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}
PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "RFC 9457 problem details.",
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "errors": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
    },
    "required": ["type", "title", "status", "detail"],
}
DESCRIPTIONS = {
    "400": "the input fails validation (problem details name the fields)",
    "401": "no valid credentials",
    "403": "the caller may not do this",
    "404": "no such object, or one the caller may not see; or a page past the end",
}
METHODS = ("get", "post", "put", "patch", "delete")


def add_problem_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular post-processing hook: problem-details error answers on every operation."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("Problem", PROBLEM_SCHEMA)
    for path, item in result.get("paths", {}).items():
        for method in METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            responses = operation.setdefault("responses", {})
            params = operation.get("parameters", [])
            wanted = set()
            if "{" in path or any(p.get("in") == "query" and p.get("name") == "page" for p in params):
                wanted.add("404")  # an id nobody may see, or a page past the end
            if operation.get("security") != [] and {} not in operation.get("security", [{}]):
                wanted |= {"401", "403"}
            if method in ("post", "put", "patch") or any(p.get("in") == "query" for p in params):
                wanted.add("400")
            for code in wanted - set(responses):
                responses[code] = {"description": DESCRIPTIONS[code]}
            for code, response in responses.items():
                if code.isdigit() and int(code) >= 400:
                    content = response.setdefault("content", {})
                    content.setdefault(PROBLEM, {"schema": PROBLEM_REF})
    return result

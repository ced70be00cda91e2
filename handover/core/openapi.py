"""Schema post-processing: document the error answers every API operation can give.

Every API error is RFC 9457 problem details as ``application/problem+json`` (``handover.core.errors``),
and some answers come from the framework rather than the view: 401 without credentials, 403 for a
person without the permission, 404 for an object they may not see or a page number past the end, 400
for a body that fails validation. drf-spectacular documents only what each view declares, so this hook
(``SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]``) adds those answers where they are missing and
offers ``application/problem+json`` beside any other media type an error answer already has (PagerDuty-
format senders keep PagerDuty's own JSON shape). An operation that may answer 429 -- a view with DRF
throttle classes, or a handler marked ``@rate_limited(...)`` (a limit a service enforces, such as the
password re-entry's) -- gets that answer documented too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings

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
RATE_LIMITED_ATTR = "handover_rate_limited"

_F = TypeVar("_F", bound=Callable[..., Any])


def rate_limited(description: str) -> Callable[[_F], _F]:
    """Mark a view handler that may answer 429 (``description`` says which limit) for the schema."""

    def mark(handler: _F) -> _F:
        setattr(handler, RATE_LIMITED_ATTR, description)
        return handler

    return mark


def _rate_limits(generator: Any) -> dict[tuple[str, str], str]:
    """``(path, method) -> description`` of every operation that may answer 429."""
    found: dict[tuple[str, str], str] = {}
    for path, _regex, method, callback in getattr(generator, "endpoints", None) or []:
        view_class = getattr(callback, "cls", None)
        if view_class is None:
            continue
        actions = getattr(callback, "actions", None) or {}
        handler = getattr(view_class, actions.get(method.lower(), method.lower()), None)
        description = getattr(handler, RATE_LIMITED_ATTR, None)
        if description is None and getattr(view_class, "throttle_classes", None):
            description = "too many requests: the rate limit; see Retry-After"
        if description:
            found[(path, method.lower())] = description
    return found


def add_problem_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular post-processing hook: problem-details error answers on every operation."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("Problem", PROBLEM_SCHEMA)
    rate_limits = _rate_limits(generator)
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
            if (path, method) in rate_limits and "429" not in responses:
                responses["429"] = {"description": rate_limits[(path, method)]}
            for code, response in responses.items():
                if code.isdigit() and int(code) >= 400:
                    content = response.setdefault("content", {})
                    content.setdefault(PROBLEM, {"schema": PROBLEM_REF})
    return result


FRAMEWORK_EXAMPLE_URL = re.compile(r"^https?://api\.example\.org/accounts/")
EXAMPLE_ID = "3f2a9c4e-8d1b-4f7a-b6e2-1c5d9a0e7b42"
PAGE_LINKS = ("next", "previous")


def add_page_link_examples(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular post-processing hook: page links that point at this API, not DRF's placeholder.

    DRF's paginators document ``next``/``previous`` with ``http://api.example.org/accounts/?page=4``.
    Each paged list's component gets the list's own address on ``HANDOVER_BASE_URL`` instead (path
    parameters filled with an example id), keeping the paginator's query (``?page=4``, ``?cursor=...``).
    """
    base = settings.HANDOVER_BASE_URL.rstrip("/")
    schemas = result.get("components", {}).get("schemas", {})
    for path, item in result.get("paths", {}).items():
        response = (item.get("get") or {}).get("responses", {}).get("200", {})
        ref = response.get("content", {}).get("application/json", {}).get("schema", {}).get("$ref", "")
        component = schemas.get(ref.rsplit("/", 1)[-1]) if ref else None
        if not component:
            continue
        address = base + re.sub(r"\{[^}]+\}", EXAMPLE_ID, path)
        for name in PAGE_LINKS:
            link = component.get("properties", {}).get(name, {})
            example = link.get("example")
            if isinstance(example, str) and FRAMEWORK_EXAMPLE_URL.match(example):
                link["example"] = FRAMEWORK_EXAMPLE_URL.sub(address, example)
    return result

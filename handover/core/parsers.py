"""The API's body parsers: DRF's JSON, form and multipart parsers, with a nesting limit and no NUL characters.

Set as ``REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]`` (people's API and the runner's); the ingestion
endpoint has a parser of its own. A JSON body nested deeper than ``MAX_DEPTH`` levels, or a body with
a NUL character in any key or string value (PostgreSQL cannot store one in text or ``jsonb``), answers
400 problem details naming ``body`` -- never a RecursionError or a database error (a 500). Uploaded
files are bytes and are not checked here (the ledger's file reader checks its own input).
"""

from __future__ import annotations

from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ValidationError

from handover.core.fields import NUL_MESSAGE, has_nul

MAX_DEPTH = 64


def json_depth_exceeds(document: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``document`` (parsed JSON) nests objects and arrays more than ``limit`` levels deep."""
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = list(item.values())
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _refuse_nul(values: Any) -> None:
    if has_nul(values):
        raise ValidationError({"body": [NUL_MESSAGE]})


class JSONParser(parsers.JSONParser):
    """``application/json`` with at most ``MAX_DEPTH`` levels of nesting and no NUL characters."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        too_deep = ValidationError({"body": [f"The JSON body is nested too deeply (more than {MAX_DEPTH} levels)."]})
        try:
            document = super().parse(stream, media_type, parser_context)
        except RecursionError:  # the decoder itself gave up (thousands of levels)
            raise too_deep from None
        if json_depth_exceeds(document):
            raise too_deep
        _refuse_nul(document)
        return document


class FormParser(parsers.FormParser):
    """``application/x-www-form-urlencoded`` without NUL characters in names or values."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        data = super().parse(stream, media_type, parser_context)
        _refuse_nul(list(data.lists()))
        return data


class MultiPartParser(parsers.MultiPartParser):
    """``multipart/form-data`` without NUL characters in field names or values (file contents are bytes)."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        parsed = super().parse(stream, media_type, parser_context)
        _refuse_nul(list(parsed.data.lists()))
        return parsed

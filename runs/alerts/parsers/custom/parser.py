"""The adapter interface of the custom source: its settings, and ``parse`` (body in, records out)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from runs.alerts.parsers.base import FormatError, InvalidItem, ParsedAlert, ParseResult
from runs.alerts.parsers.custom.evaluation import map_document

SOURCE = "custom"
DEFAULT_SETTINGS: dict[str, Any] = {"mapping": {}, "default_tenant": None, "default_environment": None}
# Secret-looking key names anywhere in the payload are redacted by the mechanism's rules; a custom
# payload has no fixed secret paths of its own.
REDACT_PATHS: tuple[str, ...] = ()


def load_json(body: bytes) -> Any:
    """Decode a post's body as JSON; raise ``FormatError`` (400) when it is not JSON."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise FormatError(f"The body is not valid JSON: {exc}", field="body") from exc


def parse(body: bytes, *, settings: Mapping[str, Any], received_at: datetime) -> ParseResult:
    """Map a post with the integration's ``settings["mapping"]`` into records, in post order.

    Raises ``FormatError`` for a body that is not JSON or carries more than ``MAX_RECORDS`` records.
    Every other fault (a bad mapping, a missing field, an unmapped status) is a record's ``problems``.
    """
    document = load_json(body)
    outcome = map_document(document, settings.get("mapping"))
    alerts: list[ParsedAlert | InvalidItem] = [r.alert for r in outcome.records]
    return ParseResult(alerts=alerts, notes=outcome.notes)

"""Handover's own generic alert format, version 1 (``runs/demo/alerts/generic/FORMAT.md``).

One object per post, or ``{"alerts": [...]}`` with up to 1,000 objects. Since this is our own
format, a missing required field or a wrong type is a format error (400 naming the field; in a
batch the invalid items are listed by index and the valid ones processed).

Dedup key: the sender's ``dedup_key`` when given, else ``job`` + ``tenant`` + ``environment`` +
``execution_id`` + ``status`` (joined with a unit separator) -- the status makes "running" and
"succeeded" of one execution two alerts.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from runs.alerts.parsers.base import (
    AlertKind,
    FormatError,
    InvalidItem,
    ParsedAlert,
    ParseResult,
    TimeFormatError,
    load_json,
    parse_timestamp,
    summarise_error,
)

SOURCE = "generic"
SCHEMA = "handover.alert/v1"
MAX_BATCH = 1000
DEFAULT_SETTINGS: dict[str, Any] = {"default_tenant": None, "default_environment": "prod"}
REDACT_PATHS: tuple[str, ...] = ("token", "password", "secret", "alerts.*.token", "alerts.*.password")

STATUSES = ("queued", "running", "succeeded", "failed", "timed_out", "cancelled")
TRIGGERS = ("scheduled", "automatic_retry", "manual_replay", "manual_rerun", "catch_up")
TIME_FIELDS = ("window_start", "window_end", "scheduled_for", "started_at", "ended_at", "sent_at")


class _ItemError(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _text(item: Mapping[str, Any], name: str, *, required: bool = False) -> str | None:
    value = item.get(name)
    if value is None or value == "":
        if required:
            raise _ItemError(name, f"`{name}` is required")
        return None
    if not isinstance(value, str):
        raise _ItemError(name, f"`{name}` must be a string, not {type(value).__name__}")
    return value


def _time(item: Mapping[str, Any], name: str) -> datetime | None:
    try:
        return parse_timestamp(item.get(name))
    except TimeFormatError as exc:
        raise _ItemError(name, f"`{name}`: {exc}") from exc


def _ids(value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, (str, int)) for v in value):
        raise _ItemError(name, f"`{name}` must be a list of record ids")
    return [str(v) for v in value]


def _details(sent_at: datetime | None, business_impact: str | None) -> dict[str, Any]:
    """The extras kept for display: when the sender produced the alert, and its business-impact statement
    when it gave one (summarised like an error: free text from the sender)."""
    details: dict[str, Any] = {"sent_at": sent_at.isoformat() if sent_at else None}
    if business_impact:
        details["business_impact"] = summarise_error(business_impact)
    return details


def _parse_item(item: Any) -> ParsedAlert:
    if not isinstance(item, Mapping):
        raise _ItemError("", "each alert must be a JSON object")
    if item.get("schema") != SCHEMA:
        raise _ItemError("schema", f'`schema` must be "{SCHEMA}"')
    job = _text(item, "job", required=True)
    tenant = _text(item, "tenant")
    environment = _text(item, "environment")
    execution_id = _text(item, "execution_id", required=True)
    status = _text(item, "status", required=True)
    if status not in STATUSES:
        raise _ItemError("status", f"`status` must be one of {', '.join(STATUSES)}")
    trigger = _text(item, "trigger")
    if trigger is not None and trigger not in TRIGGERS:
        raise _ItemError("trigger", f"`trigger` must be one of {', '.join(TRIGGERS)}")
    attempt = item.get("attempt")
    if attempt is not None and (isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1):
        raise _ItemError("attempt", "`attempt` must be an integer >= 1")
    times = {name: _time(item, name) for name in TIME_FIELDS}
    if times["scheduled_for"] is None and times["started_at"] is None and times["window_start"] is None:
        raise _ItemError("scheduled_for", "`scheduled_for` is required (or `started_at`, or a window)")
    if (times["window_start"] is None) != (times["window_end"] is None):
        missing = "window_end" if times["window_end"] is None else "window_start"
        raise _ItemError(missing, "`window_start` and `window_end` go together: give both or neither")
    if times["window_start"] and times["window_end"] and times["window_end"] <= times["window_start"]:
        raise _ItemError("window_end", "`window_end` must be after `window_start`")
    items = item.get("items")
    runner_items = None
    if items is not None:
        if not isinstance(items, Mapping):
            raise _ItemError("items", "`items` must be an object of id lists")
        runner_items = {k: _ids(items.get(k), f"items.{k}") for k in ("attempted", "completed", "failed")}
    error = item.get("error")
    if error is not None and not isinstance(error, str):
        raise _ItemError("error", "`error` must be a string")
    dedup = _text(item, "dedup_key") or "\x1f".join(
        [job or "", tenant or "", environment or "", execution_id or "", status]
    )
    log_url = _text(item, "log_url") or ""
    return ParsedAlert(
        dedup_key=dedup,
        kind=AlertKind.ATTEMPT,
        job_key=job,
        tenant=tenant,
        environment=environment,
        window_start=times["window_start"],
        window_end=times["window_end"],
        scheduled_for=times["scheduled_for"],
        execution_id=execution_id,
        attempt_number=attempt,
        # no trigger given: a source attempt number above 1 says retry; else Handover infers it on the slot
        trigger=trigger or ("automatic_retry" if (attempt or 1) > 1 else None),
        status=status,
        started_at=times["started_at"],
        ended_at=times["ended_at"],
        error_summary=summarise_error(error),
        correlation_ref=_text(item, "correlation_id") or "",
        log_url=log_url if log_url.startswith(("http://", "https://")) else "",
        config_version=_text(item, "config_version") or "",
        replay_key=_text(item, "replay_key") or "",
        runner_items=runner_items,
        occurred_at=times["ended_at"]
        if status in ("succeeded", "failed", "timed_out", "cancelled")
        else times["started_at"],
        summary=f"{job} {execution_id} {status}",
        details=_details(times["sent_at"], _text(item, "business_impact")),
    )


def parse(body: bytes, *, settings: Mapping[str, Any], received_at: datetime) -> ParseResult:
    """Parse a generic-format post into records.

    Raises ``FormatError`` (400) for invalid JSON, a wrong top-level shape, an empty or oversized
    batch, or -- for a single-object post -- any invalid field. In a batch an invalid item becomes
    an ``InvalidItem`` naming ``alerts.<index>.<field>``.
    """
    try:
        document = load_json(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise FormatError(f"The body is not valid JSON: {exc}", field="body") from exc
    if isinstance(document, Mapping) and "alerts" in document and "schema" not in document:
        batch = document["alerts"]
        if not isinstance(batch, list) or not batch:
            raise FormatError("`alerts` must be a non-empty list of alert objects", field="alerts")
        if len(batch) > MAX_BATCH:
            raise FormatError(f"A batch holds at most {MAX_BATCH} alerts, not {len(batch)}", field="alerts")
        records: list[ParsedAlert | InvalidItem] = []
        for index, item in enumerate(batch):
            try:
                records.append(_parse_item(item))
            except _ItemError as exc:
                name = f"alerts.{index}.{exc.field}" if exc.field else f"alerts.{index}"
                records.append(InvalidItem(field=name, message=exc.message))
        return ParseResult(alerts=records)
    if not isinstance(document, Mapping):
        raise FormatError('The body must be one alert object or {"alerts": [...]}', field="body")
    try:
        return ParseResult(alerts=[_parse_item(document)])
    except _ItemError as exc:
        raise FormatError(exc.message, field=exc.field or "body") from exc

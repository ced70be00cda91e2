"""PagerDuty Events API v2 alert events (``trigger`` / ``acknowledge`` / ``resolve``).

Format: https://developer.pagerduty.com/docs/events-api-v2-overview and
https://developer.pagerduty.com/docs/send-alert-event. One event per post; the sender's key travels in the
body as ``routing_key`` (no header, no signature): ``credential_from_body`` offers it to the mechanism and
it is redacted before the body is stored. Run details travel in ``payload.custom_details`` under the
generic format's names (conventions in ``DEFAULT_SETTINGS``). Answers use PagerDuty's own response shapes
(``render_response``).

Dedup key (computed before redaction, includes the event's state, never includes ``routing_key``):
sha256 of the JSON list ``[dedup_key, event_action, custom_details.execution_id]``; with no execution id
(resolve, acknowledge, a string ``custom_details``) the sha256 of the canonical body takes the execution
id's place; with no ``dedup_key`` either, the key is the sha256 of the canonical body. The canonical body
is the event without ``routing_key``, as JSON with sorted keys and no whitespace. One PagerDuty
``dedup_key`` shared by two executions therefore does not merge them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from runs.alerts.parsers.base import (
    AlertKind,
    FormatError,
    ParsedAlert,
    ParseResult,
    PathReader,
    as_mapping,
    http_link,
    load_json,
    read_timestamp,
    sha256_json,
    summarise_error,
)

SOURCE = "pagerduty"

# Dotted paths from the event's top level; a list means "this, else that"; None: not configured.
_DETAILS = "payload.custom_details"
DEFAULT_SETTINGS: dict[str, Any] = {
    "job_from": "payload.component",
    "tenant_from": ["payload.group", f"{_DETAILS}.tenant"],
    "environment_from": f"{_DETAILS}.env",
    "window_start_from": f"{_DETAILS}.window_start",
    "window_end_from": f"{_DETAILS}.window_end",
    "scheduled_for_from": f"{_DETAILS}.scheduled_for",
    "execution_id_from": f"{_DETAILS}.execution_id",
    "attempt_from": f"{_DETAILS}.attempt",
    "trigger_from": f"{_DETAILS}.trigger",
    "started_at_from": f"{_DETAILS}.started_at",
    "ended_at_from": [f"{_DETAILS}.ended_at", "payload.timestamp"],
    "error_from": f"{_DETAILS}.error",
    "exception_from": f"{_DETAILS}.exception",  # kept for display beside the error
    "correlation_from": f"{_DETAILS}.correlation_id",
    "config_version_from": f"{_DETAILS}.config_version",
    "log_link_text": "Execution logs",  # the ``links[]`` entry whose ``text`` this is carries the log link
    "default_tenant": None,
    "default_environment": None,
}

REDACT_PATHS: tuple[str, ...] = ("routing_key",)

# PagerDuty's documented limits and enums (violations are 400 "invalid event", as PagerDuty answers).
EVENT_ACTIONS = ("trigger", "acknowledge", "resolve")
SEVERITIES = ("critical", "error", "warning", "info")
SUMMARY_MAX_CHARS = 1024
DEDUP_KEY_MAX_CHARS = 255
_KINDS = {"trigger": AlertKind.ATTEMPT, "acknowledge": AlertKind.ACKNOWLEDGE, "resolve": AlertKind.RESOLVE}


def credential_from_body(body: bytes) -> str | None:
    """Return the event's ``routing_key`` (the integration key), or None; never raises."""
    try:
        data = load_json(body)
    except ValueError:
        return None
    key = data.get("routing_key") if isinstance(data, dict) else None
    return key if isinstance(key, str) and key else None


def parse(body: bytes, *, settings: Mapping[str, Any], received_at: datetime) -> ParseResult:
    """Parse one Events v2 event into one record.

    Raises ``FormatError`` (every broken field named, PagerDuty's messages) for invalid JSON, an unknown
    ``event_action``, a missing or over-long ``dedup_key`` (255 characters), and for a trigger a missing
    payload, ``summary`` (1,024 characters), ``source`` or ``severity`` outside the enum. An acknowledge or
    resolve needs no payload, so its payload is not validated. ``response["dedup_key"]`` is the key PagerDuty
    would echo: the sender's, or for a trigger without one a key generated from the body, as PagerDuty does.
    """
    try:
        event = load_json(body)
    except ValueError as exc:
        raise FormatError(f"the body is not valid JSON ({exc})", field="") from exc
    if not isinstance(event, dict):
        raise FormatError("the body must be a JSON object (one PagerDuty event)", field="")
    _validate(event)
    action: str = event["event_action"]
    pd_key: str = event.get("dedup_key") or ""
    body_hash = sha256_json({k: v for k, v in event.items() if k != "routing_key"})  # routing_key is a secret
    payload = as_mapping(event.get("payload"))
    trigger = action == "trigger"
    problems: list[str] = []
    read = PathReader(event, problems)
    record = ParsedAlert(dedup_key="", kind=_KINDS[action])
    # An acknowledge/resolve is attached by ``dedup_key`` to earlier triggers, so missing run identity is no
    # problem there; identity found in its payload is still carried.
    record.job_key, record.tenant, record.environment = read.run_identity(settings, required=trigger)
    record.execution_id = read.text(settings.get("execution_id_from"), "execution id", required=trigger)
    record.window_start, record.window_end = read.window(settings)
    record.scheduled_for = read.time(settings.get("scheduled_for_from"))
    record.attempt_number = read.integer(settings.get("attempt_from"))
    details = payload.get("custom_details")
    if trigger:
        if details not in (None, "") and not isinstance(details, dict):
            problems.append("`payload.custom_details` is text, not an object: no run detail can be read from it")
        record.status = "failed"
        record.trigger = read.trigger(settings.get("trigger_from"), record.attempt_number)
        record.started_at = read.time(settings.get("started_at_from"))
        record.ended_at = read.time(settings.get("ended_at_from"))
        record.error_summary = summarise_error(read.text(settings.get("error_from"), "error"))
        record.correlation_ref = read.text(settings.get("correlation_from"), "correlation") or ""
        record.config_version = read.text(settings.get("config_version_from"), "config") or ""
        record.log_url = _log_link(event.get("links"), settings.get("log_link_text"))
        record.occurred_at = record.ended_at
    else:
        # acknowledge/resolve: the event's own time, when it has one (usually none: the received time).
        record.occurred_at = read_timestamp(payload.get("timestamp"), "`payload.timestamp`", problems)
    if not pd_key:
        # Only a trigger may omit it: PagerDuty then generates one and returns it; ours is derived from the
        # body (32 hex characters, like PagerDuty's), so reprocessing the stored body yields the same key.
        pd_key = body_hash[:32]
        record.dedup_key = body_hash
    else:
        record.dedup_key = sha256_json([pd_key, action, record.execution_id or body_hash])
    record.group_ref = pd_key  # acknowledge/resolve attach to the latest trigger under this key
    record.summary = str(payload.get("summary") or f"{action} for {pd_key}")[:200]
    record.problems = problems
    notes: list[str] = []
    severity = payload.get("severity")
    if severity is not None and severity not in SEVERITIES:
        notes.append(f"severity {severity!r} is not one of {', '.join(SEVERITIES)} (not checked for {action})")
    record.details = {
        "event_action": action,
        "dedup_key": pd_key,
        "severity": severity,
        "source": payload.get("source"),
        "class": payload.get("class"),
        "timestamp": payload.get("timestamp"),
        "exception": read.text(settings.get("exception_from"), "exception"),
        "custom_details": details,  # any JSON, a plain string included
        "client": event.get("client"),
        "client_url": http_link(event.get("client_url")),
        "links": [
            {"href": http_link(item.get("href")), "text": item.get("text")}
            for item in event.get("links") or []
            if isinstance(item, dict) and http_link(item.get("href"))
        ],
        "notes": notes,
    }
    return ParseResult(alerts=[record], response={"dedup_key": pd_key})


def render_response(
    *,
    delivery_id: Any,
    alerts: list[dict[str, Any]],
    error: FormatError | None,
    response: Mapping[str, Any] | None = None,
) -> tuple[int, dict[str, Any]]:
    """Answer in PagerDuty Events v2's shape: ``(202, success)`` or ``(400, invalid event)``.

    ``response`` is ``ParseResult.response`` (the ``dedup_key`` to echo); without it the ``group_ref`` of
    the first alert dict is used. ``delivery`` is added so a person can find the stored post.
    """
    if error is not None:
        messages = [message for found in error.errors.values() for message in found] or [error.message]
        body: dict[str, Any] = {
            "status": "invalid event",
            "message": "Event object is invalid",
            "errors": messages,
        }
        status = 400
    else:
        key = (response or {}).get("dedup_key") or next(
            (a.get("group_ref") for a in alerts if a.get("group_ref")), None
        )
        body = {"status": "success", "message": "Event processed", "dedup_key": key}
        status = 202
    if delivery_id is not None:
        body["delivery"] = str(delivery_id)
    return status, body


def _validate(event: Mapping[str, Any]) -> None:
    errors: dict[str, list[str]] = {}
    action = event.get("event_action")
    if action not in EVENT_ACTIONS:
        errors["event_action"] = [f"'event_action' must be one of {', '.join(EVENT_ACTIONS)} (got {action!r})"]
    key = event.get("dedup_key")
    if key is not None and not isinstance(key, str):
        errors["dedup_key"] = ["'dedup_key' must be a string"]
    elif isinstance(key, str) and len(key) > DEDUP_KEY_MAX_CHARS:
        errors["dedup_key"] = [f"'dedup_key' is too long ({len(key)} characters; the limit is {DEDUP_KEY_MAX_CHARS})"]
    elif not key and action in ("acknowledge", "resolve"):
        errors["dedup_key"] = [f"'dedup_key' is required for {action}"]
    if action == "trigger":
        payload = event.get("payload")
        if not isinstance(payload, dict):
            errors["payload"] = ["'payload' is required for trigger and must be an object"]
        else:
            summary = payload.get("summary")
            if not isinstance(summary, str) or not summary.strip():
                errors["payload.summary"] = ["'payload.summary' is required"]
            elif len(summary) > SUMMARY_MAX_CHARS:  # characters, not bytes
                too_long = f"({len(summary)} characters; the limit is {SUMMARY_MAX_CHARS})"
                errors["payload.summary"] = [f"'payload.summary' is too long {too_long}"]
            if not isinstance(payload.get("source"), str) or not payload["source"].strip():
                errors["payload.source"] = ["'payload.source' is required"]
            if payload.get("severity") not in SEVERITIES:
                got = payload.get("severity")
                errors["payload.severity"] = [
                    f"'payload.severity' must be one of {', '.join(SEVERITIES)} (got {got!r})"
                ]
    if errors:
        first = next(iter(errors))
        raise FormatError(
            "Event object is invalid: " + "; ".join(m for ms in errors.values() for m in ms),
            field=first,
            errors=errors,
        )


def _log_link(links: Any, text: Any) -> str:
    """The href of the ``links[]`` entry whose ``text`` is the configured one (http(s) only)."""
    for item in links if isinstance(links, list) else []:
        if isinstance(item, dict) and text and item.get("text") == text:
            return http_link(item.get("href"))
    return ""

"""AWS EventBridge Scheduler dead-letter messages (``POST /api/v1/alerts/eventbridge-scheduler/``).

Scheduler writes a message to the schedule's SQS dead-letter queue when invoking the target failed (retries
exhausted, or a non-retryable error); a forwarder posts what it received, either an SQS ``ReceiveMessage``
response (``Messages[]``, ``MessageAttributes.<NAME>.StringValue``) or a Lambda SQS event (``Records[]``,
camelCase ``messageAttributes.<NAME>.stringValue``). Each message is one record. Public documentation:

- dead-letter attributes: https://docs.aws.amazon.com/scheduler/latest/UserGuide/configuring-schedule-dlq.html
- context attributes: https://docs.aws.amazon.com/scheduler/latest/UserGuide/managing-schedule-context-attributes.html
- ReceiveMessage: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ReceiveMessage.html
- Lambda SQS records: https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html

Identity comes from the attributes only: the job is the schedule name (last segment of ``SCHEDULE_ARN``),
tenant and environment come from the schedule group split at its last separator, the scheduled time is
``SCHEDULED_TIME``. The body (the target's input) is never read: it may be plain text, truncated or stale.

Dedup key: ``sqs-message:<MessageId>`` (``messageId`` in Lambda records) -- the same in both wrappers and on
every redelivery; never the ``ReceiptHandle`` or ``ApproximateReceiveCount``. Every DLQ message reports one
failed invocation, so the state needs no field of its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from runs.alerts.parsers.base import (
    FormatError,
    InvalidItem,
    ParsedAlert,
    ParseResult,
    TimeFormatError,
    as_mapping,
    load_json,
    parse_epoch,
    read_integer,
    read_timestamp,
    sha256_text,
    summarise_error,
)

SOURCE = "eventbridge-scheduler"
# Whether the sender can sign its posts (runs.catalog.keys.source_can_sign):
# a dead-letter message relayed from SQS is not signed by the scheduler.
CAN_SIGN = False

# Each ``*_from`` names a part of SCHEDULE_ARN: ``schedule_name``, ``schedule_group``, or the group split at
# its LAST ``group_separator``: ``group_before_separator`` (fjord-freight) / ``group_after_separator`` (prod).
# Like every ``*_from`` setting it may be a list, tried in order (the first part the ARN has).
DEFAULT_SETTINGS: dict[str, Any] = {
    "job_from": "schedule_name",
    "tenant_from": "group_before_separator",
    "environment_from": "group_after_separator",
    "group_separator": "-",
    "default_tenant": None,
    "default_environment": None,
    "timeout_conditions": ["MaximumEventAgeInSeconds"],  # EXHAUSTED_RETRY_CONDITION values meaning timed_out
}

# Receipt handles are not secrets. A forwarder that wraps temporary AWS credentials around the messages would
# leak them; the body is free text (the mechanism's free-text redaction covers it).
REDACT_PATHS: tuple[str, ...] = (
    "Credentials.SecretAccessKey",
    "Credentials.SessionToken",
    "credentials.secretAccessKey",
    "credentials.sessionToken",
)

# arn:aws:scheduler:<region>:<account>:schedule/<group>/<name>; AWS's own doc example has no group segment.
_SCHEDULE_ARN = re.compile(r"arn:[\w-]+:scheduler:[^:]*:[^:]*:schedule/(?:(?P<group>[^/]+)/)?(?P<name>[^/]+)")
_WRAPPERS = {  # list key -> (id, body, system attributes, message attributes, value key)
    "Messages": ("MessageId", "Body", "Attributes", "MessageAttributes", "StringValue"),
    "Records": ("messageId", "body", "attributes", "messageAttributes", "stringValue"),
}


def _attributes(message: Mapping[str, Any], names: tuple[str, ...], at: str) -> dict[str, str]:
    """Message attributes as ``{NAME: text}``; every type (``Number`` too) carries its value as a string."""
    raw = message.get(names[3])
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise FormatError(f"{names[3]} must be an object", field=f"{at}.{names[3]}")
    values: dict[str, str] = {}
    for name, attribute in raw.items():
        value = attribute.get(names[4]) if isinstance(attribute, Mapping) else None
        if isinstance(value, str):
            values[str(name)] = value
    return values


def _message(message: Any, names: tuple[str, ...], settings: Mapping[str, Any], at: str) -> ParsedAlert:
    """One DLQ message -> one failed invocation (raises ``FormatError`` when it is not an SQS message)."""
    if not isinstance(message, Mapping):
        raise FormatError("each message must be a JSON object", field=at)
    message_id = message.get(names[0])
    if not isinstance(message_id, str) or not message_id:
        raise FormatError(f"{names[0]} is required", field=f"{at}.{names[0]}")
    attrs = _attributes(message, names, at)
    problems: list[str] = []
    alert = ParsedAlert(dedup_key=f"sqs-message:{message_id}")

    arn = attrs.get("SCHEDULE_ARN", "")
    match = _SCHEDULE_ARN.fullmatch(arn)
    group, name = (match.group("group"), match.group("name")) if match else (None, None)
    separator = str(settings.get("group_separator") or "-")
    before, after = group.rsplit(separator, 1) if group and separator in group else (None, None)
    parts = {
        "schedule_name": name,
        "schedule_group": group,
        "group_before_separator": before or None,
        "group_after_separator": after or None,
    }
    found: dict[str, str | None] = {}
    for field in ("job", "tenant", "environment"):
        source = settings.get(f"{field}_from")
        tried = _part_names(source)
        found[field] = next((parts[n] for n in tried if parts.get(n)), None) or settings.get(f"default_{field}")
        if not found[field] and not any(n in parts for n in tried):
            problems.append(f"no {field}: setting {field}_from {source!r} is not one of {', '.join(parts)}")
    alert.job_key, alert.tenant, alert.environment = found["job"], found["tenant"], found["environment"]
    if not arn:
        problems.append("no SCHEDULE_ARN attribute: job, tenant and environment cannot be read")
    elif not match:
        problems.append(f"SCHEDULE_ARN {arn!r} is not a schedule ARN (arn:aws:scheduler:…:schedule/<group>/<name>)")
    else:
        why = (
            f"SCHEDULE_ARN {arn!r} has no schedule group"
            if not group
            else f"schedule group {group!r} has no {separator!r} between tenant and environment"
        )
        unread = [
            f
            for f, value in found.items()
            if not value and any(n in parts for n in _part_names(settings.get(f"{f}_from")))
        ]
        if unread:
            expected = f"(expected <tenant>{separator}<environment>, or a default)"
            problems.append(f"no {' and no '.join(unread)}: {why} {expected}")

    # RETRY_ATTEMPTS counts the retries after the first invocation: this message reports attempt value + 1.
    retries = read_integer(attrs.get("RETRY_ATTEMPTS"), "RETRY_ATTEMPTS", problems)
    if "RETRY_ATTEMPTS" not in attrs:
        problems.append("no RETRY_ATTEMPTS attribute: the attempt number cannot be read")
    alert.attempt_number = retries + 1 if retries is not None else None
    alert.trigger = "automatic_retry" if (alert.attempt_number or 1) > 1 else "scheduled"
    alert.execution_id = attrs.get("EXECUTION_ID") or None
    if not alert.execution_id:
        problems.append("no EXECUTION_ID attribute: the invocation cannot be identified")
    condition = attrs.get("EXHAUSTED_RETRY_CONDITION", "")  # absent: a non-retryable error, sent at once
    alert.status = "timed_out" if condition in (settings.get("timeout_conditions") or []) else "failed"
    # SCHEDULED_TIME is both the run's fire time and this invocation's planned start (UTC, second precision).
    alert.scheduled_for = read_timestamp(attrs.get("SCHEDULED_TIME"), "SCHEDULED_TIME", problems)
    if "SCHEDULED_TIME" not in attrs:  # Scheduler always sends it; without it the run cannot be placed
        problems.append("no SCHEDULED_TIME attribute: the scheduled time, and so the window, is unknown")
    alert.scheduled_at = alert.scheduled_for
    code, text = attrs.get("ERROR_CODE", ""), attrs.get("ERROR_MESSAGE", "")
    alert.error_summary = summarise_error(f"{code}: {text}" if code and text else code or text)
    alert.correlation_ref = alert.execution_id or ""
    system = as_mapping(message.get(names[2]))
    try:  # SentTimestamp: epoch MILLISECONDS as a string, ~ when Scheduler gave up
        sent = system.get("SentTimestamp")
        alert.occurred_at = parse_epoch(sent, unit="ms") if sent not in (None, "") else None
    except TimeFormatError as exc:
        problems.append(f"SentTimestamp: {exc}")

    body = message.get(names[1])
    truncated = attrs.get("IS_PAYLOAD_TRUNCATED", "").lower() == "true"
    alert.details = {
        "message_id": message_id,
        "schedule_arn": arn or None,
        "schedule_group": group,
        "target_arn": attrs.get("TARGET_ARN"),
        "exhausted_retry_condition": condition or None,
        "earlier_invocations_failed": retries,  # counted, but their execution ids are unknown
        "payload_truncated": truncated,
        "body_is_json": _is_json(body),
        "body_chars": len(body) if isinstance(body, str) else None,
        "suggested_failure_class": "never_started",  # the target never accepted the invocation
    }
    alert.details = {key: value for key, value in alert.details.items() if value is not None}
    ending = f"retries exhausted ({condition})" if condition else "non-retryable error"
    what = f"{alert.job_key or arn or 'schedule'}: invocation {alert.attempt_number or '?'}"
    alert.summary = f"{what} {alert.status.replace('_', ' ')}, {ending}"
    alert.problems = problems
    return alert


def _is_json(body: Any) -> bool:
    if not isinstance(body, str):
        return False
    try:
        load_json(body)
    except ValueError:
        return False
    return True


def parse(body: bytes, *, settings: Mapping[str, Any], received_at: datetime) -> ParseResult:
    """Parse a ReceiveMessage response or a Lambda SQS event; an empty receive (``{}``) has no records."""
    try:
        doc = load_json(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"the body is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise FormatError("the body must be a JSON object: a ReceiveMessage response or a Lambda SQS event")
    key = next((k for k in _WRAPPERS if k in doc), None)
    if key is None and set(doc) <= {"ResponseMetadata"}:
        # ReceiveMessage on an idle queue answers without a Messages key: valid, and nothing to record.
        return ParseResult(alerts=[], notes={"empty_receive": True})
    if key is None:
        raise FormatError("expected Messages (ReceiveMessage) or Records (Lambda SQS event)", field="Messages")
    if not isinstance(doc[key], list):
        raise FormatError(f"{key} must be an array", field=key)
    alerts: list[ParsedAlert | InvalidItem] = []
    for index, message in enumerate(doc[key]):
        at = f"{key}.{index}"
        try:
            if key == "Records" and isinstance(message, Mapping) and message.get("eventSource") != "aws:sqs":
                raise FormatError("eventSource must be aws:sqs", field=f"{at}.eventSource")
            alerts.append(_message(message, _WRAPPERS[key], settings, at))
        except FormatError as exc:
            # A re-sent broken message is a duplicate: keyed on its MessageId, else on its canonical JSON.
            canonical = json.dumps(message, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
            message_id = message.get(_WRAPPERS[key][0]) if isinstance(message, Mapping) else None
            item_key = f"sqs-message:{message_id}" if isinstance(message_id, str) and message_id else ""
            item_key = item_key or f"invalid:{sha256_text(canonical)}"
            alerts.append(InvalidItem(field=exc.field, message=exc.message, dedup_key=item_key))
    return ParseResult(alerts=alerts, notes={"wrapper": "lambda" if key == "Records" else "receive_message"})


def _part_names(source: Any) -> list[str]:
    """The SCHEDULE_ARN part names a ``*_from`` setting tries, in order: one name, or a list of them."""
    if isinstance(source, str):
        return [source]
    return [name for name in source if isinstance(name, str)] if isinstance(source, list) else []

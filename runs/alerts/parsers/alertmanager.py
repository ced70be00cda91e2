"""Prometheus Alertmanager webhook receiver (payload ``version`` "4").

Format: https://prometheus.io/docs/alerting/latest/configuration/#webhook_config and
https://prometheus.io/docs/alerting/latest/notifications/ (serialisation: ``prometheus/alertmanager``
``template/template.go``). Alertmanager knows nothing about jobs: every job concept comes from labels and
annotations the *rule author* wrote, so each one is read through a dotted path from ``settings``
(``DEFAULT_SETTINGS`` holds the conventions of ``runs/demo/alerts/alertmanager/SOURCE.md``).

Dedup key (computed before redaction, includes the alert's state): per alert, sha256 of the JSON list
``[fingerprint, startsAt, status]`` (``startsAt`` as sent). A ``resolved`` never duplicates its ``firing``;
a repeat or HA re-send of the same firing alert is a duplicate; ``groupKey`` plays no part.
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
    PathReader,
    TimeFormatError,
    describe_label_path,
    http_link,
    load_json,
    parse_timestamp,
    sha256_json,
    summarise_error,
)

SOURCE = "alertmanager"
# Whether the sender can sign its posts (runs.catalog.keys.source_can_sign):
# Alertmanager's webhook_configs cannot sign a body (only basic auth, bearer credentials, mTLS).
CAN_SIGN = False

# Dotted paths are read per alert (an element of ``alerts[]``); a list means "this, else that".
DEFAULT_SETTINGS: dict[str, Any] = {
    "job_from": "labels.job_name",  # not ``labels.job``: that is the Prometheus scrape job
    "tenant_from": "labels.tenant",
    "environment_from": "labels.env",
    "execution_id_from": "labels.execution_id",
    "window_start_from": "annotations.window_start",
    "window_end_from": "annotations.window_end",
    "scheduled_for_from": "annotations.scheduled_for",
    "attempt_from": "annotations.attempt",  # a string holding an integer
    "trigger_from": None,  # no trigger annotation: attempt 1 is scheduled, higher automatic_retry
    "started_at_from": "annotations.started_at",
    "ended_at_from": "annotations.ended_at",
    "error_from": ["annotations.error", "annotations.description"],
    "correlation_from": "annotations.correlation_id",
    "log_url_from": "annotations.log_url",
    "config_version_from": None,
    "summary_from": ["annotations.summary", "labels.alertname"],
    "default_tenant": None,
    "default_environment": None,
}

# Authentication travels in headers (basic auth, bearer, mTLS); the body carries no secrets.
# Free text (annotations) is redacted by the mechanism's text rules.
REDACT_PATHS: tuple[str, ...] = ()

SUMMARY_MAX_CHARS = 200


def parse(body: bytes, *, settings: Mapping[str, Any], received_at: datetime) -> ParseResult:
    """Parse one Alertmanager notification into one record per element of ``alerts[]``, in order.

    ``settings`` are the merged integration settings (see ``DEFAULT_SETTINGS``). Raises ``FormatError``
    for invalid JSON or a body that is not an Alertmanager "4" message; an element of ``alerts[]`` that
    breaks the format becomes an ``InvalidItem``. ``notes["truncated_alerts"]`` is the number of alerts
    the sender left out (``max_alerts``), when above zero.
    """
    data = _load_object(body)
    errors: dict[str, list[str]] = {}
    if data.get("version") != "4":
        errors["version"] = [f"'version' must be \"4\" for an Alertmanager webhook (got {data.get('version')!r})"]
    alerts = data.get("alerts")
    if not isinstance(alerts, list):
        errors["alerts"] = ["'alerts' must be a list of alerts"]
        alerts = []
    truncated = data.get("truncatedAlerts", 0)
    if isinstance(truncated, bool) or not isinstance(truncated, int) or truncated < 0:
        errors["truncatedAlerts"] = [f"'truncatedAlerts' must be a whole number (got {truncated!r})"]
        truncated = 0
    item_errors = [_item_error(alert, index) for index, alert in enumerate(alerts)]
    if errors:
        # The message as a whole is broken: name the item fields too, so the sender sees everything at once.
        for problem in filter(None, item_errors):
            errors.setdefault(problem[0].replace(f"alerts.{problem[2]}.", "alerts[]."), []).append(problem[1])
        first = next(iter(errors))
        raise FormatError("not an Alertmanager webhook message: " + first, field=first, errors=errors)
    records: list[ParsedAlert | InvalidItem] = []
    for index, alert in enumerate(alerts):
        item_error = item_errors[index]
        if item_error:
            records.append(InvalidItem(field=item_error[0], message=item_error[1], dedup_key=sha256_json(alert)))
        else:
            records.append(_parse_alert(alert, settings))
    # ``truncatedAlerts > 0``: alerts are missing from ``alerts[]`` and cannot be recovered from this post.
    notes: dict[str, Any] = {"truncated_alerts": truncated} if truncated else {}
    return ParseResult(alerts=records, notes=notes)


def _load_object(body: bytes) -> dict[str, Any]:
    try:
        data = load_json(body)
    except ValueError as exc:
        raise FormatError(f"the body is not valid JSON ({exc})", field="") from exc
    if not isinstance(data, dict):
        raise FormatError("the body must be a JSON object (an Alertmanager message)", field="")
    return data


def _item_error(alert: Any, index: int) -> tuple[str, str, int] | None:
    """Return ``(field, message, index)`` when one element of ``alerts[]`` breaks the format."""
    where = f"alerts.{index}"
    if not isinstance(alert, dict):
        return where, f"'{where}' must be an object", index
    if alert.get("status") not in ("firing", "resolved"):
        return f"{where}.status", f"'status' must be firing or resolved (got {alert.get('status')!r})", index
    if not isinstance(alert.get("labels"), dict):
        return f"{where}.labels", "'labels' must be an object", index
    if not isinstance(alert.get("annotations", {}), dict):
        return f"{where}.annotations", "'annotations' must be an object", index
    if not isinstance(alert.get("fingerprint"), str) or not alert["fingerprint"]:
        return f"{where}.fingerprint", "'fingerprint' must be a non-empty string", index
    for name in ("startsAt", "endsAt"):
        try:
            value = parse_timestamp(alert.get(name))
        except TimeFormatError as exc:
            return f"{where}.{name}", f"'{name}': {exc}", index
        if name == "startsAt" and value is None:
            return f"{where}.startsAt", "'startsAt' is required", index
    return None


def _parse_alert(alert: dict[str, Any], settings: Mapping[str, Any]) -> ParsedAlert:
    problems: list[str] = []
    read = PathReader(alert, problems, describe_label_path)
    firing = alert["status"] == "firing"
    fingerprint: str = alert["fingerprint"]
    starts_at = parse_timestamp(alert["startsAt"])
    # Go's zero time ``0001-01-01T00:00:00Z`` means "not resolved yet"; parse_timestamp gives None.
    ends_at = parse_timestamp(alert.get("endsAt"))
    record = ParsedAlert(
        dedup_key=sha256_json([fingerprint, alert["startsAt"], alert["status"]]),
        kind=AlertKind.ATTEMPT if firing else AlertKind.RESOLVE,
        group_ref=f"{fingerprint}@{alert['startsAt']}",
    )
    record.job_key, record.tenant, record.environment = read.run_identity(settings)
    record.execution_id = read.text(settings.get("execution_id_from"), "execution id", required=True)
    record.window_start, record.window_end = read.window(settings)
    record.scheduled_for = read.time(settings.get("scheduled_for_from"))
    record.attempt_number = read.integer(settings.get("attempt_from"))
    if firing:
        # Alertmanager reports alert state, not job state: the rule fires on a failed execution.
        record.status = "failed"
        record.trigger = read.trigger(settings.get("trigger_from"), record.attempt_number)
        record.started_at = read.time(settings.get("started_at_from"))
        record.ended_at = read.time(settings.get("ended_at_from"))
        record.error_summary = summarise_error(read.text(settings.get("error_from"), "error"))
        record.correlation_ref = read.text(settings.get("correlation_from"), "correlation") or ""
        record.log_url = http_link(read.text(settings.get("log_url_from"), "log link"))
        record.config_version = read.text(settings.get("config_version_from"), "config") or ""
        record.occurred_at = record.ended_at
    else:
        record.occurred_at = ends_at  # when the alert resolved
    headline = read.text(settings.get("summary_from"), "summary") or fingerprint
    record.summary = f"{alert['status']}: {headline}"[:SUMMARY_MAX_CHARS]
    record.problems = problems
    labels = alert["labels"]
    record.details = {
        "fingerprint": fingerprint,
        "status": alert["status"],
        "starts_at": starts_at.isoformat() if starts_at else None,
        "ends_at": ends_at.isoformat() if ends_at else None,
        "generator_url": http_link(alert.get("generatorURL")),  # an empty generatorURL is no link
        "severity": labels.get("severity"),
        "alertname": labels.get("alertname"),
        "namespace": labels.get("namespace"),
        "labels": labels,
        "annotations": alert.get("annotations", {}),
    }
    return record

"""Grafana unified alerting webhook contact point (payload ``version`` "1").

Format: https://grafana.com/docs/grafana/latest/alerting/configure-notifications/manage-contact-points/integrations/webhook-notifier/
(serialisation: ``grafana/alerting`` ``receivers/webhook/v1/webhook.go`` and ``templates/template_data.go``).
The body is Alertmanager's data plus Grafana extras (``values``, ``silenceURL``, ``orgId``...). Grafana names
no window, execution or scheduled time: the rule counts failed attempts in the job's *latest* processing
window (``values.A``), so by the integration's configuration (``DEFAULT_SETTINGS``) the attempt number is that
count, the execution id is inferred as ``<fingerprint>#<count>``, and the mechanism derives the scheduled time
(the target's latest fire time at or before ``startsAt``; see ``scheduled_for_rule``) and from it the window.

Dedup key (computed before redaction, includes the alert's state): per alert, sha256 of the JSON list
``[fingerprint, startsAt, status, values]`` (``values`` as canonical JSON): a repeat notification whose
re-evaluated count changed (A=1 -> A=2) is a new failure, a byte-identical re-send is a duplicate.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from runs.ingest.base import (
    AlertKind,
    FormatError,
    InvalidItem,
    ParsedAlert,
    ParseResult,
    TimeFormatError,
    dig,
    parse_timestamp,
    read_integer,
    read_timestamp,
    summarise_error,
)

SOURCE = "grafana"

# Dotted paths are read per alert (an element of ``alerts[]``); a list means "this, else that".
DEFAULT_SETTINGS: dict[str, Any] = {
    "job_from": "labels.job_name",
    "tenant_from": "labels.tenant",  # ``orgId`` is the Grafana organisation, not a customer
    "environment_from": "labels.env",
    "execution_id_from": None,  # Grafana carries none: inferred through ``execution_id_template``
    "execution_id_template": "{fingerprint}#{attempt}",
    "attempt_from": "values.A",  # failed attempts counted so far in the latest window (a number)
    "window_start_from": None,
    "window_end_from": None,
    "scheduled_for_from": None,
    # For the mechanism: scheduled time = the job target's latest fire time at or before ``startsAt``.
    "scheduled_for_rule": "latest_fire_at_or_before_starts_at",
    # No start/end time, error, correlation or log link: ``startsAt`` is when the *alert* fired, and the
    # annotations are rule text (kept on the alert for display).
    "alertname_from": "labels.alertname",
    # Evaluation problems of the rule itself: never job failures.
    "evaluation_alertnames": ["DatasourceError", "DatasourceNoData"],
    "summary_from": ["annotations.summary", "labels.alertname"],
    "default_tenant": None,
    "default_environment": None,
}

# Authentication (basic auth, Authorization header, HMAC signature) travels in headers, never in the body.
REDACT_PATHS: tuple[str, ...] = ()

SUMMARY_MAX_CHARS = 200
_LINKS = {
    "silenceURL": "silence_url",
    "dashboardURL": "dashboard_url",
    "panelURL": "panel_url",
    "imageURL": "image_url",
}


def parse(body: bytes, *, settings: Mapping[str, Any], received_at: datetime) -> ParseResult:
    """Parse one Grafana webhook notification into one record per element of ``alerts[]``, in order.

    Raises ``FormatError`` for invalid JSON or a body that is not Grafana's webhook format (a custom payload
    template is not: every missing field is named); an element of ``alerts[]`` that breaks the format becomes
    an ``InvalidItem``. The deprecated ``title``, ``state`` and ``message`` are template-driven: never read.
    """
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise FormatError(f"the body is not valid JSON ({exc})", field="") from exc
    if not isinstance(data, dict):
        raise FormatError("the body must be a JSON object (a Grafana webhook message)", field="")
    errors: dict[str, list[str]] = {}
    if data.get("version") != "1":
        errors["version"] = [f"'version' must be \"1\" for a Grafana webhook (got {data.get('version')!r})"]
    if data.get("status") not in ("firing", "resolved"):
        errors["status"] = [f"'status' must be firing or resolved (got {data.get('status')!r})"]
    alerts = data.get("alerts")
    if not isinstance(alerts, list):
        errors["alerts"] = ["'alerts' must be a list of alerts"]
        alerts = []
    truncated = data.get("truncatedAlerts", 0)
    if isinstance(truncated, bool) or not isinstance(truncated, int) or truncated < 0:
        errors["truncatedAlerts"] = [f"'truncatedAlerts' must be a whole number (got {truncated!r})"]
        truncated = 0
    item_errors = [_item_errors(alert, f"alerts.{index}") for index, alert in enumerate(alerts)]
    if errors:
        # Not Grafana's webhook body as a whole (e.g. a custom payload template): name every field it lacks.
        for index, found in enumerate(item_errors):
            for field_name, message in found:
                errors.setdefault(field_name.replace(f"alerts.{index}.", "alerts[]."), []).append(message)
        first = next(iter(errors))
        raise FormatError(
            "not Grafana's webhook format (lacks or garbles: " + ", ".join(errors) + ")",
            field=first,
            errors=errors,
        )
    records: list[ParsedAlert | InvalidItem] = []
    for index, alert in enumerate(alerts):
        if item_errors[index]:
            field_name, message = item_errors[index][0]
            records.append(InvalidItem(field=field_name, message=message, dedup_key=_hash(alert)))
        else:
            records.append(_parse_alert(alert, data, settings))
    return ParseResult(alerts=records, notes={"truncated_alerts": truncated} if truncated else {})


def _item_errors(alert: Any, where: str) -> list[tuple[str, str]]:
    """Every way one element of ``alerts[]`` breaks the format, as ``(field, message)``."""
    if not isinstance(alert, dict):
        return [(where, f"'{where}' must be an object")]
    found: list[tuple[str, str]] = []
    if alert.get("status") not in ("firing", "resolved"):
        found.append((f"{where}.status", f"'status' must be firing or resolved (got {alert.get('status')!r})"))
    if not isinstance(alert.get("labels"), dict):
        found.append((f"{where}.labels", "'labels' must be an object"))
    if not isinstance(alert.get("annotations", {}), dict):
        found.append((f"{where}.annotations", "'annotations' must be an object"))
    if not isinstance(alert.get("fingerprint"), str) or not alert.get("fingerprint"):
        found.append((f"{where}.fingerprint", "'fingerprint' must be a non-empty string"))
    if alert.get("values") is not None and not isinstance(alert["values"], dict):
        found.append((f"{where}.values", "'values' must be an object or null"))  # null and {} are legal
    for name in ("startsAt", "endsAt"):
        try:
            value = parse_timestamp(alert.get(name))
        except TimeFormatError as exc:
            found.append((f"{where}.{name}", f"'{name}': {exc}"))
            continue
        if name == "startsAt" and value is None:
            found.append((f"{where}.startsAt", "'startsAt' is required"))
    return found


def _parse_alert(alert: dict[str, Any], data: Mapping[str, Any], settings: Mapping[str, Any]) -> ParsedAlert:
    problems: list[str] = []
    firing = alert["status"] == "firing"
    fingerprint: str = alert["fingerprint"]
    starts_at = parse_timestamp(alert["startsAt"])
    ends_at = parse_timestamp(alert.get("endsAt"))  # Go zero time = still firing = None
    values = alert.get("values")
    record = ParsedAlert(
        dedup_key=_hash([fingerprint, alert["startsAt"], alert["status"], values]),
        kind=AlertKind.ATTEMPT if firing else AlertKind.RESOLVE,
        # One firing episode of one series: the mechanism attaches a resolve (which carries A=0 and so no
        # attempt) to the latest attempt reported under this reference.
        group_ref=f"{fingerprint}@{alert['startsAt']}",
    )
    alertname = _text(alert, settings.get("alertname_from"), "alert name", problems)
    evaluation = alertname in (settings.get("evaluation_alertnames") or [])
    record.job_key = _text(alert, settings.get("job_from"), "job", problems, required=True)
    record.tenant = _text(alert, settings.get("tenant_from"), "tenant", problems, True, settings.get("default_tenant"))
    record.environment = _text(
        alert,
        settings.get("environment_from"),
        "environment",
        problems,
        True,
        settings.get("default_environment"),
    )
    if evaluation:
        problems.append(
            f"alertname `{alertname}`: Grafana could not evaluate the rule; that says nothing about the job "
            "and is never recorded as a job failure"
        )
    record.window_start, record.window_end = _window(alert, settings, problems)
    record.scheduled_for = _time(alert, settings.get("scheduled_for_from"), problems)
    if firing and not evaluation:
        record.status = "failed"
        record.attempt_number = _attempt(alert, settings, problems)
        record.execution_id = _execution_id(alert, settings, fingerprint, record.attempt_number, problems)
        if record.attempt_number is not None:
            # Grafana names no trigger: the first counted failure is the scheduled attempt, others retries.
            record.trigger = "scheduled" if record.attempt_number == 1 else "automatic_retry"
        # ``startsAt`` is when the series began failing, i.e. the first counted failure; a repeat notification
        # (count above 1) carries no time for the newer failure, so the mechanism uses the received time.
        record.occurred_at = starts_at if record.attempt_number == 1 else None
    elif not firing:
        record.execution_id = _text(alert, settings.get("execution_id_from"), "execution id", problems)
        record.occurred_at = ends_at
    headline = _text(alert, settings.get("summary_from"), "summary", problems) or fingerprint
    record.summary = f"{alert['status']}: {headline}"[:SUMMARY_MAX_CHARS]
    record.problems = problems
    labels = alert["labels"]
    annotations = alert.get("annotations", {})
    record.details = {
        "fingerprint": fingerprint,
        "status": alert["status"],
        "alertname": alertname,
        "starts_at": starts_at.isoformat() if starts_at else None,
        "ends_at": ends_at.isoformat() if ends_at else None,
        "values": values,
        "generator_url": _link(alert.get("generatorURL")),  # the rule's page
        **{name: _link(alert.get(key)) for key, name in _LINKS.items()},
        "org_id": alert.get("orgId", data.get("orgId")),  # per-alert ``orgId`` is omitempty
        "severity": labels.get("severity"),
        "grafana_folder": labels.get("grafana_folder"),
        "labels": labels,
        "annotations": annotations,
        "scheduled_for_rule": settings.get("scheduled_for_rule") if record.scheduled_for is None else None,
    }
    if evaluation and annotations.get("Error"):
        record.details["evaluation_error"] = summarise_error(annotations["Error"])
    return record


def _paths(spec: Any) -> list[str]:
    if not spec:
        return []
    return [spec] if isinstance(spec, str) else [str(path) for path in spec]


def _first(alert: Mapping[str, Any], spec: Any) -> tuple[str, Any]:
    paths = _paths(spec)
    for path in paths:
        value = dig(alert, path)
        if value is not None and value != "":
            return path, value
    return (paths[0] if paths else ""), None


def _describe(path: str) -> str:
    section, _, name = path.partition(".")
    if section in ("labels", "annotations") and name:
        return f"`{name}` {section[:-1]}"
    return f"`{path}`"


def _text(
    alert: Mapping[str, Any],
    spec: Any,
    concept: str,
    problems: list[str],
    required: bool = False,
    default: str | None = None,
) -> str | None:
    path, value = _first(alert, spec)
    if value is None:
        if default:
            return str(default)
        if required:
            names = " or ".join(_describe(p) for p in _paths(spec)) or f"setting for the {concept}"
            problems.append(f"no {names}: the {concept} is unknown")
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        problems.append(f"{_describe(path)} {value!r} is not text")
        return None
    return str(value).strip()


def _time(alert: Mapping[str, Any], spec: Any, problems: list[str]) -> datetime | None:
    path, value = _first(alert, spec)
    return read_timestamp(value, _describe(path), problems)


def _window(
    alert: Mapping[str, Any], settings: Mapping[str, Any], problems: list[str]
) -> tuple[datetime | None, datetime | None]:
    start_path, start_raw = _first(alert, settings.get("window_start_from"))
    end_path, end_raw = _first(alert, settings.get("window_end_from"))
    start = read_timestamp(start_raw, _describe(start_path), problems)
    end = read_timestamp(end_raw, _describe(end_path), problems)
    if (start_raw is None) != (end_raw is None):
        missing, which = (end_path, "end") if end_raw is None else (start_path, "start")
        where = _describe(missing) if missing else f"the window {which} (no setting names it)"
        problems.append(f"{where} is missing: a window needs both its start and its end")
        return None, None
    if start and end and start >= end:
        problems.append(f"window start {start.isoformat()} is not before window end {end.isoformat()}")
        return None, None
    return (start, end) if start and end else (None, None)


def _attempt(alert: Mapping[str, Any], settings: Mapping[str, Any], problems: list[str]) -> int | None:
    """The failed-attempt count; ``values`` are floats in Grafana (``2.0``), so whole floats are accepted."""
    path, value = _first(alert, settings.get("attempt_from"))
    if value is None:
        if path:
            problems.append(f"no {_describe(path)}: the failed-attempt count that numbers the attempt is missing")
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    number = read_integer(value, _describe(path), problems)
    if number is not None and number < 1:
        problems.append(f"{_describe(path)} {number} counts no failed attempt, yet the alert is firing")
        return None
    return number


def _execution_id(
    alert: Mapping[str, Any],
    settings: Mapping[str, Any],
    fingerprint: str,
    number: int | None,
    problems: list[str],
) -> str | None:
    """The configured execution id, else one inferred from the template (``<fingerprint>#<count>``)."""
    if settings.get("execution_id_from"):
        return _text(alert, settings["execution_id_from"], "execution id", problems, required=True)
    template = settings.get("execution_id_template")
    if not template:
        problems.append("no execution id: the integration sets neither `execution_id_from` nor a template")
        return None
    if number is None:
        return None  # the missing or garbled count is already listed as a problem
    try:
        return str(template).format(fingerprint=fingerprint, attempt=number)
    except (AttributeError, IndexError, KeyError, ValueError) as exc:
        problems.append(f"setting `execution_id_template` {template!r} cannot be filled in ({exc!r})")
        return None


def _link(value: Any) -> str:
    """Only http(s) links are kept; ``""`` (Grafana's empty dashboard/panel URL) is no link."""
    if isinstance(value, str) and value.strip().lower().startswith(("https://", "http://")):
        return value.strip()
    return ""


def _hash(parts: Any) -> str:
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

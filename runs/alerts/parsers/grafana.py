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

import re
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
    read_integer,
    sha256_json,
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
        data = load_json(body)
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
            records.append(InvalidItem(field=field_name, message=message, dedup_key=sha256_json(alert)))
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
    read = PathReader(alert, problems, describe_label_path)
    firing = alert["status"] == "firing"
    fingerprint: str = alert["fingerprint"]
    starts_at = parse_timestamp(alert["startsAt"])
    ends_at = parse_timestamp(alert.get("endsAt"))  # Go zero time = still firing = None
    values = alert.get("values")
    record = ParsedAlert(
        dedup_key=sha256_json([fingerprint, alert["startsAt"], alert["status"], values]),
        kind=AlertKind.ATTEMPT if firing else AlertKind.RESOLVE,
        # One firing episode of one series: the mechanism attaches a resolve (which carries A=0 and so no
        # attempt) to the latest attempt reported under this reference.
        group_ref=f"{fingerprint}@{alert['startsAt']}",
    )
    alertname = read.text(settings.get("alertname_from"), "alert name")
    evaluation = alertname in (settings.get("evaluation_alertnames") or [])
    record.job_key, record.tenant, record.environment = read.run_identity(settings)
    if evaluation:
        problems.append(
            f"alertname `{alertname}`: Grafana could not evaluate the rule; that says nothing about the job "
            "and is never recorded as a job failure"
        )
    record.window_start, record.window_end = read.window(settings)
    record.scheduled_for = read.time(settings.get("scheduled_for_from"))
    if firing and not evaluation:
        record.status = "failed"
        record.attempt_number = _attempt(read, settings)
        record.execution_id = _execution_id(read, settings, fingerprint, record.attempt_number)
        if record.attempt_number is not None:
            # Grafana names no trigger: the first counted failure is the scheduled attempt, others retries.
            record.trigger = "scheduled" if record.attempt_number == 1 else "automatic_retry"
        # ``startsAt`` is when the series began failing, i.e. the first counted failure; a repeat notification
        # (count above 1) carries no time for the newer failure, so the mechanism uses the received time.
        record.occurred_at = starts_at if record.attempt_number == 1 else None
    elif not firing:
        record.execution_id = read.text(settings.get("execution_id_from"), "execution id")
        record.occurred_at = ends_at
    headline = read.text(settings.get("summary_from"), "summary") or fingerprint
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
        "generator_url": http_link(alert.get("generatorURL")),  # the rule's page
        **{name: http_link(alert.get(key)) for key, name in _LINKS.items()},
        "org_id": alert.get("orgId", data.get("orgId")),  # per-alert ``orgId`` is omitempty
        "severity": labels.get("severity"),
        "grafana_folder": labels.get("grafana_folder"),
        "labels": labels,
        "annotations": annotations,
        "scheduled_for_rule": settings.get("scheduled_for_rule") if record.scheduled_for is None else None,
        # an id filled in from the template names no execution of its own (a conflicting report if the
        # run already succeeded)
        "execution_id_inferred": bool(record.execution_id) and not settings.get("execution_id_from"),
    }
    if evaluation and annotations.get("Error"):
        record.details["evaluation_error"] = summarise_error(annotations["Error"])
    return record


def _attempt(read: PathReader, settings: Mapping[str, Any]) -> int | None:
    """The failed-attempt count; ``values`` are floats in Grafana (``2.0``), so whole floats are accepted."""
    path, value = read.first(settings.get("attempt_from"))
    if value is None:
        if path:
            read.problems.append(
                f"no {read.describe(path)}: the failed-attempt count that numbers the attempt is missing"
            )
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    number = read_integer(value, read.describe(path), read.problems)
    if number is not None and number < 1:
        read.problems.append(f"{read.describe(path)} {number} counts no failed attempt, yet the alert is firing")
        return None
    return number


def _execution_id(read: PathReader, settings: Mapping[str, Any], fingerprint: str, number: int | None) -> str | None:
    """The configured execution id, else one inferred from the template (``<fingerprint>#<count>``)."""
    if settings.get("execution_id_from"):
        return read.text(settings["execution_id_from"], "execution id", required=True)
    template = settings.get("execution_id_template")
    if not template:
        read.problems.append("no execution id: the integration sets neither `execution_id_from` nor a template")
        return None
    if number is None:
        return None  # the missing or garbled count is already listed as a problem
    try:
        return template_fill(str(template), {"fingerprint": fingerprint, "attempt": str(number)})
    except KeyError as exc:
        read.problems.append(f"setting `execution_id_template` {template!r} cannot be filled in ({exc!r})")
        return None


# ``{name}`` (a placeholder), ``{{`` and ``}}`` (a brace): nothing else, unlike ``str.format``, whose
# format specs (``{attempt:>999999999}``) would let a setting build a gigabyte on every post.
_TEMPLATE_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


def template_fill(template: str, values: Mapping[str, str]) -> str:
    """``template`` with each ``{name}`` replaced by ``values[name]`` and ``{{``/``}}`` by a brace.

    Raises ``KeyError`` (the placeholder) for a name ``values`` lacks, a format spec or a conversion
    included (``{attempt:03}`` names "attempt:03"). The result is at most the template's length plus
    the values' lengths per placeholder: no placeholder pads or repeats.
    """

    def token(match: re.Match[str]) -> str:
        text = match.group(0)
        if text in ("{{", "}}"):
            return text[0]
        return values[match.group(1)]

    return _TEMPLATE_TOKEN.sub(token, template)

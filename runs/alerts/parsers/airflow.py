"""Apache Airflow callback / listener context posted as JSON (``POST /api/v1/alerts/airflow/``).

Airflow has no wire format for failures: a task or DAG callback (or an Airflow 3 listener) posts its
context with Airflow's own names. Public documentation:

- callbacks: https://airflow.apache.org/docs/apache-airflow/stable/administration-and-deployment/logging-monitoring/callbacks.html
- context variables: https://airflow.apache.org/docs/apache-airflow/stable/templates-ref.html
- listeners: https://airflow.apache.org/docs/apache-airflow/stable/administration-and-deployment/listeners.html

What one post becomes:

- a task-level callback/listener -> an ``ATTEMPT`` for the task instance try, execution id
  ``<run_id>/<task_id>/<map_index>/<try_number>``; a retry callback with ``next_retry_datetime`` also
  announces the next try as a ``queued`` related attempt;
- ``dag.on_success_callback`` -> an ``ATTEMPT`` for the DAG run itself (execution id ``run_id``, times
  from ``dag_run``): only the DAG-level callback says the run succeeded;
- any other DAG-level callback (failure, timeout) -> ``RUN``: the failing tries are attempts already, and
  the context's ``task_instance`` is only Airflow's *last* task, which may never have run.

Dedup key (before redaction, includes the state; the callback name is left out so that
``on_failure_callback`` and Airflow 3's ``on_task_instance_failed`` for one try count once):
task level ``sha256(["task", dag_id, run_id, task_id, map_index, try_number, state])``; DAG level
``sha256(["dag", dag_id, run_id, dag_run.state])``. ``dag_id`` is in it because run ids repeat across DAGs.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from runs.alerts.parsers.base import (
    AlertKind,
    AttemptState,
    FormatError,
    ParsedAlert,
    ParseResult,
    as_mapping,
    dig,
    load_json,
    read_timestamp,
    sha256_text,
    summarise_error,
)

SOURCE = "airflow"

# Every convention is data: an integration's settings are laid over these (``merged_settings``).
# A path is dotted JSON (``params.tenant``); ``tag:<prefix>`` reads the dag_tags entry ``<prefix><value>``.
DEFAULT_SETTINGS: dict[str, Any] = {
    "job_from": ["dag_id"],
    "tenant_from": ["params.tenant", "conf.tenant", "tag:tenant:"],
    "environment_from": ["params.env", "conf.env", "tag:env:"],
    # (start, end) pairs tried in order; a payload window wins and is used as given (not floored).
    "window_from": [
        ["params.window_start", "params.window_end"],
        ["conf.window_start", "conf.window_end"],
        ["data_interval_start", "data_interval_end"],
    ],
    # Airflow 2 cron timetables close the data interval at the fire time.
    "scheduled_for_from": ["data_interval_end"],
    "config_version_from": ["params.config_version", "conf.config_version"],
    "replay_key_from": ["conf.replay_key", "params.replay_key"],
    "correlation_from": ["task_instance.id"],  # Airflow 3 task-instance UUID
    "default_tenant": None,
    "default_environment": None,
    # Airflow task / DAG-run state -> attempt status (AirflowTaskTimeout turns a failure into timed_out).
    "status_map": {
        "up_for_retry": "failed",
        "failed": "failed",
        "success": "succeeded",
        "running": "running",
        "queued": "queued",
        "scheduled": "queued",
        "deferred": "running",
        "up_for_reschedule": "running",
        "restarting": "running",
    },
    "timeout_exceptions": ["AirflowTaskTimeout"],
    # run_type -> trigger of try 1; later tries are automatic retries.
    "trigger_map": {
        "scheduled": "scheduled",
        "manual": "manual_rerun",
        "backfill": "catch_up",
        "asset_triggered": "scheduled",
        "dataset_triggered": "scheduled",
    },
}

# The context carries no secrets by itself, but DAG authors do put credentials into params / conf.
REDACT_PATHS: tuple[str, ...] = tuple(
    f"{root}.{name}"
    for root in ("params", "conf")
    for name in ("password", "token", "access_token", "api_key", "secret", "authorization")
)

_DAG_LEVEL_LISTENERS = ("on_dag_run_failed", "on_dag_run_success", "on_dag_run_running")


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else ([] if value is None else [value])


def _finish(alert: ParsedAlert, problems: list[str]) -> ParseResult:
    alert.problems = problems
    alert.details = {key: value for key, value in alert.details.items() if value not in (None, "")}
    return ParseResult(alerts=[alert])


def _hash_key(kind: str, parts: list[Any]) -> str:
    canonical = json.dumps([kind, *parts], ensure_ascii=False, separators=(",", ":"))
    return f"{kind}:{sha256_text(canonical)}"


def _tags(doc: Mapping[str, Any]) -> list[str]:
    # Airflow 2 sends tag names; the Airflow 3 API shape is [{"name": ...}]: accept both.
    names = []
    for tag in _as_list(doc.get("dag_tags")):
        name = tag.get("name") if isinstance(tag, Mapping) else tag
        if isinstance(name, str):
            names.append(name)
    return names


def _lookup(doc: Mapping[str, Any], sources: Any) -> tuple[Any, str]:
    """First non-empty value among ``sources`` (dotted paths or ``tag:<prefix>``), with where it came from."""
    for source in _as_list(sources):
        if not isinstance(source, str):
            continue
        if source.startswith("tag:"):
            prefix = source[4:]
            for tag in _tags(doc):
                if tag.startswith(prefix) and tag[len(prefix) :]:
                    return tag[len(prefix) :], f"tag {tag!r}"
            continue
        value = dig(doc, source)
        if value not in (None, ""):
            return value, source
    return None, ""


def _text(doc: Mapping[str, Any], settings: Mapping[str, Any], name: str, problems: list[str]) -> str:
    """A convention text (``<name>_from``, else ``default_<name>``), NFC-normalised; a problem if absent."""
    value, where = _lookup(doc, settings.get(f"{name}_from"))
    if value is None:
        value, where = settings.get(f"default_{name}"), f"default_{name}"
    if value is None:
        tried = ", ".join(str(s) for s in _as_list(settings.get(f"{name}_from"))) or "nothing"
        problems.append(f"no {name}: none of {tried} is set and the integration has no default_{name}")
        return ""
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{name} from {where} is {value!r}, not a text value")
        return ""
    return unicodedata.normalize("NFC", value.strip())


def _window(
    doc: Mapping[str, Any], settings: Mapping[str, Any], problems: list[str]
) -> tuple[datetime | None, datetime | None, str]:
    """The first (start, end) pair present; a zero-length interval (Airflow 3 cron triggers) is no window."""
    for pair in _as_list(settings.get("window_from")):
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            continue
        raw_start, raw_end = dig(doc, pair[0]), dig(doc, pair[1])
        if raw_start in (None, "") and raw_end in (None, ""):
            continue
        if raw_start in (None, "") or raw_end in (None, ""):
            given, missing = (pair[0], pair[1]) if raw_end in (None, "") else (pair[1], pair[0])
            problems.append(f"{given} is set but {missing} is not: a window needs both ends")
            return None, None, ""
        start = read_timestamp(raw_start, pair[0], problems)
        end = read_timestamp(raw_end, pair[1], problems)
        if start is None or end is None:
            return None, None, ""
        if start > end:
            problems.append(f"{pair[0]} {raw_start} is after {pair[1]} {raw_end}")
            return None, None, ""
        if start < end:
            return start, end, f"{pair[0]}..{pair[1]}"
    return None, None, ""


def _http_link(value: Any) -> str:
    if isinstance(value, str) and urlsplit(value).scheme in ("http", "https") and urlsplit(value).netloc:
        return value
    return ""


def _require(doc: Mapping[str, Any], path: str, kind: type, errors: dict[str, list[str]]) -> Any:
    """A field the envelope needs; integers may arrive as strings (``"2"``, ``"-1"``)."""
    value = dig(doc, path)
    if kind is int and isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    if isinstance(value, bool) or not isinstance(value, kind) or (kind is str and not value):
        expected = {str: "a non-empty string", int: "an integer", dict: "an object"}[kind]
        errors[path] = [f"{path} is required and must be {expected}, got {value!r}"]
        return None
    return value


def parse(body: bytes, *, settings: Mapping[str, Any], received_at: datetime) -> ParseResult:
    """Parse one callback context into one record (aware UTC times); ``FormatError`` on a broken shape."""
    try:
        doc = load_json(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"the body is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise FormatError("the body must be a JSON object (an Airflow callback context)")
    errors: dict[str, list[str]] = {}
    dag_id = _require(doc, "dag_id", str, errors)
    run_id = _require(doc, "run_id", str, errors)
    callback = doc.get("callback")
    callback = callback if isinstance(callback, str) else ""
    hook = callback.rsplit(".", 1)[-1]
    dag_level = callback.startswith("dag.") or hook in _DAG_LEVEL_LISTENERS
    task_id, try_number, map_index = "", 0, -1
    if dag_level:
        _require(doc, "dag_run", dict, errors)
    elif _require(doc, "task_instance", dict, errors) is not None:
        task_id = _require(doc, "task_instance.task_id", str, errors)
        try_number = _require(doc, "task_instance.try_number", int, errors)
        if doc["task_instance"].get("map_index") is not None:  # -1 (not mapped) when absent
            map_index = _require(doc, "task_instance.map_index", int, errors)
    if errors:
        first = next(iter(errors))
        raise FormatError(errors[first][0], field=first, errors=errors)

    problems: list[str] = []
    alert = ParsedAlert(dedup_key="")
    alert.job_key = _text(doc, settings, "job", problems) or None
    alert.tenant = _text(doc, settings, "tenant", problems) or None
    alert.environment = _text(doc, settings, "environment", problems) or None
    alert.window_start, alert.window_end, window_source = _window(doc, settings, problems)
    scheduled, where = _lookup(doc, settings.get("scheduled_for_from"))
    alert.scheduled_for = read_timestamp(scheduled, where, problems) if scheduled is not None else None
    run_after = read_timestamp(doc.get("run_after"), "run_after", problems)
    alert.config_version = str(_lookup(doc, settings.get("config_version_from"))[0] or "")
    alert.replay_key = str(_lookup(doc, settings.get("replay_key_from"))[0] or "")
    alert.correlation_ref = str(_lookup(doc, settings.get("correlation_from"))[0] or "")
    # Airflow's run ids start with the run type (``scheduled__…``, ``manual__…``) when run_type is not sent.
    run_type = doc.get("run_type") if isinstance(doc.get("run_type"), str) else run_id.split("__", 1)[0]
    base_trigger = str((settings.get("trigger_map") or {}).get(run_type) or "scheduled")
    status_map: Mapping[str, str] = settings.get("status_map") or {}
    alert.details = {
        "callback": callback,
        "airflow_version": doc.get("airflow_version"),
        "run_id": run_id,
        "run_type": run_type,
        "logical_date": doc.get("logical_date"),
        "window_source": window_source,
        "dag_display_name": doc.get("dag_display_name"),
        "triggered_by": doc.get("triggered_by"),
    }
    if base_trigger in ("manual_replay", "manual_rerun") and not alert.replay_key:
        # A person started this run in Airflow itself, around Handover's approval process.
        alert.details["manual_run_outside_approval"] = True

    def trigger_for(number: int) -> str:
        return base_trigger if number <= 1 else "automatic_retry"

    if dag_level:
        dag_run: Mapping[str, Any] = doc["dag_run"]
        state = str(dag_run.get("state") or ("success" if doc.get("reason") == "success" else ""))
        started = read_timestamp(dag_run.get("start_date"), "dag_run.start_date", problems)
        ended = read_timestamp(dag_run.get("end_date"), "dag_run.end_date", problems)
        last_ti = as_mapping(doc.get("task_instance"))
        alert.details.update(
            reason=doc.get("reason"),
            dag_run_state=state,
            last_task_instance={k: last_ti.get(k) for k in ("task_id", "map_index", "try_number", "state")},
        )
        alert.dedup_key = _hash_key("dag", [dag_id, run_id, state])
        alert.occurred_at = ended or started
        if status_map.get(state) == "succeeded":
            # The DAG run is the execution this callback describes (no try reported success).
            alert.kind = AlertKind.ATTEMPT
            alert.execution_id, alert.attempt_number = run_id, 1
            alert.trigger, alert.status = trigger_for(1), "succeeded"
            alert.scheduled_at = run_after or alert.scheduled_for
            alert.started_at, alert.ended_at = started, ended
            alert.summary = f"{dag_id}: DAG run {run_id} succeeded"
        else:
            alert.kind = AlertKind.RUN
            reason = doc.get("reason") or "?"
            alert.summary = f"{dag_id}: DAG run {run_id} {state or 'ended'} (reason {reason})"
        return _finish(alert, problems)

    ti: Mapping[str, Any] = doc["task_instance"]
    state = str(ti.get("state") or "")
    exception_type = str(doc.get("exception_type") or "")
    # Airflow 2 callbacks send exception_type + exception; Airflow 3 listeners one ``error`` text.
    exception = doc.get("exception") if doc.get("exception") not in (None, "") else doc.get("error")
    status = status_map.get(state)
    if status is None:
        problems.append(f"task_instance.state {state!r} has no status mapping (settings status_map)")
    error_class = exception_type or str(exception or "").split(":", 1)[0]
    timeouts = [str(t) for t in _as_list(settings.get("timeout_exceptions")) if t]
    if status == "failed" and any(error_class.endswith(t) for t in timeouts):
        status = "timed_out"
    prefix = f"{run_id}/{task_id}/{map_index}"
    alert.kind = AlertKind.ATTEMPT
    alert.execution_id, alert.attempt_number = f"{prefix}/{try_number}", try_number
    alert.trigger, alert.status = trigger_for(try_number), status
    # Try 1 was meant to start at the fire time (Airflow 3: run_after); a retry's came with its announcement.
    alert.scheduled_at = (run_after or alert.scheduled_for) if try_number <= 1 else None
    alert.started_at = read_timestamp(ti.get("start_date"), "task_instance.start_date", problems)
    alert.ended_at = read_timestamp(ti.get("end_date"), "task_instance.end_date", problems)
    both = exception_type and exception not in (None, "")
    error = f"{exception_type}: {exception}" if both else exception_type or exception
    alert.error_summary = summarise_error(error)
    alert.log_url = _http_link(ti.get("log_url"))
    alert.occurred_at = alert.ended_at or alert.started_at
    alert.dedup_key = _hash_key("task", [dag_id, run_id, task_id, map_index, try_number, state])
    where = f"{task_id}[{map_index}]" if map_index != -1 else task_id
    alert.summary = f"{dag_id}: {where} try {try_number} {status or state}"
    alert.details.update(
        task_id=task_id,
        map_index=map_index,
        rendered_map_index=ti.get("rendered_map_index"),
        state=state,
        previous_state=doc.get("previous_state"),
        max_tries=ti.get("max_tries"),
        hostname=ti.get("hostname"),
        operator=ti.get("operator"),
        exception_type=exception_type or None,
    )
    next_retry = read_timestamp(doc.get("next_retry_datetime"), "next_retry_datetime", problems)
    if next_retry is not None and state == "up_for_retry":
        # Airflow has scheduled the next try: a queued attempt is what blocks a replay on top of it.
        alert.related_attempts.append(
            AttemptState(
                execution_id=f"{prefix}/{try_number + 1}",
                number=try_number + 1,
                trigger="automatic_retry",
                status="queued",
                scheduled_at=next_retry,
            )
        )
        alert.summary += f"; try {try_number + 1} queued for {next_retry.isoformat()}"
    return _finish(alert, problems)

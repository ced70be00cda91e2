"""What a custom mapping may say: its keys, fields and their kinds (with help text for the editor),
statuses, signals, triggers, time formats, window and scheduled-time rules, limits, and the starter
mapping the "new custom integration" form begins with."""

from __future__ import annotations

from typing import Any

from runs.alerts.parsers.base import AlertKind

MAX_RECORDS = 1000
MAX_EXPRESSION_CHARS = 1000
STATUSES = ("queued", "running", "succeeded", "failed", "timed_out", "cancelled")
SIGNALS = {"resolved": AlertKind.RESOLVE, "acknowledged": AlertKind.ACKNOWLEDGE}
# Status-map targets that make a record something other than an attempt state (no attempt is created):
# ``received`` registers an execution's identity (job, tenant, environment, window) for the later events
# that correlate with it; ``missed`` reports that a slot never ran (an event on the run, the missed-run rule).
EVENT_STATUSES = {"received": AlertKind.IDENTITY, "missed": AlertKind.MISSED}
# What a correlating record may take from the earlier event (its run's identity).
CORRELATED_FIELDS = ("job_key", "tenant", "environment", "window_start", "window_end", "scheduled_for")
TRIGGERS = ("scheduled", "automatic_retry", "manual_replay", "manual_rerun", "catch_up")
TERMINAL = ("succeeded", "failed", "timed_out", "cancelled")
TIME_FORMATS = ("auto", "iso", "epoch_s", "epoch_ms", "epoch_us", "epoch_ns")
WINDOW_RULES = ("payload_or_schedule", "payload", "schedule")
SCHEDULED_FOR_RULES = ("exact", "latest_fire_at_or_before")
MAPPING_KEYS = (
    "records",
    "fields",
    "status_map",
    "trigger_map",
    "defaults",
    "timezone",
    "time_format",
    "window_rule",
    "scheduled_for_rule",
    "correlate_by",
)

# field -> kind of value it holds
FIELDS: dict[str, str] = {
    "job_key": "text",
    "tenant": "text",
    "environment": "text",
    "window_start": "time",
    "window_end": "time",
    "scheduled_for": "time",
    "execution_id": "text",
    "attempt_number": "integer",
    "trigger": "trigger",
    "status": "status",
    "scheduled_at": "time",
    "started_at": "time",
    "ended_at": "time",
    "error_summary": "long_text",
    "correlation_ref": "text",
    "log_url": "url",
    "config_version": "text",
    "dedup_key": "text",
    "group_ref": "text",
    "summary": "text",
    "occurred_at": "time",
}
FIELD_HELP: dict[str, str] = {
    "job_key": "the registered job's key",
    "tenant": "the tenant's slug",
    "environment": "prod, staging, ...",
    "window_start": "start of the processing window (with window_end)",
    "window_end": "end of the processing window (with window_start)",
    "scheduled_for": "the fire time of the run (or, with latest_fire_at_or_before, a time at or after it)",
    "execution_id": "the executor's id of this attempt",
    "attempt_number": "1 for the first attempt",
    "trigger": "scheduled, automatic_retry, manual_replay, manual_rerun, catch_up (through trigger_map)",
    "status": "queued, running, succeeded, failed, timed_out, cancelled; received (identity only), missed "
    "(a slot that never ran); resolved, acknowledged (signals) -- through status_map",
    "scheduled_at": "when this attempt was meant to start",
    "started_at": "when this attempt started",
    "ended_at": "when this attempt ended",
    "error_summary": "the error, cut to 2,000 characters",
    "correlation_ref": "a trace or correlation id",
    "log_url": "an http(s) link to the logs",
    "config_version": "the effective configuration version",
    "dedup_key": "the sender's own event key (the status is appended)",
    "group_ref": "the sender's incident key, for resolve/acknowledge signals",
    "summary": "one human line for the inbox",
    "occurred_at": "when the reported thing happened",
}
# What every attempt record needs (a default counts); the window is checked on its own.
REQUIRED = ("job_key", "tenant", "environment", "execution_id", "status")
# Fields that identify the run or the attempt: never `optional` (an error in one leaves the alert unmatched).
IDENTITY_FIELDS = (
    "job_key",
    "tenant",
    "environment",
    "window_start",
    "window_end",
    "scheduled_for",
    "execution_id",
    "status",
)
# ``correlate_by`` (a top-level key, a field spec like the fields') names the id events of one execution
# share; like the identity fields it is never optional.


# What the "new custom integration" form starts from: every common field, to be edited to the payload.
STARTER_MAPPING: dict[str, Any] = {
    "records": None,
    "fields": {
        "job_key": "job",
        "tenant": "tenant",
        "environment": "environment",
        "scheduled_for": "scheduled_for",
        "execution_id": "run_id",
        "attempt_number": "attempt",
        "status": "status",
        "started_at": "started_at",
        "ended_at": "ended_at",
        "error_summary": "error",
        "correlation_ref": "trace_id",
        "log_url": "log_url",
    },
    "status_map": {"ok": "succeeded", "error": "failed"},
    "defaults": {"environment": "prod"},
    "timezone": "UTC",
}

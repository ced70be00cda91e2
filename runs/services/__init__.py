"""Every write of the runs app (STYLE.md §2), split by sub-domain and re-exported here."""

from __future__ import annotations

from runs.services.attempts import (
    AttemptReport,
    attempt_abandon,
    attempt_report_apply,
    attempt_transition,
    run_status_refresh,
)
from runs.services.catalog import (
    integration_get_or_create,
    integration_key_create,
    integration_key_revoke,
    job_get_or_create,
    job_target_get_or_create,
    role_grant,
    role_revoke,
    runner_credential_create,
    tenant_create,
    tenant_get_or_create,
)
from runs.services.checks.decisions import next_run_check_confirm, next_run_check_waive
from runs.services.checks.evaluation import CheckFacts, CheckVerdict, next_run_check_evaluate
from runs.services.checks.follow_ups import next_run_check_notify_failed
from runs.services.checks.missed_runs import run_sweep_missed
from runs.services.checks.overlaps import attempt_overlap_record
from runs.services.checks.schedules import job_schedule, schedule_dst_sentences, schedule_fire_times, target_schedule
from runs.services.checks.scheduling import CheckRequester, next_run_check_schedule
from runs.services.checks.sweep import next_run_check_sweep
from runs.services.checks.transitions import CheckChange, next_run_check_transition
from runs.services.heartbeats import heartbeat_record
from runs.services.ingest.context import IngestResult
from runs.services.ingest.delivery import (
    delivery_receive,
    delivery_record_response,
    delivery_refusal_count,
    delivery_sweep_received,
)
from runs.services.ingest.triage import alert_ignore, alert_reprocess, alert_sweep_pending
from runs.services.jobs import job_pause, job_resume
from runs.services.ledger.batches import work_item_load_run
from runs.services.ledger.failure_class import run_failure_class_confirm, run_failure_class_suggest
from runs.services.ledger.items import work_item_change, work_item_verify
from runs.services.ledger.loads import LoadFile, work_item_load_create, work_item_load_retry, work_item_loads_create
from runs.services.ledger.totals import run_totals_refresh
from runs.services.timeline import timeline_event_record

__all__ = [
    "AttemptReport",
    "CheckChange",
    "CheckFacts",
    "CheckRequester",
    "CheckVerdict",
    "IngestResult",
    "LoadFile",
    "alert_ignore",
    "alert_reprocess",
    "alert_sweep_pending",
    "attempt_abandon",
    "attempt_overlap_record",
    "attempt_report_apply",
    "attempt_transition",
    "delivery_receive",
    "delivery_record_response",
    "delivery_refusal_count",
    "delivery_sweep_received",
    "heartbeat_record",
    "integration_get_or_create",
    "integration_key_create",
    "integration_key_revoke",
    "job_get_or_create",
    "job_pause",
    "job_resume",
    "job_schedule",
    "job_target_get_or_create",
    "next_run_check_confirm",
    "next_run_check_evaluate",
    "next_run_check_notify_failed",
    "next_run_check_schedule",
    "next_run_check_sweep",
    "next_run_check_transition",
    "next_run_check_waive",
    "role_grant",
    "role_revoke",
    "run_failure_class_confirm",
    "run_failure_class_suggest",
    "run_status_refresh",
    "run_sweep_missed",
    "run_totals_refresh",
    "runner_credential_create",
    "schedule_dst_sentences",
    "schedule_fire_times",
    "target_schedule",
    "tenant_create",
    "tenant_get_or_create",
    "timeline_event_record",
    "work_item_change",
    "work_item_load_create",
    "work_item_load_retry",
    "work_item_load_run",
    "work_item_loads_create",
    "work_item_verify",
]

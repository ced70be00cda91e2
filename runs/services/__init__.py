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
from runs.services.ingest import (
    IngestResult,
    alert_ignore,
    alert_reprocess,
    alert_sweep_pending,
    delivery_receive,
    delivery_record_response,
)
from runs.services.timeline import timeline_event_record

__all__ = [
    "AttemptReport",
    "IngestResult",
    "alert_ignore",
    "alert_reprocess",
    "alert_sweep_pending",
    "attempt_abandon",
    "attempt_report_apply",
    "attempt_transition",
    "delivery_receive",
    "delivery_record_response",
    "integration_get_or_create",
    "integration_key_create",
    "integration_key_revoke",
    "job_get_or_create",
    "job_target_get_or_create",
    "role_grant",
    "role_revoke",
    "run_status_refresh",
    "runner_credential_create",
    "tenant_create",
    "tenant_get_or_create",
    "timeline_event_record",
]

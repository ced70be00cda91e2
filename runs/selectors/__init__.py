"""Reads of the runs app, scoped to what a person may see (django-guardian object permissions).

A person sees a tenant's runs when they hold a tenant role there (support, business owner,
auditor), and a job's runs (all its tenants) when they are its technical owner. Superusers see
everything. Never a global group check (DESIGN.md "Who uses it").

Split by sub-domain and re-exported here (``from runs.selectors import ...``): ``access`` (who sees
which tenants, jobs and runs), ``runs``, ``alerts`` (the inbox, integrations, deliveries and what
alerts carry), ``jobs`` (jobs, targets and their outages), ``checks`` (next-run checks), ``ledger``
(work items and loads) and ``heartbeats`` (when the beat last ticked).
"""

from __future__ import annotations

from runs.selectors.access import (
    job_list_owned,
    run_visibility_filter,
    tenant_list_visible,
)
from runs.selectors.alerts import (
    AlertCompleteness,
    CompletenessCell,
    CompletenessRow,
    alert_completeness,
    alert_count_unmatched,
    alert_get,
    alert_inbox,
    alert_list,
    delivery_count_rejected,
    delivery_list_recent,
    delivery_list_rejected,
    integration_list,
)
from runs.selectors.checks import (
    check_get,
    check_list,
    check_list_for_run,
    check_sections,
)
from runs.selectors.heartbeats import heartbeat_age_seconds
from runs.selectors.jobs import (
    Outage,
    job_get,
    job_list_visible,
    target_is_visible,
    target_list_visible,
    target_may_act,
    target_outage_list,
)
from runs.selectors.ledger import (
    LOAD_PROGRESS_KEY,
    WorkItemPage,
    run_get_for_ledger,
    run_ledger_writable,
    work_item_change_list,
    work_item_list,
    work_item_load_get,
    work_item_load_list,
    work_item_load_progress,
    work_item_page,
    work_item_search,
)
from runs.selectors.runs import run_get, run_list

__all__ = [
    "AlertCompleteness",
    "CompletenessCell",
    "CompletenessRow",
    "LOAD_PROGRESS_KEY",
    "Outage",
    "WorkItemPage",
    "alert_completeness",
    "alert_count_unmatched",
    "alert_get",
    "alert_inbox",
    "alert_list",
    "check_get",
    "check_list",
    "check_list_for_run",
    "check_sections",
    "delivery_count_rejected",
    "delivery_list_recent",
    "delivery_list_rejected",
    "heartbeat_age_seconds",
    "integration_list",
    "job_get",
    "job_list_owned",
    "job_list_visible",
    "run_get",
    "run_get_for_ledger",
    "run_ledger_writable",
    "run_list",
    "run_visibility_filter",
    "target_is_visible",
    "target_list_visible",
    "target_may_act",
    "target_outage_list",
    "tenant_list_visible",
    "work_item_change_list",
    "work_item_list",
    "work_item_load_get",
    "work_item_load_list",
    "work_item_load_progress",
    "work_item_page",
    "work_item_search",
]

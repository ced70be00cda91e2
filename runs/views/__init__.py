"""HTML pages of the runs app, thin: selectors + services (STYLE.md §2, §7).

Split by page family and re-exported here for ``runs/urls.py`` (``views.<name>``): ``runs`` (runs list
and run page), ``alerts`` (the alert inbox and one alert), ``integrations`` (integrations, keys, custom
mappings), ``checks`` (next-run checks), ``jobs`` (jobs and their schedules), ``ledger`` (the run's work
ledger and the record search).
"""

from __future__ import annotations

from runs.views.alerts import alert_detail_view, alert_ignore_view, alert_inbox_view, alert_reprocess_view
from runs.views.checks import (
    BEAT_SILENT_AFTER_SECONDS,
    check_confirm_view,
    check_create_view,
    check_detail_view,
    check_list_view,
    check_waive_view,
)
from runs.views.integrations import (
    integration_create_view,
    integration_detail_view,
    integration_key_create_view,
    integration_list_view,
    integration_mapping_export_view,
    integration_mapping_view,
    integration_reprocess_view,
)
from runs.views.jobs import job_detail_view, job_list_view
from runs.views.ledger import (
    LEDGER_PAGE_SIZE,
    LEDGER_SEGMENTS,
    run_failure_class_confirm_view,
    work_item_change_view,
    work_item_load_create_view,
    work_item_load_progress_view,
    work_item_search_view,
    work_item_verify_view,
)
from runs.views.runs import run_detail_view, run_list_view

__all__ = [
    "BEAT_SILENT_AFTER_SECONDS",
    "LEDGER_PAGE_SIZE",
    "LEDGER_SEGMENTS",
    "alert_detail_view",
    "alert_ignore_view",
    "alert_inbox_view",
    "alert_reprocess_view",
    "check_confirm_view",
    "check_create_view",
    "check_detail_view",
    "check_list_view",
    "check_waive_view",
    "integration_create_view",
    "integration_detail_view",
    "integration_key_create_view",
    "integration_list_view",
    "integration_mapping_export_view",
    "integration_mapping_view",
    "integration_reprocess_view",
    "job_detail_view",
    "job_list_view",
    "run_detail_view",
    "run_failure_class_confirm_view",
    "run_list_view",
    "work_item_change_view",
    "work_item_load_create_view",
    "work_item_load_progress_view",
    "work_item_search_view",
    "work_item_verify_view",
]

"""HTML routes of the runs app (names ``runs:<entity>-<action>``)."""

from __future__ import annotations

from django.urls import path

from runs.alerts.views import (
    alert_detail_view,
    alert_ignore_view,
    alert_inbox_view,
    alert_reprocess_view,
    delivery_reprocess_view,
)
from runs.attempts.views import (
    attempt_explain_duplicate_view,
    attempt_replace_slot_view,
    run_detail_view,
    run_explain_conflicting_report_view,
    run_explain_refire_view,
    run_list_view,
)
from runs.catalog.integration_views import (
    integration_conventions_view,
    integration_create_view,
    integration_detail_view,
    integration_key_create_view,
    integration_list_view,
    integration_mapping_export_view,
    integration_mapping_view,
    integration_reprocess_view,
    integration_transport_view,
)
from runs.catalog.runner_credential_views import runner_credential_create_view, runner_credential_revoke_view
from runs.catalog.source_views import source_detail_view, source_list_view
from runs.catalog.views import job_detail_view, job_list_view
from runs.checks.views import (
    check_confirm_view,
    check_create_view,
    check_detail_view,
    check_list_view,
    check_waive_view,
)
from runs.ledger.views import (
    run_failure_class_confirm_view,
    work_item_change_view,
    work_item_duplicate_explain_view,
    work_item_load_confirm_view,
    work_item_load_create_view,
    work_item_load_discard_view,
    work_item_load_preview_view,
    work_item_load_progress_view,
    work_item_search_view,
    work_item_verify_view,
)

app_name = "runs"
urlpatterns = [
    path("runs/", run_list_view, name="run-list"),
    path("runs/<uuid:id>/", run_detail_view, name="run-detail"),
    path(
        "runs/<uuid:id>/attempts/<uuid:attempt_id>/explain-duplicate/",
        attempt_explain_duplicate_view,
        name="attempt-explain-duplicate",
    ),
    path(
        "runs/<uuid:id>/attempts/<uuid:attempt_id>/replace-slot/",
        attempt_replace_slot_view,
        name="attempt-replace-slot",
    ),
    path("runs/<uuid:id>/explain-refire/", run_explain_refire_view, name="run-explain-refire"),
    path(
        "runs/<uuid:id>/explain-conflicting-report/",
        run_explain_conflicting_report_view,
        name="run-explain-conflicting-report",
    ),
    # the work ledger (docs/work-ledger.md)
    path("runs/<uuid:id>/items/loads/", work_item_load_create_view, name="work-item-load-create"),
    path(
        "runs/<uuid:id>/items/loads/<uuid:load_id>/progress/",
        work_item_load_progress_view,
        name="work-item-load-progress",
    ),
    path(
        "runs/<uuid:id>/items/loads/<uuid:load_id>/confirm/",
        work_item_load_confirm_view,
        name="work-item-load-confirm",
    ),
    path(
        "runs/<uuid:id>/items/loads/<uuid:load_id>/discard/",
        work_item_load_discard_view,
        name="work-item-load-discard",
    ),
    path(
        "runs/<uuid:id>/items/loads/<uuid:load_id>/weakened.csv",
        work_item_load_preview_view,
        name="work-item-load-preview",
    ),
    path(
        "runs/<uuid:id>/items/explain-duplicate/", work_item_duplicate_explain_view, name="work-item-duplicate-explain"
    ),
    path("runs/<uuid:id>/items/change/", work_item_change_view, name="work-item-change"),
    path("runs/<uuid:id>/items/verify/", work_item_verify_view, name="work-item-verify"),
    path("runs/<uuid:id>/items/failure-class/", run_failure_class_confirm_view, name="run-failure-class"),
    path("items/search/", work_item_search_view, name="work-item-search"),
    path("inbox/", alert_inbox_view, name="alert-inbox"),
    path("alerts/<uuid:id>/", alert_detail_view, name="alert-detail"),
    path("alerts/<uuid:id>/reprocess/", alert_reprocess_view, name="alert-reprocess"),
    path("alerts/<uuid:id>/ignore/", alert_ignore_view, name="alert-ignore"),
    path("deliveries/<uuid:id>/reprocess/", delivery_reprocess_view, name="delivery-reprocess"),
    path("integrations/", integration_list_view, name="integration-list"),
    path("integrations/<uuid:id>/", integration_detail_view, name="integration-detail"),
    # custom integrations (docs/custom-integrations.md)
    path("integrations/new/", integration_create_view, name="integration-create"),
    path("integrations/<uuid:id>/keys/", integration_key_create_view, name="integration-key-create"),
    path("integrations/<uuid:id>/transport/", integration_transport_view, name="integration-transport"),
    path("integrations/<uuid:id>/conventions/", integration_conventions_view, name="integration-conventions"),
    path("integrations/<uuid:id>/mapping/", integration_mapping_view, name="integration-mapping"),
    path(
        "integrations/<uuid:id>/mapping/export/",
        integration_mapping_export_view,
        name="integration-mapping-export",
    ),
    path("integrations/<uuid:id>/reprocess/", integration_reprocess_view, name="integration-reprocess"),
    # a page per source (ingestion address): guide, integrations, refusals, recent deliveries
    path("sources/", source_list_view, name="source-list"),
    path("sources/<slug:source>/", source_detail_view, name="source-detail"),
    path("checks/", check_list_view, name="check-list"),
    path("checks/create/", check_create_view, name="check-create"),
    path("checks/<uuid:id>/", check_detail_view, name="check-detail"),
    path("checks/<uuid:id>/waive/", check_waive_view, name="check-waive"),
    path("checks/<uuid:id>/confirm/", check_confirm_view, name="check-confirm"),
    path("jobs/", job_list_view, name="job-list"),
    path("jobs/<uuid:id>/", job_detail_view, name="job-detail"),
    path("jobs/<uuid:id>/runner-credentials/", runner_credential_create_view, name="runner-credential-create"),
    path(
        "jobs/<uuid:id>/runner-credentials/<str:prefix>/revoke/",
        runner_credential_revoke_view,
        name="runner-credential-revoke",
    ),
]

"""HTML routes of the runs app (names ``runs:<entity>-<action>``)."""

from __future__ import annotations

from django.urls import path

from runs import views

app_name = "runs"
urlpatterns = [
    path("runs/", views.run_list_view, name="run-list"),
    path("runs/<uuid:id>/", views.run_detail_view, name="run-detail"),
    # the work ledger (issue 4)
    path("runs/<uuid:id>/items/loads/", views.work_item_load_create_view, name="work-item-load-create"),
    path(
        "runs/<uuid:id>/items/loads/<uuid:load_id>/progress/",
        views.work_item_load_progress_view,
        name="work-item-load-progress",
    ),
    path("runs/<uuid:id>/items/change/", views.work_item_change_view, name="work-item-change"),
    path("runs/<uuid:id>/items/verify/", views.work_item_verify_view, name="work-item-verify"),
    path("runs/<uuid:id>/items/failure-class/", views.run_failure_class_confirm_view, name="run-failure-class"),
    path("items/search/", views.work_item_search_view, name="work-item-search"),
    path("inbox/", views.alert_inbox_view, name="alert-inbox"),
    path("alerts/<uuid:id>/", views.alert_detail_view, name="alert-detail"),
    path("alerts/<uuid:id>/reprocess/", views.alert_reprocess_view, name="alert-reprocess"),
    path("alerts/<uuid:id>/ignore/", views.alert_ignore_view, name="alert-ignore"),
    path("integrations/", views.integration_list_view, name="integration-list"),
    path("integrations/<uuid:id>/", views.integration_detail_view, name="integration-detail"),
    # custom integrations (issue 9)
    path("integrations/new/", views.integration_create_view, name="integration-create"),
    path("integrations/<uuid:id>/keys/", views.integration_key_create_view, name="integration-key-create"),
    path("integrations/<uuid:id>/mapping/", views.integration_mapping_view, name="integration-mapping"),
    path(
        "integrations/<uuid:id>/mapping/export/",
        views.integration_mapping_export_view,
        name="integration-mapping-export",
    ),
    path("integrations/<uuid:id>/reprocess/", views.integration_reprocess_view, name="integration-reprocess"),
    path("checks/", views.check_list_view, name="check-list"),
    path("checks/create/", views.check_create_view, name="check-create"),
    path("checks/<uuid:id>/", views.check_detail_view, name="check-detail"),
    path("checks/<uuid:id>/waive/", views.check_waive_view, name="check-waive"),
    path("checks/<uuid:id>/confirm/", views.check_confirm_view, name="check-confirm"),
    path("jobs/", views.job_list_view, name="job-list"),
    path("jobs/<uuid:id>/", views.job_detail_view, name="job-detail"),
]

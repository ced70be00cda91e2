"""HTML routes of the runs app (names ``runs:<entity>-<action>``)."""

from __future__ import annotations

from django.urls import path

from runs import views

app_name = "runs"
urlpatterns = [
    path("runs/", views.run_list_view, name="run-list"),
    path("runs/<uuid:id>/", views.run_detail_view, name="run-detail"),
    path("inbox/", views.alert_inbox_view, name="alert-inbox"),
    path("alerts/<uuid:id>/", views.alert_detail_view, name="alert-detail"),
    path("alerts/<uuid:id>/reprocess/", views.alert_reprocess_view, name="alert-reprocess"),
    path("alerts/<uuid:id>/ignore/", views.alert_ignore_view, name="alert-ignore"),
    path("integrations/", views.integration_list_view, name="integration-list"),
    path("integrations/<uuid:id>/", views.integration_detail_view, name="integration-detail"),
    path("checks/", views.check_list_view, name="check-list"),
    path("checks/create/", views.check_create_view, name="check-create"),
    path("checks/<uuid:id>/", views.check_detail_view, name="check-detail"),
    path("checks/<uuid:id>/waive/", views.check_waive_view, name="check-waive"),
    path("checks/<uuid:id>/confirm/", views.check_confirm_view, name="check-confirm"),
    path("jobs/", views.job_list_view, name="job-list"),
    path("jobs/<uuid:id>/", views.job_detail_view, name="job-detail"),
]

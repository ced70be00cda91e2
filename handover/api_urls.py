"""``/api/v1/`` routes of the handover app (namespace ``handover-api``)."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import DefaultRouter

from handover.api import HandoverViewSet, JobPauseView, JobResumeView

router = DefaultRouter(use_regex_path=False)
router.include_root_view = False
router.register("handovers", HandoverViewSet, basename="handover")

app_name = "handover-api"
urlpatterns = [
    *router.urls,
    path("jobs/<uuid:id>/pause/", JobPauseView.as_view(), name="job-pause"),
    path("jobs/<uuid:id>/resume/", JobResumeView.as_view(), name="job-resume"),
]

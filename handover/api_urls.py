"""``/api/v1/`` routes of the handover app (namespace ``handover-api``)."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import DefaultRouter

from handover.accounts.api import ApiTokenViewSet
from handover.handovers.api import HandoverViewSet
from handover.notifications.api import NotificationViewSet
from handover.ownership.api import AgedWorkViewSet, JobOwnershipView, TargetOwnershipView
from handover.problems.api import ProblemViewSet
from runs.catalog.pause_api import JobPauseView, JobResumeView, TargetPauseView, TargetResumeView

router = DefaultRouter(use_regex_path=False)
router.include_root_view = False
# JSON only: no ``.json`` twins of every route (custom actions take no ``format`` argument: a 500)
router.include_format_suffixes = False
router.register("handovers", HandoverViewSet, basename="handover")
# problems: the systemic cause behind handovers (docs/problems.md)
router.register("problems", ProblemViewSet, basename="problem")
# the caller's own personal API tokens: /api/v1/tokens/ and /api/v1/tokens/<prefix>/
router.register("tokens", ApiTokenViewSet, basename="api-token")
# the caller's own notifications: /api/v1/notifications/, unread-count/, read/
router.register("notifications", NotificationViewSet, basename="notification")
# aged work the caller may see, with owner and age: /api/v1/aged-work/
router.register("aged-work", AgedWorkViewSet, basename="aged-work")

app_name = "handover-api"
urlpatterns = [
    *router.urls,
    path("jobs/<uuid:id>/pause/", JobPauseView.as_view(), name="job-pause"),
    path("jobs/<uuid:id>/resume/", JobResumeView.as_view(), name="job-resume"),
    path("jobs/<uuid:id>/ownership/", JobOwnershipView.as_view(), name="job-ownership"),
    path(
        "jobs/<uuid:id>/targets/<uuid:target_id>/ownership/",
        TargetOwnershipView.as_view(),
        name="target-ownership",
    ),
    path("targets/<uuid:id>/pause/", TargetPauseView.as_view(), name="target-pause"),
    path("targets/<uuid:id>/resume/", TargetResumeView.as_view(), name="target-resume"),
]

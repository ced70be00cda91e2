"""``/api/v1/`` routes of the approvals app (namespace ``approvals-api``)."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import DefaultRouter

from approvals.recurrence.api import RecurrenceView, SupportabilityView
from approvals.replays.api import ReplayRequestViewSet
from approvals.replays.runner_api import ReplayClaimableView, ReplayClaimView, ReplayRunnerReportView

router = DefaultRouter(use_regex_path=False)
router.include_root_view = False
router.include_format_suffixes = False  # one URL per resource: /replays/<id>/, never /replays/<id>.json
router.register("replays", ReplayRequestViewSet, basename="replay")

app_name = "approvals-api"
urlpatterns = [
    # The runner's routes authenticate with a runner credential, not a person's session or token.
    path("replays/claimable/", ReplayClaimableView.as_view(), name="replay-claimable"),
    path("replays/<uuid:id>/claim/", ReplayClaimView.as_view(), name="replay-claim"),
    path("replays/<uuid:id>/runner-report/", ReplayRunnerReportView.as_view(), name="replay-runner-report"),
    path("recurrence/", RecurrenceView.as_view(), name="recurrence"),
    path("supportability/", SupportabilityView.as_view(), name="supportability"),
    *router.urls,
]

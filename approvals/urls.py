"""HTML routes of the approvals app (names ``approvals:<entity>-<action>``)."""

from __future__ import annotations

from django.urls import path

from approvals.recurrence.views import recurrence_view, supportability_export_view, supportability_view
from approvals.replays.views import (
    recovery_decision_view,
    replay_cancel_view,
    replay_create_view,
    replay_decide_view,
    replay_detail_view,
    replay_dispatch_view,
    replay_list_view,
    replay_settle_view,
    run_replays_view,
)

app_name = "approvals"
urlpatterns = [
    path("recurrence/", recurrence_view, name="recurrence"),
    path("supportability/", supportability_view, name="supportability"),
    path("supportability/export.md", supportability_export_view, name="supportability-export"),
    path("replays/", replay_list_view, name="replay-list"),
    path("replays/<uuid:id>/", replay_detail_view, name="replay-detail"),
    path("replays/<uuid:id>/approve/", replay_decide_view, {"decision": "approve"}, name="replay-approve"),
    path("replays/<uuid:id>/reject/", replay_decide_view, {"decision": "reject"}, name="replay-reject"),
    path("replays/<uuid:id>/cancel/", replay_cancel_view, name="replay-cancel"),
    path("replays/<uuid:id>/dispatch/", replay_dispatch_view, name="replay-dispatch"),
    path("replays/<uuid:id>/settle/", replay_settle_view, name="replay-settle"),
    path("runs/<uuid:run_id>/replays/", run_replays_view, name="run-replays"),
    path("runs/<uuid:run_id>/replays/new/", replay_create_view, name="replay-create"),
    path("runs/<uuid:run_id>/recovery-decision/", recovery_decision_view, name="recovery-decision"),
]

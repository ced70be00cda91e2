"""HTML routes of the approvals app (names ``approvals:<entity>-<action>``)."""

from __future__ import annotations

from django.urls import path

from approvals import views

app_name = "approvals"
urlpatterns = [
    path("replays/", views.replay_list_view, name="replay-list"),
    path("replays/<uuid:id>/", views.replay_detail_view, name="replay-detail"),
    path("replays/<uuid:id>/approve/", views.replay_decide_view, {"decision": "approve"}, name="replay-approve"),
    path("replays/<uuid:id>/reject/", views.replay_decide_view, {"decision": "reject"}, name="replay-reject"),
    path("replays/<uuid:id>/cancel/", views.replay_cancel_view, name="replay-cancel"),
    path("replays/<uuid:id>/dispatch/", views.replay_dispatch_view, name="replay-dispatch"),
    path("replays/<uuid:id>/settle/", views.replay_settle_view, name="replay-settle"),
    path("runs/<uuid:run_id>/replays/", views.run_replays_view, name="run-replays"),
    path("runs/<uuid:run_id>/replays/new/", views.replay_create_view, name="replay-create"),
    path("runs/<uuid:run_id>/recovery-decision/", views.recovery_decision_view, name="recovery-decision"),
]

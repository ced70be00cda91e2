"""The demo: a replay approved by both owners, claimed by a simulated runner and completed; a refused one says why."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from approvals.replays.models import Dispatch, ReplayRequest
from runs.audit.models import AuditEvent
from runs.checks.models import NextRunCheck
from runs.timeline.models import TimelineEvent

pytestmark = pytest.mark.django_db


def test_the_demo_tells_the_replay_story_once(enqueued: dict[str, list[Any]]) -> None:
    call_command("load_demo", demo=True, stdout=StringIO())
    call_command("load_demo", demo=True, stdout=StringIO())  # idempotent: nothing changes the second time

    request = ReplayRequest.objects.select_related("run__tenant").get()
    assert request.run.tenant.slug == "dunmore-pharmacy"
    assert request.status == ReplayRequest.Status.COMPLETED
    assert sorted(request.items.values_list("record_id", flat=True)) == ["DUN-3004", "DUN-3005", "DUN-3006"]
    approvals = {a.kind: a for a in request.approvals.select_related("actor")}
    assert approvals["business"].actor.get_username() == "business-owner"
    assert approvals["technical"].actor.get_username() == "tech-owner"
    assert approvals["technical"].accepts_unknown_repeat_safety
    dispatch = Dispatch.objects.select_related("attempt", "claimed_by").get()
    assert dispatch.channel == "claim" and dispatch.claimed_by is not None and dispatch.status == "succeeded"
    assert (dispatch.attempt.trigger, dispatch.attempt.status) == ("manual_replay", "succeeded")
    assert dispatch.attempt.replay_key == dispatch.idempotency_key
    assert NextRunCheck.objects.filter(requested_by_ref=str(request.public_id)).exists()

    # the refused request shows why, in the audit trail (it did not happen: not on the run's timeline)
    refused = AuditEvent.objects.get(action="replay_refused")
    assert "rule 2" in refused.summary and "DUN-3003" in refused.summary
    assert refused.data["run"] == str(request.run.public_id)
    assert not TimelineEvent.objects.filter(run=request.run, kind="replay_refused").exists()
    kinds = list(
        TimelineEvent.objects.filter(run=request.run, kind__startswith="replay_").values_list("kind", flat=True)
    )
    for kind in (
        "replay_requested",
        "replay_approval",
        "replay_approved",
        "replay_dispatched",
        "replay_claimed",
        "replay_attempt_linked",
        "replay_attempt_started",
        "replay_attempt_succeeded",
        "replay_completed",
    ):
        assert kind in kinds

    client = Client()
    client.force_login(get_user_model().objects.get(username="support"))
    page = client.get(f"/replays/{request.public_id}/").content.decode()
    assert "completed" in page and "business-owner" in page and "tech-owner" in page
    run_page = client.get(f"/runs/{request.run.public_id}/").content.decode()
    assert "Replay request refused" not in run_page
    auditor = Client()
    auditor.force_login(get_user_model().objects.get(username="auditor"))
    trail = auditor.get("/audit/").content.decode()
    assert "Replay request refused" in trail and "DUN-3003" in trail

"""Every (status, action) pair of the replay request and the dispatch: moved, unchanged or refused (409)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from approvals.replays.dispatch import dispatch_transition
from approvals.replays.models import Dispatch, ReplayRequest
from approvals.replays.requests import replay_request_transition
from handover.core.errors import InvalidTransition
from runs.timeline.models import TimelineEvent
from tests.approvals.conftest import MakeRequest, World

CLAIMED = TimelineEvent.Kind.REPLAY_CLAIMED

pytestmark = pytest.mark.django_db

REQUEST_CASES = [(status, action) for status in ReplayRequest.Status.values for action in ReplayRequest.TRANSITIONS]


def put_request_in(request: ReplayRequest, status: str, actor: Any) -> None:
    """Place a request in ``status`` with the stamps its constraints ask for."""
    now = timezone.now()
    values: dict[str, Any] = {"status": status, "approved_at": None, "dispatched_at": None, "closed_at": None}
    if status in ("approved", "dispatched", "completed", "failed"):
        values["approved_at"] = now
    if status in ("dispatched", "completed", "failed"):
        values["dispatched_at"] = now
    if status in ReplayRequest.TERMINAL_STATUSES:
        values.update(closed_at=now, closed_by=actor, close_reason="set up")
    ReplayRequest.objects.filter(pk=request.pk).update(**values)


@pytest.mark.parametrize(("status", "action"), REQUEST_CASES)
def test_replay_request_transition_matrix(world: World, make_request: MakeRequest, status: str, action: str) -> None:
    request = make_request()
    put_request_in(request, status, world.support)
    allowed_from, target = ReplayRequest.TRANSITIONS[action]
    before = TimelineEvent.objects.count()
    if status in allowed_from:
        moved, changed = replay_request_transition(request=request, action=action, actor=world.support, reason="r")
        assert changed and moved.status == target
        assert TimelineEvent.objects.count() == before + 1
        if target in ReplayRequest.TERMINAL_STATUSES:
            assert moved.closed_at is not None and not moved.items.filter(is_open=True).exists()
        else:
            assert moved.closed_at is None and moved.items.filter(is_open=True).count() == moved.item_count
    elif status == target:
        moved, changed = replay_request_transition(request=request, action=action, actor=world.support, reason="r")
        assert not changed and moved.status == status
        assert TimelineEvent.objects.count() == before
    else:
        with pytest.raises(InvalidTransition) as caught:
            replay_request_transition(request=request, action=action, actor=world.support, reason="r")
        assert caught.value.status == 409 and caught.value.errors == {"status": [status]}
        assert ReplayRequest.objects.get(pk=request.pk).status == status
        assert TimelineEvent.objects.count() == before


DISPATCH_CASES = [(status, action) for status in Dispatch.Status.values for action in Dispatch.TRANSITIONS]


@pytest.mark.parametrize(("status", "action"), DISPATCH_CASES)
def test_dispatch_transition_matrix(world: World, approved: ReplayRequest, status: str, action: str) -> None:
    now = timezone.now()
    dispatch = Dispatch.objects.create(
        request=approved,
        idempotency_key="rk_matrix",
        channel="claim",
        status=status,
        lease_expires_at=now + timedelta(hours=1),
        unknown_at=now if status == "unknown" else None,
        unknown_reason="set up" if status == "unknown" else "",
        finished_at=now if status in ("succeeded", "failed") else None,
    )
    values = {"unknown_at": now, "unknown_reason": "lapsed"} if action == "lapse" else {"finished_at": now}
    allowed_from, target = Dispatch.TRANSITIONS[action]
    if status in allowed_from:
        moved, changed = dispatch_transition(
            dispatch=dispatch, action=action, values=values, summary="s", event_kind=CLAIMED
        )
        assert changed and moved.status == target
        assert TimelineEvent.objects.filter(kind=CLAIMED).count() == 1
    elif status == target:
        moved, changed = dispatch_transition(
            dispatch=dispatch, action=action, values=values, summary="s", event_kind=CLAIMED
        )
        assert not changed
        assert not TimelineEvent.objects.filter(kind=CLAIMED).exists()
    else:
        with pytest.raises(InvalidTransition):
            dispatch_transition(
                dispatch=dispatch,
                action=action,
                values=values,
                summary="s",
                event_kind=CLAIMED,
            )
        assert Dispatch.objects.get(pk=dispatch.pk).status == status

"""Dispatch happens once (rule 5 in docs/architecture.md), with real threads released together by one Barrier.

Two approvers at the same instant, ten simultaneous dispatch triggers, two claims, a delivery task
run twice at once: one dispatch row, one idempotency key, one timeline event -- and every losing
path really ran (it got the existing dispatch, ``claimed_now`` false, a skipped delivery, or the
refusal).
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import pytest
from django.db import connection  # noqa: F401 - read by the skipif condition
from django.test import Client
from django.utils import timezone

from approvals.replays import tasks
from approvals.replays import webhook_client as webhooks
from approvals.replays.decisions import replay_request_approve
from approvals.replays.delivery import dispatch_webhook_deliver
from approvals.replays.dispatch import replay_request_dispatch
from approvals.replays.models import Approval, Dispatch, ReplayRequest, WebhookDelivery
from approvals.replays.requests import replay_request_create
from approvals.replays.webhook_settings import replay_webhook_set
from handover.core.errors import DomainError
from runs.timeline.models import TimelineEvent
from tests.approvals.conftest import World
from tests.concurrency import run_concurrently

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif("connection.vendor != 'postgresql'", reason="real row locks and unique indexes need PostgreSQL"),
]


@pytest.fixture
def dispatch_runs_inline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dispatch task enqueued on commit runs at once in the committing thread (as a worker would)."""
    monkeypatch.setattr(tasks.replay_request_dispatch, "delay", lambda pk: tasks.replay_request_dispatch.run(pk))
    monkeypatch.setattr(tasks.replay_request_notify, "delay", lambda *a: None)
    monkeypatch.setattr(tasks.dispatch_webhook_deliver, "delay", lambda *a: None)


def make(world: World, record_ids: list[str] | None = None) -> ReplayRequest:
    return replay_request_create(
        actor=world.support,
        run=world.run,
        kind="absent_items",
        reason="the gateway was down",
        record_ids=record_ids or ["INV-1", "INV-2"],
    )


def approve(request_pk: int, user_pk: int, kind: str) -> ReplayRequest:
    from django.contrib.auth import get_user_model

    request = ReplayRequest.objects.select_related("run__job", "run__tenant", "requested_by").get(pk=request_pk)
    return replay_request_approve(
        request=request,
        actor=get_user_model().objects.get(pk=user_pk),
        kind=kind,
        scope_fingerprint=request.scope_fingerprint,
        reauthenticated_at=timezone.now(),
    )


def approve_or_refusal(request_pk: int, user_pk: int, kind: str) -> str | DomainError:
    """The request's status after ``approve``, or the refusal it raised: the losing path's answer."""
    try:
        return approve(request_pk, user_pk, kind).status
    except DomainError as exc:
        return exc


def test_two_approvers_at_the_same_instant_give_one_dispatch(world: World, dispatch_runs_inline: None) -> None:
    request = make(world)
    approvals = [
        partial(approve, request.pk, world.business.pk, "business"),
        partial(approve, request.pk, world.technical.pk, "technical"),
    ]

    results = [approved.status for approved in run_concurrently(approvals)]

    # one approval saw the other already there and approved; the other saw none and stayed pending
    assert sorted(results) == ["approved", "pending"]
    request.refresh_from_db()
    assert request.status == ReplayRequest.Status.DISPATCHED
    assert Approval.objects.filter(request=request, voided_at__isnull=True).count() == 2
    assert Dispatch.objects.count() == 1
    assert TimelineEvent.objects.filter(kind="replay_approved").count() == 1
    assert TimelineEvent.objects.filter(kind="replay_dispatched").count() == 1


def test_two_business_owners_at_the_same_instant_give_one_business_approval(
    world: World, dispatch_runs_inline: None
) -> None:
    request = make(world)
    people = [world.business.pk, world.both.pk]

    results = run_concurrently([partial(approve_or_refusal, request.pk, person, "business") for person in people])

    assert Approval.objects.filter(request=request, kind="business").count() == 1
    # the losing path ran: refused as already decided (409)
    errors = [result for result in results if isinstance(result, DomainError)]
    assert len(errors) == 1 and errors[0].status == 409
    assert results.count("pending") == 1


def test_one_person_cannot_slip_both_approvals_in_at_once(world: World, dispatch_runs_inline: None) -> None:
    request = make(world)
    kinds = ["business", "technical"]

    results = run_concurrently([partial(approve_or_refusal, request.pk, world.both.pk, kind) for kind in kinds])

    assert Approval.objects.filter(request=request).count() == 1
    errors = [result for result in results if isinstance(result, DomainError)]
    assert len(errors) == 1 and errors[0].status in (403, 409)
    assert ReplayRequest.objects.get(pk=request.pk).status == "pending"
    assert not Dispatch.objects.exists()


def _approved(world: World) -> ReplayRequest:
    request = make(world)
    approve(request.pk, world.business.pk, "business")
    approve(request.pk, world.technical.pk, "technical")
    request.refresh_from_db()
    assert request.status == ReplayRequest.Status.APPROVED
    return request


def test_ten_simultaneous_dispatch_triggers_give_one_dispatch_one_key_one_event(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tasks.replay_request_dispatch, "delay", lambda pk: None)  # the triggers below race instead
    monkeypatch.setattr(tasks.replay_request_notify, "delay", lambda *a: None)
    request = _approved(world)

    def trigger() -> tuple[int, bool, str]:
        fresh = ReplayRequest.objects.select_related("run__job", "run__tenant").get(pk=request.pk)
        dispatch, created = replay_request_dispatch(request=fresh)
        return dispatch.pk, created, dispatch.idempotency_key

    results = run_concurrently([trigger] * 10)

    assert sorted(created for _, created, _ in results) == [False] * 9 + [True]  # nine got the existing row
    assert len({pk for pk, _, _ in results}) == 1 and len({key for _, _, key in results}) == 1
    assert Dispatch.objects.count() == 1
    assert Dispatch.objects.get().idempotency_key == results[0][2]
    assert TimelineEvent.objects.filter(kind="replay_dispatched").count() == 1


def test_two_claims_at_once_give_one_dispatch_and_one_lease(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tasks.replay_request_dispatch, "delay", lambda pk: None)
    monkeypatch.setattr(tasks.replay_request_notify, "delay", lambda *a: None)
    request = _approved(world)

    def claim() -> tuple[int, dict[str, Any]]:
        response = Client().post(
            f"/api/v1/replays/{request.public_id}/claim/", HTTP_AUTHORIZATION=f"Bearer {world.credential_key}"
        )
        return response.status_code, response.json()

    results = run_concurrently([claim, claim])

    assert [status for status, _ in results] == [200, 200]
    bodies = [body for _, body in results]
    assert bodies[0]["dispatch"] == bodies[1]["dispatch"]
    assert bodies[0]["idempotency_key"] == bodies[1]["idempotency_key"]
    assert sorted(body["claimed_now"] for body in bodies) == [False, True]  # the second got the same lease back
    assert Dispatch.objects.count() == 1
    assert TimelineEvent.objects.filter(kind="replay_dispatched").count() == 1
    assert TimelineEvent.objects.filter(kind="replay_claimed").count() == 1


def test_a_delivery_task_run_twice_at_once_delivers_once(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tasks.replay_request_dispatch, "delay", lambda pk: None)
    monkeypatch.setattr(tasks.replay_request_notify, "delay", lambda *a: None)
    monkeypatch.setattr(tasks.dispatch_webhook_deliver, "delay", lambda pk: None)
    replay_webhook_set(job=world.job, url="https://runner.example.com/replays")
    request = _approved(world)
    dispatch, _ = replay_request_dispatch(request=request)
    sent: list[str] = []

    def slow_webhook(*, url: str, body: bytes, headers: dict[str, str]) -> webhooks.Answer:
        sent.append(headers["Idempotency-Key"])
        time.sleep(0.3)  # the other worker arrives while this one is still waiting for the answer
        return webhooks.Answer(200, "ok")

    monkeypatch.setattr(webhooks, "deliver", slow_webhook)

    results = run_concurrently([lambda: dispatch_webhook_deliver(dispatch_id=dispatch.pk).outcome] * 4)

    assert sorted(results) == ["delivered", "skipped", "skipped", "skipped"]
    assert sent == [dispatch.idempotency_key]
    assert WebhookDelivery.objects.count() == 1
    assert Dispatch.objects.get().status == Dispatch.Status.LEASED
    assert TimelineEvent.objects.filter(kind="replay_dispatched").count() == 1
    assert TimelineEvent.objects.filter(kind="replay_webhook_delivered").count() == 1

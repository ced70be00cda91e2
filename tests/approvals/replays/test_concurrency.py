"""Dispatch happens once (rule 5 in docs/architecture.md), with real threads released together by one Barrier.

Two approvers at the same instant, ten simultaneous dispatch triggers, two claims, a delivery task
run twice at once: one dispatch row, one idempotency key, one timeline event -- and every losing
path really ran (it got the existing dispatch, ``claimed_now`` false, a skipped delivery, or the
refusal).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
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

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif("connection.vendor != 'postgresql'", reason="real row locks and unique indexes need PostgreSQL"),
]


def run_together(count: int, work: Callable[[int], Any]) -> tuple[list[Any], list[BaseException]]:
    """Run ``work(i)`` in ``count`` threads released at once; returns (results, errors) in thread order."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    errors: list[BaseException] = []
    lock = threading.Lock()

    def target(i: int) -> None:
        try:
            barrier.wait(timeout=30)  # every thread reaches the contended call together
            results[i] = work(i)
        except BaseException as exc:  # noqa: BLE001 - collected and asserted by the test
            with lock:
                errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results, errors


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


def test_two_approvers_at_the_same_instant_give_one_dispatch(world: World, dispatch_runs_inline: None) -> None:
    request = make(world)
    people = [(world.business.pk, "business"), (world.technical.pk, "technical")]

    results, errors = run_together(2, lambda i: approve(request.pk, *people[i]).status)

    assert not errors
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

    results, errors = run_together(2, lambda i: approve(request.pk, people[i], "business").status)

    assert Approval.objects.filter(request=request, kind="business").count() == 1
    # the losing path ran: refused as already decided (409)
    assert len(errors) == 1 and isinstance(errors[0], DomainError) and errors[0].status == 409
    assert results.count("pending") == 1


def test_one_person_cannot_slip_both_approvals_in_at_once(world: World, dispatch_runs_inline: None) -> None:
    request = make(world)
    kinds = ["business", "technical"]

    results, errors = run_together(2, lambda i: approve(request.pk, world.both.pk, kinds[i]).status)

    assert Approval.objects.filter(request=request).count() == 1
    assert len(errors) == 1 and isinstance(errors[0], DomainError) and errors[0].status in (403, 409)
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

    def trigger(i: int) -> tuple[int, bool, str]:
        fresh = ReplayRequest.objects.select_related("run__job", "run__tenant").get(pk=request.pk)
        dispatch, created = replay_request_dispatch(request=fresh)
        return dispatch.pk, created, dispatch.idempotency_key

    results, errors = run_together(10, trigger)

    assert not errors
    assert sorted(created for _, created, _ in results) == [False] * 9 + [True]  # nine got the existing row
    assert len({pk for pk, _, _ in results}) == 1 and len({key for _, _, key in results}) == 1
    assert Dispatch.objects.count() == 1
    assert Dispatch.objects.get().idempotency_key == results[0][2]
    assert TimelineEvent.objects.filter(kind="replay_dispatched").count() == 1


def test_two_claims_at_once_give_one_dispatch_and_one_lease(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tasks.replay_request_dispatch, "delay", lambda pk: None)
    monkeypatch.setattr(tasks.replay_request_notify, "delay", lambda *a: None)
    request = _approved(world)

    def claim(i: int) -> tuple[int, dict[str, Any]]:
        response = Client().post(
            f"/api/v1/replays/{request.public_id}/claim/", HTTP_AUTHORIZATION=f"Bearer {world.credential_key}"
        )
        return response.status_code, response.json()

    results, errors = run_together(2, claim)

    assert not errors
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

    results, errors = run_together(4, lambda i: dispatch_webhook_deliver(dispatch_id=dispatch.pk).outcome)

    assert not errors
    assert sorted(results) == ["delivered", "skipped", "skipped", "skipped"]
    assert sent == [dispatch.idempotency_key]
    assert WebhookDelivery.objects.count() == 1
    assert Dispatch.objects.get().status == Dispatch.Status.LEASED
    assert TimelineEvent.objects.filter(kind="replay_dispatched").count() == 1
    assert TimelineEvent.objects.filter(kind="replay_webhook_delivered").count() == 1

"""Celery tasks called directly: the signed webhook (every delivery recorded, transient errors retried
with backoff, permanent ones not), e-mail to approvers and reminders, and the sweeps (run twice)."""

from __future__ import annotations

import json
import socket
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from celery.exceptions import Retry
from django.core import mail
from django.test import override_settings
from django.utils import timezone

from approvals.replays import tasks
from approvals.replays import webhook_client as webhooks
from approvals.replays.delivery import dispatch_webhook_deliver, replay_sweep
from approvals.replays.dispatch import replay_request_dispatch
from approvals.replays.models import Dispatch, ReplayRequest, WebhookDelivery
from approvals.replays.webhook_settings import replay_webhook_set
from handover.core.errors import DomainError
from handover.notifications import tasks as notification_tasks
from handover.notifications.models import Notification
from runs.attempts.models import Attempt
from runs.timeline.models import TimelineEvent
from tests.approvals.conftest import Approve, MakeRequest, World
from tests.factories import AttemptFactory

pytestmark = pytest.mark.django_db
URL = "https://runner.example.com/replays"


class FakeWebhook:
    """The webhook target: answers from a script and keeps what it was sent."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls: list[dict[str, Any]] = []

    def __call__(self, *, url: str, body: bytes, headers: dict[str, str]) -> webhooks.Answer:
        self.calls.append({"url": url, "body": body, "headers": headers})
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


@pytest.fixture
def webhook(world: World) -> str:
    """The job's replay webhook; returns its secret."""
    return replay_webhook_set(job=world.job, url=URL, actor=world.admin)[1]


@pytest.fixture
def dispatched(world: World, webhook: str, approved: ReplayRequest, enqueued: dict[str, list[Any]]) -> Dispatch:
    """A dispatch going out by webhook (its delivery task only recorded)."""
    from django.db import transaction

    with transaction.atomic():
        dispatch, _ = replay_request_dispatch(request=approved)
    return dispatch


def deliveries() -> list[WebhookDelivery]:
    return list(WebhookDelivery.objects.order_by("number"))


def test_dispatch_by_webhook_enqueues_its_delivery_on_commit(
    world: World,
    webhook: str,
    approved: ReplayRequest,
    enqueued: dict[str, list[Any]],
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        dispatch, _ = replay_request_dispatch(request=approved)
    assert dispatch.channel == Dispatch.Channel.WEBHOOK
    assert enqueued["deliver"] == [dispatch.pk]


def test_a_delivery_is_signed_recorded_and_leases_the_dispatch(
    world: World, webhook: str, dispatched: Dispatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = FakeWebhook(webhooks.Answer(202, '{"accepted": true}'))
    monkeypatch.setattr(webhooks, "deliver", target)

    assert tasks.dispatch_webhook_deliver.run(dispatched.pk) == "delivered"

    [call] = target.calls
    headers, body = call["headers"], call["body"]
    assert call["url"] == URL
    assert headers["Idempotency-Key"] == dispatched.idempotency_key
    assert webhooks.verify(webhook, int(headers["X-Handover-Timestamp"]), body, headers["X-Handover-Signature"])
    assert not webhooks.verify(webhook, int(headers["X-Handover-Timestamp"]) + 1, body, headers["X-Handover-Signature"])
    document = json.loads(body)
    assert document["idempotency_key"] == dispatched.idempotency_key and document["record_ids"] == ["INV-1", "INV-2"]
    [row] = deliveries()
    assert (row.number, row.status, row.response_status, row.response_body) == (
        1,
        "succeeded",
        202,
        '{"accepted": true}',
    )
    dispatched.refresh_from_db()
    assert dispatched.status == Dispatch.Status.LEASED and dispatched.delivered_at is not None
    assert dispatched.lease_expires_at > timezone.now() + timedelta(minutes=14)
    assert TimelineEvent.objects.filter(kind="replay_webhook_delivered").count() == 1
    # run again (a redelivered message): nothing is sent twice
    assert tasks.dispatch_webhook_deliver.run(dispatched.pk) == "skipped"
    assert len(target.calls) == 1 and len(deliveries()) == 1


def test_transient_errors_retry_with_backoff_and_every_attempt_is_recorded(
    world: World, dispatched: Dispatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = FakeWebhook(
        webhooks.TransientError("The webhook answered 503.", webhooks.Answer(503, "busy")),
        webhooks.TransientError("TimeoutError: timed out"),
        webhooks.Answer(200, "ok"),
    )
    monkeypatch.setattr(webhooks, "deliver", target)

    first = dispatch_webhook_deliver(dispatch_id=dispatched.pk)
    assert first.outcome == "retry" and 30 <= (first.retry_in_seconds or 0) <= 33
    # not due again before the backoff: a duplicate message sends nothing
    assert dispatch_webhook_deliver(dispatch_id=dispatched.pk).outcome == "skipped"
    dispatched.refresh_from_db()
    with time_machine.travel(dispatched.next_delivery_at + timedelta(seconds=1)):
        second = dispatch_webhook_deliver(dispatch_id=dispatched.pk)
    assert second.outcome == "retry" and 60 <= (second.retry_in_seconds or 0) <= 66
    dispatched.refresh_from_db()
    with time_machine.travel(dispatched.next_delivery_at + timedelta(seconds=1)):
        assert dispatch_webhook_deliver(dispatch_id=dispatched.pk).outcome == "delivered"
    rows = deliveries()
    assert [(r.number, r.status, r.is_transient, r.response_status) for r in rows] == [
        (1, "failed", True, 503),
        (2, "failed", True, None),
        (3, "succeeded", False, 200),
    ]
    assert "timed out" in rows[1].error
    assert Dispatch.objects.get().status == Dispatch.Status.LEASED


def test_the_task_asks_celery_to_retry_after_the_backoff(
    world: World, dispatched: Dispatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(webhooks, "deliver", FakeWebhook(webhooks.TransientError("ConnectionRefusedError")))
    retried: list[float] = []

    def fake_retry(*args: Any, countdown: float, **kwargs: Any) -> Retry:
        retried.append(countdown)
        return Retry()

    monkeypatch.setattr(tasks.dispatch_webhook_deliver, "retry", fake_retry)
    with pytest.raises(Retry):
        tasks.dispatch_webhook_deliver.run(dispatched.pk)
    assert len(retried) == 1 and retried[0] >= 30


def test_a_permanent_error_is_not_retried_and_the_dispatch_needs_a_person(
    world: World, dispatched: Dispatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = FakeWebhook(webhooks.PermanentError("The webhook answered 401.", webhooks.Answer(401, "bad signature")))
    monkeypatch.setattr(webhooks, "deliver", target)
    assert tasks.dispatch_webhook_deliver.run(dispatched.pk) == "failed"
    [row] = deliveries()
    assert (row.status, row.is_transient, row.response_status) == ("failed", False, 401)
    dispatched.refresh_from_db()
    assert dispatched.status == Dispatch.Status.UNKNOWN and "401" in dispatched.unknown_reason
    assert tasks.dispatch_webhook_deliver.run(dispatched.pk) == "skipped"
    assert len(target.calls) == 1


@override_settings(HANDOVER_REPLAY_WEBHOOK_MAX_DELIVERIES=2)
def test_the_last_failed_retry_makes_the_dispatch_unknown(
    world: World, dispatched: Dispatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        webhooks, "deliver", FakeWebhook(webhooks.TransientError("502"), webhooks.TransientError("502"))
    )
    assert dispatch_webhook_deliver(dispatch_id=dispatched.pk).outcome == "retry"
    dispatched.refresh_from_db()
    with time_machine.travel(dispatched.next_delivery_at + timedelta(seconds=1)):
        assert dispatch_webhook_deliver(dispatch_id=dispatched.pk).outcome == "gave_up"
    dispatched.refresh_from_db()
    assert dispatched.status == "unknown" and "failed 2 times" in dispatched.unknown_reason
    assert len(deliveries()) == 2


def test_at_most_4_kib_of_the_answer_is_kept(
    world: World, dispatched: Dispatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(webhooks, "deliver", FakeWebhook(webhooks.Answer(200, "x" * 10_000)))
    dispatch_webhook_deliver(dispatch_id=dispatched.pk)
    assert len(deliveries()[0].response_body) == 4096


def test_a_retried_task_after_a_crash_records_the_lost_delivery_and_sends_once_more(
    world: World, dispatched: Dispatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the first worker claimed the delivery, wrote its row and died before the answer was recorded
    now = timezone.now()
    Dispatch.objects.filter(pk=dispatched.pk).update(delivery_count=1, next_delivery_at=now + timedelta(seconds=60))
    WebhookDelivery.objects.create(
        dispatch=dispatched, number=1, url=URL, timestamp=int(now.timestamp()), started_at=now
    )
    target = FakeWebhook(webhooks.Answer(200, "ok"))
    monkeypatch.setattr(webhooks, "deliver", target)
    assert dispatch_webhook_deliver(dispatch_id=dispatched.pk).outcome == "skipped"  # still held by the first worker
    with time_machine.travel(now + timedelta(seconds=61)):
        assert dispatch_webhook_deliver(dispatch_id=dispatched.pk).outcome == "delivered"
        assert dispatch_webhook_deliver(dispatch_id=dispatched.pk).outcome == "skipped"
    rows = deliveries()
    assert [(r.number, r.status) for r in rows] == [(1, "failed"), (2, "succeeded")]
    assert rows[0].error == "the worker was lost before the answer was recorded"
    # one dispatch, one key, one dispatched event, one delivered event
    assert Dispatch.objects.count() == 1 and len(target.calls) == 1
    assert target.calls[0]["headers"]["Idempotency-Key"] == dispatched.idempotency_key
    assert TimelineEvent.objects.filter(kind="replay_dispatched").count() == 1
    assert TimelineEvent.objects.filter(kind="replay_webhook_delivered").count() == 1


def test_the_sweep_lists_due_deliveries_for_a_lost_message(world: World, dispatched: Dispatch) -> None:
    assert replay_sweep().due_deliveries == [dispatched.pk]


def test_a_webhook_switched_off_before_delivery_makes_the_dispatch_unknown(
    world: World, dispatched: Dispatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    from approvals.replays.models import ReplayWebhook

    ReplayWebhook.objects.update(is_active=False)
    target = FakeWebhook()
    monkeypatch.setattr(webhooks, "deliver", target)
    assert dispatch_webhook_deliver(dispatch_id=dispatched.pk).outcome == "failed"
    assert target.calls == [] and Dispatch.objects.get().status == "unknown"


# --- the webhook target rules (no network) ---------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/hook",
        "https://10.0.0.8/hook",
        "https://192.168.1.20/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://[::1]/hook",
        "ftp://runner.example.com/hook",
        "https://user:pw@runner.example.com/hook",
        "not a url",
    ],
)
def test_internal_or_malformed_webhook_urls_are_refused(world: World, url: str) -> None:
    with pytest.raises(DomainError):
        replay_webhook_set(job=world.job, url=url)


def test_an_allow_listed_internal_host_is_accepted(world: World) -> None:
    with override_settings(HANDOVER_REPLAY_WEBHOOK_ALLOWED_HOSTS=["10.0.0.8"]):
        row, secret = replay_webhook_set(job=world.job, url="https://10.0.0.8/hook")
    assert row.url == "https://10.0.0.8/hook" and len(secret) == 64


@override_settings(PRODUCTION=True)
def test_plain_http_is_refused_in_production(world: World) -> None:
    with pytest.raises(DomainError):
        replay_webhook_set(job=world.job, url="http://runner.example.com/hook")


def test_a_name_resolving_to_a_private_address_is_refused_at_delivery(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        socket, "getaddrinfo", lambda *a, **k: [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", 443))]
    )
    with pytest.raises(webhooks.PermanentError):
        webhooks.resolve_target("https://runner.example.com/hook")


def test_the_secret_is_not_stored_and_stays_until_rotated(world: World) -> None:
    row, secret = replay_webhook_set(job=world.job, url=URL)
    assert secret not in row.secret_salt
    _, same = replay_webhook_set(job=world.job, url=URL + "/v2")
    _, rotated = replay_webhook_set(job=world.job, url=URL, rotate_secret=True)
    assert same == secret and rotated != secret


# --- e-mail to approvers, reminders ---------------------------------------------------------------


def test_the_eligible_approvers_are_told_once_and_mailed_on_delivery(
    world: World, make_request: MakeRequest, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    delivered: list[int] = []
    monkeypatch.setattr(notification_tasks.notification_deliver, "delay", lambda pk: delivered.append(pk))
    with django_capture_on_commit_callbacks(execute=True):
        request = make_request()
    notes = Notification.objects.filter(event="approval_needed", dedup_key=f"replay:{request.public_id}")
    assert sorted(n.recipient.username for n in notes) == ["bea-business", "bo-both", "tom-technical"]
    assert tasks.replay_request_notify.run(request.pk, "requested") == 3  # counted, not told again
    for pk in delivered:
        notification_tasks.notification_deliver(pk)
    assert sorted(m.to[0] for m in mail.outbox) == [
        "bea-business@example.com",
        "bo-both@example.com",
        "tom-technical@example.com",
    ]
    assert f"/replays/{request.public_id}/" in mail.outbox[0].body
    assert "sam-support@example.com" not in [m.to[0] for m in mail.outbox]
    assert Notification.objects.filter(event="approval_needed").count() == 3


def test_reminders_go_to_those_who_have_not_decided_once_per_interval(
    world: World, make_request: MakeRequest, approve: Approve, enqueued: dict[str, list[Any]]
) -> None:
    request = make_request()
    approve(request, world.business, "business")
    assert tasks.replay_request_remind.run() == 0
    with time_machine.travel(request.created_at + timedelta(hours=4, seconds=1)):
        assert tasks.replay_request_remind.run() == 1
        assert tasks.replay_request_remind.run() == 0  # claimed: an overlapping tick reminds nobody twice
        assert tasks.replay_request_notify.run(request.pk, "reminder") == 2
    reminded = Notification.objects.filter(event="approval_needed", dedup_key__contains=":reminder:")
    assert sorted(n.recipient.username for n in reminded) == ["bo-both", "tom-technical"]
    assert enqueued["notify"][-1] == (request.pk, "reminder")
    request.refresh_from_db()
    assert request.reminder_count == 1
    with time_machine.travel(request.created_at + timedelta(hours=8, seconds=2)):
        assert tasks.replay_request_remind.run() == 1


# --- the sweep ------------------------------------------------------------------------------------


def test_the_sweep_expires_overdue_pending_requests_and_is_idempotent(
    world: World, make_request: MakeRequest, approve: Approve
) -> None:
    request = make_request()
    approve(request, world.business, "business")
    with time_machine.travel(request.expires_at - timedelta(seconds=1)):
        assert replay_sweep().expired == 0
    with time_machine.travel(request.expires_at):
        assert replay_sweep().expired == 1
        assert replay_sweep().expired == 0
    request.refresh_from_db()
    assert request.status == ReplayRequest.Status.EXPIRED
    assert request.approvals.get().voided_at is not None


def test_the_sweep_dispatches_a_held_request_once_its_blocker_is_gone(world: World, approved: ReplayRequest) -> None:
    retry = AttemptFactory(run=world.run, execution_id="exp-a2", number=2, status="queued")
    result = replay_sweep()
    assert (result.dispatched, result.held) == (0, 1)
    assert replay_sweep().held == 1
    assert TimelineEvent.objects.filter(kind="replay_dispatch_blocked").count() == 1
    Attempt.objects.filter(pk=retry.pk).update(status="failed")
    assert replay_sweep().dispatched == 1
    assert replay_sweep().dispatched == 0
    assert Dispatch.objects.count() == 1


def test_the_dispatch_task_reports_what_happened(world: World, approved: ReplayRequest) -> None:
    assert tasks.replay_request_dispatch.run(approved.pk) == "dispatched"
    assert tasks.replay_request_dispatch.run(approved.pk) == "already"
    assert tasks.replay_request_dispatch.run(999_999) == "gone"


def test_the_sweep_task_enqueues_due_deliveries(
    world: World, dispatched: Dispatch, enqueued: dict[str, list[Any]]
) -> None:
    counts = tasks.replay_sweep.run()
    assert counts["deliveries"] == 1 and enqueued["deliver"] == [dispatched.pk]

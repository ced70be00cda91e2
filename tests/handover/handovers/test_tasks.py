"""Handover notifications through the notifications subsystem: rows in the transaction, delivery
enqueued on commit, e-mail sent once; the verifying sweep."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import mail

from handover.handovers import tasks
from handover.handovers.checks import (
    handover_escalation_owners_for_check,
    handover_reopen_for_failed_check,
    handover_sweep_verifying,
)
from handover.handovers.models import Handover, HandoverNotification, HandoverRun
from handover.handovers.services import handover_hand_over, handover_start_recovery, handover_update, handover_verify
from handover.notifications import tasks as notification_tasks
from handover.notifications.models import Notification, NotificationDelivery
from tests.handover.helpers import World, settle_check

pytestmark = pytest.mark.django_db


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the delivery ids the on-commit callbacks hand to ``handover.notification_deliver.delay``."""
    ids: list[int] = []
    monkeypatch.setattr(notification_tasks.notification_deliver, "delay", lambda pk: ids.append(pk))
    return ids


def _hand_over(world: World, draft: Handover, django_capture_on_commit_callbacks: Any) -> Handover:
    handover_update(handover=draft, actor=world.support, fields={"escalation_owner": world.owner})
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        moved = handover_hand_over(handover=draft, actor=world.support)
    assert len(callbacks) == 1
    return moved


def test_hand_over_tells_the_escalation_owner_in_app_and_by_mail_after_commit(
    world: World, draft: Handover, enqueued: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        handover_update(handover=draft, actor=world.support, fields={"escalation_owner": world.owner})
        handover_hand_over(handover=draft, actor=world.support)
    note = Notification.objects.get()
    assert note.recipient == world.owner and note.event == "handed_over" and note.in_app and note.read_at is None
    delivery = NotificationDelivery.objects.get()
    assert delivery.channel == "email" and delivery.status == "pending"
    assert enqueued == [] and len(mail.outbox) == 0  # nothing is sent before the commit
    for callback in callbacks:
        callback()
    assert enqueued == [delivery.pk]

    assert notification_tasks.notification_deliver(delivery.pk) == "sent"
    assert notification_tasks.notification_deliver(delivery.pk) == "sent"  # a repeated task sends nothing twice

    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["olga@example.com"]
    assert message.subject == f"[Handover] Handed over to you: {draft.title}"
    assert f"/handovers/{draft.public_id}/" in message.body
    assert "What is safe to do next:" in message.body
    delivery.refresh_from_db()
    assert delivery.status == "sent" and delivery.sent_at and delivery.attempt_count == 1
    assert not HandoverNotification.objects.exists()  # the old per-handover rows are no longer written


def test_a_repeated_hand_over_tells_nobody_again(
    world: World, draft: Handover, enqueued: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    _hand_over(world, draft, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        handover_hand_over(handover=draft, actor=world.support)
    assert callbacks == [] and len(enqueued) == 1 and Notification.objects.count() == 1


def test_a_new_escalation_owner_is_told_too(
    world: World, draft: Handover, enqueued: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    _hand_over(world, draft, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        handover_update(handover=draft, actor=world.support, fields={"escalation_owner": world.auditor})

    assert [r.recipient for r in Notification.objects.order_by("id")] == [world.owner, world.auditor]
    assert len(enqueued) == 2


def test_an_owner_without_an_address_is_told_in_app_and_the_mail_is_marked_undeliverable(
    world: World, draft: Handover, enqueued: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    world.owner.email = ""
    world.owner.save()
    handover_update(handover=draft, actor=world.support, fields={"escalation_owner": world.owner})
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        handover_hand_over(handover=draft, actor=world.support)
    assert callbacks == [] and enqueued == []
    assert Notification.objects.get().in_app
    delivery = NotificationDelivery.objects.get()
    assert delivery.status == "undeliverable" and delivery.error == "no verified e-mail address"


def test_the_verifying_sweep_task_reports_counts(db: None) -> None:
    assert tasks.handover_sweep_verifying() == {"resolved": 0, "reopened": 0}
    assert handover_sweep_verifying().resolved == 0


def test_a_failed_check_tells_the_escalation_owner_once(
    world: World, draft: Handover, enqueued: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    _hand_over(world, draft, django_capture_on_commit_callbacks)
    handover_start_recovery(handover=draft, actor=world.support)
    with django_capture_on_commit_callbacks(execute=True):
        handover_verify(handover=draft, actor=world.support)
    check = settle_check(
        HandoverRun.objects.get(handover=draft).next_run_check, "failed", result_summary="no run by the deadline"
    )
    assert handover_escalation_owners_for_check(check=check) == [world.owner]
    people = type(world.owner)._default_manager.filter(pk=world.owner.pk)
    people.update(is_active=False)
    assert handover_escalation_owners_for_check(check=check) == []  # a departed owner is not mailed
    people.update(is_active=True)

    with django_capture_on_commit_callbacks(execute=True):
        handover_reopen_for_failed_check(check=check)
        handover_reopen_for_failed_check(check=check)

    note = Notification.objects.get(event="escalation")
    assert note.recipient == world.owner and note.dedup_key.endswith(":reopened_1")
    delivery = note.deliveries.get()
    assert enqueued[-1] == delivery.pk
    assert notification_tasks.notification_deliver(delivery.pk) == "sent"
    assert "Reopened: The next-run check" in mail.outbox[-1].body


def test_an_old_queued_handover_message_is_drained_without_sending(world: World, draft: Handover) -> None:
    from django.utils import timezone

    row = HandoverNotification.objects.create(
        handover=draft, channel="email", reason="handed_over", key="k", recipient=world.owner, created_at=timezone.now()
    )
    assert tasks.handover_notification_send(row.pk) == "failed"
    assert len(mail.outbox) == 0

"""Notifications: rows in the transaction, the task enqueued on commit, e-mail and chat sent once."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import mail
from django.test import override_settings

from handover.handovers import tasks
from handover.handovers.checks import (
    handover_escalation_owners_for_check,
    handover_reopen_for_failed_check,
    handover_sweep_verifying,
)
from handover.handovers.models import Handover, HandoverNotification, HandoverRun
from handover.handovers.notifications import handover_notification_send
from handover.handovers.notifiers import chat
from handover.handovers.notifiers.base import Delivered, PermanentError, TransientError
from handover.handovers.services import handover_hand_over, handover_start_recovery, handover_update, handover_verify
from tests.handover.helpers import World, settle_check

pytestmark = pytest.mark.django_db


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the ids the on-commit callbacks hand to ``handover.handover_notification_send.delay``."""
    ids: list[int] = []
    monkeypatch.setattr(tasks.handover_notification_send, "delay", lambda pk: ids.append(pk))
    return ids


def _hand_over(world: World, draft: Handover, django_capture_on_commit_callbacks: Any) -> Handover:
    handover_update(handover=draft, actor=world.support, fields={"escalation_owner": world.owner})
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        moved = handover_hand_over(handover=draft, actor=world.support)
    assert len(callbacks) == 1
    return moved


def test_hand_over_mails_the_escalation_owner_after_commit(
    world: World, draft: Handover, enqueued: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        handover_update(handover=draft, actor=world.support, fields={"escalation_owner": world.owner})
        handover_hand_over(handover=draft, actor=world.support)
    row = HandoverNotification.objects.get()
    assert row.channel == "email" and row.recipient == world.owner and row.status == "pending"
    assert enqueued == [] and len(mail.outbox) == 0  # nothing is sent before the commit
    for callback in callbacks:
        callback()
    assert enqueued == [row.pk]

    assert tasks.handover_notification_send(row.pk) == "sent"
    assert tasks.handover_notification_send(row.pk) == "sent"  # a repeated task sends nothing twice

    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["olga@example.com"]
    assert message.subject == f"[Handover] {draft.title}"
    assert f"/handovers/{draft.public_id}/" in message.body
    assert "What is safe to do next:" in message.body and "Request a replay" not in message.subject
    row.refresh_from_db()
    assert row.status == "sent" and row.sent_at and row.attempt_count == 1


def test_a_repeated_hand_over_enqueues_nothing_more(
    world: World, draft: Handover, enqueued: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    _hand_over(world, draft, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        handover_hand_over(handover=draft, actor=world.support)
    assert callbacks == [] and len(enqueued) == 1 and HandoverNotification.objects.count() == 1


def test_a_new_escalation_owner_is_told_too(
    world: World, draft: Handover, enqueued: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    _hand_over(world, draft, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        handover_update(handover=draft, actor=world.support, fields={"escalation_owner": world.auditor})

    assert [r.recipient for r in HandoverNotification.objects.order_by("id")] == [world.owner, world.auditor]
    assert len(enqueued) == 2


def test_an_owner_without_an_address_gets_no_mail_row(
    world: World, draft: Handover, enqueued: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    world.owner.email = ""
    world.owner.save()
    handover_update(handover=draft, actor=world.support, fields={"escalation_owner": world.owner})
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        handover_hand_over(handover=draft, actor=world.support)
    assert callbacks == [] and not HandoverNotification.objects.exists()


@override_settings(HANDOVER_CHAT_WEBHOOK_URL="https://chat.example.com/hooks/abc")
def test_chat_webhook_is_posted_once_at_the_boundary(
    world: World,
    draft: Handover,
    enqueued: list[int],
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    posts: list[tuple[str, dict[str, object]]] = []

    def fake_deliver(url: str, payload: dict[str, object]) -> Delivered:
        posts.append((url, payload))
        return Delivered(status=200, body="ok")

    monkeypatch.setattr(chat, "deliver", fake_deliver)
    _hand_over(world, draft, django_capture_on_commit_callbacks)
    rows = {r.channel: r for r in HandoverNotification.objects.all()}
    assert set(rows) == {"email", "chat"} and sorted(enqueued) == sorted(r.pk for r in rows.values())

    tasks.handover_notification_send(rows["chat"].pk)
    tasks.handover_notification_send(rows["chat"].pk)

    assert len(posts) == 1
    url, payload = posts[0]
    assert url == "https://chat.example.com/hooks/abc"
    assert draft.title in str(payload["text"]) and "Escalation owner: olga-owner" in str(payload["text"])
    rows["chat"].refresh_from_db()
    assert rows["chat"].status == "sent" and rows["chat"].response_status == 200 and rows["chat"].response_body == "ok"


@override_settings(HANDOVER_CHAT_WEBHOOK_URL="https://chat.example.com/hooks/abc")
def test_transient_errors_release_the_claim_and_permanent_ones_are_recorded(
    world: World,
    draft: Handover,
    enqueued: list[int],
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _hand_over(world, draft, django_capture_on_commit_callbacks)
    row = HandoverNotification.objects.get(channel="chat")

    def flaky(url: str, payload: dict[str, object]) -> Delivered:
        raise TransientError("503 from the chat server")

    monkeypatch.setattr(chat, "deliver", flaky)
    with pytest.raises(TransientError):
        handover_notification_send(notification_id=row.pk)
    row.refresh_from_db()
    assert row.status == "pending" and row.claimed_at is None and row.attempt_count == 1

    def refused(url: str, payload: dict[str, object]) -> Delivered:
        raise PermanentError("The webhook answered 404")

    monkeypatch.setattr(chat, "deliver", refused)
    assert tasks.handover_notification_send(row.pk) == "failed"
    row.refresh_from_db()
    assert row.status == "failed" and row.failed_at and "404" in row.error and row.attempt_count == 2


def test_the_task_gives_up_after_its_last_retry(
    world: World, draft: Handover, enqueued: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    _hand_over(world, draft, django_capture_on_commit_callbacks)
    row = HandoverNotification.objects.get()
    with override_settings(EMAIL_BACKEND="tests.handover.handovers.test_tasks.BrokenBackend"):
        tasks.handover_notification_send.push_request(retries=tasks.MAX_RETRIES)
        try:
            assert tasks.handover_notification_send.run(row.pk) == "failed"
        finally:
            tasks.handover_notification_send.pop_request()
    row.refresh_from_db()
    assert row.status == "failed" and "gave up after retries" in row.error


def test_a_missing_row_is_logged_and_skipped(world: World) -> None:
    assert tasks.handover_notification_send(987654) == "gone"


class BrokenBackend:
    """A mail backend whose server is down (a transient error)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def send_messages(self, messages: list[Any]) -> int:
        raise ConnectionRefusedError("mail server down")


@pytest.mark.parametrize(
    ("url", "allowed", "refused"),
    [
        ("http://127.0.0.1:9/hook", [], True),
        ("https://10.1.2.3/hook", [], True),
        ("https://169.254.169.254/latest", [], True),
        ("ftp://chat.example.com/hook", [], True),
        ("http://127.0.0.1:9/hook", ["127.0.0.1"], False),
    ],
)
def test_webhook_targets_are_checked(url: str, allowed: list[str], refused: bool) -> None:
    with override_settings(HANDOVER_CHAT_WEBHOOK_ALLOWED_HOSTS=allowed):
        if refused:
            with pytest.raises(PermanentError):
                chat.check_target(url)
        else:
            chat.check_target(url)


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

    row = HandoverNotification.objects.get(reason="reopened_1")
    assert row.recipient == world.owner and enqueued[-1] == row.pk
    assert tasks.handover_notification_send(row.pk) == "sent"
    assert "Reopened: The next-run check" in mail.outbox[-1].body

"""The follow-ups of failed next-run checks are an outbox the handover app sweeps: a failed check with
no ``failure_notified_at`` is followed up (once) by the next beat tick, whatever happened to any
message -- the runs app enqueues nothing and imports nothing of the handover app."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.core import mail

from handover.handovers import tasks
from handover.handovers.check_follow_ups import FOLLOW_UP_WINDOW, next_run_check_follow_ups_due
from runs.catalog.services import role_grant
from runs.checks.models import NextRunCheck
from runs.checks.sweep import next_run_check_sweep
from tests.factories import NextRunCheckFactory, UserFactory

pytestmark = pytest.mark.django_db

FAILED_AT = datetime(2026, 11, 29, 1, 30, tzinfo=UTC)


def test_a_failed_check_is_followed_up_by_the_next_tick_once() -> None:
    check = NextRunCheckFactory(failed=True, failed_at=FAILED_AT)
    owner = UserFactory(email="tech@example.com")
    role_grant(user=owner, role="technical_owner", obj=check.target.job)

    with time_machine.travel(FAILED_AT + timedelta(seconds=30), tick=False):
        assert tasks.next_run_check_follow_ups_sweep() == {"notified": 1, "failed": 0}
        assert tasks.next_run_check_follow_ups_sweep() == {"notified": 0, "failed": 0}  # claimed: once

    check.refresh_from_db()
    assert check.failure_notified_at == FAILED_AT + timedelta(seconds=30)
    # told through the notifications (i20): one check_failed notification, its e-mail delivered by its task
    from handover.notifications import tasks as notification_tasks
    from handover.notifications.models import Notification, NotificationDelivery

    notes = Notification.objects.filter(event="check_failed", dedup_key=f"check:{check.public_id}")
    assert [n.recipient.email for n in notes] == ["tech@example.com"]
    for delivery in NotificationDelivery.objects.filter(channel="email"):
        assert notification_tasks.notification_deliver(delivery.pk) == "sent"
    assert [m.to for m in mail.outbox] == [["tech@example.com"]]
    # the message name of old still runs (queued before the outbox), and finds nothing to do twice
    assert tasks.next_run_check_notify_failed(check_ids=[check.pk]) == 0


def test_the_outbox_holds_failed_unnotified_checks_within_the_window() -> None:
    due = [NextRunCheckFactory(failed=True, failed_at=FAILED_AT) for _ in range(2)]
    NextRunCheckFactory(failed=True, failed_at=FAILED_AT, failure_notified_at=FAILED_AT)  # done
    NextRunCheckFactory(failed=True, failed_at=FAILED_AT - FOLLOW_UP_WINDOW)  # too old: given up
    NextRunCheckFactory(passed=True)

    assert next_run_check_follow_ups_due(now=FAILED_AT + timedelta(minutes=5)) == [c.pk for c in due]
    assert NextRunCheck.objects.filter(failure_notified_at__isnull=True, status="failed").count() == 3


def test_a_follow_up_whose_telling_fails_is_released_for_the_next_tick_and_others_go_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from handover.handovers import check_follow_ups

    broken, fine = (NextRunCheckFactory(failed=True, failed_at=FAILED_AT) for _ in range(2))
    for check in (broken, fine):
        role_grant(user=UserFactory(email=f"tech{check.pk}@example.com"), role="technical_owner", obj=check.target.job)
    real_tell = check_follow_ups._tell_check_failed

    def tell(*, check: NextRunCheck, people: list[Any]) -> None:
        if check.pk == broken.pk:
            raise OSError("database hiccup")
        real_tell(check=check, people=people)

    monkeypatch.setattr("handover.handovers.check_follow_ups._tell_check_failed", tell)
    with time_machine.travel(FAILED_AT + timedelta(minutes=1), tick=False):
        assert tasks.next_run_check_follow_ups_sweep() == {"notified": 1, "failed": 1}

    assert NextRunCheck.objects.get(pk=broken.pk).failure_notified_at is None  # released: tried next tick
    assert NextRunCheck.objects.get(pk=fine.pk).failure_notified_at is not None


def test_the_runs_sweep_enqueues_nothing_for_a_failed_check(
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> None:
    check = NextRunCheckFactory(expected_at=FAILED_AT - timedelta(hours=2))
    with time_machine.travel(FAILED_AT + timedelta(hours=1), tick=False):
        with django_capture_on_commit_callbacks() as callbacks:
            result = next_run_check_sweep()
        assert next_run_check_follow_ups_due() == [check.pk]

    assert result.failed == 1 and callbacks == []
    check.refresh_from_db()
    assert check.status == NextRunCheck.Status.FAILED and check.failure_notified_at is None

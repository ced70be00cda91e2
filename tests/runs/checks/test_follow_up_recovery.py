"""A failed next-run check whose follow-up message was lost is re-found by the sweep task (recovery drill).

The drill (``bench/drill.py``) killed a worker while it held a ``runs.next_run_check_notify_failed``
message: the failed checks of that batch were never notified (no handover reopen, no e-mail) until
the broker gave the message back -- never with the filesystem broker, two hours later with Redis --
and nothing re-found them. Now the beat's sweep task enqueues them again after a grace period.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine

from runs.checks import tasks
from runs.checks.follow_ups import FOLLOW_UP_GRACE, FOLLOW_UP_RESEND_WINDOW, next_run_check_follow_ups_resend
from runs.checks.models import NextRunCheck
from runs.checks.sweep import next_run_check_sweep
from tests.factories import NextRunCheckFactory

pytestmark = pytest.mark.django_db

FAILED_AT = datetime(2026, 11, 29, 1, 30, tzinfo=UTC)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The check ids each enqueued follow-up task would get (the message, not the broker)."""
    calls: list[list[int]] = []
    monkeypatch.setattr(tasks.next_run_check_notify_failed, "delay", lambda check_ids: calls.append(check_ids))
    return calls


def tick(at: datetime, capture: Callable[..., Any]) -> None:
    """One beat tick of the sweep task at ``at``; its on-commit callbacks (the enqueues) run."""
    with time_machine.travel(at, tick=False), capture(execute=True):
        tasks.next_run_check_sweep()


def test_a_failed_check_whose_follow_up_was_lost_is_enqueued_again_and_notified_once(
    sent: list[list[int]], django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    # The sweep failed it; its follow-up message died with the worker (failure_notified_at stays empty).
    check = NextRunCheckFactory(failed=True, failed_at=FAILED_AT)

    tick(FAILED_AT + FOLLOW_UP_GRACE - timedelta(seconds=1), django_capture_on_commit_callbacks)
    assert sent == []  # within the grace the first message may still be on its way

    tick(FAILED_AT + FOLLOW_UP_GRACE, django_capture_on_commit_callbacks)
    assert sent == [[check.pk]]
    assert check.failure_notified_at is None  # re-found from the database, not yet notified

    # The resent follow-up runs (twice: the original message may come back too) and notifies once.
    assert tasks.next_run_check_notify_failed(check_ids=sent[0]) == 1
    assert tasks.next_run_check_notify_failed(check_ids=sent[0]) == 0
    check.refresh_from_db()
    assert check.failure_notified_at is not None

    tick(FAILED_AT + FOLLOW_UP_GRACE + timedelta(minutes=1), django_capture_on_commit_callbacks)
    assert sent == [[check.pk]]  # notified: not enqueued again


def test_follow_ups_are_resent_in_batches_only_within_the_window(
    sent: list[list[int]], django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    lost = [NextRunCheckFactory(failed=True, failed_at=FAILED_AT) for _ in range(3)]
    NextRunCheckFactory(failed=True, failed_at=FAILED_AT, failure_notified_at=FAILED_AT)  # ran: not resent
    NextRunCheckFactory(failed=True, failed_at=FAILED_AT - FOLLOW_UP_RESEND_WINDOW)  # too old: given up
    NextRunCheckFactory(passed=True)

    with time_machine.travel(FAILED_AT + timedelta(minutes=5), tick=False):
        with django_capture_on_commit_callbacks(execute=True):
            assert next_run_check_follow_ups_resend(batch_size=2) == 3

    assert sorted(pk for batch in sent for pk in batch) == sorted(c.pk for c in lost)
    assert [len(batch) for batch in sent] == [2, 1]
    assert NextRunCheck.objects.filter(failure_notified_at__isnull=True, status="failed").count() == 4


def test_the_sweep_service_itself_resends_lost_follow_ups_and_counts_them(
    sent: list[list[int]], django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    # The service, not the task, owns the re-find: any caller of the sweep recovers lost follow-ups.
    check = NextRunCheckFactory(failed=True, failed_at=FAILED_AT)
    with time_machine.travel(FAILED_AT + FOLLOW_UP_GRACE, tick=False):
        with django_capture_on_commit_callbacks(execute=True):
            result = next_run_check_sweep()
    assert result.follow_ups_resent == 1
    assert sent == [[check.pk]]

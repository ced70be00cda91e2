"""Celery tasks of the handover app: sending notifications, the verifying sweep and the follow-ups of
failed next-run checks.

They follow the task rules of docs/architecture.md "Layout rules".
"""

from __future__ import annotations

import logging
import random
from smtplib import SMTPException

from celery import shared_task
from celery.app.task import Task

from handover.handovers.notifiers.base import TransientError

logger = logging.getLogger(__name__)
MAX_RETRIES = 5


@shared_task(bind=True, name="handover.handover_notification_send", max_retries=MAX_RETRIES)
def handover_notification_send(self: Task, notification_id: int) -> str:
    """Send one handover notification (e-mail or chat) by row id; idempotent.

    Loads the row; gone or no longer pending → nothing to do. A transient error retries with
    exponential backoff and jitter (at most ``MAX_RETRIES``); after the last one the row is marked
    ``failed``. A permanent error is recorded on the row by the service and not retried.
    Returns the row's status (or ``gone``).
    """
    from handover.handovers.notifications import handover_notification_fail
    from handover.handovers.notifications import handover_notification_send as send

    try:
        row = send(notification_id=notification_id)
    except TransientError as exc:
        if self.request.retries >= MAX_RETRIES:
            handover_notification_fail(notification_id=notification_id, error=f"gave up after retries: {exc}")
            return "failed"
        countdown = min(3600, 30 * 2**self.request.retries) + random.uniform(0, 10)  # noqa: S311 - jitter
        raise self.retry(exc=exc, countdown=countdown) from exc
    return row.status if row is not None else "gone"


@shared_task(name="handover.handover_sweep_verifying")
def handover_sweep_verifying() -> dict[str, int]:
    """Beat tick: resolve verifying handovers whose next-run checks passed or were waived; reopen those
    whose check failed. Safe to overlap. Returns the counts."""
    from handover.handovers.checks import handover_sweep_verifying as sweep

    result = sweep()
    return {"resolved": result.resolved, "reopened": result.reopened}


@shared_task(name="handover.next_run_check_follow_ups_sweep")
def next_run_check_follow_ups_sweep() -> dict[str, int]:
    """Beat tick: run the follow-ups of failed next-run checks from their outbox (reopen the handover,
    e-mail the people responsible). Safe to overlap: each check is claimed once. Returns the counts."""
    from handover.handovers.check_follow_ups import next_run_check_follow_ups_sweep as sweep

    notified, failed = sweep()
    if notified or failed:
        logger.info("failed-check follow-ups: notified=%d failed=%d", notified, failed)
    return {"notified": notified, "failed": failed}


@shared_task(
    name="runs.next_run_check_notify_failed",
    autoretry_for=(OSError, SMTPException),
    retry_backoff=30,
    retry_jitter=True,
    max_retries=5,
)
def next_run_check_notify_failed(check_ids: list[int]) -> int:
    """Follow-ups of the failed checks ``check_ids`` (primary keys): reopen the handover, e-mail the people
    responsible. Nothing enqueues it any more (the outbox sweep above runs them); it stays registered
    under its old name so messages queued before that still run. Idempotent: each check is claimed once."""
    from handover.handovers.check_follow_ups import next_run_check_notify_failed as notify

    return notify(check_ids=check_ids)

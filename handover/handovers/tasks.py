"""Celery tasks of the handover app: sending notifications, the verifying sweep and the follow-ups of
failed next-run checks.

They follow the task rules of docs/architecture.md "Layout rules".
"""

from __future__ import annotations

import logging
from smtplib import SMTPException

from celery import shared_task

logger = logging.getLogger(__name__)
MAX_RETRIES = 5


@shared_task(name="handover.handover_notification_send")
def handover_notification_send(notification_id: int) -> str:
    """Drain a message queued before handovers were told through ``handover.notifications``: the old row
    (``HandoverNotification``) is marked ``failed`` with that reason, nothing is sent. Returns its status."""
    from django.utils import timezone

    from handover.handovers.models import HandoverNotification

    HandoverNotification.objects.filter(pk=notification_id, status="pending").update(
        status="failed", failed_at=timezone.now(), error="superseded by the notifications subsystem", claimed_at=None
    )
    row = HandoverNotification.objects.filter(pk=notification_id).first()
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
    tell the people responsible). Safe to overlap: each check is claimed once. Returns the counts."""
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
    """Follow-ups of the failed checks ``check_ids`` (primary keys): reopen the handover, tell the people
    responsible. Nothing enqueues it any more (the outbox sweep above runs them); it stays registered
    under its old name so messages queued before that still run. Idempotent: each check is claimed once."""
    from handover.handovers.check_follow_ups import next_run_check_notify_failed as notify

    return notify(check_ids=check_ids)

"""Celery tasks of notifications: deliver one (retried with backoff) and the minute's sweep (digests, lost messages).

They follow the task rules of docs/architecture.md "Layout rules".
"""

from __future__ import annotations

import random

from celery import shared_task
from celery.app.task import Task

MAX_RETRIES = 5


@shared_task(bind=True, name="handover.notification_deliver", max_retries=MAX_RETRIES)
def notification_deliver(self: Task[..., str], delivery_id: int) -> str:
    """Send one notification delivery (e-mail or chat/push) by row id; idempotent.

    A transient error retries with exponential backoff and jitter (at most ``MAX_RETRIES``); after the
    last one the delivery is ``failed``. Returns the row's status (or ``gone``).
    """
    from handover.notifications.services import (
        DeliveryTransientError,
        notification_delivery_fail,
        notification_delivery_send,
    )

    try:
        row = notification_delivery_send(delivery_id=delivery_id)
    except DeliveryTransientError as exc:
        if self.request.retries >= MAX_RETRIES:
            notification_delivery_fail(delivery_id=delivery_id, error=f"gave up after retries: {exc}")
            return "failed"
        countdown = min(3600, 30 * 2**self.request.retries) + random.uniform(0, 10)  # noqa: S311 - jitter
        raise self.retry(exc=exc, countdown=countdown) from exc
    return row.status if row is not None else "gone"


@shared_task(name="handover.notification_sweep")
def notification_sweep() -> dict[str, int]:
    """Beat tick: send the digests of held deliveries; enqueue again pending deliveries whose message was
    lost. Safe to overlap (each delivery is claimed). Returns the counts."""
    from handover.notifications.services import notification_deliveries_lost, notification_digests_send

    digests = notification_digests_send()
    lost = notification_deliveries_lost()
    for pk in lost:
        notification_deliver.delay(pk)
    return {"digests": digests, "requeued": len(lost)}

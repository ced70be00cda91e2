"""Celery tasks of the handover app: sending notifications and the verifying sweep.

They follow the task rules of docs/architecture.md "Layout rules".
"""

from __future__ import annotations

import logging

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

"""Celery tasks of the approvals app: dispatch, webhook delivery, reminders to approvers, and the sweeps.

Each task takes ids only, loads its row, returns when the work is done already, and calls a
service that claims the work with a guarded UPDATE (docs/architecture.md "Layout rules"): a repeated or lost message
changes nothing and loses nothing (the sweep re-finds due work).
"""

from __future__ import annotations

import logging
import random
from typing import Any

from celery import shared_task
from celery.app.task import Task

logger = logging.getLogger(__name__)
NOTIFY_MAX_RETRIES = 5


@shared_task(name="approvals.replay_request_dispatch")
def replay_request_dispatch(request_id: int) -> str:
    """Dispatch an approved request once (enqueued when the second approval commits).

    Returns ``dispatched``, ``already`` (another trigger won), ``held`` (a rule holds it; the sweep
    tries again), ``gone`` or the status that prevents it.
    """
    from approvals.replays.dispatch import replay_request_dispatch as dispatch
    from approvals.replays.models import ReplayRequest
    from approvals.replays.rules import ReplayRefused
    from handover.core.errors import InvalidTransition

    request = ReplayRequest.objects.select_related("run__job", "run__tenant").filter(pk=request_id).first()
    if request is None:
        return "gone"
    try:
        _, created = dispatch(request=request)
    except ReplayRefused:
        return "held"
    except InvalidTransition:
        return request.status
    return "dispatched" if created else "already"


@shared_task(bind=True, name="approvals.dispatch_webhook_deliver", max_retries=None)
def dispatch_webhook_deliver(self: Task[Any, Any], dispatch_id: int) -> str:
    """Deliver a dispatch to its job's signed webhook; on a transient error, retry after the backoff.

    The retry count is bounded by the service (``HANDOVER_REPLAY_WEBHOOK_MAX_DELIVERIES`` deliveries
    per dispatch, counted on the row), not by the message. Returns the delivery's outcome.
    """
    from approvals.replays.delivery import dispatch_webhook_deliver as deliver

    result = deliver(dispatch_id=dispatch_id)
    if result.outcome == "retry" and result.retry_in_seconds is not None:
        raise self.retry(countdown=result.retry_in_seconds)
    return result.outcome


@shared_task(bind=True, name="approvals.replay_request_notify", max_retries=NOTIFY_MAX_RETRIES)
def replay_request_notify(self: Task[Any, Any], request_id: int, reason: str) -> int:
    """Tell the eligible approvers of a pending request again (``reason``: reminder) or count those told
    when it was made (``requested``), through ``handover.notifications``; each channel's delivery retries
    on its own. Returns how many people were told.
    """
    from approvals.replays.delivery import NotifyTransientError
    from approvals.replays.delivery import replay_request_notify as notify

    try:
        return notify(request_id=request_id, reason=reason)
    except NotifyTransientError as exc:
        if self.request.retries >= NOTIFY_MAX_RETRIES:
            logger.warning("gave up telling approvers about replay %s: %s", request_id, exc)
            return 0
        countdown = min(3600, 30 * 2**self.request.retries) + random.uniform(0, 10)  # noqa: S311 - jitter
        raise self.retry(exc=exc, countdown=countdown) from exc


@shared_task(name="approvals.replay_sweep")
def replay_sweep() -> dict[str, int]:
    """Beat tick: expiry, lapsed leases, held or lost dispatches, completions; enqueue due webhook deliveries."""
    from approvals.replays.delivery import replay_sweep as sweep

    result = sweep()
    for dispatch_id in result.due_deliveries:
        dispatch_webhook_deliver.delay(dispatch_id)
    counts = {
        "expired": result.expired,
        "lapsed": result.lapsed,
        "dispatched": result.dispatched,
        "held": result.held,
        "completed": result.completed,
        "deliveries": len(result.due_deliveries),
    }
    if any(counts.values()):
        logger.info("replay sweep: %s", counts)
    return counts


@shared_task(name="approvals.replay_request_remind")
def replay_request_remind() -> int:
    """Beat tick: remind the eligible approvers of requests waiting too long (one e-mail task each)."""
    from approvals.replays.delivery import replay_request_remind_due

    ids = replay_request_remind_due()
    for request_id in ids:
        replay_request_notify.delay(request_id, "reminder")
    return len(ids)


__all__ = [
    "dispatch_webhook_deliver",
    "replay_request_dispatch",
    "replay_request_notify",
    "replay_request_remind",
    "replay_sweep",
]

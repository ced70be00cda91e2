"""Delivering a dispatch to the job's signed webhook, reminding approvers, and the beat sweeps.

Webhook delivery follows the task rules (docs/architecture.md "Layout rules"): the task passes only
the dispatch id; the service claims the
delivery with a guarded UPDATE (``next_delivery_at`` pushed past the HTTP timeout, so a second
worker finds nothing due), writes the WebhookDelivery row *before* the call and records the
answer on it after. Transient errors (timeouts, connection errors, 5xx, 429) are retried with
exponential backoff and jitter, at most ``HANDOVER_REPLAY_WEBHOOK_MAX_DELIVERIES`` deliveries in
all; a permanent error (4xx, a URL that is not allowed) is not retried. Either way the dispatch
then becomes ``unknown`` for a person to decide -- a failed webhook is never re-dispatched.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from approvals.replays import webhook_client as webhooks
from approvals.replays.dispatch import dispatch_lapse, dispatch_transition, replay_request_dispatch
from approvals.replays.models import Dispatch, ReplayRequest, ReplayWebhook, WebhookDelivery
from approvals.replays.requests import replay_request_complete_if_confirmed, replay_request_expire
from approvals.replays.rules import ReplayRefused
from handover.core.errors import InvalidTransition
from runs.alerts.redaction import redact_text
from runs.timeline.models import TimelineEvent

logger = logging.getLogger(__name__)
SWEEP_BATCH = 200


class NotifyTransientError(Exception):
    """A mail server hiccup: the notification task retries."""


@dataclass(frozen=True)
class DeliveryResult:
    """What one delivery attempt did: ``delivered``, ``retry`` (in ``retry_in_seconds``), ``failed``
    (permanent), ``gave_up`` (retries exhausted) or ``skipped`` (gone, not due, already settled)."""

    outcome: str
    retry_in_seconds: float | None = None
    delivery_id: int | None = None


def _backoff_seconds(delivery_count: int) -> float:
    """Exponential backoff with jitter: base · 2^(n-1), capped at an hour, plus up to 10 % jitter."""
    base = settings.HANDOVER_REPLAY_WEBHOOK_BACKOFF_SECONDS * 2 ** max(0, delivery_count - 1)
    capped = min(3600.0, float(base))
    return capped + random.uniform(0, capped / 10)  # noqa: S311 - jitter, not a secret


def _record(delivery_id: int, *, status: str, answer: webhooks.Answer | None, error: str, transient: bool) -> None:
    WebhookDelivery.objects.filter(pk=delivery_id, status=WebhookDelivery.Status.SENDING).update(
        status=status,
        is_transient=transient,
        finished_at=timezone.now(),
        response_status=answer.status if answer is not None else None,
        response_body=(answer.body if answer is not None else "")[: webhooks.KEPT_RESPONSE_BYTES],
        error=redact_text(error)[:2000],
    )


def dispatch_webhook_deliver(*, dispatch_id: int) -> DeliveryResult:
    """Deliver one dispatch to its job's webhook, once per due time; idempotent and safe to repeat.

    Claims the dispatch (pending, webhook channel, ``next_delivery_at`` due) with a guarded UPDATE
    that also counts the delivery, marks a ``sending`` row left by a lost worker as failed, writes
    the new WebhookDelivery, signs and posts the stored payload (``approvals.replays.webhook_client.deliver``) and
    records the answer (at most 4 KiB). A 2xx leases the dispatch to the runner
    (``lease_expires_at`` = now + ``HANDOVER_REPLAY_LEASE_SECONDS``) with one
    ``replay_webhook_delivered`` event. Returns a DeliveryResult; never raises for the webhook's errors.
    """
    dispatch = Dispatch.objects.filter(pk=dispatch_id).select_related("request__run__job").first()
    if dispatch is None:
        logger.info("dispatch %s is gone", dispatch_id)
        return DeliveryResult("skipped")
    if dispatch.channel != Dispatch.Channel.WEBHOOK or dispatch.status != Dispatch.Status.PENDING:
        return DeliveryResult("skipped")
    now = timezone.now()
    hold = timedelta(seconds=3 * settings.HANDOVER_REPLAY_WEBHOOK_TIMEOUT_SECONDS + 30)
    claimed = Dispatch.objects.filter(
        pk=dispatch.pk,
        status=Dispatch.Status.PENDING,
        channel=Dispatch.Channel.WEBHOOK,
        next_delivery_at__lte=now,
    ).update(next_delivery_at=now + hold, delivery_count=F("delivery_count") + 1, updated_at=now)
    if not claimed:
        return DeliveryResult("skipped")
    dispatch.refresh_from_db(fields=["delivery_count", "next_delivery_at", "status"])
    WebhookDelivery.objects.filter(dispatch=dispatch, status=WebhookDelivery.Status.SENDING).update(
        status=WebhookDelivery.Status.FAILED,
        is_transient=True,
        finished_at=now,
        error="the worker was lost before the answer was recorded",
    )
    webhook = ReplayWebhook.objects.filter(job_id=dispatch.request.run.job_id, is_active=True).first()
    if webhook is None:
        dispatch_lapse(dispatch=dispatch, reason="the job's webhook was switched off before the delivery")
        return DeliveryResult("failed")
    body = dispatch.payload.encode()
    timestamp = int(now.timestamp())
    row = WebhookDelivery.objects.create(
        dispatch=dispatch, number=dispatch.delivery_count, url=webhook.url, timestamp=timestamp, started_at=now
    )
    headers = {
        webhooks.TIMESTAMP_HEADER: str(timestamp),
        webhooks.SIGNATURE_HEADER: webhooks.sign(webhooks.webhook_secret(webhook.secret_salt), timestamp, body),
        "Idempotency-Key": dispatch.idempotency_key,
        "User-Agent": "handover-replay",
    }
    try:
        answer = webhooks.deliver(url=webhook.url, body=body, headers=headers)
    except webhooks.PermanentError as exc:
        _record(row.pk, status=WebhookDelivery.Status.FAILED, answer=exc.answer, error=str(exc), transient=False)
        dispatch_lapse(dispatch=dispatch, reason=f"the webhook refused delivery {row.number} for good ({exc})")
        return DeliveryResult("failed", delivery_id=row.pk)
    except webhooks.TransientError as exc:
        _record(row.pk, status=WebhookDelivery.Status.FAILED, answer=exc.answer, error=str(exc), transient=True)
        if dispatch.delivery_count >= settings.HANDOVER_REPLAY_WEBHOOK_MAX_DELIVERIES:
            dispatch_lapse(
                dispatch=dispatch,
                reason=f"the webhook failed {dispatch.delivery_count} times (last: {exc}); "
                "the runner may or may not have received it",
            )
            return DeliveryResult("gave_up", delivery_id=row.pk)
        wait = _backoff_seconds(dispatch.delivery_count)
        Dispatch.objects.filter(pk=dispatch.pk, status=Dispatch.Status.PENDING).update(
            next_delivery_at=timezone.now() + timedelta(seconds=wait)
        )
        return DeliveryResult("retry", retry_in_seconds=wait, delivery_id=row.pk)
    _record(row.pk, status=WebhookDelivery.Status.SUCCEEDED, answer=answer, error="", transient=False)
    delivered = timezone.now()
    lease_until = delivered + timedelta(seconds=settings.HANDOVER_REPLAY_LEASE_SECONDS)
    try:
        dispatch_transition(
            dispatch=dispatch,
            action="lease",
            values={"delivered_at": delivered, "lease_expires_at": lease_until, "next_delivery_at": None},
            summary=f"Replay webhook delivered (delivery {row.number}, HTTP {answer.status}); the runner must report "
            f"the attempt as started by {lease_until:%Y-%m-%d %H:%M:%S}Z",
            event_kind=TimelineEvent.Kind.REPLAY_WEBHOOK_DELIVERED,
            data={"delivery": row.number, "response_status": answer.status},
        )
    except InvalidTransition:  # the runner claimed or reported meanwhile: the delivery stands recorded
        pass
    return DeliveryResult("delivered", delivery_id=row.pk)


def replay_request_notify(*, request_id: int, reason: str) -> int:
    """Tell the eligible approvers of a pending request who have not decided yet; returns how many were told.

    ``reason``: ``requested`` -- the request's own transaction told them already (``replay_event_record``),
    so this counts those notifications; ``reminder`` -- a new notification per reminder (the reminder
    sweep claimed it, stamped ``reminded_at``), through each approver's chosen channels. Nothing for a
    request that is no longer pending. Delivery (e-mail, chat) happens after commit with its own retries.
    """
    from approvals.replays.notices import replay_notices_send
    from handover.notifications.models import Notification

    request = (
        ReplayRequest.objects.filter(pk=request_id).select_related("run__job", "run__tenant", "requested_by").first()
    )
    if request is None or request.status != ReplayRequest.Status.PENDING:
        return 0
    if reason == "requested":
        return Notification.objects.filter(event="approval_needed", dedup_key=f"replay:{request.public_id}").count()
    stamp = (request.reminded_at or timezone.now()).strftime("%Y%m%dT%H%M%S")
    waiting = timezone.now() - request.created_at
    with transaction.atomic():
        told = replay_notices_send(
            request=request,
            kind="replay_requested",
            summary=f"Still waiting for approval after {int(waiting.total_seconds() // 3600)} h; it expires at "
            f"{request.expires_at:%Y-%m-%d %H:%M}Z unless both approvals are given.",
            reminder=stamp,
        )
    return len(told)


# --- the sweeps -----------------------------------------------------------------------------------


@dataclass
class ReplaySweepResult:
    """What one tick did (counts), and the dispatch ids whose webhook is due (enqueued by the task)."""

    expired: int = 0
    lapsed: int = 0
    dispatched: int = 0
    held: int = 0
    completed: int = 0
    due_deliveries: list[int] = field(default_factory=list)


def replay_sweep(*, now: datetime | None = None) -> ReplaySweepResult:
    """Beat tick: expire overdue pending requests, make lapsed dispatches ``unknown``, dispatch approved
    requests whose dispatch was lost or held, complete requests the ledger now confirms, and list
    webhook deliveries that are due.

    Each step is one set-based query for what is due, then a short guarded transition per row, so
    overlapping sweeps are harmless (the second finds nothing to move). At most 200 rows per step.
    """
    now = now or timezone.now()
    result = ReplaySweepResult()
    for request in ReplayRequest.objects.filter(status=ReplayRequest.Status.PENDING, expires_at__lte=now).order_by(
        "expires_at"
    )[:SWEEP_BATCH]:
        if replay_request_expire(request=request)[1]:
            result.expired += 1
    lapsing = Dispatch.objects.filter(
        status__in=[Dispatch.Status.PENDING, Dispatch.Status.LEASED], lease_expires_at__lte=now
    ).order_by("lease_expires_at")[:SWEEP_BATCH]
    for dispatch in lapsing:
        if dispatch.status == Dispatch.Status.LEASED:
            reason = "the runner did not report the replay's attempt as started before its lease ran out"
        elif dispatch.channel == Dispatch.Channel.CLAIM:
            reason = "no runner claimed the replay in time"
        else:
            reason = "the webhook was not delivered in time"
        if dispatch_lapse(dispatch=dispatch, reason=reason, now=now)[1]:
            result.lapsed += 1
    for request in (
        ReplayRequest.objects.filter(status=ReplayRequest.Status.APPROVED)
        .select_related("run__job", "run__tenant")
        .order_by("approved_at")[:SWEEP_BATCH]
    ):
        try:
            _, created = replay_request_dispatch(request=request)
            result.dispatched += int(created)
        except ReplayRefused:
            result.held += 1
        except InvalidTransition:
            continue
    for request in (
        ReplayRequest.objects.filter(
            status=ReplayRequest.Status.DISPATCHED, dispatches__status=Dispatch.Status.SUCCEEDED
        )
        .select_related("run__job", "run__tenant")
        .order_by("dispatched_at")[:SWEEP_BATCH]
    ):
        if replay_request_complete_if_confirmed(request=request)[1]:
            result.completed += 1
    result.due_deliveries = list(
        Dispatch.objects.filter(
            status=Dispatch.Status.PENDING, channel=Dispatch.Channel.WEBHOOK, next_delivery_at__lte=now
        )
        .order_by("next_delivery_at")
        .values_list("pk", flat=True)[:SWEEP_BATCH]
    )
    return result


def replay_request_remind_due(*, now: datetime | None = None) -> list[int]:
    """Claim the pending requests waiting longer than ``HANDOVER_REPLAY_REMIND_AFTER_SECONDS`` since
    they were made or last reminded; returns their ids (the task e-mails each).

    The claim is a guarded UPDATE of ``reminded_at``, so overlapping ticks remind once.
    """
    now = now or timezone.now()
    threshold = now - timedelta(seconds=settings.HANDOVER_REPLAY_REMIND_AFTER_SECONDS)
    due = Q(reminded_at__isnull=True) | Q(reminded_at__lte=threshold)
    candidates = (
        ReplayRequest.objects.filter(status=ReplayRequest.Status.PENDING, created_at__lte=threshold, expires_at__gt=now)
        .filter(due)
        .order_by("created_at")
        .values_list("pk", flat=True)[:SWEEP_BATCH]
    )
    claimed: list[int] = []
    for pk in candidates:
        with transaction.atomic():
            if (
                ReplayRequest.objects.filter(pk=pk, status=ReplayRequest.Status.PENDING)
                .filter(due)
                .update(reminded_at=now, reminder_count=F("reminder_count") + 1)
            ):
                claimed.append(pk)
    return claimed

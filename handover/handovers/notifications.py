"""Telling people about a handover: rows first, messages after commit (docs/architecture.md "Layout rules").

``handover_notifications_create`` writes one ``HandoverNotification`` per channel inside the
caller's transaction and enqueues ``handover.handover_notification_send`` for each on commit. The
task calls ``handover_notification_send``: it claims the row with a guarded UPDATE, sends through
the channel's module (``handover.handovers.notifiers``) and records the outcome, so a repeated or
concurrent task sends nothing twice.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from handover.handovers.models import Handover, HandoverNotification
from handover.handovers.notifiers import chat as chat_channel
from handover.handovers.notifiers.base import PermanentError, TransientError
from handover.handovers.notifiers.registry import channel_for

logger = logging.getLogger(__name__)
# A claim older than this is taken to be from a worker that died mid-send.
CLAIM_TIMEOUT = timedelta(minutes=5)


def handover_notifications_create(
    *, handover: Handover, reason: str, recipient: AbstractBaseUser | None
) -> list[HandoverNotification]:
    """Write the notifications announcing ``handover`` to ``recipient`` and enqueue them on commit.

    One e-mail row when the recipient has an address, one chat row when a webhook is configured
    (``HANDOVER_CHAT_WEBHOOK_URL``). Once only: a row with the same handover, channel, reason and
    recipient is not written again. Must run inside the transaction of the change it announces.
    Side effects: the rows; ``handover.handover_notification_send`` per new row, on commit.
    Returns the new rows.
    """
    now = timezone.now()
    key = f"{reason}:user={recipient.pk if recipient is not None else '-'}"
    wanted: list[tuple[str, AbstractBaseUser | None]] = []
    if recipient is not None and getattr(recipient, "email", ""):
        wanted.append((HandoverNotification.Channel.EMAIL, recipient))
    elif recipient is not None:
        logger.info("escalation owner %s of handover %s has no e-mail address", recipient.pk, handover.public_id)
    if chat_channel.is_configured():
        wanted.append((HandoverNotification.Channel.CHAT, recipient))
    created: list[HandoverNotification] = []
    for channel, person in wanted:
        if HandoverNotification.objects.filter(handover=handover, channel=channel, key=key).exists():
            continue
        try:
            with transaction.atomic():
                created.append(
                    HandoverNotification.objects.create(
                        handover=handover, channel=channel, reason=reason, key=key, recipient=person, created_at=now
                    )
                )
        except IntegrityError:  # a concurrent change wrote it first
            continue
    ids = [row.pk for row in created]
    if ids:
        transaction.on_commit(lambda: _enqueue(ids))
    return created


def _enqueue(ids: list[int]) -> None:
    from handover.handovers.tasks import handover_notification_send

    for pk in ids:
        handover_notification_send.delay(pk)


def handover_notification_send(*, notification_id: int) -> HandoverNotification | None:
    """Send one notification unless it was sent, failed for good, or another worker holds it.

    Claims the row (``claimed_at``) with a guarded UPDATE outside any long transaction, sends
    through its channel, then records ``sent`` (with the answer) or, for a permanent error,
    ``failed``. A transient error releases the claim and is re-raised for the task to retry.
    Returns the row, or None when it is gone.
    """
    row = HandoverNotification.objects.filter(pk=notification_id).first()
    if row is None:
        logger.info("notification %s is gone", notification_id)
        return None
    if row.status != HandoverNotification.Status.PENDING:
        return row
    now = timezone.now()
    claimed = (
        HandoverNotification.objects.filter(pk=row.pk, status=HandoverNotification.Status.PENDING)
        .filter(Q(claimed_at__isnull=True) | Q(claimed_at__lt=now - CLAIM_TIMEOUT))
        .update(claimed_at=now, attempt_count=F("attempt_count") + 1)
    )
    if not claimed:
        return row
    handover = Handover.objects.select_related("job", "escalation_owner").get(pk=row.handover_id)
    row = HandoverNotification.objects.select_related("recipient").get(pk=row.pk)
    try:
        delivered = channel_for(row.channel).send(notification=row, handover=handover)
    except PermanentError as exc:
        _record_failure(row.pk, str(exc))
        logger.warning("notification %s failed for good: %s", row.pk, exc)
    except TransientError:
        HandoverNotification.objects.filter(pk=row.pk, claimed_at=now).update(claimed_at=None)
        raise
    else:
        HandoverNotification.objects.filter(pk=row.pk, status=HandoverNotification.Status.PENDING).update(
            status=HandoverNotification.Status.SENT,
            sent_at=timezone.now(),
            response_status=delivered.status,
            response_body=delivered.body[:4096],
            error="",
        )
    row.refresh_from_db()
    return row


def _record_failure(pk: int, error: str) -> None:
    HandoverNotification.objects.filter(pk=pk, status=HandoverNotification.Status.PENDING).update(
        status=HandoverNotification.Status.FAILED, failed_at=timezone.now(), error=error[:2000], claimed_at=None
    )


def handover_notification_fail(*, notification_id: int, error: str) -> None:
    """Mark a notification ``failed`` after its last retry (idempotent: only a pending row changes)."""
    _record_failure(notification_id, error)

"""Telling people: notifications written in the change's transaction, delivered after commit.

``notify`` writes one ``Notification`` per person (once per event and subject: a unique constraint)
and one ``NotificationDelivery`` per outbound channel their preferences select, then enqueues
``handover.notification_deliver`` for each on commit. A delivery is ``sent`` only when its channel
accepted it; one with nowhere to go is ``undeliverable`` at once, so pages can say who was told how.
``notification_delivery_send`` (the task's body) claims a delivery with a guarded UPDATE, holds it for
the digest during a storm (more than ``HANDOVER_NOTIFICATION_STORM_COUNT`` to one person and channel in
``HANDOVER_NOTIFICATION_STORM_MINUTES``), sends, and records the outcome.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import smtplib
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

from handover.core.errors import DomainError
from handover.core.links import absolute_url
from handover.core.people import Person
from handover.core.rows import row_insert_unless_conflict
from handover.notifications.apprise_targets import (
    TargetNotAllowed,
    TargetUnresolved,
    apprise_send,
    target_check,
    url_decrypt,
    url_encrypt,
)
from handover.notifications.events import channel_default
from handover.notifications.models import (
    AppriseTarget,
    Notification,
    NotificationDelivery,
    NotificationEmail,
    NotificationPreference,
    Team,
)
from handover.notifications.told import Told
from runs.alerts.redaction import redact_text

logger = logging.getLogger(__name__)
CLAIM_TIMEOUT = timedelta(minutes=5)
VERIFY_TOKEN_HOURS = 48


class DeliveryTransientError(Exception):
    """Worth retrying: the mail server or the chat service did not take the message this time."""


# --- who gets what ------------------------------------------------------------------------------------


def notification_channels(*, user: Person, event: str) -> list[str]:
    """The channels ``user`` wants ``event`` on (their preferences over the defaults), in-app first.

    Chat is on by default (for the events that ask a person to act) only when the person or one of
    their teams has a chat/push target; chosen explicitly without one, it is recorded as not deliverable.
    """
    chosen = dict(NotificationPreference.objects.filter(user_id=user.pk, event=event).values_list("channel", "enabled"))
    channels = [c for c in ("in_app", "email", "chat") if chosen.get(c, channel_default(event, c))]
    if "chat" in channels and "chat" not in chosen and not apprise_targets_for(user=user):
        channels.remove("chat")  # on by default only for people (or teams) with a chat/push target
    return channels


def notification_email_address(*, user: Person) -> str:
    """Where e-mail to ``user`` goes: their verified notification address; an address an admin set (no
    change made by the person yet) counts as verified; empty when there is none."""
    row = NotificationEmail.objects.filter(user_id=user.pk).first()
    if row is not None:
        return row.verified
    return str(getattr(user, "email", "") or "")


def apprise_targets_for(*, user: Person) -> list[AppriseTarget]:
    """The person's own chat/push targets; without any, those of the teams they belong to."""
    own = list(AppriseTarget.objects.filter(user_id=user.pk).order_by("pk"))
    if own:
        return own
    return list(AppriseTarget.objects.filter(team__members__pk=user.pk).distinct().order_by("pk"))


def email_mask(address: str) -> str:
    """``b…@example.com``: enough for a person to recognise their address, not a copy of it (rule 8 in
    docs/architecture.md: no e-mail addresses on pages)."""
    local, _, domain = address.partition("@")
    return f"{local[:1]}…@{domain}" if domain else ""


def notify(
    *,
    event: str,
    recipients: Iterable[Person],
    dedup_key: str,
    subject: str,
    body: str = "",
    link: str = "",
    job_key: str = "",
    tenant_slug: str = "",
) -> list[Told]:
    """Tell ``recipients`` about ``event`` once each (per ``dedup_key``); call inside the change's transaction.

    ``link`` is a path on this site (made absolute with ``HANDOVER_BASE_URL`` in e-mail and chat);
    ``job_key`` and ``tenant_slug`` name what it is about (the inbox filters on them; empty: several or none).
    Inactive people and repeats are skipped; a person whose preferences select no channel gets
    nothing. Side effects: Notification and NotificationDelivery rows; one
    ``handover.notification_deliver`` task per pending delivery, on commit. Returns who was told how.
    """
    now = timezone.now()
    seen: set[int] = set()
    told: list[Told] = []
    pending: list[int] = []
    team_destinations: set[str] = set(
        NotificationDelivery.objects.filter(
            notification__event=event, notification__dedup_key=dedup_key, target__team__isnull=False
        ).values_list("destination", flat=True)
    )
    for person in recipients:
        if person.pk in seen or not person.is_active:
            continue
        seen.add(person.pk)
        channels = notification_channels(user=person, event=event)
        if not channels:
            continue
        row = Notification(
            recipient_id=person.pk,
            event=event,
            dedup_key=dedup_key[:200],
            subject=redact_text(subject)[:300],
            body=redact_text(body),
            link=link[:500],
            job_key=job_key[:150],
            tenant_slug=tenant_slug[:100],
            in_app="in_app" in channels,
            created_at=now,
        )
        if not row_insert_unless_conflict(row):
            continue  # told already
        entry = Told(username=person.get_username())
        if row.in_app:
            entry.channels.append("in_app")
        if "email" in channels:
            address = notification_email_address(user=person)
            status = NotificationDelivery.Status.PENDING if address else NotificationDelivery.Status.UNDELIVERABLE
            delivery = NotificationDelivery.objects.create(
                notification=row,
                channel="email",
                destination="email",
                shown_as=email_mask(address),
                status=status,
                error="" if address else "no verified e-mail address",
                created_at=now,
            )
            if address:
                pending.append(delivery.pk)
                entry.queued.append("email")
            else:
                entry.missing.append("e-mail not deliverable: no verified address")
        if "chat" in channels:
            targets = apprise_targets_for(user=person)
            if not targets:
                NotificationDelivery.objects.create(
                    notification=row,
                    channel="chat",
                    destination="chat",
                    status=NotificationDelivery.Status.UNDELIVERABLE,
                    error="no chat/push URL (own or team)",
                    created_at=now,
                )
                entry.missing.append("chat not deliverable: no chat/push URL")
            for target in targets:
                destination = f"apprise:{target.pk}"
                if target.team_id is not None:
                    if destination in team_destinations:
                        continue  # the team's channel carries this event once, not once per member
                    team_destinations.add(destination)
                delivery = NotificationDelivery.objects.create(
                    notification=row,
                    channel="chat",
                    destination=destination,
                    target=target,
                    shown_as=target.url_masked,
                    created_at=now,
                )
                pending.append(delivery.pk)
            if targets and "chat" not in entry.queued:
                entry.queued.append("chat")
        told.append(entry)
    if pending:
        transaction.on_commit(lambda: _enqueue(pending))
    return told


def _enqueue(ids: list[int]) -> None:
    from handover.notifications import tasks as notification_tasks

    for pk in ids:
        notification_tasks.notification_deliver.delay(pk)


# --- sending ------------------------------------------------------------------------------------------


def _message(notification: Notification) -> tuple[str, str]:
    link = absolute_url(notification.link) if notification.link else ""
    text = notification.body + (f"\n\nOpen it: {link}" if link else "")
    return f"[Handover] {notification.subject}", text


def _send(delivery: NotificationDelivery, title: str, text: str) -> None:
    """Hand one message to its channel; returns when it was accepted. Raises DeliveryTransientError or
    TargetNotAllowed / DomainError (permanent)."""
    recipient = delivery.notification.recipient
    if delivery.channel == "email":
        address = notification_email_address(user=recipient)
        if not address:
            raise DomainError("no verified e-mail address")
        try:
            send_mail(subject=title, message=text, from_email=None, recipient_list=[address], fail_silently=False)
        except smtplib.SMTPRecipientsRefused as exc:
            raise DomainError(f"the mail server refused the address: {exc}") from exc
        except (smtplib.SMTPException, OSError) as exc:
            raise DeliveryTransientError(f"{type(exc).__name__}: {exc}") from exc
        return
    if delivery.target is None:
        raise DomainError("the chat/push URL was removed")
    url = url_decrypt(delivery.target.url_encrypted)
    try:
        accepted = apprise_send(url, title=title, body=text)
    except TargetUnresolved as exc:
        raise DeliveryTransientError(str(exc)) from exc
    if not accepted:
        raise DeliveryTransientError("the chat/push service did not accept the message")


def _storm(delivery: NotificationDelivery, now: datetime) -> bool:
    since = now - timedelta(minutes=settings.HANDOVER_NOTIFICATION_STORM_MINUTES)
    recent = NotificationDelivery.objects.filter(
        notification__recipient_id=delivery.notification.recipient_id,
        destination=delivery.destination,
        status=NotificationDelivery.Status.SENT,
        sent_at__gte=since,
    ).count()
    return recent >= int(settings.HANDOVER_NOTIFICATION_STORM_COUNT)


def notification_delivery_send(*, delivery_id: int) -> NotificationDelivery | None:
    """Send one delivery unless it was sent, failed, held or another worker holds it; idempotent.

    Claims the row (``claimed_at``, a guarded UPDATE outside any long transaction). During a storm the
    row becomes ``held`` for the digest. A permanent refusal (a target the rules now refuse, no address)
    makes it ``failed`` with the reason; DeliveryTransientError releases the claim and is re-raised for
    the task to retry. Returns the row, or None when it is gone.
    """
    now = timezone.now()
    claimed = (
        NotificationDelivery.objects.filter(pk=delivery_id, status=NotificationDelivery.Status.PENDING)
        .filter(Q(claimed_at__isnull=True) | Q(claimed_at__lt=now - CLAIM_TIMEOUT))
        .update(claimed_at=now, attempt_count=F("attempt_count") + 1)
    )
    row = (
        NotificationDelivery.objects.select_related("notification__recipient", "target").filter(pk=delivery_id).first()
    )
    if row is None or not claimed:
        return row
    if _storm(row, now):
        NotificationDelivery.objects.filter(pk=row.pk, claimed_at=now).update(
            status=NotificationDelivery.Status.HELD, claimed_at=None
        )
        row.refresh_from_db()
        return row
    title, text = _message(row.notification)
    try:
        _send(row, title, text)
    except (TargetNotAllowed, DomainError) as exc:
        notification_delivery_fail(delivery_id=row.pk, error=str(exc))
    except DeliveryTransientError:
        NotificationDelivery.objects.filter(pk=row.pk, claimed_at=now).update(claimed_at=None)
        raise
    else:
        NotificationDelivery.objects.filter(pk=row.pk, status=NotificationDelivery.Status.PENDING).update(
            status=NotificationDelivery.Status.SENT, sent_at=timezone.now(), error=""
        )
    row.refresh_from_db()
    return row


def notification_delivery_fail(*, delivery_id: int, error: str) -> None:
    """Mark a pending delivery ``failed`` with the reason (after its last retry, or a permanent refusal)."""
    NotificationDelivery.objects.filter(
        pk=delivery_id, status__in=[NotificationDelivery.Status.PENDING, NotificationDelivery.Status.HELD]
    ).update(status=NotificationDelivery.Status.FAILED, error=error[:500], claimed_at=None)


def notification_digests_send() -> int:
    """Send one digest per person and destination for the deliveries held during a storm; returns how many.

    The held rows become ``sent`` (``via_digest``) only when the digest was accepted; a failure leaves
    them held for the next sweep (a refused target fails them).
    """
    held = (
        NotificationDelivery.objects.filter(status=NotificationDelivery.Status.HELD)
        .select_related("notification__recipient", "target")
        .order_by("notification__recipient_id", "destination", "pk")
    )
    groups: dict[tuple[int, str], list[NotificationDelivery]] = {}
    for row in held:
        groups.setdefault((row.notification.recipient_id, row.destination), []).append(row)
    sent = 0
    for rows in groups.values():
        lines = [f"- {r.notification.subject}" for r in rows]
        title = f"[Handover] {len(rows)} notifications (digest)"
        text = "\n".join(lines) + f"\n\nAll of them: {absolute_url(reverse('handover:notification-list'))}"
        try:
            _send(rows[0], title, text)
        except (TargetNotAllowed, DomainError) as exc:
            for r in rows:
                notification_delivery_fail(delivery_id=r.pk, error=str(exc))
            continue
        except DeliveryTransientError:
            logger.info("a digest of %s notifications waits for the next sweep", len(rows))
            continue
        NotificationDelivery.objects.filter(
            pk__in=[r.pk for r in rows], status=NotificationDelivery.Status.HELD
        ).update(status=NotificationDelivery.Status.SENT, sent_at=timezone.now(), via_digest=True)
        sent += 1
    return sent


def notification_deliveries_lost(*, older_than: timedelta = timedelta(minutes=2)) -> list[int]:
    """Pending deliveries nobody holds, older than ``older_than``: their message was lost (re-enqueue them)."""
    now = timezone.now()
    return list(
        NotificationDelivery.objects.filter(status=NotificationDelivery.Status.PENDING, created_at__lt=now - older_than)
        .filter(Q(claimed_at__isnull=True) | Q(claimed_at__lt=now - CLAIM_TIMEOUT))
        .order_by("pk")
        .values_list("pk", flat=True)[:500]
    )


# --- reading ------------------------------------------------------------------------------------------


def notification_mark_read(*, user: Person, public_ids: Iterable[object] | None = None) -> int:
    """Mark the person's unread in-app notifications read (all, or those named); returns how many changed."""
    rows = Notification.objects.filter(recipient_id=user.pk, read_at__isnull=True)
    if public_ids is not None:
        rows = rows.filter(public_id__in=list(public_ids))
    return rows.update(read_at=timezone.now())


# --- preferences, addresses, targets -----------------------------------------------------------------


def notification_preferences_set(*, user: Person, choices: dict[tuple[str, str], bool]) -> None:
    """Store the person's choices per (event, channel); a choice equal to the default removes its row."""
    with transaction.atomic():
        for (event, channel), enabled in choices.items():
            # chat's default depends on having a target, so a choice for it is always kept
            if channel != "chat" and enabled == channel_default(event, channel):
                NotificationPreference.objects.filter(user_id=user.pk, event=event, channel=channel).delete()
            else:
                NotificationPreference.objects.update_or_create(
                    user_id=user.pk, event=event, channel=channel, defaults={"enabled": enabled}
                )


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def notification_email_change(*, user: Person, password: str, address: str) -> str:
    """Start changing the person's notification address: needs their password; mails a verification link.

    Raises DomainError for a wrong password. Until the link is followed, e-mail keeps going to the
    old verified address (or nowhere). Side effects: the pending address and the token's hash; one
    mail to the new address. Returns the verification path (for tests and the console mail).
    """
    if not user.check_password(password):
        raise DomainError("The password is not right.", errors={"password": ["The password is not right."]})
    token = secrets.token_urlsafe(32)
    with transaction.atomic():
        row, _ = NotificationEmail.objects.get_or_create(
            user=user, defaults={"verified": str(getattr(user, "email", "") or "")}
        )
        row.pending, row.pending_token_hash, row.pending_sent_at = address, _token_hash(token), timezone.now()
        row.save(update_fields=["pending", "pending_token_hash", "pending_sent_at", "updated_at"])
    path = reverse("handover:profile-email-verify", kwargs={"token": token})
    send_mail(
        subject="[Handover] Confirm your notification address",
        message=f"Follow this link to receive Handover notifications at this address:\n{absolute_url(path)}\n\n"
        f"It works for {VERIFY_TOKEN_HOURS} hours. If you did not ask for this, ignore this mail.",
        from_email=None,
        recipient_list=[address],
        fail_silently=False,
    )
    return path


def notification_email_verify(*, token: str, user: Person) -> NotificationEmail:
    """Follow a verification link: the pending address becomes the verified one (and the account's e-mail).

    Raises DomainError for an unknown, used or expired token, or one of another account (``user`` is
    the signed-in person following the link).
    """
    with transaction.atomic():
        row = (
            NotificationEmail.objects.select_for_update()
            .filter(pending_token_hash=_token_hash(token))
            .exclude(pending_token_hash="")
            .first()
        )
        if row is None or row.pending_sent_at is None:
            raise DomainError("This verification link is unknown or was used already.")
        if row.user_id != user.pk:
            raise DomainError("This verification link belongs to another account: sign in as its owner.")
        if row.pending_sent_at < timezone.now() - timedelta(hours=VERIFY_TOKEN_HOURS):
            raise DomainError("This verification link has expired: change the address again.")
        row.verified, row.verified_at = row.pending, timezone.now()
        row.pending, row.pending_token_hash, row.pending_sent_at = "", "", None
        row.save()
        get_user_model().objects.filter(pk=row.user_id).update(email=row.verified)
    return row


def notification_email_set_verified(*, user: Person, address: str) -> NotificationEmail:
    """Set a verified address without a mail (an admin's or the demo's act, e.g. ``load_demo``)."""
    row, _ = NotificationEmail.objects.update_or_create(
        user=user,
        defaults={"verified": address, "verified_at": timezone.now(), "pending": "", "pending_token_hash": ""},
    )
    get_user_model().objects.filter(pk=user.pk).update(email=address)
    return row


def apprise_target_add(
    *, url: str, user: Person | None = None, team: Team | None = None, label: str = ""
) -> AppriseTarget:
    """Store a chat/push URL for a person or a team after the checks (``target_check``), encrypted.

    Raises DomainError with the refusal's reason.
    """
    try:
        checked = target_check(url)
    except TargetNotAllowed as exc:
        raise DomainError(str(exc), errors={"url": [str(exc)]}) from exc
    try:
        return AppriseTarget.objects.create(
            user_id=user.pk if user is not None else None,
            team=team,
            label=label[:100],
            url_encrypted=url_encrypt(url.strip()),
            url_masked=checked.masked,
            scheme=checked.scheme,
            host=checked.host,
        )
    except IntegrityError as exc:
        raise DomainError("A chat/push URL belongs to a person or a team.") from exc


def apprise_target_test(*, target: AppriseTarget) -> bool:
    """Send a test message to ``target`` now (same checks as any send). Raises DomainError for a refusal;
    returns whether the service accepted it."""
    try:
        return apprise_send(
            url_decrypt(target.url_encrypted),
            title="[Handover] Test message",
            body="This chat/push target receives your Handover notifications.",
        )
    except TargetNotAllowed as exc:
        raise DomainError(str(exc)) from exc

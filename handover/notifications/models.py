"""Notifications: what a person is told (in-app rows), how each channel delivered it, their preferences,
their chat/push targets (Apprise URLs, stored encrypted) and teams (docs/architecture.md "Notifications")."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from handover.core.models import TimeStampedModel, choices_check


class _NotificationEvent(models.TextChoices):
    APPROVAL_NEEDED = "approval_needed", "A replay needs your approval"
    REPLAY_APPROVED = "replay_approved", "A replay was approved"
    REPLAY_REJECTED = "replay_rejected", "A replay was rejected"
    REPLAY_DISPATCHED = "replay_dispatched", "A replay was dispatched"
    DISPATCH_LAPSED = "dispatch_lapsed", "A dispatched replay lapsed (nobody reported it started)"
    REPLAY_COMPLETED = "replay_completed", "A replay completed"
    REPLAY_FAILED = "replay_failed", "A replay failed"
    CHECK_FAILED = "check_failed", "A next-run check failed"
    HANDED_OVER = "handed_over", "A handover was handed over to you"
    ESCALATION = "escalation", "An escalation (a handover you own was reopened)"
    AGED_WORK = "aged_work", "Work you own has aged (a reminder of the ladder)"


class _NotificationChannel(models.TextChoices):
    IN_APP = "in_app", "In the app"
    EMAIL = "email", "E-mail"
    CHAT = "chat", "Chat / push (Apprise)"


class _DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SENT = "sent", "Sent (the channel accepted it)"
    HELD = "held", "Held for a digest (too many in a short time)"
    FAILED = "failed", "Failed (gave up)"
    UNDELIVERABLE = "undeliverable", "Not deliverable (no verified address or target)"


class Team(TimeStampedModel):
    """A named set of people with chat/push targets of its own; grants no permission (roles stay object
    permissions). A member without a chat target of their own is told through their teams' targets."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=100, unique=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="notification_teams")

    def __str__(self) -> str:
        return self.name


class AppriseTarget(TimeStampedModel):
    """A chat/push destination: an Apprise URL of a person or of a team (exactly one), stored encrypted.

    ``url_encrypted`` is a Fernet token (key from the environment, ``HANDOVER_NOTIFICATION_KEYS``);
    ``url_masked`` is what pages show. ``scheme`` and ``host`` are kept for the admin's allow-list
    checks (``host`` empty for services whose address is fixed, e.g. Slack).
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="apprise_targets"
    )
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.CASCADE, related_name="apprise_targets")
    label = models.CharField(max_length=100, blank=True)
    url_encrypted = models.TextField()
    url_masked = models.CharField(max_length=200)
    scheme = models.CharField(max_length=20)
    host = models.CharField(max_length=255, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=False, team__isnull=True) | Q(user__isnull=True, team__isnull=False),
                name="apprise_target_one_owner",
                violation_error_code="owner",
            )
        ]

    def __str__(self) -> str:
        return self.url_masked


class NotificationPreference(models.Model):
    """One person's choice for one event on one channel (absent: the default, ``handover.notifications.events``)."""

    Event = _NotificationEvent
    Channel = _NotificationChannel

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    event = models.CharField(max_length=30, choices=Event.choices)
    channel = models.CharField(max_length=10, choices=Channel.choices)
    enabled = models.BooleanField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "event", "channel"], name="notification_preference_once"),
            choices_check("notification_preference_event_valid", "event", _NotificationEvent),
            choices_check("notification_preference_channel_valid", "channel", _NotificationChannel),
        ]

    def __str__(self) -> str:
        return f"{self.event} on {self.channel}: {'on' if self.enabled else 'off'}"


class NotificationEmail(TimeStampedModel):
    """A person's notification address: e-mail goes only to ``verified`` (set when the link in the
    verification mail is followed). ``pending`` waits for that link; only its token's SHA-256 is kept."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_email")
    verified = models.EmailField(blank=True)
    verified_at = models.DateTimeField(null=True, blank=True)
    pending = models.EmailField(blank=True)
    pending_token_hash = models.CharField(max_length=64, blank=True)
    pending_sent_at = models.DateTimeField(null=True, blank=True)


class Notification(models.Model):
    """One thing one person is told, once: unique per person, event and ``dedup_key`` (the subject of the
    event, e.g. ``replay:<id>``). ``in_app`` rows are listed on the notifications page; ``link`` is a path."""

    Event = _NotificationEvent

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    recipient = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    event = models.CharField(max_length=30, choices=Event.choices)
    dedup_key = models.CharField(max_length=200)
    subject = models.CharField(max_length=300)
    body = models.TextField(blank=True)
    link = models.CharField(max_length=500, blank=True, help_text="a path on this site")
    job_key = models.CharField(max_length=150, blank=True, help_text="the job it is about (the inbox filters on it)")
    tenant_slug = models.CharField(
        max_length=100, blank=True, help_text="the tenant it is about, empty when several (the inbox filters on it)"
    )
    in_app = models.BooleanField(default=True)
    created_at = models.DateTimeField(db_index=True)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["recipient", "event", "dedup_key"], name="notification_once", violation_error_code="duplicate"
            ),
            choices_check("notification_event_valid", "event", _NotificationEvent),
        ]
        indexes = [models.Index(fields=["recipient", "read_at"], name="notification_unread")]

    def __str__(self) -> str:
        return self.subject


class NotificationDelivery(models.Model):
    """One notification on one outbound channel and destination (``email`` or ``apprise:<target id>``).

    ``sent`` only when the channel accepted it (the mail backend took it; Apprise reported success);
    ``undeliverable`` when there was nowhere to send it (shown as such); ``held`` during a storm, until
    the digest carries it. ``claimed_at`` is set by the sending task with a guarded UPDATE.
    """

    Channel = _NotificationChannel
    Status = _DeliveryStatus

    notification = models.ForeignKey(Notification, on_delete=models.CASCADE, related_name="deliveries")
    channel = models.CharField(max_length=10, choices=Channel.choices)
    destination = models.CharField(max_length=100)
    target = models.ForeignKey(AppriseTarget, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    shown_as = models.CharField(max_length=200, blank=True, help_text="the masked address")
    status = models.CharField(max_length=15, choices=Status.choices, default=Status.PENDING)
    attempt_count = models.PositiveIntegerField(default=0)
    claimed_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    via_digest = models.BooleanField(default=False)
    error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["notification", "channel", "destination"],
                name="notification_delivery_once",
                violation_error_code="duplicate",
            ),
            choices_check("notification_delivery_channel_valid", "channel", _NotificationChannel),
            choices_check("notification_delivery_status_valid", "status", _DeliveryStatus),
            models.CheckConstraint(
                condition=~Q(status="sent") | Q(sent_at__isnull=False),
                name="notification_delivery_sent_stamp",
                violation_error_code="status_stamp",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.channel} to {self.shown_as or self.destination}: {self.status}"

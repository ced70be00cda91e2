"""The handover: the support record of one failed run (or several runs of one job), its history and residue.

- ``Handover`` holds the sections support reads at 3 a.m. (what definitely happened, what may have
  happened, what is safe to do next, ...), the owners, and the lifecycle ``draft`` → ``handed_over``
  → ``recovering`` → ``verifying`` → ``resolved`` → ``closed`` (``Handover.TRANSITIONS``; the one
  function that moves it is ``handover.handovers.services.handover_transition``).
- ``HandoverRun`` links it to its runs and the execution (attempt) of each; it keeps its own
  ``is_open`` flag so "at most one open handover per run" is a partial unique constraint (a
  condition cannot reach across the join to the handover's status).
- ``HandoverRevision`` keeps every text a section ever had: the previous text stays retrievable.
- ``ResidualException`` is what is knowingly left over (items nobody can settle now, explained
  duplicates), each with a named owner and a due date.
- ``HandoverNotification`` is the row written before an e-mail or chat message goes out (rows first,
  messages after commit).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from handover.core.models import TimeStampedModel


def choices_check(name: str, field: str, choices: type[models.TextChoices]) -> models.CheckConstraint:
    """A CheckConstraint keeping ``field`` inside the enum (choices alone do not constrain the database)."""
    return models.CheckConstraint(
        condition=Q(**{f"{field}__in": choices.values}), name=name, violation_error_code="invalid_choice"
    )


class _HandoverStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    HANDED_OVER = "handed_over", "Handed over"
    RECOVERING = "recovering", "Recovering"
    VERIFYING = "verifying", "Verifying"
    RESOLVED = "resolved", "Resolved"
    CLOSED = "closed", "Closed"


class _HandoverSection(models.TextChoices):
    """The free-text sections of a handover; each edit keeps a revision. Values are the field names."""

    EXPECTED_OUTPUT = "expected_output", "Expected output and how to verify it"
    DEFINITELY_HAPPENED = "definitely_happened", "What definitely happened"
    MAY_HAVE_HAPPENED = "may_have_happened", "What may have happened"
    NEXT_ACTION = "next_action", "What is safe to do next"
    AFFECTED = "affected", "Affected tenants and users"
    BUSINESS_IMPACT = "business_impact", "Business impact"
    DEADLINES = "deadlines", "Deadlines and waiting downstream tasks"
    RECENT_CHANGES = "recent_changes", "Recent deployments or configuration changes"


class Handover(TimeStampedModel):
    """The support record of one failed run, or of several runs of one job (e.g. two tenants, one bad record).

    Sections are plain text (secrets and personal data redacted on write); ``generated_sections``
    lists the sections whose text was pre-filled from evidence and no person has confirmed yet.
    Status timestamps agree with the status (constraints below); a reopened handover clears its
    ``resolved_at`` / ``closed_*`` and keeps ``reopened_*`` and ``reopen_count``.
    """

    Status = _HandoverStatus
    Section = _HandoverSection

    OPEN_STATUSES = frozenset(_HandoverStatus.values) - {_HandoverStatus.CLOSED.value}
    # action -> allowed source statuses -> target status (docs/architecture.md "State machines").
    # ``resolve`` is the system's act (next-run checks passed or waived); ``close`` is a person's, once
    # the closing conditions hold (from ``verifying`` when the checks have already passed but the sweep
    # has not resolved it yet).
    TRANSITIONS: dict[str, tuple[frozenset[str], str]] = {
        "hand_over": (frozenset({Status.DRAFT}), Status.HANDED_OVER),
        "start_recovery": (frozenset({Status.HANDED_OVER}), Status.RECOVERING),
        "verify": (frozenset({Status.RECOVERING}), Status.VERIFYING),
        "resolve": (frozenset({Status.VERIFYING}), Status.RESOLVED),
        "close": (frozenset({Status.VERIFYING, Status.RESOLVED}), Status.CLOSED),
        "reopen": (frozenset({Status.VERIFYING, Status.RESOLVED, Status.CLOSED}), Status.RECOVERING),
    }

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    job = models.ForeignKey("runs.Job", on_delete=models.PROTECT, related_name="handovers")
    version = models.PositiveIntegerField(
        default=1,
        help_text="raised by every write (edit, confirmation, owner change, transition, regeneration); the ETag",
    )
    title = models.CharField(max_length=300)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.DRAFT)
    status_changed_at = models.DateTimeField(null=True, blank=True)
    # sections (HandoverRevision keeps every earlier text)
    expected_output = models.TextField(blank=True)
    definitely_happened = models.TextField(blank=True)
    may_have_happened = models.TextField(blank=True)
    next_action = models.TextField(blank=True, help_text="the permitted next action")
    affected = models.TextField(blank=True)
    business_impact = models.TextField(blank=True)
    deadlines = models.TextField(blank=True)
    recent_changes = models.TextField(blank=True)
    generated_sections = models.JSONField(
        default=list, blank=True, help_text="section names whose text is generated and not yet confirmed by a person"
    )
    generated_evidence = models.JSONField(
        default=dict,
        blank=True,
        help_text="the evidence the generated text came from, per run public id: ledger_version, status, "
        "attempt_count, latest_attempt, counts (handover.handovers.staleness)",
    )
    # owners and references
    escalation_owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="escalated_handovers",
    )
    customer_update_owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="customer_update_handovers",
    )
    defect_ref = models.CharField(
        max_length=500, blank=True, help_text="engineering defect: link to the technical change or problem ticket"
    )
    is_supportability_defect = models.BooleanField(
        default=False, help_text="the job could not report its own progress accurately"
    )
    supportability_ticket = models.CharField(max_length=500, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    # lifecycle stamps
    handed_over_at = models.DateTimeField(null=True, blank=True)
    handed_over_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    verifying_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reopened_at = models.DateTimeField(null=True, blank=True)
    reopened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="empty when the system reopened it (a failed next-run check)",
    )
    reopen_reason = models.TextField(blank=True)
    reopen_count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            choices_check("handover_handover_status_valid", "status", _HandoverStatus),
            # a draft has not been handed over; everything after it has, by someone
            models.CheckConstraint(
                condition=(
                    Q(status="draft", handed_over_at__isnull=True)
                    | (~Q(status="draft") & Q(handed_over_at__isnull=False, handed_over_by__isnull=False))
                ),
                name="handover_handover_handed_over_stamp",
                violation_error_code="handed_over_stamp",
            ),
            models.CheckConstraint(
                condition=~Q(status="verifying") | Q(verifying_at__isnull=False),
                name="handover_handover_verifying_stamp",
                violation_error_code="verifying_stamp",
            ),
            models.CheckConstraint(
                condition=(
                    Q(status="resolved", resolved_at__isnull=False)
                    | (~Q(status__in=["resolved", "closed"]) & Q(resolved_at__isnull=True))
                    | Q(status="closed")
                ),
                name="handover_handover_resolved_stamp",
                violation_error_code="resolved_stamp",
            ),
            # a closed handover has a closed time and closer, and the reverse
            models.CheckConstraint(
                condition=(
                    Q(status="closed", closed_at__isnull=False, closed_by__isnull=False)
                    | (~Q(status="closed") & Q(closed_at__isnull=True, closed_by__isnull=True))
                ),
                name="handover_handover_closed_stamp",
                violation_error_code="closed_stamp",
            ),
            models.CheckConstraint(
                condition=Q(reopened_at__isnull=True) | ~Q(reopen_reason=""),
                name="handover_handover_reopen_reason",
                violation_error_code="reopen_reason_required",
            ),
        ]
        indexes = [
            # "my handovers": by escalation owner, newest first
            models.Index(fields=["escalation_owner", "-created_at"], name="handover_owner_idx"),
            # the list page and the "needs attention" page: open handovers by status and age
            models.Index(fields=["status", "created_at"], name="handover_status_idx"),
            # the verifying sweep
            models.Index(fields=["status_changed_at"], condition=Q(status="verifying"), name="handover_verifying_idx"),
        ]

    def __str__(self) -> str:
        return self.title

    @property
    def is_open(self) -> bool:
        return self.status != self.Status.CLOSED

    def section_is_generated(self, section: str) -> bool:
        return section in (self.generated_sections or [])


class HandoverRun(models.Model):
    """One run a handover is about, the execution (attempt) it concerns, and that run's next-run check.

    ``is_open`` mirrors "the handover is not closed" and is written in the same transaction as the
    handover's status, so the partial unique constraint holds "at most one open handover per run".
    """

    handover = models.ForeignKey(Handover, on_delete=models.CASCADE, related_name="links")
    run = models.ForeignKey("runs.Run", on_delete=models.PROTECT, related_name="handover_links")
    attempt = models.ForeignKey(
        "runs.Attempt",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="the execution the handover is about (the latest attempt when it was written)",
    )
    is_open = models.BooleanField(default=True)
    next_run_check = models.ForeignKey(
        "runs.NextRunCheck",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="the check scheduled when the handover last moved to verifying",
    )
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["handover", "run"], name="handover_handoverrun_unique", violation_error_code="duplicate"
            ),
            models.UniqueConstraint(
                fields=["run"],
                condition=Q(is_open=True),
                name="handover_handoverrun_one_open",
                violation_error_code="open_handover_exists",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.handover_id} ↔ run {self.run_id}"


class HandoverRevision(models.Model):
    """One text a section had: written on creation (generated), on every edit and on every regeneration."""

    handover = models.ForeignKey(Handover, on_delete=models.CASCADE, related_name="revisions")
    section = models.CharField(max_length=30, choices=Handover.Section.choices)
    text = models.TextField(blank=True)
    is_generated = models.BooleanField(default=False, help_text="pre-filled from evidence, not written by a person")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="empty for text the system generated",
    )
    created_at = models.DateTimeField()

    class Meta:
        constraints = [choices_check("handover_revision_section_valid", "section", _HandoverSection)]
        indexes = [
            # the history page: one section's texts in order
            models.Index(fields=["handover", "section", "created_at"], name="handover_revision_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.section} @ {self.created_at:%Y-%m-%d %H:%M:%S}Z"


class ResidualException(TimeStampedModel):
    """What is knowingly left over when a handover closes, with a named owner and a due date.

    ``work_items`` are the ledger items it covers: an unresolved item (unverified, absent, uncertain)
    or a possible duplicate counts as settled for closing only when an exception covers it.
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    handover = models.ForeignKey(Handover, on_delete=models.CASCADE, related_name="residual_exceptions")
    version = models.PositiveIntegerField(default=1, help_text="raised by every change of the exception")
    run = models.ForeignKey(
        "runs.Run", null=True, blank=True, on_delete=models.PROTECT, related_name="+", help_text="the run it concerns"
    )
    description = models.TextField()
    work_items = models.ManyToManyField("runs.WorkItem", blank=True, related_name="residual_exceptions")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    due_date = models.DateField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=~Q(description=""),
                name="handover_residual_description_set",
                violation_error_code="required",
            )
        ]

    def __str__(self) -> str:
        return self.description[:80]


class _NotificationChannel(models.TextChoices):
    EMAIL = "email", "E-mail"
    CHAT = "chat", "Chat webhook"


class _NotificationStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"


class HandoverNotification(models.Model):
    """One message about a handover, written before it is sent and updated with the outcome.

    ``key`` makes it once-only: one message per handover, channel, reason and recipient (a new
    escalation owner gets their own). ``claimed_at`` is set by the sending task with a guarded
    UPDATE; ``response_*`` keep at most 4 KiB of what a webhook answered.
    """

    Channel = _NotificationChannel
    Status = _NotificationStatus

    handover = models.ForeignKey(Handover, on_delete=models.CASCADE, related_name="notifications")
    channel = models.CharField(max_length=10, choices=Channel.choices)
    reason = models.CharField(max_length=40, help_text="what it announces, e.g. handed_over")
    key = models.CharField(max_length=200, help_text="reason and recipient: one message each")
    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempt_count = models.PositiveIntegerField(default=0)
    claimed_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.TextField(blank=True, help_text="at most 4 KiB of the webhook's answer")
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["handover", "channel", "key"],
                name="handover_notification_once",
                violation_error_code="duplicate",
            ),
            choices_check("handover_notification_channel_valid", "channel", _NotificationChannel),
            choices_check("handover_notification_status_valid", "status", _NotificationStatus),
            models.CheckConstraint(
                condition=(
                    Q(status="sent", sent_at__isnull=False)
                    | Q(status="failed", failed_at__isnull=False)
                    | Q(status="pending", sent_at__isnull=True, failed_at__isnull=True)
                ),
                name="handover_notification_stamps",
                violation_error_code="status_stamp",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.channel} {self.reason} ({self.status})"

"""Tenants, jobs, integrations, deliveries, alerts, runs, attempts and the timeline (DESIGN.md vocabulary).

Every invariant the database can hold is a constraint here: run identity, attempt identity, one
original alert per (integration, dedup key), enum values, timestamp order.
"""

from __future__ import annotations

import unicodedata
import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from handover.models.base import TimeStampedModel, validate_time_zone

# Enumerations are defined at module level and nested into their model by assignment
# (``Job.DstGap``): a nested ``Meta`` cannot see names of the class body it sits in, and each
# enum's values are needed there for its CheckConstraint.


def _choices_check(name: str, field: str, choices: type[models.TextChoices]) -> models.CheckConstraint:
    """A CheckConstraint keeping ``field`` inside the enum (choices alone do not constrain the database)."""
    return models.CheckConstraint(
        condition=Q(**{f"{field}__in": choices.values}),
        name=name,
        violation_error_code="invalid_choice",
    )


def normalise_slug(value: str) -> str:
    """NFC-normalise a tenant slug (Unicode allowed); its casefolded form is the unique key."""
    return unicodedata.normalize("NFC", value.strip())


class Tenant(TimeStampedModel):
    """The client whose data a run processes. ``slug`` is NFC; ``slug_key`` (casefolded) is unique."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    slug = models.CharField(max_length=100)
    slug_key = models.CharField(max_length=100, unique=True, editable=False, help_text="casefold(NFC(slug))")
    name = models.CharField(max_length=200)

    class Meta:
        permissions = [
            ("act_as_support", "Support: triage, evidence, handovers, replay requests"),
            ("act_as_business_owner", "Business owner: approve the business side of replays"),
            ("act_as_auditor", "Auditor: read everything of this tenant"),
        ]

    def save(self, *args: object, **kwargs: object) -> None:
        self.slug = normalise_slug(self.slug)
        self.slug_key = self.slug.casefold()
        super().save(*args, **kwargs)  # type: ignore[arg-type]

    def __str__(self) -> str:
        return self.slug


class _JobDstGap(models.TextChoices):
    NEXT_EXISTING = "next_existing", "Run at the next existing time (Debian cron, Dagster)"
    SKIP = "skip", "Skip the slot (EventBridge Scheduler, Kubernetes)"
    SHIFT = "shift", "Shift by the gap length"


class _JobDstOverlap(models.TextChoices):
    FIRST = "first", "First occurrence (Debian cron)"
    SECOND = "second", "Second occurrence (Dagster)"
    BOTH = "both", "Both occurrences"


class _JobWindowAlignment(models.TextChoices):
    NONE = "none", "None"
    HOUR = "hour", "Hour"
    DAY = "day", "Day"
    MONTH = "month", "Month"


class _JobMissedRunPolicy(models.TextChoices):
    CATCH_UP_ALL = "catch_up_all", "Catch up every missed slot"
    LATEST_ONLY = "latest_only", "Run only the latest missed slot"
    EXPIRE_AFTER = "expire_after", "Expire missed slots after a duration"


class _JobOverlapPolicy(models.TextChoices):
    SKIP = "skip", "Skip"
    QUEUE = "queue", "Queue"
    REPLACE = "replace", "Replace"
    ALLOW = "allow", "Allow"


class Job(TimeStampedModel):
    """A scheduled job definition, identified by its stable ``key`` (``nightly-invoice-export``)."""

    DstGap = _JobDstGap
    DstOverlap = _JobDstOverlap
    WindowAlignment = _JobWindowAlignment
    MissedRunPolicy = _JobMissedRunPolicy
    OverlapPolicy = _JobOverlapPolicy

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    key = models.SlugField(max_length=150, unique=True, allow_unicode=True)
    name = models.CharField(max_length=200, blank=True)
    schedule = models.CharField(max_length=200, help_text="cron expression (Debian/Vixie dialect)")
    timezone = models.CharField(max_length=64, default="UTC", validators=[validate_time_zone])
    dst_gap_policy = models.CharField(max_length=20, choices=DstGap.choices, default=DstGap.NEXT_EXISTING)
    dst_overlap_policy = models.CharField(max_length=20, choices=DstOverlap.choices, default=DstOverlap.FIRST)
    grace_seconds = models.PositiveIntegerField(default=1800)
    window_alignment = models.CharField(max_length=10, choices=WindowAlignment.choices, default=WindowAlignment.NONE)
    missed_run_policy = models.CharField(
        max_length=20, choices=MissedRunPolicy.choices, default=MissedRunPolicy.CATCH_UP_ALL
    )
    missed_run_expire_after_seconds = models.PositiveIntegerField(null=True, blank=True)
    overlap_policy = models.CharField(max_length=10, choices=OverlapPolicy.choices, default=OverlapPolicy.ALLOW)
    expected_output = models.TextField(blank=True, help_text="what a successful run produces")
    verification = models.TextField(blank=True, help_text="how to verify it in the authoritative destination")
    paused_at = models.DateTimeField(null=True, blank=True)
    paused_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    pause_reason = models.TextField(blank=True)

    class Meta:
        permissions = [("act_as_technical_owner", "Technical owner: classify repeat safety, approve technically")]
        constraints = [
            _choices_check("runs_job_dst_gap_valid", "dst_gap_policy", _JobDstGap),
            _choices_check("runs_job_dst_overlap_valid", "dst_overlap_policy", _JobDstOverlap),
            _choices_check("runs_job_alignment_valid", "window_alignment", _JobWindowAlignment),
            _choices_check("runs_job_missed_valid", "missed_run_policy", _JobMissedRunPolicy),
            _choices_check("runs_job_overlap_valid", "overlap_policy", _JobOverlapPolicy),
            models.CheckConstraint(
                condition=Q(paused_at__isnull=True) | ~Q(pause_reason=""),
                name="runs_job_pause_has_reason",
                violation_error_code="pause_reason_required",
            ),
        ]

    def __str__(self) -> str:
        return self.key


class _SideEffectRepeatSafety(models.TextChoices):
    IDEMPOTENT = "idempotent", "Idempotent"
    IDEMPOTENT_WITH_KEY = "idempotent_with_key", "Idempotent with a key"
    NOT_IDEMPOTENT = "not_idempotent", "Not idempotent"
    UNKNOWN = "unknown", "Unknown"


class SideEffect(TimeStampedModel):
    """Something a job does in the world, with its repeat safety and the evidence for it."""

    RepeatSafety = _SideEffectRepeatSafety

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="side_effects")
    description = models.CharField(max_length=300)
    repeat_safety = models.CharField(max_length=30, choices=RepeatSafety.choices, default=RepeatSafety.UNKNOWN)
    evidence = models.TextField(blank=True)

    class Meta:
        constraints = [_choices_check("runs_sideeffect_safety_valid", "repeat_safety", _SideEffectRepeatSafety)]

    def __str__(self) -> str:
        return f"{self.job.key}: {self.description}"


class JobTarget(TimeStampedModel):
    """A (job, tenant, environment) the job runs for, with optional schedule overrides."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    job = models.ForeignKey(Job, on_delete=models.PROTECT, related_name="targets")
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="targets")
    environment = models.SlugField(max_length=50, default="prod")
    schedule_override = models.CharField(max_length=200, blank=True)
    timezone_override = models.CharField(max_length=64, blank=True)
    dst_gap_override = models.CharField(max_length=20, choices=Job.DstGap.choices, blank=True)
    dst_overlap_override = models.CharField(max_length=20, choices=Job.DstOverlap.choices, blank=True)
    reports_successes = models.BooleanField(default=True)
    is_active = models.BooleanField(default=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["job", "tenant", "environment"],
                name="runs_jobtarget_unique",
                violation_error_code="duplicate_target",
            )
        ]

    def __str__(self) -> str:
        return f"{self.job.key} / {self.tenant.slug} / {self.environment}"


class Integration(TimeStampedModel):
    """A monitoring system posting alerts: a source adapter plus declarative settings.

    ``settings`` is laid over the adapter's ``DEFAULT_SETTINGS`` (where the tenant, environment and
    job key come from; defaults such as ``default_tenant``).
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    source = models.SlugField(max_length=50)
    name = models.CharField(max_length=100, unique=True)
    settings = models.JSONField(default=dict, blank=True)
    is_active = models.BooleanField(default=True)
    refused_post_count = models.PositiveIntegerField(
        default=0, help_text="posts refused with a key of this integration sent to another source"
    )

    def __str__(self) -> str:
        return self.name


class IntegrationKey(TimeStampedModel):
    """A secret a monitoring system authenticates with: shown once, stored as SHA-256.

    Bound to one integration and to a list of tenants; ``all_tenants`` only by an admin's explicit choice.
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    integration = models.ForeignKey(Integration, on_delete=models.PROTECT, related_name="keys")
    label = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, db_index=True, help_text="first characters, for lookup and display")
    secret_hash = models.CharField(max_length=64, help_text="hex SHA-256 of the whole key")
    tenants = models.ManyToManyField(Tenant, blank=True, related_name="integration_keys")
    all_tenants = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.integration.name} {self.prefix}…"


class RunnerCredential(TimeStampedModel):
    """A job runner's secret: claims replays and reports their attempts for one job only."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    job = models.ForeignKey(Job, on_delete=models.PROTECT, related_name="runner_credentials")
    label = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, db_index=True)
    secret_hash = models.CharField(max_length=64)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.job.key} runner {self.prefix}…"


class AuthFailureCounter(models.Model):
    """Unauthenticated ingestion posts are not stored, only counted (per source slug)."""

    source = models.CharField(max_length=50, unique=True)
    count = models.PositiveBigIntegerField(default=0)
    last_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.source}: {self.count}"


class _DeliveryOutcome(models.TextChoices):
    RECEIVED = "received", "Received (not parsed yet)"
    PROCESSED = "processed", "Processed"
    REJECTED = "rejected", "Rejected"


class Delivery(TimeStampedModel):
    """One authenticated HTTP post to an ingestion endpoint, stored before anything is parsed.

    ``body`` is the raw body as text with secrets redacted; ``size_bytes`` and ``sha256`` describe the
    bytes as received (computed before redaction).
    """

    Outcome = _DeliveryOutcome

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    integration = models.ForeignKey(Integration, on_delete=models.PROTECT, related_name="deliveries")
    key = models.ForeignKey(IntegrationKey, on_delete=models.PROTECT, related_name="deliveries")
    received_at = models.DateTimeField()
    content_type = models.CharField(max_length=200, blank=True)
    size_bytes = models.PositiveBigIntegerField(help_text="size of the body as received, in bytes")
    sha256 = models.CharField(max_length=64)
    body = models.TextField(help_text="raw body, redacted; an oversized body keeps its first 64 KiB")
    is_body_truncated = models.BooleanField(default=False)
    outcome = models.CharField(max_length=20, choices=Outcome.choices, default=Outcome.RECEIVED)
    reason = models.TextField(blank=True)
    notes = models.JSONField(default=dict, blank=True, help_text="facts about the post, e.g. truncated_alerts")
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.JSONField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "deliveries"
        constraints = [_choices_check("runs_delivery_outcome_valid", "outcome", _DeliveryOutcome)]
        indexes = [
            # the integration page's "recent deliveries"
            models.Index(fields=["integration", "-received_at"], name="runs_delivery_recent_idx"),
            # the sweep of deliveries a crash left unfinished (runs.services.delivery_sweep_received)
            models.Index(fields=["received_at"], condition=Q(outcome="received"), name="runs_delivery_received_idx"),
        ]

    def __str__(self) -> str:
        return f"delivery {self.public_id} ({self.outcome})"


class _RunStatus(models.TextChoices):
    EXPECTED = "expected", "Expected"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    MISSED = "missed", "Missed"
    UNKNOWN = "unknown", "Unknown"


class _RunFailureClass(models.TextChoices):
    NEVER_STARTED = "never_started", "Never started"
    FAILED_IN_PREPARATION = "failed_in_preparation", "Failed in preparation"
    PARTIALLY_COMMITTED = "partially_committed", "Partially committed"
    COMPLETED_ACK_LOST = "completed_ack_lost", "Completed, acknowledgement lost"
    UNDETERMINED = "undetermined", "Undetermined"


class Run(TimeStampedModel):
    """A logical run: one job's work for one target and processing window ``[window_start, window_end)``.

    Identity ``(job, tenant, environment, window_start, window_end)`` is unique. ``status`` is set in
    one place only (``runs.services.attempts``), from the highest-numbered attempt.
    """

    Status = _RunStatus
    FailureClass = _RunFailureClass

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    job = models.ForeignKey(Job, on_delete=models.PROTECT, related_name="runs")
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="runs")
    environment = models.SlugField(max_length=50)
    target = models.ForeignKey(JobTarget, null=True, blank=True, on_delete=models.PROTECT, related_name="runs")
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    scheduled_for = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.UNKNOWN)
    status_changed_at = models.DateTimeField(null=True, blank=True)
    # run totals, stored when a load or change commits (the work ledger fills them)
    eligible_count = models.PositiveIntegerField(default=0)
    attempted_count = models.PositiveIntegerField(default=0)
    completed_count = models.PositiveIntegerField(default=0)
    skipped_count = models.PositiveIntegerField(default=0)
    rejected_count = models.PositiveIntegerField(default=0)
    unresolved_count = models.PositiveIntegerField(default=0)
    possible_duplicate_count = models.PositiveIntegerField(default=0)
    # the parts of unresolved_count, for the run page's stacked bar
    unverified_count = models.PositiveIntegerField(default=0, help_text="part of unresolved_count")
    absent_count = models.PositiveIntegerField(default=0, help_text="part of unresolved_count")
    uncertain_count = models.PositiveIntegerField(default=0, help_text="part of unresolved_count")
    ledger_updated_at = models.DateTimeField(
        null=True, blank=True, help_text="when a work-ledger load or change last stored the totals"
    )
    # failure class: suggested from the ledger's evidence, confirmed by a person (runs.services.ledger)
    failure_class_suggested = models.CharField(max_length=30, choices=FailureClass.choices, blank=True)
    failure_class = models.CharField(max_length=30, choices=FailureClass.choices, blank=True)
    failure_class_confirmed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    failure_class_confirmed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["job", "tenant", "environment", "window_start", "window_end"],
                name="runs_run_identity_unique",
                violation_error_code="duplicate_run",
            ),
            models.CheckConstraint(
                condition=Q(window_end__gt=models.F("window_start")),
                name="runs_run_window_order",
                violation_error_code="empty_window",
            ),
            _choices_check("runs_run_status_valid", "status", _RunStatus),
            models.CheckConstraint(
                condition=Q(failure_class="") | Q(failure_class__in=_RunFailureClass.values),
                name="runs_run_failure_class_valid",
                violation_error_code="invalid_choice",
            ),
            models.CheckConstraint(
                condition=Q(failure_class_suggested="") | Q(failure_class_suggested__in=_RunFailureClass.values),
                name="runs_run_failure_suggested_valid",
                violation_error_code="invalid_choice",
            ),
            models.CheckConstraint(
                condition=Q(failure_class="") | Q(failure_class_confirmed_by__isnull=False),
                name="runs_run_failure_class_confirmed",
                violation_error_code="confirmed_by_required",
            ),
        ]
        indexes = [
            # the runs list: newest first, filtered by tenant
            models.Index(fields=["tenant", "-window_start"], name="runs_run_tenant_window_idx"),
            models.Index(fields=["-window_start", "-id"], name="runs_run_newest_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.job.key} / {self.tenant.slug} / {self.environment} / {self.window_start:%Y-%m-%d %H:%M}Z"


class _AttemptTrigger(models.TextChoices):
    SCHEDULED = "scheduled", "Scheduled"
    AUTOMATIC_RETRY = "automatic_retry", "Automatic retry"
    MANUAL_REPLAY = "manual_replay", "Manual replay"
    CATCH_UP = "catch_up", "Catch-up"


class _AttemptStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    TIMED_OUT = "timed_out", "Timed out"
    ABANDONED = "abandoned", "Abandoned"


class Attempt(TimeStampedModel):
    """One technical execution of a run, unique on ``(run, execution_id)`` (the executor's id)."""

    Trigger = _AttemptTrigger
    Status = _AttemptStatus

    # action -> allowed source statuses -> target status (STYLE.md §4). Terminal states never move.
    TERMINAL = frozenset({Status.SUCCEEDED, Status.FAILED, Status.TIMED_OUT, Status.ABANDONED})
    TRANSITIONS: dict[str, tuple[frozenset[str], str]] = {
        "queue": (frozenset(), Status.QUEUED),
        "start": (frozenset({Status.QUEUED}), Status.RUNNING),
        "succeed": (frozenset({Status.QUEUED, Status.RUNNING}), Status.SUCCEEDED),
        "fail": (frozenset({Status.QUEUED, Status.RUNNING}), Status.FAILED),
        "time_out": (frozenset({Status.QUEUED, Status.RUNNING}), Status.TIMED_OUT),
        "abandon": (frozenset({Status.QUEUED, Status.RUNNING}), Status.ABANDONED),
    }
    ACTION_FOR_STATUS = {
        Status.QUEUED: "queue",
        Status.RUNNING: "start",
        Status.SUCCEEDED: "succeed",
        Status.FAILED: "fail",
        Status.TIMED_OUT: "time_out",
        Status.ABANDONED: "abandon",
    }

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="attempts")
    execution_id = models.CharField(max_length=300)
    number = models.PositiveIntegerField(default=1)
    trigger = models.CharField(max_length=20, choices=Trigger.choices, default=Trigger.SCHEDULED)
    status = models.CharField(max_length=20, choices=Status.choices)
    scheduled_at = models.DateTimeField(null=True, blank=True, help_text="when this attempt was meant to start")
    started_at = models.DateTimeField(null=True, blank=True, help_text="actual start")
    ended_at = models.DateTimeField(null=True, blank=True)
    status_changed_at = models.DateTimeField(null=True, blank=True)
    error_summary = models.TextField(blank=True, help_text="at most 2,000 characters")
    correlation_ref = models.CharField(max_length=300, blank=True)
    log_url = models.URLField(max_length=2000, blank=True)
    config_version = models.CharField(max_length=200, blank=True)
    replay_key = models.CharField(max_length=200, blank=True)
    abandon_reason = models.TextField(blank=True)
    abandoned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "execution_id"],
                name="runs_attempt_identity_unique",
                violation_error_code="duplicate",
            ),
            _choices_check("runs_attempt_status_valid", "status", _AttemptStatus),
            _choices_check("runs_attempt_trigger_valid", "trigger", _AttemptTrigger),
            models.CheckConstraint(
                condition=Q(number__gte=1), name="runs_attempt_number_positive", violation_error_code="number"
            ),
            models.CheckConstraint(
                condition=~Q(status="abandoned") | ~Q(abandon_reason=""),
                name="runs_attempt_abandon_reason",
                violation_error_code="abandon_reason_required",
            ),
        ]
        indexes = [
            # "no replay while an attempt of the run is queued or running"
            models.Index(fields=["run"], condition=Q(status__in=["queued", "running"]), name="runs_attempt_active_idx"),
            models.Index(fields=["correlation_ref"], name="runs_attempt_corr_idx"),
            models.Index(fields=["execution_id"], name="runs_attempt_exec_idx"),
        ]

    def __str__(self) -> str:
        return f"attempt {self.number} {self.execution_id} ({self.status})"


class _AlertOutcome(models.TextChoices):
    PENDING = "pending", "Pending"
    ACCEPTED = "accepted", "Accepted"
    DUPLICATE = "duplicate", "Duplicate"
    UNMATCHED = "unmatched", "Unmatched"
    REJECTED = "rejected", "Rejected"
    IGNORED = "ignored", "Ignored"


class Alert(TimeStampedModel):
    """One record parsed out of a delivery, with its outcome.

    The first alert with a given (integration, dedup key) is the original; later ones are
    ``duplicate`` rows pointing at it. ``dedup_hash`` is the SHA-256 of the source's dedup key,
    computed before redaction.
    """

    Outcome = _AlertOutcome

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    delivery = models.ForeignKey(Delivery, on_delete=models.PROTECT, related_name="alerts")
    integration = models.ForeignKey(Integration, on_delete=models.PROTECT, related_name="alerts")
    index = models.PositiveIntegerField(help_text="position of the record in its post, from 0")
    source = models.SlugField(max_length=50)
    kind = models.CharField(max_length=20, default="attempt")
    dedup_key = models.TextField(blank=True, help_text="the source's dedup key, for display")
    dedup_hash = models.CharField(max_length=64, blank=True)
    duplicate_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="duplicates")
    repeat_count = models.PositiveIntegerField(default=0, help_text="how often the same alert was sent again")
    outcome = models.CharField(max_length=20, choices=Outcome.choices, default=Outcome.PENDING)
    reason = models.TextField(blank=True)
    is_stale = models.BooleanField(default=False, help_text="a late, earlier-state report: kept, changes nothing")
    fields = models.JSONField(default=dict, blank=True, help_text="normalised fields, for display")
    job_key = models.CharField(max_length=300, blank=True)
    tenant_slug = models.CharField(max_length=300, blank=True)
    environment = models.CharField(max_length=100, blank=True)
    execution_id = models.CharField(max_length=300, blank=True)
    summary = models.CharField(max_length=500, blank=True)
    group_ref = models.CharField(
        max_length=300,
        blank=True,
        help_text="the source's incident key (PagerDuty dedup_key), for ack/resolve",
    )
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.PROTECT, related_name="alerts")
    attempt = models.ForeignKey(Attempt, null=True, blank=True, on_delete=models.PROTECT, related_name="alerts")
    outcome_at = models.DateTimeField(null=True, blank=True)
    ignored_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        constraints = [
            # One original per (integration, dedup key): concurrent posts of one alert race on this
            # index, and the losers become `duplicate` rows.
            models.UniqueConstraint(
                fields=["integration", "dedup_hash"],
                condition=Q(duplicate_of__isnull=True) & ~Q(dedup_hash=""),
                name="runs_alert_original_unique",
                violation_error_code="duplicate",
            ),
            models.UniqueConstraint(
                fields=["delivery", "index"],
                name="runs_alert_delivery_index_unique",
                violation_error_code="index",
            ),
            _choices_check("runs_alert_outcome_valid", "outcome", _AlertOutcome),
            models.CheckConstraint(
                condition=~Q(outcome="duplicate") | Q(duplicate_of__isnull=False),
                name="runs_alert_duplicate_has_original",
                violation_error_code="duplicate_of_required",
            ),
        ]
        indexes = [
            # the inbox: unmatched first, newest first
            models.Index(fields=["outcome", "-created_at"], name="runs_alert_inbox_idx"),
            # the pending sweep
            models.Index(fields=["created_at"], condition=Q(outcome="pending"), name="runs_alert_pending_idx"),
            models.Index(fields=["integration", "job_key"], name="runs_alert_job_idx"),
            # attaching a PagerDuty acknowledge/resolve to the triggers with the same dedup_key
            models.Index(fields=["integration", "group_ref"], name="runs_alert_group_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.source} alert {self.public_id} ({self.outcome})"


class RunnerReport(TimeStampedModel):
    """What the job runner said about records of one attempt. A report is not evidence of the destination."""

    attempt = models.ForeignKey(Attempt, on_delete=models.PROTECT, related_name="runner_reports")
    alert = models.OneToOneField(Alert, null=True, blank=True, on_delete=models.PROTECT, related_name="runner_report")
    attempted_ids = models.JSONField(default=list, blank=True)
    completed_ids = models.JSONField(default=list, blank=True)
    failed_ids = models.JSONField(default=list, blank=True)
    reported_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"report on {self.attempt}"


class _TimelineEventActorKind(models.TextChoices):
    PERSON = "person", "Person"
    INTEGRATION = "integration", "Integration"
    SYSTEM = "system", "System"


class TimelineEvent(models.Model):
    """The append-only chronology. Never edited or deleted (a PostgreSQL trigger refuses both).

    ``job`` is required; tenant, run and attempt are null for job-level events (a pause).
    ``occurred_at`` is when the thing happened (per the source), ``recorded_at`` when we wrote it.
    """

    ActorKind = _TimelineEventActorKind

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    job = models.ForeignKey(Job, on_delete=models.PROTECT, related_name="timeline")
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.PROTECT, related_name="timeline")
    attempt = models.ForeignKey(Attempt, null=True, blank=True, on_delete=models.PROTECT, related_name="timeline")
    alert = models.ForeignKey(Alert, null=True, blank=True, on_delete=models.PROTECT, related_name="timeline")
    kind = models.CharField(max_length=60)
    occurred_at = models.DateTimeField()
    recorded_at = models.DateTimeField()
    actor_kind = models.CharField(max_length=20, choices=ActorKind.choices)
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    actor_integration = models.ForeignKey(
        Integration, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    summary = models.CharField(max_length=500)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            _choices_check("runs_timelineevent_actor_valid", "actor_kind", _TimelineEventActorKind),
            models.CheckConstraint(
                condition=~Q(actor_kind="person") | Q(actor_user__isnull=False),
                name="runs_timelineevent_person_actor",
                violation_error_code="actor_required",
            ),
        ]
        indexes = [
            models.Index(fields=["run", "occurred_at"], name="runs_event_run_idx"),
            models.Index(fields=["job", "occurred_at"], name="runs_event_job_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.occurred_at:%Y-%m-%d %H:%M:%S}Z {self.kind}: {self.summary}"

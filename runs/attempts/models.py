"""Logical runs (job, tenant, environment, processing window), their attempts and the runners' reports."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Coalesce

from handover.core.durations import seconds_in_words
from handover.core.models import TimeStampedModel, choices_check
from runs.catalog.models import Job, JobTarget, Tenant
from runs.checks.schedule.slots import delay_words


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
    one place only (``runs.attempts.services.run_status_refresh``), from its latest attempt that is not a
    duplicate trigger. ``scheduled_for`` is the run's slot (``runs.checks.schedule.slots``).
    """

    Status = _RunStatus
    FailureClass = _RunFailureClass

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # No index of their own: the run identity (job, ...) and (tenant, window_start) lead with them.
    job = models.ForeignKey(Job, on_delete=models.PROTECT, related_name="runs", db_index=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="runs", db_index=False)
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
    ledger_version = models.PositiveIntegerField(
        default=0, help_text="raised by every write to the run's work ledger (a load, a change, an explanation)"
    )
    # failure class: suggested from the ledger's evidence, confirmed by a person (runs.ledger)
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
            choices_check("runs_run_status_valid", "status", _RunStatus),
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
            # the run time (the slot, else the window's end): failed runs of a period (recurrence, trends)
            models.Index(Coalesce("scheduled_for", "window_end"), name="runs_run_run_at_idx"),
            # failed and missed runs, by when they failed (aged work, oldest first) -- and the navigation's
            # capped "needs attention" count, from either partial index: no scan of the succeeded ones
            models.Index(
                Coalesce("status_changed_at", "scheduled_for", "created_at"),
                "id",
                condition=Q(status__in=["failed", "missed"]),
                name="runs_run_failing_aged_idx",
            ),
            # the "needs attention" page, oldest first by the slot (else when recorded): failed and missed
            # runs, and runs with unresolved or possibly duplicated work items
            models.Index(
                Coalesce("scheduled_for", "created_at"),
                "id",
                condition=Q(status__in=["failed", "missed"]),
                name="runs_run_failing_since_idx",
            ),
            models.Index(
                Coalesce("scheduled_for", "created_at"),
                "id",
                condition=Q(unresolved_count__gt=0) | Q(possible_duplicate_count__gt=0),
                name="runs_run_unresolved_since_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.job.key} / {self.tenant.slug} / {self.environment} / {self.window_start:%Y-%m-%d %H:%M}Z"


class _AttemptTrigger(models.TextChoices):
    SCHEDULED = "scheduled", "Scheduled"
    AUTOMATIC_RETRY = "automatic_retry", "Automatic retry"
    MANUAL_REPLAY = "manual_replay", "Manual replay"
    MANUAL_RERUN = "manual_rerun", "Manual re-run (outside approval)"
    CATCH_UP = "catch_up", "Catch-up"


class _AttemptStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    TIMED_OUT = "timed_out", "Timed out"
    CANCELLED = "cancelled", "Cancelled (by the executor)"
    ABANDONED = "abandoned", "Abandoned"


class Attempt(TimeStampedModel):
    """One technical execution of a run, unique on ``(run, execution_id)`` (the executor's id)."""

    Trigger = _AttemptTrigger
    Status = _AttemptStatus

    # action -> allowed source statuses -> target status (docs/architecture.md "State machines").
    # Terminal states never move.
    TERMINAL = frozenset({Status.SUCCEEDED, Status.FAILED, Status.TIMED_OUT, Status.CANCELLED, Status.ABANDONED})
    TRANSITIONS: dict[str, tuple[frozenset[str], str]] = {
        "queue": (frozenset(), Status.QUEUED),
        "start": (frozenset({Status.QUEUED}), Status.RUNNING),
        "succeed": (frozenset({Status.QUEUED, Status.RUNNING}), Status.SUCCEEDED),
        "fail": (frozenset({Status.QUEUED, Status.RUNNING}), Status.FAILED),
        "time_out": (frozenset({Status.QUEUED, Status.RUNNING}), Status.TIMED_OUT),
        # the executor cancelled it (a person's "this will never report" is abandon)
        "cancel": (frozenset({Status.QUEUED, Status.RUNNING}), Status.CANCELLED),
        "abandon": (frozenset({Status.QUEUED, Status.RUNNING}), Status.ABANDONED),
    }
    ACTION_FOR_STATUS = {
        Status.QUEUED: "queue",
        Status.RUNNING: "start",
        Status.SUCCEEDED: "succeed",
        Status.FAILED: "fail",
        Status.TIMED_OUT: "time_out",
        Status.CANCELLED: "cancel",
        Status.ABANDONED: "abandon",
    }

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # No index of its own: the attempt identity (run, execution_id) and (run, number) lead with it.
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="attempts", db_index=False)
    execution_id = models.CharField(max_length=300)
    number = models.PositiveIntegerField(
        default=1, help_text="Handover's ordinal on the run: 1 + the attempts first reported before it; never changed"
    )
    source_number = models.PositiveIntegerField(
        null=True, blank=True, help_text="the source's attempt or try number as reported"
    )
    trigger = models.CharField(max_length=20, choices=Trigger.choices, default=Trigger.SCHEDULED)
    is_trigger_inferred = models.BooleanField(
        default=False, help_text="the source gave no trigger: automatic_retry inferred from the slot's history"
    )
    is_duplicate_trigger = models.BooleanField(
        default=False, help_text="a second schedule-started execution of a slot that already had one"
    )
    duplicate_explained_at = models.DateTimeField(null=True, blank=True)
    duplicate_explained_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    duplicate_explanation = models.TextField(blank=True)
    duplicate_evidence_ref = models.CharField(max_length=300, blank=True)
    # slot placement (the reported time against the run's slot, ``Run.scheduled_for``)
    slot_offset_seconds = models.IntegerField(
        null=True, blank=True, help_text="reported time minus the slot, seconds (negative: early)"
    )
    slot_tolerance_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="the early tolerance e used when the attempt was placed, seconds"
    )
    is_slot_late = models.BooleanField(default=False, help_text="reported later than the slot + grace")
    is_slot_inferred = models.BooleanField(default=False, help_text="placed on an earlier free slot (queue, streak)")
    slot_hint = models.CharField(max_length=200, blank=True, help_text="e.g. 'time-zone or DST policy mismatch?'")
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
            choices_check("runs_attempt_status_valid", "status", _AttemptStatus),
            choices_check("runs_attempt_trigger_valid", "trigger", _AttemptTrigger),
            models.CheckConstraint(
                condition=Q(number__gte=1), name="runs_attempt_number_positive", violation_error_code="number"
            ),
            models.UniqueConstraint(
                fields=["run", "number"], name="runs_attempt_number_unique", violation_error_code="duplicate_number"
            ),
            models.CheckConstraint(
                condition=Q(duplicate_explained_at__isnull=True) | Q(is_duplicate_trigger=True),
                name="runs_attempt_explained_is_dup",
                violation_error_code="not_a_duplicate_trigger",
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
            # the business state's "a duplicate trigger not explained" (the runs lists): a few rows, not
            # every attempt, whichever way PostgreSQL evaluates the EXISTS
            models.Index(
                fields=["run"],
                condition=Q(is_duplicate_trigger=True, duplicate_explained_at__isnull=True),
                name="runs_attempt_dup_unexpl_idx",
            ),
            # attempts that ended failed (runs.attempts.failures: a period's failed runs, their first
            # failure and count): the failures alone, not every attempt of the history
            models.Index(
                fields=["run"],
                condition=Q(status__in=["failed", "timed_out", "cancelled", "abandoned"]),
                name="runs_attempt_failed_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"attempt {self.number} {self.execution_id} ({self.status})"

    @property
    def slot_flags(self) -> list[str]:
        """How the attempt was placed on its slot, in words: offset with tolerance, late, inferred, hint."""
        flags = []
        if self.slot_offset_seconds:
            words = delay_words(self.slot_offset_seconds)
            flags.append(f"{words} (early tolerance {seconds_in_words(self.slot_tolerance_seconds or 0)})")
        if self.is_slot_late:
            flags.append("late")
        if self.is_slot_inferred:
            flags.append("slot inferred")
        if self.slot_hint:
            flags.append(self.slot_hint)
        return flags

    @property
    def is_manual_rerun(self) -> bool:
        """Started outside the approval process: always flagged where the attempt shows."""
        return self.trigger == _AttemptTrigger.MANUAL_RERUN

    @property
    def is_duplicate_unexplained(self) -> bool:
        return self.is_duplicate_trigger and self.duplicate_explained_at is None


class RunnerReport(TimeStampedModel):
    """What the job runner said about records of one attempt. A report is not evidence of the destination."""

    attempt = models.ForeignKey(Attempt, on_delete=models.PROTECT, related_name="runner_reports")
    alert = models.OneToOneField(
        "runs.Alert", null=True, blank=True, on_delete=models.PROTECT, related_name="runner_report"
    )
    attempted_ids = models.JSONField(default=list, blank=True)
    completed_ids = models.JSONField(default=list, blank=True)
    failed_ids = models.JSONField(default=list, blank=True)
    reported_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"report on {self.attempt}"

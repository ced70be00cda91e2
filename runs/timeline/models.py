"""The timeline: the append-only chronology of a job's runs, attempts and decisions."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from handover.core.models import choices_check
from runs.alerts.models import Alert
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Integration, Job, Tenant


class _TimelineEventActorKind(models.TextChoices):
    PERSON = "person", "Person"
    INTEGRATION = "integration", "Integration"
    SYSTEM = "system", "System"


class TimelineEventKind(models.TextChoices):
    """Every kind of timeline event. A new kind is a new member (docs/architecture.md "Adding a timeline kind")."""

    ACKNOWLEDGED = "acknowledged", "Acknowledged"
    AGED_WORK_ESCALATED = "aged_work_escalated", "Aged work escalated"
    ATTEMPT_ABANDONED = "attempt_abandoned", "Attempt abandoned"
    ATTEMPT_CANCELLED = "attempt_cancelled", "Attempt cancelled"
    ATTEMPT_DETAILS_CHANGED = "attempt_details_changed", "Attempt details changed"
    ATTEMPT_FAILED = "attempt_failed", "Attempt failed"
    ATTEMPT_QUEUED = "attempt_queued", "Attempt queued"
    ATTEMPT_REPLACED = "attempt_replaced", "Attempt replaced"
    ATTEMPT_RUNNING = "attempt_running", "Attempt running"
    ATTEMPT_SUCCEEDED = "attempt_succeeded", "Attempt succeeded"
    ATTEMPT_TIMED_OUT = "attempt_timed_out", "Attempt timed out"
    CONFLICTING_REPORT = "conflicting_report", "Conflicting report"
    CONFLICTING_REPORT_EXPLAINED = "conflicting_report_explained", "Conflicting report explained"
    DEFINITION_MISMATCH = "definition_mismatch", "Definition mismatch"
    DUPLICATE_TRIGGER = "duplicate_trigger", "Duplicate trigger"
    DUPLICATE_TRIGGER_EXPLAINED = "duplicate_trigger_explained", "Duplicate trigger explained"
    FAILURE_CLASS_CONFIRMED = "failure_class_confirmed", "Failure class confirmed"
    FAILURE_CLASS_SUGGESTED = "failure_class_suggested", "Failure class suggested"
    HANDOVER_CLOSED = "handover_closed", "Handover closed"
    HANDOVER_CREATED = "handover_created", "Handover created"
    HANDOVER_EDITED = "handover_edited", "Handover edited"
    HANDOVER_HANDED_OVER = "handover_handed_over", "Handover handed over"
    HANDOVER_RECOVERING = "handover_recovering", "Handover recovering"
    HANDOVER_REGENERATED = "handover_regenerated", "Handover regenerated"
    HANDOVER_REOPENED = "handover_reopened", "Handover reopened"
    HANDOVER_RESOLVED = "handover_resolved", "Handover resolved"
    HANDOVER_VERIFYING = "handover_verifying", "Handover verifying"
    JOB_PAUSED = "job_paused", "Job paused"
    JOB_RESUMED = "job_resumed", "Job resumed"
    TARGET_PAUSED = "target_paused", "Target paused"
    TARGET_RESUMED = "target_resumed", "Target resumed"
    MANUAL_REPLAY_UNAPPROVED = "manual_replay_unapproved", "Manual replay unapproved"
    MISSED_REPORTED = "missed_reported", "Missed (reported)"
    MISSED_STREAK_CLOSED = "missed_streak_closed", "Missed streak closed"
    MISSED_STREAK_OPENED = "missed_streak_opened", "Missed streak opened"
    NEXT_RUN_CHECK_AWAITING_CONFIRMATION = (
        "next_run_check_awaiting_confirmation",
        "Next run check awaiting confirmation",
    )
    NEXT_RUN_CHECK_CONFIRMED = "next_run_check_confirmed", "Next run check confirmed"
    NEXT_RUN_CHECK_FAILED = "next_run_check_failed", "Next run check failed"
    NEXT_RUN_CHECK_LATE_SUCCESS = "next_run_check_late_success", "Next run check late success"
    NEXT_RUN_CHECK_MOVED = "next_run_check_moved", "Next run check moved"
    NEXT_RUN_CHECK_PASSED = "next_run_check_passed", "Next run check passed"
    NEXT_RUN_CHECK_SCHEDULED = "next_run_check_scheduled", "Next run check scheduled"
    NEXT_RUN_CHECK_WAIVED = "next_run_check_waived", "Next run check waived"
    OVERLAP_BREACH = "overlap_breach", "Overlap breach"
    OWNERSHIP_CHANGED = "ownership_changed", "Ownership changed"
    OVERLAP_DETECTED = "overlap_detected", "Overlap detected"
    RECOVERY_DECISION = "recovery_decision", "Recovery decision"
    REFIRE = "refire", "Refire"
    REFIRE_EXPLAINED = "refire_explained", "Refire explained"
    REPLAY_APPROVAL = "replay_approval", "Replay approval"
    REPLAY_APPROVED = "replay_approved", "Replay approved"
    REPLAY_ATTEMPT_FAILED = "replay_attempt_failed", "Replay attempt failed"
    REPLAY_ATTEMPT_LINKED = "replay_attempt_linked", "Replay attempt linked"
    REPLAY_ATTEMPT_STARTED = "replay_attempt_started", "Replay attempt started"
    REPLAY_ATTEMPT_SUCCEEDED = "replay_attempt_succeeded", "Replay attempt succeeded"
    REPLAY_ATTEMPT_TIMED_OUT = "replay_attempt_timed_out", "Replay attempt timed out"
    REPLAY_CANCELLED = "replay_cancelled", "Replay cancelled"
    REPLAY_CLAIMED = "replay_claimed", "Replay claimed"
    REPLAY_COMPLETED = "replay_completed", "Replay completed"
    REPLAY_DISPATCH_BLOCKED = "replay_dispatch_blocked", "Replay dispatch blocked"
    REPLAY_DISPATCH_UNKNOWN = "replay_dispatch_unknown", "Replay dispatch unknown"
    REPLAY_DISPATCHED = "replay_dispatched", "Replay dispatched"
    REPLAY_EXPIRED = "replay_expired", "Replay expired"
    REPLAY_FAILED = "replay_failed", "Replay failed"
    REPLAY_REFUSED = "replay_refused", "Replay refused"  # retired (RETIRED_KINDS): rows written before only
    REPLAY_REJECTED = "replay_rejected", "Replay rejected"
    REPLAY_REQUESTED = "replay_requested", "Replay requested"
    REPLAY_RESCOPED = "replay_rescoped", "Replay rescoped"
    REPLAY_WEBHOOK_DELIVERED = "replay_webhook_delivered", "Replay webhook delivered"
    RESIDUAL_EXCEPTION_ADDED = "residual_exception_added", "Residual exception added"
    RESIDUAL_EXCEPTION_CHANGED = "residual_exception_changed", "Residual exception changed"
    RESOLVED = "resolved", "Resolved"
    RETENTION_PURGED = "retention_purged", "Retention purged"
    RETRIES_EXHAUSTED = "retries_exhausted", "Retries exhausted"
    RUN_MISSED = "run_missed", "Run missed"
    RUN_REPORTED = "run_reported", "Run reported"
    SCHEDULE_MISMATCH = "schedule_mismatch", "Schedule mismatch"
    SECOND_SCHEDULER_SUSPECTED = "second_scheduler_suspected", "Second scheduler suspected"
    SOURCE_NUMBER_REPEATED = "source_number_repeated", "Source number repeated"
    WORK_ITEM_CHANGED = "work_item_changed", "Work item changed"
    WORK_ITEM_DUPLICATE_EXPLAINED = "work_item_duplicate_explained", "Work item duplicate explained"
    WORK_ITEM_VERIFIED = "work_item_verified", "Work item verified"
    WORK_ITEMS_LOAD_AWAITING_CONFIRMATION = (
        "work_items_load_awaiting_confirmation",
        "Work items load awaiting confirmation",
    )
    WORK_ITEMS_LOAD_DISCARDED = "work_items_load_discarded", "Work items load discarded"
    WORK_ITEMS_LOADED = "work_items_loaded", "Work items loaded"
    WORK_ITEMS_VERIFIED = "work_items_verified", "Work items verified"


# Kinds kept only for the rows written before they were retired; nothing writes them any more.
# ``replay_refused``: a refused replay request or approval did not happen to the run, so it is in the
# audit trail now (``AuditEvent.Action.REPLAY_REFUSED``, approvals/replays/requests.py ``replay_refusal_record``).
RETIRED_KINDS = frozenset({TimelineEventKind.REPLAY_REFUSED})


# Kinds the run page flags: something went against the schedule, the policy or the approval process.
WARNING_KINDS = frozenset(
    {
        TimelineEventKind.MANUAL_REPLAY_UNAPPROVED,
        TimelineEventKind.SCHEDULE_MISMATCH,
        TimelineEventKind.OVERLAP_BREACH,
        TimelineEventKind.NEXT_RUN_CHECK_FAILED,
        TimelineEventKind.RUN_MISSED,
        TimelineEventKind.MISSED_REPORTED,
    }
)


class TimelineEvent(models.Model):
    """The append-only chronology. Never edited or deleted (a PostgreSQL trigger refuses both).

    ``job`` is required; tenant, run and attempt are null for job-level events (a pause).
    ``occurred_at`` is when the thing happened (per the source), ``recorded_at`` when we wrote it.
    """

    ActorKind = _TimelineEventActorKind
    Kind = TimelineEventKind

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # job and run: no index of their own, (job, occurred_at) and (run, occurred_at) lead with them.
    job = models.ForeignKey(Job, on_delete=models.PROTECT, related_name="timeline", db_index=False)
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.PROTECT, related_name="timeline", db_index=False
    )
    attempt = models.ForeignKey(Attempt, null=True, blank=True, on_delete=models.PROTECT, related_name="timeline")
    alert = models.ForeignKey(Alert, null=True, blank=True, on_delete=models.PROTECT, related_name="timeline")
    kind = models.CharField(max_length=60, choices=Kind.choices)
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
            choices_check("runs_timelineevent_actor_valid", "actor_kind", _TimelineEventActorKind),
            choices_check("runs_timelineevent_kind_valid", "kind", TimelineEventKind),
            models.CheckConstraint(
                condition=~Q(actor_kind="person") | Q(actor_user__isnull=False),
                name="runs_timelineevent_person_actor",
                violation_error_code="actor_required",
            ),
        ]
        indexes = [
            models.Index(fields=["run", "occurred_at"], name="runs_event_run_idx"),
            models.Index(fields=["job", "occurred_at"], name="runs_event_job_idx"),
            # the business state's re-fires and conflicting reports (the runs lists): the flagged events
            # alone, not every event of the history
            models.Index(
                fields=["run", "recorded_at"],
                condition=Q(kind__in=[TimelineEventKind.REFIRE, TimelineEventKind.CONFLICTING_REPORT]),
                name="runs_event_flagged_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.occurred_at:%Y-%m-%d %H:%M:%S}Z {self.kind}: {self.summary}"

    @property
    def is_warning(self) -> bool:
        """True for the kinds the run page flags with a warning sign (``WARNING_KINDS``)."""
        return self.kind in WARNING_KINDS

"""Next-run checks: after a recovery, the target's next normal run must happen and must not duplicate anything.

A check is one expected fire time of one job target (docs/architecture.md "Vocabulary"): ``expected_at`` is
the DST-correct fire time in UTC, ``deadline_at`` adds the job's grace. Its ``status`` moves only
through ``NextRunCheck.TRANSITIONS`` (``runs.checks.transitions.next_run_check_transition``); the
evidence columns (the attempt that satisfied it, a late success, whether duplicates could be
checked, a person's confirmation) are written beside the status, never instead of it.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from handover.core.models import TimeStampedModel, choices_check
from runs.attempts.models import Attempt, Run
from runs.catalog.models import JobTarget


class _NextRunCheckStatus(models.TextChoices):
    SCHEDULED = "scheduled", "Scheduled"
    PASSED = "passed", "Passed"
    FAILED = "failed", "Failed"
    WAIVED = "waived", "Waived"


class _NextRunCheckFailureReason(models.TextChoices):
    DEADLINE_PASSED = "deadline_passed", "No qualifying success before the deadline"
    DUPLICATE_REEMITTED = "duplicate_reemitted", "The next run re-emitted records (possible duplicates)"
    STALE_RETRY_QUEUED = "stale_retry_queued", "An old retry of the failed run is still queued"


class _NextRunCheckDuplicateCheck(models.TextChoices):
    NOT_YET = "not_yet", "Not evaluated yet"
    CHECKED = "checked", "Checked against the next run's ledger"
    NO_LEDGER = "no_ledger", "No ledger for the next run: a person confirms"


class _NextRunCheckRequesterKind(models.TextChoices):
    HANDOVER = "handover", "Handover"
    REPLAY_REQUEST = "replay_request", "Replay request"
    PERSON = "person", "A person, by hand"


class NextRunCheck(TimeStampedModel):
    """One expected fire time of a target that must run, succeed and re-emit nothing.

    ``requested_by_kind`` / ``requested_by_ref`` name the handover or replay request that asked for
    the check (their public ids). They are plain text: ``runs`` may not point at the ``handover`` and ``approvals``
    apps' models (docs/architecture.md "Layout rules").
    """

    Status = _NextRunCheckStatus
    FailureReason = _NextRunCheckFailureReason
    DuplicateCheck = _NextRunCheckDuplicateCheck
    RequesterKind = _NextRunCheckRequesterKind

    # action -> allowed source statuses -> target status (docs/architecture.md "State machines").
    # Passed, failed and waived are final: a failed check is not waived afterwards (close with its
    # late-success evidence, or schedule a check of the following fire time).
    TRANSITIONS: dict[str, tuple[frozenset[str], str]] = {
        "pass": (frozenset({Status.SCHEDULED}), Status.PASSED),
        "fail": (frozenset({Status.SCHEDULED}), Status.FAILED),
        "waive": (frozenset({Status.SCHEDULED}), Status.WAIVED),
    }

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # No index of its own: the unique (target, expected_at) serves lookups by target.
    target = models.ForeignKey(JobTarget, on_delete=models.PROTECT, related_name="next_run_checks", db_index=False)
    recovered_run = models.ForeignKey(
        Run,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="next_run_checks",
        help_text="the failed run whose recovery this check verifies (its stale retries fail the check)",
    )
    requested_by_kind = models.CharField(max_length=20, choices=RequesterKind.choices, default=RequesterKind.PERSON)
    requested_by_ref = models.CharField(
        max_length=200, blank=True, help_text="public id of the handover or replay request that asked for it"
    )
    # Columns nobody filters on carry no index (``db_index=False``): a sweep UPDATE changes the
    # indexed status, so PostgreSQL writes a new entry into every index of the table per check.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    expected_at = models.DateTimeField(help_text="the target's next fire time (UTC, DST-correct)")
    deadline_at = models.DateTimeField(help_text="expected_at + the job's grace (UTC)")
    window_start = models.DateTimeField(
        null=True, blank=True, help_text="processing window of the expected run, to find it by identity"
    )
    window_end = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.SCHEDULED)
    status_changed_at = models.DateTimeField(null=True, blank=True)
    # evidence found by evaluation
    next_run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.PROTECT, related_name="+", help_text="the run for expected_at"
    )
    evidence_attempt = models.ForeignKey(
        Attempt,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,
        help_text="scheduled attempt of the next run, reported through a key bound to the tenant, "
        "that succeeded before the deadline",
    )
    evidence_at = models.DateTimeField(null=True, blank=True, help_text="when that attempt succeeded")
    late_success_attempt = models.ForeignKey(
        Attempt,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,
        help_text="a success that came after the deadline: evidence only, the check stays failed",
    )
    late_success_at = models.DateTimeField(null=True, blank=True)
    duplicate_check = models.CharField(max_length=20, choices=DuplicateCheck.choices, default=DuplicateCheck.NOT_YET)
    possible_duplicate_count = models.PositiveIntegerField(
        default=0, help_text="possible duplicates in the next run's ledger when evaluated"
    )
    failure_reason = models.CharField(max_length=30, choices=FailureReason.choices, blank=True)
    result_summary = models.TextField(blank=True, help_text="why the check passed, failed or waits")
    passed_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)
    failure_notified_at = models.DateTimeField(
        null=True, blank=True, help_text="when the failure follow-up (e-mail, reopen) was claimed"
    )
    # a person's confirmation that duplicates were checked outside a ledger
    confirmed_at = models.DateTimeField(null=True, blank=True)
    confirmed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    confirmation_note = models.TextField(blank=True)
    # the waiver: for a next run far away, a checkpoint date, a reason and a named owner
    waived_at = models.DateTimeField(null=True, blank=True)
    waived_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    waiver_owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,
        help_text="the named person who looks again at the checkpoint",
    )
    waiver_checkpoint = models.DateField(null=True, blank=True, help_text="the date the owner looks again")
    waiver_reason = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["target", "expected_at"],
                name="runs_nextruncheck_target_expected_unique",
                violation_error_code="duplicate_check",
            ),
            choices_check("runs_nextruncheck_status_valid", "status", _NextRunCheckStatus),
            choices_check("runs_nextruncheck_dupcheck_valid", "duplicate_check", _NextRunCheckDuplicateCheck),
            choices_check("runs_nextruncheck_requester_valid", "requested_by_kind", _NextRunCheckRequesterKind),
            models.CheckConstraint(
                condition=Q(failure_reason="") | Q(failure_reason__in=_NextRunCheckFailureReason.values),
                name="runs_nextruncheck_reason_valid",
                violation_error_code="invalid_choice",
            ),
            models.CheckConstraint(
                condition=Q(deadline_at__gte=F("expected_at")),
                name="runs_nextruncheck_deadline_order",
                violation_error_code="deadline_before_expected",
            ),
            # never "passed" before it ran: a pass names the attempt that satisfied it
            models.CheckConstraint(
                condition=(
                    Q(status="passed", passed_at__isnull=False, evidence_attempt__isnull=False)
                    | (~Q(status="passed") & Q(passed_at__isnull=True))
                ),
                name="runs_nextruncheck_passed_evidence",
                violation_error_code="passed_needs_evidence",
            ),
            # a pass without a ledger needs a person's confirmation
            models.CheckConstraint(
                condition=~Q(status="passed", duplicate_check="no_ledger") | Q(confirmed_at__isnull=False),
                name="runs_nextruncheck_pass_confirmed",
                violation_error_code="confirmation_required",
            ),
            models.CheckConstraint(
                condition=(
                    (Q(status="failed", failed_at__isnull=False) & ~Q(failure_reason=""))
                    | (~Q(status="failed") & Q(failed_at__isnull=True, failure_reason=""))
                ),
                name="runs_nextruncheck_failed_reason",
                violation_error_code="failure_reason_required",
            ),
            models.CheckConstraint(
                condition=(
                    (
                        Q(
                            status="waived",
                            waived_at__isnull=False,
                            waived_by__isnull=False,
                            waiver_owner__isnull=False,
                            waiver_checkpoint__isnull=False,
                        )
                        & ~Q(waiver_reason="")
                    )
                    | (~Q(status="waived") & Q(waived_at__isnull=True))
                ),
                name="runs_nextruncheck_waiver_complete",
                violation_error_code="waiver_incomplete",
            ),
            models.CheckConstraint(
                condition=Q(confirmed_at__isnull=True) | Q(confirmed_by__isnull=False),
                name="runs_nextruncheck_confirmed_by",
                violation_error_code="confirmed_by_required",
            ),
        ]
        indexes = [
            # the sweep's due query: scheduled checks whose fire time has come, by expected time
            models.Index(
                fields=["expected_at"],
                condition=Q(status="scheduled", evidence_attempt__isnull=True),
                name="runs_check_due_idx",
            ),
            # the sweep's late-success pass over checks that failed for want of a success
            models.Index(
                fields=["failed_at"],
                condition=Q(status="failed", failure_reason="deadline_passed", late_success_attempt__isnull=True),
                name="runs_check_late_idx",
            ),
            # the checks page: by status, newest deadline first
            models.Index(fields=["status", "-deadline_at"], name="runs_check_status_idx"),
        ]

    def __str__(self) -> str:
        return f"check {self.target_id} @ {self.expected_at:%Y-%m-%d %H:%M}Z ({self.status})"

    @property
    def is_awaiting_confirmation(self) -> bool:
        """A success came in time but the next run has no ledger: a person must confirm duplicates."""
        return (
            self.status == self.Status.SCHEDULED
            and self.evidence_attempt_id is not None
            and self.duplicate_check == self.DuplicateCheck.NO_LEDGER
            and self.confirmed_at is None
        )


class MissedStreak(TimeStampedModel):
    """Consecutive missed slots of one target under ``latest_only`` or a skip overlap policy.

    One row stands for the whole streak (first and last slot, UTC; ``slot_count``) instead of a
    ``missed`` run per slot. Open while ``closed_at`` is empty; at most one open streak per target.
    Opening and closing each write a timeline event (``missed_streak_opened`` / ``_closed``).
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    target = models.ForeignKey(JobTarget, on_delete=models.PROTECT, related_name="missed_streaks")
    first_slot_at = models.DateTimeField()
    last_slot_at = models.DateTimeField()
    slot_count = models.PositiveIntegerField(default=1)
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_by_run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.PROTECT, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["target"],
                condition=Q(closed_at__isnull=True),
                name="runs_missedstreak_one_open",
                violation_error_code="streak_open",
            ),
            models.CheckConstraint(
                condition=Q(last_slot_at__gte=F("first_slot_at")),
                name="runs_missedstreak_slot_order",
                violation_error_code="slot_order",
            ),
        ]

    def __str__(self) -> str:
        return f"missed streak {self.target_id}: {self.slot_count} slots from {self.first_slot_at:%Y-%m-%d %H:%M}Z"

    @property
    def is_open(self) -> bool:
        return self.closed_at is None

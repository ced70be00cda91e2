"""Problems: the systemic cause behind one or more handovers (docs/problems.md).

- ``Problem`` holds the title, owning team, defect reference and description, and the lifecycle
  ``open`` → ``fix_in_progress`` → ``fix_deployed`` → ``verified`` → ``closed`` (``Problem.TRANSITIONS``;
  the one function that moves it is ``handover.problems.services.problem_transition``). ``verified``
  needs ``clean_runs_required`` clean runs of every linked target after ``fix_deployed_at``.
- ``ProblemHandover`` links a problem to a handover (a handover may close while its problem stays open).
- ``ProblemEvent`` is the problem's own append-only history (created, edited, linked, unlinked, every
  transition): a problem belongs to no single job, so its history is not on the runs' timeline. On
  PostgreSQL a trigger refuses UPDATE and DELETE on it.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.db.models import Q

from handover.core.models import TimeStampedModel, choices_check

if TYPE_CHECKING:
    from handover.handovers.models import Handover

DEFAULT_CLEAN_RUNS_REQUIRED = 3
MAX_CLEAN_RUNS_REQUIRED = 100


class _ProblemStatus(models.TextChoices):
    OPEN = "open", "Open"
    FIX_IN_PROGRESS = "fix_in_progress", "Fix in progress"
    FIX_DEPLOYED = "fix_deployed", "Fix deployed"
    VERIFIED = "verified", "Verified"
    CLOSED = "closed", "Closed"


class Problem(TimeStampedModel):
    """The systemic cause behind one or more handovers, tracked until its fix is verified by clean runs.

    ``fix_deployed_at`` (UTC) starts the count of clean runs; reopening clears it. Stamps agree with
    the status (constraints below). ``clean_runs_required`` is N of the clean-run rule (1..100).
    """

    Status = _ProblemStatus

    # action -> allowed source statuses -> target status (docs/problems.md "States"). ``verify`` is
    # refused unless the clean-run rule holds (the sweep does it; a person may ask for it too);
    # ``close`` from anything but ``verified`` needs a reason (a duplicate, not a defect, won't fix);
    # ``reopen`` (with a reason) is the regression path back to ``open``.
    TRANSITIONS: dict[str, tuple[frozenset[str], str]] = {
        "start_fix": (frozenset({Status.OPEN}), Status.FIX_IN_PROGRESS),
        "deploy_fix": (frozenset({Status.OPEN, Status.FIX_IN_PROGRESS}), Status.FIX_DEPLOYED),
        "verify": (frozenset({Status.FIX_DEPLOYED}), Status.VERIFIED),
        "close": (
            frozenset({Status.OPEN, Status.FIX_IN_PROGRESS, Status.FIX_DEPLOYED, Status.VERIFIED}),
            Status.CLOSED,
        ),
        "reopen": (frozenset({Status.FIX_DEPLOYED, Status.VERIFIED, Status.CLOSED}), Status.OPEN),
    }
    # the actions a reason is required for, and ``close`` unless it comes from ``verified``
    REASON_REQUIRED = frozenset({"reopen"})

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    title = models.CharField(max_length=300)
    owning_team = models.ForeignKey(
        "handover.Team", null=True, blank=True, on_delete=models.PROTECT, related_name="problems"
    )
    defect_ref = models.CharField(
        max_length=500, blank=True, help_text="the engineering defect: a ticket URL or key (e.g. PRB-2041)"
    )
    description = models.TextField(blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OPEN)
    status_changed_at = models.DateTimeField(null=True, blank=True)
    clean_runs_required = models.PositiveSmallIntegerField(
        default=DEFAULT_CLEAN_RUNS_REQUIRED,
        help_text="N: clean runs of every linked target after the fix was deployed before it is verified",
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    fix_deployed_at = models.DateTimeField(null=True, blank=True, help_text="clean runs count from here (UTC)")
    verified_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    handovers: models.ManyToManyField[Handover, ProblemHandover] = models.ManyToManyField(
        "handover.Handover", through="ProblemHandover", related_name="problems", blank=True
    )

    class Meta:
        constraints = [
            choices_check("handover_problem_status_valid", "status", _ProblemStatus),
            models.CheckConstraint(
                condition=~Q(title=""), name="handover_problem_title_set", violation_error_code="required"
            ),
            models.CheckConstraint(
                condition=Q(clean_runs_required__gte=1, clean_runs_required__lte=MAX_CLEAN_RUNS_REQUIRED),
                name="handover_problem_clean_runs_range",
                violation_error_code="clean_runs_range",
            ),
            # a deployed or verified fix has its deployment time (clean runs count from it)
            models.CheckConstraint(
                condition=~Q(status__in=["fix_deployed", "verified"]) | Q(fix_deployed_at__isnull=False),
                name="handover_problem_fix_deployed_stamp",
                violation_error_code="fix_deployed_stamp",
            ),
            models.CheckConstraint(
                condition=~Q(status="verified") | Q(verified_at__isnull=False),
                name="handover_problem_verified_stamp",
                violation_error_code="verified_stamp",
            ),
            # a closed problem has a closed time and closer, and the reverse
            models.CheckConstraint(
                condition=(
                    Q(status="closed", closed_at__isnull=False, closed_by__isnull=False)
                    | (~Q(status="closed") & Q(closed_at__isnull=True, closed_by__isnull=True))
                ),
                name="handover_problem_closed_stamp",
                violation_error_code="closed_stamp",
            ),
        ]
        indexes = [
            # the list page: by status, newest first
            models.Index(fields=["status", "-created_at"], name="handover_problem_status_idx"),
            # the verify sweep: problems whose fix is deployed
            models.Index(
                fields=["fix_deployed_at"], condition=Q(status="fix_deployed"), name="handover_problem_deployed_idx"
            ),
        ]

    def __str__(self) -> str:
        return self.title

    @property
    def is_open(self) -> bool:
        return self.status != self.Status.CLOSED


class ProblemHandover(models.Model):
    """One handover a problem is behind; who linked it and when (an unlink deletes the row; the history keeps both)."""

    problem = models.ForeignKey(Problem, on_delete=models.CASCADE, related_name="links")
    handover = models.ForeignKey("handover.Handover", on_delete=models.PROTECT, related_name="problem_links")
    linked_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    linked_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["problem", "handover"], name="handover_problemhandover_unique", violation_error_code="duplicate"
            )
        ]

    def __str__(self) -> str:
        return f"problem {self.problem_id} ↔ handover {self.handover_id}"


class _ProblemEventKind(models.TextChoices):
    CREATED = "created", "Created"
    EDITED = "edited", "Edited"
    HANDOVER_LINKED = "handover_linked", "Handover linked"
    HANDOVER_UNLINKED = "handover_unlinked", "Handover unlinked"
    TRANSITIONED = "transitioned", "Status changed"


class ProblemEvent(models.Model):
    """One entry of a problem's append-only history: who did what, when, from which status to which.

    ``handover`` is set for link and unlink events (the history shows them only to people who see that
    handover); ``data`` keeps old and new values of an edit. Never updated or deleted.
    """

    Kind = _ProblemEventKind

    problem = models.ForeignKey(Problem, on_delete=models.PROTECT, related_name="events")
    kind = models.CharField(max_length=30, choices=Kind.choices)
    from_status = models.CharField(max_length=20, blank=True)
    to_status = models.CharField(max_length=20, blank=True)
    reason = models.TextField(blank=True)
    handover = models.ForeignKey("handover.Handover", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="empty when the system acted (the verify sweep)",
    )
    summary = models.CharField(max_length=500)
    data = models.JSONField(default=dict, blank=True)
    occurred_at = models.DateTimeField()

    class Meta:
        constraints = [choices_check("handover_problemevent_kind_valid", "kind", _ProblemEventKind)]
        indexes = [
            # the problem page's history, oldest first
            models.Index(fields=["problem", "occurred_at"], name="handover_problemevent_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} @ {self.occurred_at:%Y-%m-%d %H:%M:%S}Z"

"""The work ledger: one WorkItem per business record of a run, its change history and the loads that fill it.

A work item keeps the *facts* each load contributed (in the population? skipped by rule? what the
runner said? how often the destination holds it?) next to the *outcome* derived from them, so
reconciliation is one set-based UPDATE over the run's items (``runs.ledger``), never a
Python loop over rows. A person's or a provider lookup's decision is evidence of its own and is
kept by later reconciliations unless the destination now confirms the record.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from handover.core.models import choices_check
from runs.attempts.models import Run


class _WorkItemOutcome(models.TextChoices):
    UNVERIFIED = "unverified", "Unverified"
    COMPLETED = "completed", "Completed"
    ABSENT = "absent", "Absent"
    UNCERTAIN = "uncertain", "Uncertain"
    REJECTED = "rejected", "Rejected"
    SKIPPED = "skipped", "Skipped"


class _WorkItemEvidenceKind(models.TextChoices):
    DESTINATION_QUERY = "destination_query", "Destination query"
    PROVIDER_LOOKUP = "provider_lookup", "Provider lookup"
    RUNNER_REPORT = "runner_report", "Runner report"
    MANUAL = "manual", "Manual"


class _WorkItemRunnerStatus(models.TextChoices):
    ATTEMPTED = "attempted", "Attempted"
    COMPLETED = "completed", "Claimed done"
    FAILED = "failed", "Failed"


class WorkItem(models.Model):
    """One business record of a run, by stable ``record_id``, with its outcome and the evidence for it.

    ``outcome`` is derived from the facts columns by reconciliation; ``evidence_*`` says what backs
    it (kind, reference such as a provider operation id, who, when, note). Items that are not in the
    population but were found in the destination are kept (``is_in_population`` false) and flagged
    as possible duplicates.
    """

    Outcome = _WorkItemOutcome
    EvidenceKind = _WorkItemEvidenceKind
    RunnerStatus = _WorkItemRunnerStatus

    # Outcomes that count as "unresolved" in the run totals (docs/architecture.md "Vocabulary").
    UNRESOLVED = frozenset({Outcome.UNVERIFIED, Outcome.ABSENT, Outcome.UNCERTAIN})

    # No database foreign keys on the two references of a work item: PostgreSQL checks a foreign
    # key row by row when the transaction commits, which for a million-row load cost more than the
    # load itself (bench/reconcile.py: ~9 s per key). The app writes run_id only from the run it has
    # locked, and evidence_by from the acting person; runs and people are never deleted (PROTECT,
    # and the append-only timeline points at both).
    # No index of its own either: the unique (run, record_id) index serves every lookup by run.
    run = models.ForeignKey(
        Run, on_delete=models.PROTECT, related_name="work_items", db_constraint=False, db_index=False
    )
    record_id = models.CharField(max_length=300, help_text="the business record's stable id")
    outcome = models.CharField(max_length=20, choices=Outcome.choices, default=Outcome.UNVERIFIED)
    # facts contributed by the loads
    is_in_population = models.BooleanField(default=True, help_text="listed in the run's eligible population")
    skip_reason = models.CharField(max_length=300, blank=True, help_text="not eligible by this rule")
    attributes = models.JSONField(null=True, blank=True, help_text="optional attributes from the population")
    is_attempted = models.BooleanField(default=False, help_text="the job runner reported it attempted")
    runner_status = models.CharField(max_length=20, choices=RunnerStatus.choices, blank=True)
    destination_count = models.PositiveIntegerField(
        default=0, help_text="how many times a destination export holds the record (the most any export listed it)"
    )
    destination_ref = models.CharField(max_length=300, blank=True)
    is_possible_duplicate = models.BooleanField(
        default=False, help_text="in the destination but not eligible, or in it more than once, and not explained"
    )
    destination_load = models.ForeignKey(
        "runs.WorkItemLoad",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_constraint=False,  # see ``run``: no per-row foreign-key check on a million-row load
        db_index=False,
        help_text="the destination export that last listed the record (its destination facts' load)",
    )
    # A possible duplicate is cleared only by a person's explanation (docs/work-ledger.md "Loads"):
    # once explained, later loads never flag the item again.
    duplicate_explained_at = models.DateTimeField(null=True, blank=True)
    duplicate_explained_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_constraint=False,
        db_index=False,
    )
    duplicate_explanation = models.TextField(blank=True, help_text="why the possible duplicate is not one")
    duplicate_evidence_ref = models.CharField(max_length=300, blank=True, help_text="ticket or provider reference")
    # evidence for the outcome
    evidence_kind = models.CharField(max_length=30, choices=EvidenceKind.choices, blank=True)
    evidence_ref = models.CharField(max_length=300, blank=True, help_text="provider operation or correlation id")
    evidence_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_constraint=False,
        db_index=False,  # never looked up by person; an index would take a million NULLs per load
    )
    evidence_at = models.DateTimeField(null=True, blank=True)
    evidence_note = models.TextField(blank=True)

    class Meta:
        constraints = [
            # Also the keyset index of the item table: pages go by (run, record_id).
            models.UniqueConstraint(
                fields=["run", "record_id"], name="runs_workitem_record_unique", violation_error_code="duplicate"
            ),
            choices_check("runs_workitem_outcome_valid", "outcome", _WorkItemOutcome),
            models.CheckConstraint(
                condition=Q(evidence_kind="") | Q(evidence_kind__in=_WorkItemEvidenceKind.values),
                name="runs_workitem_evidence_valid",
                violation_error_code="invalid_choice",
            ),
            models.CheckConstraint(
                condition=Q(runner_status="") | Q(runner_status__in=_WorkItemRunnerStatus.values),
                name="runs_workitem_runner_valid",
                violation_error_code="invalid_choice",
            ),
            models.CheckConstraint(
                condition=~Q(record_id=""), name="runs_workitem_record_id_set", violation_error_code="required"
            ),
            # every confirmed or suspected outcome carries its evidence
            models.CheckConstraint(
                condition=Q(outcome__in=["unverified", "skipped"]) | ~Q(evidence_kind=""),
                name="runs_workitem_outcome_evidence",
                violation_error_code="evidence_required",
            ),
            models.CheckConstraint(
                condition=~Q(outcome="skipped") | ~Q(skip_reason="") | ~Q(evidence_kind=""),
                name="runs_workitem_skipped_reason",
                violation_error_code="skip_reason_required",
            ),
            # an explained duplicate says why, and who explained it when
            models.CheckConstraint(
                condition=Q(duplicate_explained_at__isnull=True, duplicate_explanation="")
                | (
                    Q(duplicate_explained_at__isnull=False, duplicate_explained_by__isnull=False)
                    & ~Q(duplicate_explanation="")
                ),
                name="runs_workitem_dup_explained",
                violation_error_code="explanation_required",
            ),
        ]
        # No index on outcome: a load rewrites most outcomes of a run, and every index on a changed
        # column makes each of those million-row updates several times dearer (bench/reconcile.py).
        # Filtered pages walk the (run, record_id) key instead; the run's stored per-outcome counts
        # let an empty filter answer without a query.
        # No index on record_id alone: "what happened to INV-1003?" across runs is served by the
        # prefix-search index on UPPER(record_id) (migration 0025), every exact lookup is within a run
        # (the unique index), and each index on the table is a fourth of a million-row load's index work.
        indexes = [
            # the prominent possible-duplicates list on the run page
            models.Index(
                fields=["run", "record_id"], condition=Q(is_possible_duplicate=True), name="runs_workitem_dup_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.record_id} ({self.outcome})"

    @property
    def is_eligible(self) -> bool:
        """In the population and not skipped: counted in the run's eligible total."""
        return self.is_in_population and self.outcome != self.Outcome.SKIPPED

    @property
    def evidence_summary(self) -> str:
        """Why the item has its outcome, in words: a person's note, else what the loads' facts say.

        Derived from the row's own fields (reconciliation stores no per-row prose for a million rows).
        """
        if self.evidence_note:
            return self.evidence_note
        kind, outcome = self.evidence_kind, self.outcome
        if outcome == self.Outcome.SKIPPED:
            return f"not eligible: {self.skip_reason}" if self.skip_reason else "skipped"
        if kind == self.EvidenceKind.DESTINATION_QUERY and outcome == self.Outcome.COMPLETED:
            if not self.is_in_population:
                return "in the destination but not in the eligible population"
            if self.destination_count > 1:
                return f"in the destination export {self.destination_count} times"
            return "in the destination export"
        if kind == self.EvidenceKind.DESTINATION_QUERY and outcome == self.Outcome.ABSENT:
            return "not in the destination export declared complete for the window"
        if kind == self.EvidenceKind.RUNNER_REPORT and outcome == self.Outcome.REJECTED:
            return "the runner reported it failed"
        if kind == self.EvidenceKind.RUNNER_REPORT and self.runner_status == self.RunnerStatus.COMPLETED:
            return "the runner claims it done; the destination cannot confirm it"
        if kind == self.EvidenceKind.RUNNER_REPORT:
            return "attempted, and an attempt of the run timed out after sending"
        if kind == self.EvidenceKind.PROVIDER_LOOKUP:
            return "the provider found it" if outcome == self.Outcome.COMPLETED else "the provider did not find it"
        return "nothing confirmed yet"


class _WorkItemChangeKind(models.TextChoices):
    CHANGE = "change", "Changed by a person"
    VERIFY = "verify", "Verified by a provider lookup"
    WEAKEN = "weaken", "Weakened by a load a person confirmed"
    EXPLAIN = "explain", "Possible duplicate explained by a person"


class WorkItemChange(models.Model):
    """One change of a work item's outcome or evidence by a person or a provider lookup (its history)."""

    Kind = _WorkItemChangeKind

    work_item = models.ForeignKey(WorkItem, on_delete=models.PROTECT, related_name="changes")
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="work_item_changes")
    load = models.ForeignKey(
        "runs.WorkItemLoad", null=True, blank=True, on_delete=models.PROTECT, related_name="changes"
    )
    kind = models.CharField(max_length=20, choices=Kind.choices)
    from_outcome = models.CharField(max_length=20, choices=WorkItem.Outcome.choices)
    to_outcome = models.CharField(max_length=20, choices=WorkItem.Outcome.choices)
    evidence_kind = models.CharField(max_length=30, choices=WorkItem.EvidenceKind.choices)
    evidence_ref = models.CharField(max_length=300, blank=True)
    note = models.TextField(blank=True)
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    changed_at = models.DateTimeField()

    class Meta:
        constraints = [
            choices_check("runs_workitemchange_kind_valid", "kind", _WorkItemChangeKind),
            choices_check("runs_workitemchange_from_valid", "from_outcome", _WorkItemOutcome),
            choices_check("runs_workitemchange_to_valid", "to_outcome", _WorkItemOutcome),
            choices_check("runs_workitemchange_evidence_valid", "evidence_kind", _WorkItemEvidenceKind),
            # a person's manual change says why
            models.CheckConstraint(
                condition=~Q(evidence_kind="manual") | ~Q(note=""),
                name="runs_workitemchange_manual_note",
                violation_error_code="note_required",
            ),
        ]
        indexes = [models.Index(fields=["work_item", "changed_at"], name="runs_wichange_item_idx")]

    def __str__(self) -> str:
        return f"{self.work_item_id}: {self.from_outcome} → {self.to_outcome}"


class _WorkItemLoadKind(models.TextChoices):
    POPULATION = "population", "Eligible population"
    RUNNER_REPORT = "runner_report", "Runner report"
    DESTINATION = "destination", "Destination export"
    PROVIDER_LOOKUP = "provider_lookup", "Provider lookup export (bulk verify)"


class _WorkItemLoadStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    AWAITING_CONFIRMATION = "awaiting_confirmation", "Awaiting confirmation"
    COMMITTED = "committed", "Committed"
    DISCARDED = "discarded", "Discarded"
    FAILED = "failed", "Failed"


class _WorkItemLoadFormat(models.TextChoices):
    AUTO = "auto", "Detect"
    CSV = "csv", "CSV"
    JSONL = "jsonl", "JSON lines"


class WorkItemLoad(models.Model):
    """One uploaded file of record ids for a run and what became of it.

    The uploaded bytes are stored in the row (``content``) until the load commits, so a large load
    runs in a Celery task that is passed only the row id, and a failed one can simply be retried. A load is
    atomic: ``failed`` means nothing of it was written; ``error_line`` / ``error_column`` point at
    the offending input.
    """

    Kind = _WorkItemLoadKind
    Status = _WorkItemLoadStatus
    Format = _WorkItemLoadFormat

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="work_item_loads")
    number = models.PositiveIntegerField(
        default=1, help_text="1, 2, ... per run and kind, in upload order (the upload service numbers it)"
    )
    batch = models.UUIDField(
        default=uuid.uuid4, db_index=True, help_text="files uploaded together share it and load in one transaction"
    )
    kind = models.CharField(max_length=20, choices=Kind.choices)
    status = models.CharField(max_length=30, choices=Status.choices, default=Status.PENDING)
    format = models.CharField(max_length=10, choices=Format.choices, default=Format.AUTO)
    id_column = models.CharField(max_length=200, default="record_id")
    options = models.JSONField(
        default=dict, blank=True, help_text="ref_column, status_column, skip_column, found_column"
    )
    is_destination_complete = models.BooleanField(
        default=False, help_text="destination export declared complete for the window: missing means absent"
    )
    file_name = models.CharField(max_length=255, blank=True)
    content = models.BinaryField(
        blank=True,
        editable=False,
        help_text="the uploaded bytes, zlib-compressed, kept until the load commits (a retry re-reads them)",
    )
    size_bytes = models.PositiveBigIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True)
    row_count = models.PositiveIntegerField(default=0, help_text="data rows read from the file")
    counts = models.JSONField(default=dict, blank=True, help_text="what the load changed, by name")
    error = models.TextField(blank=True)
    error_line = models.PositiveIntegerField(null=True, blank=True, help_text="1-based line of the file")
    error_column = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # the confirmation a weakening load waits for
    preview = models.JSONField(
        default=dict, blank=True, help_text="weakenings: counts by change, total, the first 50 items"
    )
    preview_version = models.PositiveIntegerField(
        null=True, blank=True, help_text="the run's ledger version the preview was computed on"
    )
    preview_list = models.BinaryField(
        blank=True, editable=False, help_text="every weakened item as CSV, zlib-compressed (the downloadable list)"
    )
    confirmed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    confirmed_at = models.DateTimeField(null=True, blank=True)
    confirmed_version = models.PositiveIntegerField(null=True, blank=True)
    confirm_reason = models.TextField(blank=True, help_text="why the person accepted the weakenings (or discarded)")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "kind", "number"],
                name="runs_workitemload_number_unique",
                violation_error_code="duplicate",
            ),
            models.CheckConstraint(
                condition=Q(confirmed_at__isnull=True) | (Q(confirmed_by__isnull=False) & ~Q(confirm_reason="")),
                name="runs_workitemload_confirm_reason",
                violation_error_code="reason_required",
            ),
            models.CheckConstraint(
                condition=~Q(status="awaiting_confirmation") | Q(preview_version__isnull=False),
                name="runs_workitemload_awaiting_preview",
                violation_error_code="preview_required",
            ),
            choices_check("runs_workitemload_kind_valid", "kind", _WorkItemLoadKind),
            choices_check("runs_workitemload_status_valid", "status", _WorkItemLoadStatus),
            choices_check("runs_workitemload_format_valid", "format", _WorkItemLoadFormat),
            models.CheckConstraint(
                condition=~Q(status="failed") | ~Q(error=""),
                name="runs_workitemload_failed_error",
                violation_error_code="error_required",
            ),
        ]
        indexes = [models.Index(fields=["run", "-created_at"], name="runs_wiload_run_idx")]

    def __str__(self) -> str:
        return f"{self.kind} load #{self.number} {self.public_id} ({self.status})"

    @property
    def label(self) -> str:
        """The load's name for people: "Destination export #2"."""
        return f"{self.get_kind_display()} #{self.number}"

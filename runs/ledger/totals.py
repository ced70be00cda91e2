"""A run's ledger totals, recomputed with one aggregate and stored on the run."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, F, Q
from django.utils import timezone

from runs.attempts.models import Run
from runs.ledger.models import WorkItem, WorkItemLoad


@dataclass
class RunTotals:
    """A run's ledger totals (docs/architecture.md "Vocabulary": Run totals), with the parts of ``unresolved``."""

    eligible: int = 0
    attempted: int = 0
    completed: int = 0
    skipped: int = 0
    rejected: int = 0
    unresolved: int = 0
    unverified: int = 0
    absent: int = 0
    uncertain: int = 0
    possible_duplicates: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)

    @classmethod
    def stored_on(cls, run: Run) -> RunTotals:
        """The totals ``run_totals_refresh`` last stored on the run (its ``*_count`` columns)."""
        return cls(**{name: getattr(run, column) for name, column in _COLUMNS.items()})


# Each total and the Run column that stores it.
_COLUMNS = {
    "eligible": "eligible_count",
    "attempted": "attempted_count",
    "completed": "completed_count",
    "skipped": "skipped_count",
    "rejected": "rejected_count",
    "unresolved": "unresolved_count",
    "unverified": "unverified_count",
    "absent": "absent_count",
    "uncertain": "uncertain_count",
    "possible_duplicates": "possible_duplicate_count",
}


def destination_is_complete(run: Run) -> bool:
    """Whether any committed destination export of the run was declared complete for the window.

    Destination facts are the union of the exports: once one export vouched for the whole window,
    an eligible record no export lists is ``absent`` (docs/work-ledger.md "Loads").
    """
    return WorkItemLoad.objects.filter(
        run=run,
        kind=WorkItemLoad.Kind.DESTINATION,
        status=WorkItemLoad.Status.COMMITTED,
        is_destination_complete=True,
    ).exists()


def run_totals_refresh(*, run: Run) -> RunTotals:
    """Recompute the run's totals from its items (one aggregate) and store them on the run.

    Call inside the transaction of the load or change; it also raises the run's ``ledger_version``
    (every ledger write goes through here, so a preview computed on an older version is stale).
    Counts: eligible = in the population and
    not skipped; completed, rejected, unresolved (unverified + absent + uncertain) and attempted
    count eligible items only; possible duplicates count every flagged item. Sets
    ``run.ledger_updated_at``. Writes no timeline event (the caller's event carries the totals).
    """
    in_population = Q(is_in_population=True)
    counts = WorkItem.objects.filter(run=run).aggregate(
        eligible=Count("id", filter=in_population & ~Q(outcome=WorkItem.Outcome.SKIPPED)),
        attempted=Count("id", filter=in_population & Q(is_attempted=True) & ~Q(outcome=WorkItem.Outcome.SKIPPED)),
        completed=Count("id", filter=in_population & Q(outcome=WorkItem.Outcome.COMPLETED)),
        skipped=Count("id", filter=in_population & Q(outcome=WorkItem.Outcome.SKIPPED)),
        rejected=Count("id", filter=in_population & Q(outcome=WorkItem.Outcome.REJECTED)),
        unverified=Count("id", filter=in_population & Q(outcome=WorkItem.Outcome.UNVERIFIED)),
        absent=Count("id", filter=in_population & Q(outcome=WorkItem.Outcome.ABSENT)),
        uncertain=Count("id", filter=in_population & Q(outcome=WorkItem.Outcome.UNCERTAIN)),
        possible_duplicates=Count("id", filter=Q(is_possible_duplicate=True)),
    )
    totals = RunTotals(**counts, unresolved=counts["unverified"] + counts["absent"] + counts["uncertain"])
    now = timezone.now()
    fields: dict[str, object] = {column: getattr(totals, name) for name, column in _COLUMNS.items()}
    fields["ledger_updated_at"] = now
    Run.objects.filter(pk=run.pk).update(**fields, updated_at=now, ledger_version=F("ledger_version") + 1)
    for name, value in fields.items():
        setattr(run, name, value)
    run.ledger_version = Run.objects.filter(pk=run.pk).values_list("ledger_version", flat=True).get()
    return totals

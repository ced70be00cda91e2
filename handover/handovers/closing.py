"""The closing conditions of a handover (rule 6 in docs/architecture.md), each with the list of what is missing.

1. ``reconciled`` — each run has a work ledger and none of its items is ``unverified``, ``absent``
   or ``uncertain`` unless a residual exception of this handover covers it.
2. ``duplicates_explained`` — no possible duplicate is left without a residual exception covering it.
3. ``next_run_checked`` — each run's next-run check passed, or was waived with a checkpoint and owner.
4. ``exceptions_owned`` — every residual exception has a named owner and a due date.

Item-level rules read the ledger's ``WorkItem`` rows (set-based: counts per run and a short sample
of record ids, never a loop over items).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.db.models import Count, Exists, OuterRef, QuerySet

from handover.handovers.models import Handover, HandoverRun, ResidualException
from runs.attempts.models import Run
from runs.checks.models import NextRunCheck
from runs.ledger.models import WorkItem

SAMPLE_SIZE = 5
CONDITION_TITLES = {
    "reconciled": "The missing output is reconciled",
    "duplicates_explained": "No possible duplicate is unexplained",
    "next_run_checked": "The next-run check passed or was waived (checkpoint and owner)",
    "exceptions_owned": "Every residual exception has a named owner and a due date",
}
SETTLED_CHECK_STATUSES = (NextRunCheck.Status.PASSED, NextRunCheck.Status.WAIVED)


@dataclass
class ClosingCondition:
    """One closing condition: whether it holds, and what is missing when it does not."""

    key: str
    title: str
    missing: list[str] = field(default_factory=list)

    @property
    def is_met(self) -> bool:
        return not self.missing


def _at(value: datetime | None) -> str:
    return f"{value.astimezone(UTC):%Y-%m-%d %H:%M}Z" if value else "—"


def _label(run: Run, several: bool) -> str:
    return f" for {run.tenant.slug} / {run.environment}" if several else ""


def _uncovered(handover: Handover, items: QuerySet[WorkItem]) -> QuerySet[WorkItem]:
    covered = ResidualException.work_items.through.objects.filter(
        workitem_id=OuterRef("pk"), residualexception__handover_id=handover.pk
    )
    return items.filter(~Exists(covered))


def _item_lines(handover: Handover, runs: list[Run], items: QuerySet[WorkItem], what: str, advice: str) -> list[str]:
    """One line per run with uncovered items: the count and the first record ids. Queries: two."""
    several = len(runs) > 1
    uncovered = _uncovered(handover, items)
    counts = dict(uncovered.order_by().values("run_id").annotate(n=Count("id")).values_list("run_id", "n"))
    if not counts:
        return []
    samples: dict[int, list[str]] = {}
    for run_id, record_id in uncovered.order_by("run_id", "record_id").values_list("run_id", "record_id")[
        : SAMPLE_SIZE * len(counts)
    ]:
        samples.setdefault(run_id, [])
        if len(samples[run_id]) < SAMPLE_SIZE:
            samples[run_id].append(record_id)
    lines = []
    for run in runs:
        count = counts.get(run.pk)
        if not count:
            continue
        ids = samples.get(run.pk, [])
        more = f" and {count - len(ids):,} more" if count > len(ids) else ""
        lines.append(f"{count:,} {what}{_label(run, several)} ({', '.join(ids)}{more}): {advice}")
    return lines


def handover_closing_conditions(*, handover: Handover) -> list[ClosingCondition]:
    """Evaluate the four closing conditions of ``handover`` now, in the order of ``CONDITION_TITLES``.

    Each condition lists what is missing (empty when it holds). Reads only. Queries: at most
    seven (runs with their checks, two per item rule, the residual exceptions).
    """
    links = list(
        HandoverRun.objects.filter(handover=handover)
        .select_related("run__tenant", "next_run_check__waiver_owner")
        .order_by("id")
    )
    runs = [link.run for link in links]
    several = len(runs) > 1
    conditions = {key: ClosingCondition(key=key, title=title) for key, title in CONDITION_TITLES.items()}

    ledger_runs = [run for run in runs if run.ledger_updated_at is not None]
    for run in runs:
        if run.ledger_updated_at is None:
            conditions["reconciled"].missing.append(
                f"No work ledger{_label(run, several)}: load the eligible population and the destination export"
                " to show what reached the destination."
            )
    if ledger_runs:
        conditions["reconciled"].missing.extend(
            _item_lines(
                handover,
                ledger_runs,
                WorkItem.objects.filter(run__in=ledger_runs, outcome__in=WorkItem.UNRESOLVED),
                "item(s) unverified, absent or uncertain",
                "settle them, or record them as a residual exception with an owner.",
            )
        )
    # Duplicates: the items when there is a ledger, else the stored total.
    conditions["duplicates_explained"].missing.extend(
        _item_lines(
            handover,
            ledger_runs,
            WorkItem.objects.filter(run__in=ledger_runs, is_possible_duplicate=True),
            "possible duplicate(s) unexplained",
            "explain each in a residual exception.",
        )
        if ledger_runs
        else []
    )
    for run in runs:
        if run.ledger_updated_at is None and run.possible_duplicate_count:
            conditions["duplicates_explained"].missing.append(
                f"{run.possible_duplicate_count:,} possible duplicate(s){_label(run, several)} unexplained."
            )

    for link in links:
        check = link.next_run_check
        label = _label(link.run, several)
        if check is None:
            conditions["next_run_checked"].missing.append(
                f"No next-run check{label}: move the handover to verifying to schedule one."
            )
        elif check.status == NextRunCheck.Status.SCHEDULED:
            conditions["next_run_checked"].missing.append(
                f"The next-run check{label} has not passed yet (expected {_at(check.expected_at)},"
                f" deadline {_at(check.deadline_at)})."
            )
        elif check.status == NextRunCheck.Status.FAILED:
            conditions["next_run_checked"].missing.append(
                f"The next-run check{label} failed: {check.result_summary or check.failure_reason}"
            )
        elif check.status == NextRunCheck.Status.WAIVED and (
            check.waiver_owner_id is None or check.waiver_checkpoint is None
        ):
            conditions["next_run_checked"].missing.append(
                f"The next-run check{label} was waived without a checkpoint and owner."
            )

    for exception in ResidualException.objects.filter(handover=handover).order_by("created_at", "id"):
        text = exception.description[:80] + ("…" if len(exception.description) > 80 else "")
        if exception.owner_id is None:
            conditions["exceptions_owned"].missing.append(f"Residual exception “{text}” has no named owner.")
        if exception.due_date is None:
            conditions["exceptions_owned"].missing.append(f"Residual exception “{text}” has no due date.")
    return list(conditions.values())


def handover_closing_missing(*, handover: Handover) -> list[str]:
    """Everything that keeps ``handover`` from closing, as sentences (empty when it may close)."""
    return [line for condition in handover_closing_conditions(handover=handover) for line in condition.missing]


def handover_checks_settled(*, handover: Handover) -> bool:
    """Whether every run of ``handover`` has a next-run check that passed or was waived. Queries: one."""
    statuses = list(HandoverRun.objects.filter(handover=handover).values_list("next_run_check__status", flat=True))
    return bool(statuses) and all(status in SETTLED_CHECK_STATUSES for status in statuses)

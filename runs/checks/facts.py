"""The facts about checks, set-based: the run for each fire time, its qualifying success, its
ledger; and the evidence of checks awaiting a person's confirmation."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.apps import apps
from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from handover.core.errors import InvalidTransition
from runs.attempts.models import Attempt, Run
from runs.checks.evaluation import CheckFacts, CheckVerdict
from runs.checks.events import check_event_build
from runs.checks.models import NextRunCheck
from runs.checks.transitions import CheckChange, checks_update_each
from runs.timeline.models import TimelineEvent
from runs.timeline.services import timeline_events_record


def _runs_for_check() -> QuerySet[Run]:
    """The run for a check's expected fire time (correlated on the outer check row).

    Found by its scheduled time, or by its identity window (a payload's own window may differ
    from the derived one, but it then names the same scheduled time).
    """
    return Run.objects.filter(
        job_id=OuterRef("target__job_id"),
        tenant_id=OuterRef("target__tenant_id"),
        environment=OuterRef("target__environment"),
    ).filter(
        Q(scheduled_for=OuterRef("expected_at"))
        | Q(window_start=OuterRef("window_start"), window_end=OuterRef("window_end"))
    )


def _qualifying_successes(run_ref: OuterRef) -> QuerySet[Attempt]:
    """Succeeded, schedule-triggered attempts of a run whose success came through a key bound to its tenant.

    Rule 7 (docs/architecture.md): the ``attempt_succeeded`` timeline event names the alert that reported the
    success; that alert's delivery key must be bound to the run's tenant (or to all tenants, an
    admin's explicit choice). Earliest success first.
    """
    bound = TimelineEvent.objects.filter(attempt_id=OuterRef("pk"), kind=TimelineEvent.Kind.ATTEMPT_SUCCEEDED).filter(
        Q(alert__delivery__key__all_tenants=True) | Q(alert__delivery__key__tenants=OuterRef("run__tenant_id"))
    )
    return (
        Attempt.objects.filter(run_id=run_ref, status=Attempt.Status.SUCCEEDED, trigger=Attempt.Trigger.SCHEDULED)
        .filter(Exists(bound))
        .annotate(success_at=Coalesce("ended_at", "status_changed_at", "created_at"))
        .order_by("success_at", "id")
    )


def _ledger_exists(run_ref: OuterRef) -> Exists | Value:
    """Whether the run has work items (the ledger); False while the ledger model does not exist."""
    try:
        work_item = apps.get_model("runs", "WorkItem")
    except LookupError:
        return Value(False)
    return Exists(work_item.objects.filter(run_id=run_ref))


def _unexplained_duplicate_triggers(run_ref: OuterRef) -> QuerySet[Attempt]:
    """A run's attempts flagged as duplicate triggers that no person has explained yet, by number."""
    return Attempt.objects.filter(
        run_id=run_ref, is_duplicate_trigger=True, duplicate_explained_at__isnull=True
    ).order_by("number")


def checks_with_next_run(checks: QuerySet[NextRunCheck]) -> QuerySet[NextRunCheck]:
    """Annotate each check with the run for its fire time (``found_run_id``), whether an attempt
    of its recovered run is still queued (``has_stale_retry``) and the number of the recovered
    run's first unexplained duplicate trigger (``recovered_duplicate_number``, None without one)."""
    return checks.annotate(
        found_run_id=Subquery(_runs_for_check().order_by("id").values("pk")[:1]),
        has_stale_retry=Exists(
            Attempt.objects.filter(run_id=OuterRef("recovered_run_id"), status=Attempt.Status.QUEUED)
        ),
        recovered_duplicate_number=Subquery(
            _unexplained_duplicate_triggers(OuterRef("recovered_run_id")).values("number")[:1]
        ),
    )


@dataclass(frozen=True)
class _RunEvidence:
    success_attempt_id: int | None
    success_at: datetime | None
    has_ledger: bool
    possible_duplicate_count: int
    duplicate_trigger_number: int | None = None


def run_evidence(run_ids: Iterable[int]) -> dict[int, _RunEvidence]:
    """One set query: each run's earliest qualifying success, whether it has a ledger, its duplicates
    and its first unexplained duplicate trigger.

    Kept apart from the check query on purpose: referring to the found run from several subqueries
    of one query would inline its lookup into each of them, which is slow to compile and to run.
    """
    ids = {pk for pk in run_ids if pk is not None}
    if not ids:
        return {}
    rows = (
        Run.objects.filter(pk__in=ids)
        .annotate(
            success_attempt_id=Subquery(_qualifying_successes(OuterRef("pk")).values("pk")[:1]),
            success_at=Subquery(_qualifying_successes(OuterRef("pk")).values("success_at")[:1]),  # type: ignore[misc]  # an annotation of the subquery; the plugin sees only model fields
            has_ledger=_ledger_exists(OuterRef("pk")),
            duplicate_trigger_number=Subquery(_unexplained_duplicate_triggers(OuterRef("pk")).values("number")[:1]),
        )
        .values_list(
            "pk",
            "success_attempt_id",
            "success_at",
            "has_ledger",
            "possible_duplicate_count",
            "duplicate_trigger_number",
        )
    )
    return {
        pk: _RunEvidence(attempt_id, success_at, bool(ledger), duplicates or 0, duplicate_number)
        for pk, attempt_id, success_at, ledger, duplicates, duplicate_number in rows
    }


NO_RUN = _RunEvidence(None, None, False, 0)


def check_facts(row: NextRunCheck, evidence: dict[int, _RunEvidence], now: datetime) -> CheckFacts:
    run_id = row.found_run_id  # type: ignore[attr-defined]
    found = evidence.get(run_id, NO_RUN) if run_id is not None else NO_RUN
    return CheckFacts(
        now=now,
        expected_at=row.expected_at,
        deadline_at=row.deadline_at,
        next_run_id=run_id,
        success_attempt_id=found.success_attempt_id,
        success_at=found.success_at,
        has_ledger=found.has_ledger,
        possible_duplicate_count=found.possible_duplicate_count,
        stale_retry_queued=bool(row.has_stale_retry),  # type: ignore[attr-defined]
        next_run_duplicate_trigger=found.duplicate_trigger_number,
        recovered_run_duplicate_trigger=row.recovered_duplicate_number,  # type: ignore[attr-defined]
        is_confirmed=row.confirmed_at is not None,
    )


def next_run_check_facts(*, check: NextRunCheck, now: datetime | None = None) -> CheckFacts:
    """The facts about one check now (two queries); for pages and the confirm action."""
    row = checks_with_next_run(NextRunCheck.objects.filter(pk=check.pk)).get()
    return check_facts(row, run_evidence([row.found_run_id]), now or timezone.now())  # type: ignore[attr-defined]


def check_change(row: NextRunCheck, verdict: CheckVerdict, facts: CheckFacts) -> CheckChange:
    return CheckChange(
        check=row,
        summary=verdict.summary,
        values=verdict.values(facts),
        data={"reasons": list(verdict.reasons), "duplicate_check": verdict.duplicate_check},
    )


def checks_record_awaiting(items: Sequence[tuple[NextRunCheck, CheckVerdict, CheckFacts]], now: datetime) -> None:
    """Keep the in-time success of checks whose next run has no ledger: evidence, not a status change.

    One bulk UPDATE guarded on the checks still being scheduled without evidence, and one INSERT of
    their ``next_run_check_awaiting_confirmation`` events; call with the rows the claim holds.
    """
    if not items:
        return
    meta = NextRunCheck._meta
    names = {"updated_at"}
    rows = []
    for row, verdict, facts in items:
        for name, value in verdict.values(facts).items():
            names.add(meta.get_field(name).name)
            setattr(row, name, value)
        row.updated_at = now
        rows.append(row)
    updated = checks_update_each(rows, names, statuses=[NextRunCheck.Status.SCHEDULED], without_evidence=True)
    if updated != len(rows):  # only if a row escaped the claim's lock; undo the batch
        raise InvalidTransition("A claimed next-run check changed during the sweep.")
    timeline_events_record(
        [
            check_event_build(
                row,
                kind=TimelineEvent.Kind.NEXT_RUN_CHECK_AWAITING_CONFIRMATION,
                summary=verdict.summary,
                occurred_at=now,
                data={"duplicate_check": verdict.duplicate_check},
            )
            for row, verdict, _ in items
        ]
    )

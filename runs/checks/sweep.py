"""The sweep (Celery beat, every minute): find due checks with one set-based query, settle them in
short claim transactions, then record late successes of checks that failed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from runs.attempts.models import Attempt, Run
from runs.catalog.models import JobTarget
from runs.checks.evaluation import CheckFacts, CheckVerdict, next_run_check_evaluate
from runs.checks.events import check_event_record, utc_text
from runs.checks.facts import (
    NO_RUN,
    check_change,
    check_facts,
    checks_record_awaiting,
    checks_with_next_run,
    run_evidence,
)
from runs.checks.models import NextRunCheck
from runs.checks.skipped_slots import next_run_checks_move_off_skipped
from runs.checks.transitions import CheckChange, next_run_check_transition
from runs.timeline.models import TimelineEvent


@dataclass
class SweepResult:
    """What one sweep did. ``due``: checks found due; ``skipped``: due checks another sweep held or settled."""

    due: int = 0
    passed: int = 0
    failed: int = 0
    awaiting_confirmation: int = 0
    waiting: int = 0
    skipped: int = 0
    late_successes: int = 0
    moved: int = 0


def due_check_ids(now: datetime, limit: int) -> list[int]:
    """One set-based query: scheduled checks past their deadline, or whose next run has a success.

    The success test here is a cheap superset (any scheduled success of the run); the claim
    re-reads the exact facts. Served by ``runs_check_due_idx`` (scheduled, no evidence yet).
    """
    any_success = Attempt.objects.filter(
        run__job_id=OuterRef("target__job_id"),
        run__tenant_id=OuterRef("target__tenant_id"),
        run__environment=OuterRef("target__environment"),
        status=Attempt.Status.SUCCEEDED,
        trigger=Attempt.Trigger.SCHEDULED,
    ).filter(
        Q(run__scheduled_for=OuterRef("expected_at"))
        | Q(run__window_start=OuterRef("window_start"), run__window_end=OuterRef("window_end"))
    )
    return list(
        NextRunCheck.objects.filter(
            status=NextRunCheck.Status.SCHEDULED, evidence_attempt__isnull=True, expected_at__lte=now
        )
        .filter(Q(deadline_at__lte=now) | Exists(any_success))
        .order_by("deadline_at", "id")
        .values_list("pk", flat=True)[:limit]
    )


# The columns the sweep reads or writes on a claimed check; the rest stay unloaded (a batch of
# checks with every column costs more to build than to settle).
_CLAIM_FIELDS = (
    "id",
    "public_id",
    "target_id",
    "recovered_run_id",
    "expected_at",
    "deadline_at",
    "status",
    "confirmed_at",
)


def _claim(ids: Sequence[int]) -> list[NextRunCheck]:
    """Lock the still-due rows of ``ids`` with their facts; call inside the claim transaction.

    PostgreSQL: ``FOR UPDATE OF`` the check rows only, ``SKIP LOCKED``, so a concurrent sweep
    takes the other rows instead of waiting. SQLite ignores the clause: its immediate transaction
    already holds the one write lock, and the guarded UPDATEs decide anyway. The rows' targets
    (with job and tenant) and recovered runs come from one query each, shared by the batch.
    """
    rows = list(
        checks_with_next_run(
            NextRunCheck.objects.filter(
                pk__in=list(ids), status=NextRunCheck.Status.SCHEDULED, evidence_attempt__isnull=True
            )
        )
        .only(*_CLAIM_FIELDS)
        .select_for_update(skip_locked=True, of=("self",))
        .order_by("pk")
    )
    if not rows:
        return rows
    targets = JobTarget.objects.select_related("job", "tenant").in_bulk({row.target_id for row in rows})
    recovered_ids = {row.recovered_run_id for row in rows if row.recovered_run_id}
    recovered = Run.objects.in_bulk(recovered_ids) if recovered_ids else {}
    for row in rows:
        row.target = targets[row.target_id]
        if row.recovered_run_id:
            row.recovered_run = recovered[row.recovered_run_id]
    return rows


def next_run_check_sweep(*, now: datetime | None = None, limit: int = 20_000, batch_size: int = 100) -> SweepResult:
    """Settle every due next-run check, then record late successes of checks that failed.

    First, checks whose slot the job's policy skipped move to the slot that ran, or wait for it
    (``next_run_checks_move_off_skipped``). One query finds the due checks (scheduled, past the
    deadline or with a success of the next run); each batch of ``batch_size`` ids is claimed in one
    short transaction that locks the rows and
    reads their facts (one query), evaluates each (``next_run_check_evaluate``) and writes the
    outcomes: per batch one guarded UPDATE and one INSERT of timeline events for the passes, the
    same for the failures and for the checks now awaiting a person's confirmation. Safe to run
    twice or concurrently: locked rows are skipped, settled rows no longer match, and every write
    is guarded on the status.
    Side effects: check transitions and timeline events; a failed check is left in the follow-up
    outbox (``failure_notified_at`` empty) the handover app sweeps. Returns a ``SweepResult``.
    """
    now = now or timezone.now()
    result = SweepResult()
    skipped_slots = next_run_checks_move_off_skipped(now=now)
    result.moved = skipped_slots.moved
    ids = due_check_ids(now, limit)
    result.due = len(ids)
    for start in range(0, len(ids), batch_size):
        chunk = ids[start : start + batch_size]
        with transaction.atomic():
            if connection.vendor == "postgresql":
                # A batch's outcome is recomputed from the database by the next tick, so it need not
                # wait for its WAL flush: a crash can lose only the last batches (never part of one),
                # which the next sweep settles again; their follow-up task then finds no failed check.
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL synchronous_commit TO OFF")
            rows = _claim(chunk)
            result.skipped += len(chunk) - len(rows)
            evidence = run_evidence(row.found_run_id for row in rows)  # type: ignore[attr-defined]
            passing: list[CheckChange] = []
            failing: list[CheckChange] = []
            awaiting: list[tuple[NextRunCheck, CheckVerdict, CheckFacts]] = []
            for row in rows:
                if row.pk in skipped_slots.held:  # its slot was skipped by policy: it waits for the slot that runs
                    result.waiting += 1
                    continue
                facts = check_facts(row, evidence, now)
                verdict = next_run_check_evaluate(facts)
                if verdict.action == "pass":
                    passing.append(check_change(row, verdict, facts))
                elif verdict.action == "fail":
                    failing.append(check_change(row, verdict, facts))
                elif verdict.action == "await_confirmation":
                    awaiting.append((row, verdict, facts))
                else:
                    result.waiting += 1
            next_run_check_transition(action="pass", changes=passing, at=now)
            next_run_check_transition(action="fail", changes=failing, at=now)
            checks_record_awaiting(awaiting, now)
        result.passed += len(passing)
        result.failed += len(failing)
        result.awaiting_confirmation += len(awaiting)
    result.late_successes = _record_late_successes(now)
    return result


LATE_SUCCESS_LOOKBACK = timedelta(days=30)


def _record_late_successes(now: datetime) -> int:
    """Keep a success that came after a check failed for want of one: evidence, not a pass.

    Two set queries: checks failed with ``deadline_passed`` in the last 30 days without a late
    success whose fire time now has a run (served by ``runs_check_late_idx``), then those runs'
    qualifying successes. Each found is written with an UPDATE guarded on ``late_success_attempt``
    being empty, so concurrent sweeps record it once.
    """
    rows = list(
        checks_with_next_run(
            NextRunCheck.objects.filter(
                status=NextRunCheck.Status.FAILED,
                failure_reason=NextRunCheck.FailureReason.DEADLINE_PASSED,
                late_success_attempt__isnull=True,
                failed_at__gte=now - LATE_SUCCESS_LOOKBACK,
            )
        )
        .filter(found_run_id__isnull=False)  # type: ignore[misc]  # an annotation (checks_with_next_run) the plugin cannot see
        .select_related("target__job", "target__tenant", "recovered_run")
    )
    evidence = run_evidence(row.found_run_id for row in rows)  # type: ignore[attr-defined]
    recorded = 0
    for row in rows:
        found = evidence.get(row.found_run_id, NO_RUN)  # type: ignore[attr-defined]
        if found.success_attempt_id is None:
            continue
        with transaction.atomic():
            updated = NextRunCheck.objects.filter(pk=row.pk, late_success_attempt__isnull=True).update(
                late_success_attempt_id=found.success_attempt_id,
                late_success_at=found.success_at,
                next_run_id=row.found_run_id,  # type: ignore[attr-defined]
                updated_at=timezone.now(),
            )
            if updated:
                check_event_record(
                    row,
                    kind=TimelineEvent.Kind.NEXT_RUN_CHECK_LATE_SUCCESS,
                    summary=f"The next run succeeded at {utc_text(found.success_at)}, after the check failed "
                    f"(deadline {utc_text(row.deadline_at)}): kept as evidence, the check stays failed",
                    occurred_at=now,
                )
                recorded += 1
    return recorded

"""The failure class of a run: suggested from the ledger's evidence, confirmed by a person."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from handover.core.errors import DomainError
from runs.attempts.models import Attempt, Run
from runs.ledger.common import FAILURE_CLASS_WORDS, User, run_ledger_require_writer
from runs.ledger.models import WorkItemLoad
from runs.ledger.totals import RunTotals
from runs.timeline.models import TimelineEvent
from runs.timeline.services import timeline_event_record


def failure_class_for(
    *,
    run_status: str,
    totals: RunTotals,
    attempts: list[tuple[str, bool]],
    has_runner_report: bool,
) -> tuple[str, str]:
    """Suggest a failure class from the evidence: ``(class, reason)``; ``("", reason)`` for a succeeded run.

    ``attempts``: ``(status, has_started)`` per attempt, oldest first. Rules, first match wins:
    every eligible record completed while the run failed → ``completed_ack_lost``; nothing completed
    and no attempt started → ``never_started``; an attempt started but the runner reported no record
    attempted and nothing completed → ``failed_in_preparation``; some but not all completed →
    ``partially_committed``; otherwise ``undetermined``.
    """
    if run_status == Run.Status.SUCCEEDED:
        return "", "the run succeeded"
    started = any(has_started for _, has_started in attempts)
    if totals.eligible and totals.completed == totals.eligible:
        return Run.FailureClass.COMPLETED_ACK_LOST, (
            f"all {totals.eligible:,} eligible records are in the destination, yet the run failed"
        )
    if totals.completed == 0 and not started:
        return Run.FailureClass.NEVER_STARTED, "no attempt started and no record is in the destination"
    if totals.completed == 0 and totals.attempted == 0 and has_runner_report and totals.uncertain == 0:
        return Run.FailureClass.FAILED_IN_PREPARATION, (
            "an attempt started, but the runner reported no record attempted and none is in the destination"
        )
    if totals.completed > 0:
        return Run.FailureClass.PARTIALLY_COMMITTED, (
            f"{totals.completed:,} of {totals.eligible:,} eligible records are in the destination"
        )
    return Run.FailureClass.UNDETERMINED, "the evidence does not decide it yet"


def _attempt_facts(run: Run) -> list[tuple[str, bool]]:
    started_statuses = {Attempt.Status.RUNNING, Attempt.Status.SUCCEEDED, Attempt.Status.TIMED_OUT}
    return [
        (status, started_at is not None or status in started_statuses)
        for status, started_at in run.attempts.order_by("number", "id").values_list("status", "started_at")
    ]


def run_failure_class_suggest(*, run: Run, totals: RunTotals | None = None, actor: User | None = None) -> Run:
    """Refresh the run's suggested failure class; when it changes, write a ``failure_class_suggested`` event.

    Call inside a transaction. ``totals`` defaults to the run's stored totals. The event's actor is
    the system (the suggestion is the app's); ``actor`` is recorded in its data when given.
    """
    if totals is None:
        totals = RunTotals.stored_on(run)
    has_report = WorkItemLoad.objects.filter(
        run=run, kind=WorkItemLoad.Kind.RUNNER_REPORT, status=WorkItemLoad.Status.COMMITTED
    ).exists()
    suggested, reason = failure_class_for(
        run_status=run.status, totals=totals, attempts=_attempt_facts(run), has_runner_report=has_report
    )
    if suggested == run.failure_class_suggested:
        return run
    previous = run.failure_class_suggested
    Run.objects.filter(pk=run.pk).update(failure_class_suggested=suggested)
    run.failure_class_suggested = suggested
    summary = (
        f"Suggested failure class: {FAILURE_CLASS_WORDS[suggested].lower()} ({reason}); a person confirms it"
        if suggested
        else f"Failure class suggestion withdrawn ({reason})"
    )
    timeline_event_record(
        job=run.job,
        run=run,
        kind=TimelineEvent.Kind.FAILURE_CLASS_SUGGESTED,
        summary=summary,
        data={
            "suggested": suggested,
            "previous": previous,
            "reason": reason,
            "requested_by": actor.get_username() if actor is not None and actor.is_authenticated else None,
        },
    )
    return run


def run_failure_class_confirm(*, actor: User, run: Run, failure_class: str, note: str = "") -> Run:
    """Record a person's confirmation of the run's failure class, with a ``failure_class_confirmed`` event.

    ``failure_class``: one of ``Run.FailureClass``. A class other than the suggestion needs a
    ``note`` saying why. Raises NotFound / LedgerPermissionDenied (see ``work_item_loads_create``),
    DomainError (400) for an unknown class or a missing note. Returns the run.
    """
    run_ledger_require_writer(actor=actor, run=run)
    if failure_class not in Run.FailureClass.values:
        raise DomainError(
            f"{failure_class!r} is not a failure class ({', '.join(Run.FailureClass.values)}).",
            errors={"failure_class": ["unknown failure class"]},
        )
    note = note.strip()
    with transaction.atomic():
        locked = Run.objects.select_for_update().select_related("job", "tenant").get(pk=run.pk)
        if failure_class != locked.failure_class_suggested and not note:
            suggested = locked.failure_class_suggested or "none"
            raise DomainError(
                f"The app suggests {suggested}; say why you confirm {failure_class} instead.",
                errors={"note": ["required when the class differs from the suggestion"]},
            )
        now = timezone.now()
        Run.objects.filter(pk=run.pk).update(
            failure_class=failure_class,
            failure_class_confirmed_by=actor,
            failure_class_confirmed_at=now,
            updated_at=now,
        )
        summary = f"Failure class confirmed: {FAILURE_CLASS_WORDS[failure_class].lower()}"
        if locked.failure_class_suggested and locked.failure_class_suggested != failure_class:
            summary += f" (suggested: {FAILURE_CLASS_WORDS[locked.failure_class_suggested].lower()})"
        if note:
            summary += f" — {note}"
        timeline_event_record(
            job=locked.job,
            run=locked,
            kind=TimelineEvent.Kind.FAILURE_CLASS_CONFIRMED,
            summary=summary,
            actor=actor,  # type: ignore[arg-type]
            data={
                "failure_class": failure_class,
                "previous": locked.failure_class,
                "suggested": locked.failure_class_suggested,
                "note": note,
            },
        )
    run.failure_class, run.failure_class_confirmed_by, run.failure_class_confirmed_at = failure_class, actor, now  # type: ignore[assignment]
    return run

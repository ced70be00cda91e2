"""Attempts and the run status derived from them: the only code that assigns either ``status``.

Transition table: ``Attempt.TRANSITIONS`` (queued -> running -> succeeded | failed | timed_out, or
abandoned). Terminal states never move back; a late earlier-state report is *stale*, not an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models.functions import Coalesce
from django.utils import timezone

from handover.core.errors import InvalidTransition
from handover.core.people import Person
from handover.core.transitions import Transitioned, transition
from runs.alerts.models import Alert
from runs.attempts.details import CHANGEABLE_FIELDS, AttemptDetails
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Integration
from runs.checks.overlaps import attempt_overlap_record
from runs.permissions import require_act_on_run
from runs.timeline.models import TimelineEvent
from runs.timeline.services import timeline_event_build, timeline_event_record

RUN_STATUS_FOR_ATTEMPT = {
    Attempt.Status.QUEUED: Run.Status.RUNNING,
    Attempt.Status.RUNNING: Run.Status.RUNNING,
    Attempt.Status.SUCCEEDED: Run.Status.SUCCEEDED,
    Attempt.Status.FAILED: Run.Status.FAILED,
    Attempt.Status.TIMED_OUT: Run.Status.FAILED,
    Attempt.Status.CANCELLED: Run.Status.FAILED,
    Attempt.Status.ABANDONED: Run.Status.FAILED,
}
# Statuses only attempts give a run; ``expected``/``missed`` are the schedule sweep's.
ATTEMPT_MADE_STATUSES = frozenset(RUN_STATUS_FOR_ATTEMPT.values())

# The timeline event an attempt's new status writes.
ATTEMPT_EVENT_KINDS = {
    Attempt.Status.QUEUED: TimelineEvent.Kind.ATTEMPT_QUEUED,
    Attempt.Status.RUNNING: TimelineEvent.Kind.ATTEMPT_RUNNING,
    Attempt.Status.SUCCEEDED: TimelineEvent.Kind.ATTEMPT_SUCCEEDED,
    Attempt.Status.FAILED: TimelineEvent.Kind.ATTEMPT_FAILED,
    Attempt.Status.TIMED_OUT: TimelineEvent.Kind.ATTEMPT_TIMED_OUT,
    Attempt.Status.CANCELLED: TimelineEvent.Kind.ATTEMPT_CANCELLED,
    Attempt.Status.ABANDONED: TimelineEvent.Kind.ATTEMPT_ABANDONED,
}
STATUS_WORDS = {
    "queued": "queued",
    "running": "running",
    "succeeded": "succeeded",
    "failed": "failed",
    "timed_out": "timed out",
    "cancelled": "cancelled",
    "abandoned": "abandoned",
}


@dataclass
class AttemptReportResult:
    """The attempt, and what the report did: ``created``, ``changed`` (status moved) or ``stale``."""

    attempt: Attempt
    created: bool
    changed: bool
    stale: bool


def _event_time(report: AttemptDetails, fallback: datetime) -> datetime:
    if report.status in Attempt.TERMINAL and report.ended_at:
        return report.ended_at
    if report.status == Attempt.Status.RUNNING and report.started_at:
        return report.started_at
    if report.status == Attempt.Status.QUEUED and report.scheduled_at:
        return report.scheduled_at
    return fallback


def attempt_label(attempt: Attempt) -> str:
    """ "Attempt 3 · source #2" (Handover's ordinal, and the source's number when it differs)."""
    text = f"Attempt {attempt.number}"
    if attempt.source_number is not None and attempt.source_number != attempt.number:
        text += f" · source #{attempt.source_number}"
    return text


def _attempt_summary(attempt: Attempt, status: str) -> str:
    text = f"{attempt_label(attempt)} ({attempt.execution_id}) {STATUS_WORDS.get(status, status)}"
    if status == Attempt.Status.QUEUED and attempt.scheduled_at:
        text += f" for {attempt.scheduled_at.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z"
    if attempt.error_summary and status in (Attempt.Status.FAILED, Attempt.Status.TIMED_OUT):
        text += f": {attempt.error_summary[:200]}"
    return text


def run_status_refresh(*, run: Run) -> Run:
    """Set ``run.status`` from its latest attempt that is not a duplicate trigger.

    Latest by start time, else scheduled time, else first report; ties by ``number``. A run with no
    such attempt keeps its status (the schedule sweep sets ``expected``/``missed``), except a run
    left with no attempt at all (its only attempt was re-placed onto another slot), whose
    attempt-made status goes back to ``expected`` for the sweep to judge again. Writes no timeline
    event: the attempt's own event (or the re-placing's) already says what changed.
    """
    latest = (
        run.attempts.filter(is_duplicate_trigger=False)
        .annotate(placed_at=Coalesce("started_at", "scheduled_at", "created_at"))
        .order_by("-placed_at", "-number")
        .first()
    )
    if latest is not None:
        status = RUN_STATUS_FOR_ATTEMPT[Attempt.Status(latest.status)]
    elif run.status in ATTEMPT_MADE_STATUSES and not run.attempts.exists():
        status = Run.Status.EXPECTED
    else:
        return run
    if run.status != status:
        now = timezone.now()
        Run.objects.filter(pk=run.pk).update(status=status, status_changed_at=now, updated_at=now)
        run.status, run.status_changed_at = status, now
    return run


def attempt_report_apply(
    *,
    run: Run,
    report: AttemptDetails,
    received_at: datetime,
    occurred_at: datetime | None = None,
    alert: Alert | None = None,
    actor_integration: Integration | None = None,
    data: dict[str, Any] | None = None,
) -> AttemptReportResult:
    """Create the attempt a report names, or move it along its transition table.

    Must run inside a transaction; takes the run's row lock first. A new attempt is numbered
    1 + the run's attempts, keeps the source's number as ``source_number``, gets its trigger from
    ``trigger_decide`` (a duplicate trigger is flagged and explained on the timeline) and is
    created directly in the reported status; an
    existing one moves only forward (``Attempt.TRANSITIONS``); a report of the status it already
    has fills in missing details and records changed ones (``attempt_details_change``); an
    earlier-state report on a terminal
    or later attempt is stale. Each status change writes one timeline event; the run's status is
    refreshed by the caller (``run_status_refresh``) once all reports of an alert are applied.
    An event's time is the report's own (end, start or scheduled time for the status), else
    ``occurred_at`` (when the source says the reported thing happened), else ``received_at``.
    An attempt that starts running records any overlap with an earlier run of its target
    (``runs.checks.overlaps.attempt_overlap_record``).
    """
    fallback = occurred_at or received_at
    # The run's row lock orders every report on it: the ordinal and the duplicate-trigger decision
    # read the attempts already there, so two scheduler instances posting one slot at once are decided
    # one after the other (the later one sees the earlier one).
    Run.objects.select_for_update().filter(pk=run.pk).values_list("pk", flat=True).first()
    earlier = list(Attempt.objects.filter(run=run).order_by("number"))
    attempt = next((a for a in earlier if a.execution_id == report.execution_id), None)
    if attempt is None:
        attempt = attempt_build(run=run, report=report, received_at=received_at, earlier=earlier)
        attempt.save(force_insert=True)
        attempt_created_event_build(
            attempt=attempt,
            report=report,
            fallback=fallback,
            alert=alert,
            actor_integration=actor_integration,
            data=data,
        ).save(force_insert=True)
        if attempt.is_duplicate_trigger:
            duplicate_trigger_record(attempt=attempt, alert=alert, actor_integration=actor_integration, at=fallback)
        if attempt.source_number is not None:
            same = [a for a in earlier if source_number_lineage(a) == source_number_lineage(attempt)]
            if same:
                source_number_repeated_record(
                    attempt=attempt, others=same, alert=alert, actor_integration=actor_integration, at=fallback
                )
        if report.status == Attempt.Status.RUNNING:
            attempt_overlap_record(attempt=attempt, occurred_at=_event_time(report, fallback))
        return AttemptReportResult(attempt=attempt, created=True, changed=True, stale=False)

    changed = stale = False
    if report.status != attempt.status:
        allowed_from, target = Attempt.TRANSITIONS[Attempt.ACTION_FOR_STATUS[Attempt.Status(report.status)]]
        if attempt.status in allowed_from:
            attempt = attempt_transition(
                attempt=attempt,
                status=target,
                at=received_at,
                details=report,
                alert=alert,
                actor_integration=actor_integration,
                occurred_at=_event_time(report, fallback),
                data=data,
            ).obj
            changed = True
        else:
            stale = True
    if not stale:
        _fill_missing_details(attempt, report)
        if not changed:
            attempt_details_change(
                attempt=attempt, report=report, alert=alert, actor_integration=actor_integration, at=fallback
            )
    return AttemptReportResult(attempt=attempt, created=False, changed=changed, stale=stale)


def attempt_build(*, run: Run, report: AttemptDetails, received_at: datetime, earlier: list[Attempt]) -> Attempt:
    """A new attempt of ``run``, unsaved: numbered 1 + the run's attempts (``earlier``, read under the run's
    row lock; ``[]`` for a run created in the caller's transaction), its trigger decided against the slot's
    earlier executions (``trigger_decide``), in the reported status since ``received_at`` (UTC)."""
    trigger, inferred, duplicate = trigger_decide(report=report, earlier=earlier)
    return Attempt(
        run=run,
        number=max((a.number for a in earlier), default=0) + 1,
        trigger=trigger,
        is_trigger_inferred=inferred,
        is_duplicate_trigger=duplicate,
        status_changed_at=received_at,
        **report.as_model_fields(),
    )


def attempt_created_event_build(
    *,
    attempt: Attempt,
    report: AttemptDetails,
    fallback: datetime,
    alert: Alert | None = None,
    actor_integration: Integration | None = None,
    data: dict[str, Any] | None = None,
) -> TimelineEvent:
    """The unsaved timeline event of a new attempt in its reported status (``attempt_failed``, ...), at the
    report's own time for that status, else ``fallback`` (UTC; see ``attempt_report_apply``)."""
    run = attempt.run
    return timeline_event_build(
        job=run.job,
        run=run,
        attempt=attempt,
        alert=alert,
        kind=ATTEMPT_EVENT_KINDS[Attempt.Status(report.status)],
        summary=_attempt_summary(attempt, report.status),
        occurred_at=_event_time(report, fallback),
        actor_integration=actor_integration,
        data=data,
    )


SCHEDULE_STARTED = frozenset({Attempt.Trigger.SCHEDULED, Attempt.Trigger.CATCH_UP})
RETRY_AFTER = frozenset({Attempt.Status.FAILED, Attempt.Status.TIMED_OUT})


def trigger_decide(*, report: AttemptDetails, earlier: list[Attempt]) -> tuple[str, bool, bool]:
    """Decide a new execution's ``(trigger, is_trigger_inferred, is_duplicate_trigger)`` on its slot.

    ``earlier``: the slot's executions already reported. A duplicate trigger is a ``scheduled`` one
    (given, or not given) on a slot that already has a schedule-started execution, when it started
    before that one ended (or either end is unknown) or after that one succeeded. An execution whose
    source gives no trigger and that started after every earlier execution ended ``failed`` or
    ``timed_out`` is an inferred ``automatic_retry``. Pure (reads only its arguments).
    """
    given = report.trigger
    if given not in (None, Attempt.Trigger.SCHEDULED):
        return str(given), False, False
    first_runs = [a for a in earlier if a.trigger in SCHEDULE_STARTED and not a.is_duplicate_trigger]
    if not first_runs:
        return Attempt.Trigger.SCHEDULED, False, False
    start = report.started_at
    if (
        given is None
        and start is not None
        and all(a.status in RETRY_AFTER and a.ended_at is not None and a.ended_at <= start for a in earlier)
    ):
        return Attempt.Trigger.AUTOMATIC_RETRY, True, False
    for other in first_runs:
        overlaps = other.ended_at is None or start is None or start < other.ended_at
        if overlaps or other.status == Attempt.Status.SUCCEEDED:
            return Attempt.Trigger.SCHEDULED, False, True
    return Attempt.Trigger.SCHEDULED, False, False


SECOND_SCHEDULER_WINDOW = timedelta(days=7)


def duplicate_trigger_record(
    *, attempt: Attempt, alert: Alert | None, actor_integration: Integration | None, at: datetime
) -> None:
    """Write the ``duplicate_trigger`` event of a newly flagged attempt and, when its target has two or
    more within 7 days, a ``second_scheduler_suspected`` event ("a second scheduler may be running")."""
    run = attempt.run
    first = run.attempts.filter(trigger__in=SCHEDULE_STARTED, is_duplicate_trigger=False).order_by("number").first()
    timeline_event_record(
        job=run.job,
        run=run,
        attempt=attempt,
        alert=alert,
        kind=TimelineEvent.Kind.DUPLICATE_TRIGGER,
        summary=f"Duplicate trigger: attempt {attempt.number} ({attempt.execution_id}) is a second scheduled start "
        f"of this slot"
        + (f" (attempt {first.number} already started)" if first else "")
        + "; a person must explain it",
        occurred_at=attempt.started_at or at,
        actor_integration=actor_integration,
    )
    recent = Attempt.objects.filter(
        run__job_id=run.job_id,
        run__tenant_id=run.tenant_id,
        run__environment=run.environment,
        is_duplicate_trigger=True,
        created_at__gte=timezone.now() - SECOND_SCHEDULER_WINDOW,
    ).count()
    if recent >= 2:
        timeline_event_record(
            job=run.job,
            run=run,
            attempt=attempt,
            kind=TimelineEvent.Kind.SECOND_SCHEDULER_SUSPECTED,
            summary=f"{recent} duplicate triggers on this target within 7 days: a second scheduler may be running",
            occurred_at=attempt.started_at or at,
        )


def source_number_repeated_record(
    *,
    attempt: Attempt,
    others: list[Attempt],
    alert: Alert | None,
    actor_integration: Integration | None,
    at: datetime,
) -> None:
    """Flag a new attempt whose source attempt number another execution of the run already reported:
    one ``source_number_repeated`` event (two executions claim one try; the source's numbering cannot be
    trusted for this run). The run page shows the flag beside both attempts (``source_number_twins``)."""
    run = attempt.run
    names = ", ".join(f"attempt {a.number} ({a.execution_id})" for a in others)
    timeline_event_record(
        job=run.job,
        run=run,
        attempt=attempt,
        alert=alert,
        kind=TimelineEvent.Kind.SOURCE_NUMBER_REPEATED,
        summary=f"Attempt {attempt.number} ({attempt.execution_id}) reports source attempt number "
        f"{attempt.source_number}, already reported by {names}: two executions claim one try",
        occurred_at=attempt.started_at or at,
        actor_integration=actor_integration,
        data={"source_number": attempt.source_number, "attempts": [a.number for a in others]},
    )


def source_number_lineage(attempt: Attempt) -> tuple[int, str] | None:
    """What a source attempt number counts tries of: ``(source_number, the execution id without it)``
    when the id ends with that number after a separator (Airflow's ``<run>/<task>/<map index>/<try>``,
    an executor's ``<id>#<retry>``: each task instance numbers its own tries), else
    ``(source_number, "")`` (the run's executions share one count). None without a source number."""
    number = attempt.source_number
    if number is None:
        return None
    match = re.fullmatch(rf"(.*[^0-9A-Za-z]){number}", attempt.execution_id)
    return (number, match.group(1)[:-1]) if match else (number, "")


def source_number_twins(attempts: list[Attempt]) -> dict[int, list[int]]:
    """For each attempt (by primary key) the numbers of the run's other attempts that report its
    ``source_number`` for the same lineage (``source_number_lineage``; pure; attempts without a
    source number are left out)."""
    by_number: dict[tuple[int, str], list[Attempt]] = {}
    for attempt in attempts:
        lineage = source_number_lineage(attempt)
        if lineage is not None:
            by_number.setdefault(lineage, []).append(attempt)
    return {
        attempt.pk: [other.number for other in group if other.pk != attempt.pk]
        for group in by_number.values()
        if len(group) > 1
        for attempt in group
    }


def attempt_details_change(
    *,
    attempt: Attempt,
    report: AttemptDetails,
    alert: Alert | None = None,
    actor_integration: Integration | None = None,
    at: datetime | None = None,
    include_missing: bool = False,
) -> bool:
    """Keep a later same-status report that changes an attempt's details (a new error, another end time).

    Writes the new values on the attempt and one ``attempt_details_changed`` event naming what changed
    (never dropped silently). ``include_missing``: a detail the attempt lacks counts as a change too
    (a duplicate alert's details are never filled in silently). Returns whether anything changed.
    Call inside a transaction.
    """
    changes = report.changed_fields(attempt, include_missing=include_missing)
    if not changes:
        return False
    Attempt.objects.filter(pk=attempt.pk).update(**changes, updated_at=timezone.now())
    for name, value in changes.items():
        setattr(attempt, name, value)
    detail = f": {attempt.error_summary[:200]}" if "error_summary" in changes else ""
    timeline_event_record(
        job=attempt.run.job,
        run=attempt.run,
        attempt=attempt,
        alert=alert,
        kind=TimelineEvent.Kind.ATTEMPT_DETAILS_CHANGED,
        summary=f"Attempt {attempt.number} ({attempt.execution_id}) reported again as {attempt.status} with a new "
        + " and ".join(CHANGEABLE_FIELDS[n] for n in changes)
        + detail,
        occurred_at=at or timezone.now(),
        actor_integration=actor_integration,
    )
    return True


def _fill_missing_details(attempt: Attempt, report: AttemptDetails) -> None:
    """Copy details the attempt does not have yet (a later alert often knows the end time)."""
    updates = report.missing_on(attempt)
    if updates:
        Attempt.objects.filter(pk=attempt.pk).update(**updates, updated_at=timezone.now())
        for name, value in updates.items():
            setattr(attempt, name, value)


def attempt_transition(
    *,
    attempt: Attempt,
    status: str,
    at: datetime | None = None,
    details: AttemptDetails | None = None,
    reason: str = "",
    actor: Person | None = None,
    alert: Alert | None = None,
    actor_integration: Integration | None = None,
    occurred_at: datetime | None = None,
    data: dict[str, Any] | None = None,
) -> Transitioned[Attempt]:
    """Move an attempt to ``status`` with the guarded UPDATE of ``handover.core.transitions.transition``,
    writing its timeline event.

    If the attempt already has ``status``, it is returned with ``moved`` False (idempotent);
    otherwise ``InvalidTransition`` (HTTP 409) names the current status. ``abandoned`` needs
    ``reason`` and ``actor``. Refreshes the run's status. Runs in its own transaction (or the
    caller's). Moving to ``running`` records any overlap with an earlier run
    (``attempt_overlap_record``). Returns ``Transitioned(attempt, moved)``.
    """
    action = Attempt.ACTION_FOR_STATUS[Attempt.Status(status)]
    target = Attempt.TRANSITIONS[action][1]
    now = at or timezone.now()
    values: dict[str, Any] = {"status_changed_at": now, "updated_at": timezone.now()}
    if details is not None:
        values.update(details.move_fields())
    if target == Attempt.Status.ABANDONED:
        if not reason or actor is None:
            raise InvalidTransition("Abandoning an attempt needs a person and a reason.")
        values.update(abandon_reason=reason, abandoned_by=actor, ended_at=attempt.ended_at or now)

    def record(moved: Attempt, before: str) -> None:
        timeline_event_record(
            job=moved.run.job,
            run=moved.run,
            attempt=moved,
            alert=alert,
            kind=ATTEMPT_EVENT_KINDS[Attempt.Status(target)],
            summary=_attempt_summary(moved, target) + (f" — {reason}" if reason else ""),
            occurred_at=occurred_at or now,
            actor=actor,
            actor_integration=actor_integration,
            data=data,
        )
        if target == Attempt.Status.RUNNING:
            attempt_overlap_record(attempt=moved, occurred_at=occurred_at or now)
        run_status_refresh(run=moved.run)

    return transition(
        queryset=Attempt.objects.select_related("run__job", "run__tenant"),
        pk=attempt.pk,
        table=Attempt.TRANSITIONS,
        action=action,
        values=values,
        noun=f"attempt {attempt.number}",
        on_moved=record,
    )


def attempt_abandon(*, attempt: Attempt, actor: Person, reason: str) -> Attempt:
    """A person's decision that an attempt will never report: ``abandoned`` with the reason.

    Refused unless ``actor`` may act on the run (``runs.permissions.require_act_on_run``: NotFound 404
    for a run they may not see, Forbidden 403 for one they only read); InvalidTransition (409) for an
    attempt that ended, or without a reason. Returns the attempt.
    """
    require_act_on_run(user=actor, run=attempt.run, what="abandon a run's attempts")
    return attempt_transition(attempt=attempt, status=Attempt.Status.ABANDONED, reason=reason, actor=actor).obj

"""Scheduling a check: who asked for it, and the check of a target's next fire time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from handover.core.errors import DomainError
from handover.core.people import Person
from runs.attempts.models import Run
from runs.catalog.models import JobTarget
from runs.checks.events import check_event_record, local_text, utc_text
from runs.checks.models import NextRunCheck
from runs.checks.schedule.cron import ScheduleError
from runs.checks.schedule.deadlines import check_deadline
from runs.checks.schedules import target_schedule
from runs.checks.slot_placement import next_slot_after, slot_schedule, slot_window
from runs.permissions import require_act_on_target
from runs.timeline.models import TimelineEvent


@dataclass(frozen=True)
class CheckRequester:
    """Who asked for a check: a handover, a replay request (their public ids) or a person by hand.

    Until the Handover and ReplayRequest models exist this is stored as text
    (``requested_by_kind`` / ``requested_by_ref``); build it with ``CheckRequester.handover(id)``.
    """

    kind: str
    ref: str = ""

    @classmethod
    def handover(cls, public_id: object) -> CheckRequester:
        return cls(NextRunCheck.RequesterKind.HANDOVER, str(public_id))

    @classmethod
    def replay_request(cls, public_id: object) -> CheckRequester:
        return cls(NextRunCheck.RequesterKind.REPLAY_REQUEST, str(public_id))


def next_run_check_schedule(
    *,
    target: JobTarget,
    after: datetime,
    requested_by: CheckRequester | None = None,
    recovered_run: Run | None = None,
    actor: Person | None = None,
) -> tuple[NextRunCheck, bool]:
    """Create the check of ``target``'s first fire time strictly after ``after`` (aware, any zone).

    ``expected_at`` is that fire time in UTC (DST-correct, with the target's overrides, never before
    the target's ``active_from``: the slots ingestion places on), its window the one the slot derives, and
    ``deadline_at`` adds the job's ``grace_seconds``. ``recovered_run`` is the failed run being
    recovered (a queued retry of it fails the check). Idempotent: a check for the same target and
    fire time is returned as it is, with ``created`` False (one check serves every requester).

    Returns ``(check, created)``. Raises ``DomainError`` (400) for an inactive target, a recovered
    run of another target, or a schedule with no next fire time; ``Forbidden`` (403) when a person
    (``actor``) may not act on the target (``runs.permissions.may_act_on_target``), ``NotFound`` (404)
    when they may not see it. Side effects: one
    NextRunCheck and a ``next_run_check_scheduled`` timeline event.
    """
    if actor is not None:
        require_act_on_target(user=actor, target=target, what="create, waive or confirm next-run checks")
    if not target.is_active:
        raise DomainError(f"The target {target} is not active: no next run is expected.")
    if recovered_run is not None and (recovered_run.job_id, recovered_run.tenant_id, recovered_run.environment) != (
        target.job_id,
        target.tenant_id,
        target.environment,
    ):
        raise DomainError("The recovered run belongs to another job, tenant or environment than the target.")
    sched = target_schedule(target=target)
    schedule = slot_schedule(job=target.job, target=target)
    try:
        # The same slots ingestion places reports on: the schedule in force, not before ``active_from``.
        expected_at = next_slot_after(schedule, after)
    except ScheduleError as exc:
        raise DomainError(str(exc), errors={"after": [str(exc)]}) from exc
    except OverflowError as exc:
        raise DomainError(f"{sched.cron!r} has no fire time after {after.isoformat()}.") from exc
    try:
        window: tuple[datetime, datetime] | None = slot_window(job=target.job, target=target, slot=expected_at)
    except ScheduleError:  # the alignment empties it: the check finds its run by the slot alone
        window = None
    deadline_at = check_deadline(expected_at, sched.grace_seconds).astimezone(UTC)
    requester = requested_by or CheckRequester(NextRunCheck.RequesterKind.PERSON, actor.get_username() if actor else "")
    existing = NextRunCheck.objects.filter(target=target, expected_at=expected_at).first()
    if existing is not None:
        return existing, False
    try:
        with transaction.atomic():
            check = NextRunCheck.objects.create(
                target=target,
                recovered_run=recovered_run,
                requested_by_kind=requester.kind,
                requested_by_ref=requester.ref[:200],
                created_by=actor,
                expected_at=expected_at,
                deadline_at=deadline_at,
                window_start=window[0] if window else None,
                window_end=window[1] if window else None,
                status_changed_at=timezone.now(),
            )
            check_event_record(
                check,
                kind=TimelineEvent.Kind.NEXT_RUN_CHECK_SCHEDULED,
                summary=f"Next-run check scheduled: the run expected at {local_text(expected_at, sched.timezone)} "
                f"({utc_text(expected_at)}) must succeed by {utc_text(deadline_at)}",
                occurred_at=timezone.now(),
                actor=actor,
                data={"requested_by_kind": requester.kind, "requested_by_ref": requester.ref},
            )
    except IntegrityError:  # a concurrent request created the same check first
        return NextRunCheck.objects.get(target=target, expected_at=expected_at), False
    return check, True

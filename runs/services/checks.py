"""Schedule awareness: next-run checks, their evaluation and sweep, overlap detection and missed runs.

- ``next_run_check_schedule`` creates the check of a target's next fire time (the handover and
  replay issues call it when a handover moves to ``verifying`` or a replay completes).
- ``next_run_check_evaluate`` is the pure rule: it takes the facts about one check and says
  whether it waits, passes, fails or needs a person's confirmation.
- ``next_run_check_sweep`` (Celery beat, every minute) finds due checks and their evidence with
  set-based queries and settles them in short claim transactions; ``next_run_check_transition`` is
  the one function that changes a check's status.
- ``attempt_overlap_record`` is called by the attempt service when an attempt starts running.
- ``run_sweep_missed`` (Celery beat) creates one ``missed`` run per fire time that never reported.
"""

from __future__ import annotations

import logging
import zoneinfo
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from enum import Enum
from typing import Any, Literal

from django.apps import apps
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.mail import send_mail
from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, Max, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from handover.errors import DomainError, InvalidTransition
from runs import schedule
from runs.models import Attempt, Job, JobTarget, NextRunCheck, Run, TimelineEvent
from runs.services.timeline import timeline_event_build, timeline_event_record, timeline_events_record

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------------
# The schedule in force for a target


@dataclass(frozen=True)
class TargetSchedule:
    """The cron, zone and DST policies in force for a target: the job's, with the target's overrides."""

    cron: str
    timezone: str
    dst_gap: str
    dst_overlap: str
    grace_seconds: int
    window_alignment: str

    def next_fire_times(self, after: datetime, count: int) -> list[datetime]:
        """The next ``count`` fire times strictly after ``after``, aware, in the schedule's zone."""
        return schedule.next_fire_times(
            self.cron, self.timezone, after, count, dst_gap=self.dst_gap, dst_overlap=self.dst_overlap
        )

    def window(self, fire_time: datetime) -> tuple[datetime, datetime] | None:
        """The processing window (UTC) of the run at ``fire_time``; None when the alignment empties it."""
        try:
            start, end = schedule.processing_window(
                self.cron,
                self.timezone,
                fire_time,
                alignment=self.window_alignment,
                dst_gap=self.dst_gap,
                dst_overlap=self.dst_overlap,
            )
        except schedule.ScheduleError:
            return None
        return start.astimezone(UTC), end.astimezone(UTC)


def target_schedule(*, target: JobTarget) -> TargetSchedule:
    """Return the schedule in force for ``target`` (overrides win over the job's own values)."""
    job = target.job
    return TargetSchedule(
        cron=target.schedule_override or job.schedule,
        timezone=target.timezone_override or job.timezone,
        dst_gap=target.dst_gap_override or job.dst_gap_policy,
        dst_overlap=target.dst_overlap_override or job.dst_overlap_policy,
        grace_seconds=job.grace_seconds,
        window_alignment=job.window_alignment,
    )


def job_schedule(*, job: Job) -> TargetSchedule:
    """Return the job's own schedule (no target overrides)."""
    return TargetSchedule(
        cron=job.schedule,
        timezone=job.timezone,
        dst_gap=job.dst_gap_policy,
        dst_overlap=job.dst_overlap_policy,
        grace_seconds=job.grace_seconds,
        window_alignment=job.window_alignment,
    )


@dataclass(frozen=True)
class FireTime:
    """One fire time for a page: in the schedule's zone and in UTC, with its check deadline (UTC)."""

    local: datetime
    utc: datetime
    deadline: datetime


def schedule_fire_times(*, sched: TargetSchedule, after: datetime, count: int = 5) -> list[FireTime]:
    """The next ``count`` fire times after ``after`` for a page (empty for an invalid schedule; pure)."""
    try:
        times = sched.next_fire_times(after, count)
    except schedule.ScheduleError:
        return []
    return [
        FireTime(
            local=t,
            utc=t.astimezone(UTC),
            deadline=(t.astimezone(UTC) + timedelta(seconds=sched.grace_seconds)),
        )
        for t in times
    ]


_GAP_WORDS = {
    Job.DstGap.NEXT_EXISTING: "runs once, at the first instant after the jump (02:30 becomes 03:00), "
    "as Debian cron and Dagster do",
    Job.DstGap.SKIP: "does not run that day: the slot is skipped, as EventBridge Scheduler and Kubernetes do",
    Job.DstGap.SHIFT: "runs shifted by the length of the gap (02:30 becomes 03:30)",
}
_OVERLAP_WORDS = {
    Job.DstOverlap.FIRST: "runs once, at the first occurrence (summer time), as Debian cron does",
    Job.DstOverlap.SECOND: "runs once, at the second occurrence (winter time), as Dagster does",
    Job.DstOverlap.BOTH: "runs twice, once at each occurrence",
}


def schedule_dst_sentences(*, sched: TargetSchedule, now: datetime) -> list[str]:
    """Explain in words what the schedule does when the clocks change (pure; for the job page)."""
    try:
        fixed = schedule.is_fixed_time(sched.cron)
        zone = schedule.validate_timezone(sched.timezone)
    except schedule.ScheduleError as exc:
        return [f"The schedule cannot be read: {exc}"]
    offsets = {(now + timedelta(days=d)).astimezone(zone).utcoffset() for d in range(0, 366, 15)}
    sentences = []
    if len(offsets) <= 1:
        sentences.append(
            f"{sched.timezone} has no clock change in the coming year, so daylight saving time does not move "
            "this job; the policy below applies only if the zone's rules change."
        )
    if not fixed:
        sentences.append(
            f"'{sched.cron}' is a wildcard entry (its minute or hour field starts with '*'): it follows the wall "
            f"clock of {sched.timezone}. When the clocks jump forward, its slots in the skipped hour do not "
            "exist and are dropped; when they go back, its slots in the repeated hour run in both copies. "
            "The DST policy does not apply to it."
        )
        return sentences
    sentences.append(
        f"'{sched.cron}' is a fixed-time entry, so it follows the DST policy of the scheduler that runs it "
        f"(times are on the wall clock of {sched.timezone})."
    )
    sentences.append(
        "Spring, when the clocks jump forward and a fire time does not exist: the job "
        + _GAP_WORDS.get(Job.DstGap(sched.dst_gap), sched.dst_gap)
        + f" (policy '{sched.dst_gap}')."
    )
    sentences.append(
        "Autumn, when the clocks go back and a fire time occurs twice: the job "
        + _OVERLAP_WORDS.get(Job.DstOverlap(sched.dst_overlap), sched.dst_overlap)
        + f" (policy '{sched.dst_overlap}')."
    )
    return sentences


def _fire_times_between(sched: TargetSchedule, start: datetime, end: datetime, cap: int) -> list[datetime]:
    """Fire times in ``(start, end]`` (UTC out), at most ``cap``, fetched in small batches."""
    found: list[datetime] = []
    cursor = start
    while len(found) < cap:
        batch = sched.next_fire_times(cursor, min(32, cap - len(found)))
        if not batch:
            break
        for instant in batch:
            at = instant.astimezone(UTC)
            if at > end:
                return found
            found.append(at)
        cursor = batch[-1]
    return found


# --------------------------------------------------------------------------------------------------
# Scheduling a check


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


def _at(value: datetime | None) -> str:
    return f"{value.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z" if value else "—"


def _local(value: datetime, zone: str) -> str:
    local = value.astimezone(zoneinfo.ZoneInfo(zone))
    return f"{local:%Y-%m-%d %H:%M} {local.tzname()}"


def _check_event_build(
    check: NextRunCheck,
    *,
    kind: str,
    summary: str,
    occurred_at: datetime,
    actor: AbstractBaseUser | None = None,
    data: dict[str, Any] | None = None,
) -> TimelineEvent:
    """A check's (unsaved) timeline event: on the recovered run's timeline, else job-level with the tenant."""
    target = check.target
    return timeline_event_build(
        job=target.job,
        tenant=target.tenant,
        run=check.recovered_run if check.recovered_run_id else None,
        kind=kind,
        summary=summary,
        occurred_at=occurred_at,
        actor_user=actor,
        data={"check": str(check.public_id), "expected_at": check.expected_at.isoformat(), **(data or {})},
    )


def _check_event(check: NextRunCheck, **kwargs: Any) -> TimelineEvent:
    return timeline_events_record([_check_event_build(check, **kwargs)])[0]


def next_run_check_schedule(
    *,
    target: JobTarget,
    after: datetime,
    requested_by: CheckRequester | None = None,
    recovered_run: Run | None = None,
    actor: AbstractBaseUser | None = None,
) -> tuple[NextRunCheck, bool]:
    """Create the check of ``target``'s first fire time strictly after ``after`` (aware, any zone).

    ``expected_at`` is that fire time in UTC (DST-correct, with the target's overrides) and
    ``deadline_at`` adds the job's ``grace_seconds``. ``recovered_run`` is the failed run being
    recovered (a queued retry of it fails the check). Idempotent: a check for the same target and
    fire time is returned as it is, with ``created`` False (one check serves every requester).

    Returns ``(check, created)``. Raises ``DomainError`` (400) for an inactive target, a recovered
    run of another target, or a schedule with no next fire time. Side effects: one NextRunCheck
    and a ``next_run_check_scheduled`` timeline event.
    """
    if not target.is_active:
        raise DomainError(f"The target {target} is not active: no next run is expected.")
    if recovered_run is not None and (recovered_run.job_id, recovered_run.tenant_id, recovered_run.environment) != (
        target.job_id,
        target.tenant_id,
        target.environment,
    ):
        raise DomainError("The recovered run belongs to another job, tenant or environment than the target.")
    sched = target_schedule(target=target)
    try:
        fire_times = sched.next_fire_times(after, 1)
    except schedule.ScheduleError as exc:
        raise DomainError(str(exc), errors={"after": [str(exc)]}) from exc
    if not fire_times:
        raise DomainError(f"{sched.cron!r} has no fire time after {after.isoformat()}.")
    expected_at = fire_times[0].astimezone(UTC)
    deadline_at = schedule.check_deadline(expected_at, sched.grace_seconds).astimezone(UTC)
    window = sched.window(expected_at)
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
            _check_event(
                check,
                kind="next_run_check_scheduled",
                summary=f"Next-run check scheduled: the run expected at {_local(expected_at, sched.timezone)} "
                f"({_at(expected_at)}) must succeed by {_at(deadline_at)}",
                occurred_at=timezone.now(),
                actor=actor,
                data={"requested_by_kind": requester.kind, "requested_by_ref": requester.ref},
            )
    except IntegrityError:  # a concurrent request created the same check first
        return NextRunCheck.objects.get(target=target, expected_at=expected_at), False
    return check, True


# --------------------------------------------------------------------------------------------------
# The one transition function


def _update_each(
    rows: Sequence[NextRunCheck], names: Iterable[str], *, statuses: Iterable[str], without_evidence: bool = False
) -> int:
    """UPDATE the ``names`` columns of each row from its attributes, guarded on its status (and, with
    ``without_evidence``, on having no evidence yet). Returns how many rows changed.

    One statement shape with one parameter set per row (``executemany``, pipelined by psycopg).
    Django's ``bulk_update`` would build one CASE per column and row, which costs milliseconds per
    row to compile; one ``QuerySet.update`` per row costs a round trip and a compile each.
    """
    meta = NextRunCheck._meta
    fields = [meta.get_field(name) for name in sorted(set(names))]
    quote = connection.ops.quote_name
    allowed = [str(status) for status in statuses]
    in_allowed = f"IN ({', '.join(['%s'] * len(allowed))})"
    no_evidence = f" AND {quote('evidence_attempt_id')} IS NULL" if without_evidence else ""
    table, pk = quote(meta.db_table), quote(meta.pk.column)
    values = []
    for row in rows:
        prepared = [f.get_db_prep_save(getattr(row, f.attname), connection) for f in fields]
        # choices enums go to the driver as their plain value
        values.append([row.pk, *(v.value if isinstance(v, Enum) else v for v in prepared)])
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # One statement for the batch: the rows to write joined in from a VALUES list (each
            # column cast, since VALUES of parameters are untyped).
            columns = ", ".join(quote(f.column) for f in fields)
            sets = ", ".join(f"{quote(f.column)} = v.{quote(f.column)}::{f.cast_db_type(connection)}" for f in fields)
            row_sql = f"({', '.join(['%s'] * (len(fields) + 1))})"
            cursor.execute(
                f"UPDATE {table} AS t SET {sets} FROM (VALUES {', '.join([row_sql] * len(values))})"
                f" AS v(id, {columns}) WHERE t.{pk} = v.id::bigint AND t.{quote('status')} {in_allowed}"
                + no_evidence.replace(" AND ", " AND t.", 1),
                [param for row_values in values for param in row_values] + allowed,
            )
        else:
            sets = ", ".join(f"{quote(f.column)} = %s" for f in fields)
            cursor.executemany(
                f"UPDATE {table} SET {sets} WHERE {pk} = %s AND {quote('status')} {in_allowed}{no_evidence}",
                [[*row_values[1:], row_values[0], *allowed] for row_values in values],
            )
        return cursor.rowcount


_STAMP = {"pass": "passed_at", "fail": "failed_at", "waive": "waived_at"}


@dataclass
class CheckChange:
    """One check in a transition: the summary of its timeline event and the columns it writes.

    ``values`` maps field names (or ``*_id`` attnames) to values: evidence, failure reason, waiver.
    """

    check: NextRunCheck
    summary: str
    values: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)


def next_run_check_transition(
    *,
    action: str,
    changes: Sequence[CheckChange],
    at: datetime | None = None,
    actor: AbstractBaseUser | None = None,
    enqueue_follow_ups: bool = True,
) -> list[NextRunCheck]:
    """Move checks along ``NextRunCheck.TRANSITIONS`` (``pass``, ``fail``, ``waive``): the only status writer.

    One guarded UPDATE for all ``changes`` (a bulk update filtered on the allowed source statuses)
    sets the status, its ``*_at`` stamp and each check's ``values``; one INSERT writes their
    ``next_run_check_<status>`` timeline events, in the same transaction. All or nothing: if the
    guard leaves out any row, nothing is written. For a single check that already has the target
    status, it is returned unchanged (idempotent); otherwise ``InvalidTransition`` (409) names the
    current status. The sweep passes the rows its claim transaction holds locked, so the guard
    matches them all. Failed checks enqueue, on commit, one follow-up task for all of them
    (``runs.next_run_check_notify_failed``: e-mail, handover reopen) unless ``enqueue_follow_ups``
    is False. Returns the checks, updated in memory.
    """
    allowed_from, target_status = NextRunCheck.TRANSITIONS[action]
    if not changes:
        return []
    now = at or timezone.now()
    stamp = _STAMP[action]
    meta = NextRunCheck._meta
    names = {"status", "status_changed_at", stamp, "updated_at"}
    checks = [change.check for change in changes]
    for change in changes:
        for name, value in change.values.items():
            names.add(meta.get_field(name).name)
            setattr(change.check, name, value)
        change.check.status = target_status
        change.check.status_changed_at = now
        setattr(change.check, stamp, now)
        change.check.updated_at = timezone.now()
    # No savepoint: inside the sweep's claim transaction that would cost two statements per batch.
    # A partial write is undone by raising inside the block; a refusal without any write is raised
    # after it, so it never poisons a caller's transaction.
    with transaction.atomic(savepoint=False):
        updated = _update_each(checks, names, statuses=allowed_from)
        if updated == len(checks):
            timeline_events_record(
                [
                    _check_event_build(
                        change.check,
                        kind=f"next_run_check_{target_status}",
                        summary=change.summary,
                        occurred_at=now,
                        actor=actor,
                        data=change.data,
                    )
                    for change in changes
                ]
            )
            if target_status == NextRunCheck.Status.FAILED and enqueue_follow_ups:
                ids = [check.pk for check in checks]
                transaction.on_commit(lambda: _enqueue_failed_follow_ups(ids))
        elif updated:
            raise InvalidTransition("Some of the checks moved meanwhile; none was changed.")
    if updated == len(checks):
        return checks
    if len(checks) == 1:
        current = NextRunCheck.objects.get(pk=checks[0].pk)
        if current.status == target_status:
            return [current]
        raise InvalidTransition(
            f"The next-run check is {current.status}; it cannot become {target_status} "
            f"(allowed from: {', '.join(sorted(allowed_from))})."
        )
    raise InvalidTransition(f"None of the checks can become {target_status}.")


def _transition_one(
    check: NextRunCheck,
    *,
    action: str,
    summary: str,
    values: dict[str, Any] | None = None,
    actor: AbstractBaseUser | None = None,
    data: dict[str, Any] | None = None,
    at: datetime | None = None,
) -> NextRunCheck:
    change = CheckChange(check=check, summary=summary, values=values or {}, data=data or {})
    return next_run_check_transition(action=action, changes=[change], at=at, actor=actor)[0]


def _enqueue_failed_follow_ups(check_ids: list[int]) -> None:
    from runs.tasks import next_run_check_notify_failed

    next_run_check_notify_failed.delay(check_ids=check_ids)


# --------------------------------------------------------------------------------------------------
# Evaluation: a pure function of the facts


@dataclass(frozen=True)
class CheckFacts:
    """What is known about one check at ``now`` (all datetimes aware, UTC).

    ``success_*``: the earliest *qualifying* success of the run for the expected fire time (an
    attempt triggered by the schedule, reported through a key bound to the target's tenant).
    ``has_ledger``: the next run has work items, so duplicates can be checked; then
    ``possible_duplicate_count`` is its total. ``stale_retry_queued``: an attempt of the recovered
    run is still queued. ``is_confirmed``: a person confirmed duplicates outside a ledger.
    """

    now: datetime
    expected_at: datetime
    deadline_at: datetime
    next_run_id: int | None = None
    success_attempt_id: int | None = None
    success_at: datetime | None = None
    has_ledger: bool = False
    possible_duplicate_count: int = 0
    stale_retry_queued: bool = False
    is_confirmed: bool = False


@dataclass(frozen=True)
class CheckVerdict:
    """What to do with a check: ``wait``, ``pass``, ``fail`` or ``await_confirmation``.

    ``reasons`` lists every failure found, the first being ``failure_reason``. Evidence is either
    in time (``evidence_*``) or late (``late_success_*``), never both.
    """

    action: Literal["wait", "pass", "fail", "await_confirmation"]
    summary: str
    failure_reason: str = ""
    reasons: tuple[str, ...] = ()
    duplicate_check: str = NextRunCheck.DuplicateCheck.NOT_YET
    evidence_attempt_id: int | None = None
    evidence_at: datetime | None = None
    late_success_attempt_id: int | None = None
    late_success_at: datetime | None = None

    def values(self, facts: CheckFacts) -> dict[str, Any]:
        """The evidence columns this verdict writes."""
        values: dict[str, Any] = {
            "next_run_id": facts.next_run_id,
            "duplicate_check": self.duplicate_check,
            "possible_duplicate_count": facts.possible_duplicate_count if facts.has_ledger else 0,
            "result_summary": self.summary,
        }
        if self.evidence_attempt_id is not None:
            values.update(evidence_attempt_id=self.evidence_attempt_id, evidence_at=self.evidence_at)
        if self.late_success_attempt_id is not None:
            values.update(late_success_attempt_id=self.late_success_attempt_id, late_success_at=self.late_success_at)
        if self.action == "fail":
            values["failure_reason"] = self.failure_reason
        return values


_FAIL = NextRunCheck.FailureReason


def next_run_check_evaluate(facts: CheckFacts) -> CheckVerdict:
    """Decide a check from its facts (pure; no clock, no database).

    - A qualifying success *before* the deadline is in time; one at or after it is late (at the
      deadline itself the run is overdue, as ``schedule.is_overdue`` says).
    - Before the deadline and without an in-time success: ``wait``.
    - Failures, in this order: the next run's ledger shows possible duplicates
      (``duplicate_reemitted``); an old retry of the recovered run is still queued
      (``stale_retry_queued``); the deadline passed without an in-time success
      (``deadline_passed``; a late success is kept as evidence, the check stays failed).
    - Otherwise an in-time success passes when the next run has a ledger (duplicates checked) or a
      person confirmed; without both it is ``await_confirmation``.
    """
    in_time = facts.success_at is not None and facts.success_at < facts.deadline_at
    deadline_passed = facts.now >= facts.deadline_at
    if not in_time and not deadline_passed:
        return CheckVerdict(action="wait", summary="Waiting for the next run.")
    duplicate_check = NextRunCheck.DuplicateCheck.CHECKED if facts.has_ledger else NextRunCheck.DuplicateCheck.NO_LEDGER
    if facts.next_run_id is None:
        duplicate_check = NextRunCheck.DuplicateCheck.NOT_YET
    reasons: list[str] = []
    texts: list[str] = []
    if facts.has_ledger and facts.possible_duplicate_count > 0:
        reasons.append(_FAIL.DUPLICATE_REEMITTED)
        texts.append(
            f"the next run's ledger shows {facts.possible_duplicate_count} possible duplicate(s): "
            "it may have re-emitted recovered records"
        )
    if facts.stale_retry_queued:
        reasons.append(_FAIL.STALE_RETRY_QUEUED)
        texts.append("an old retry of the failed run is still queued and may run again")
    evidence: dict[str, Any] = {}
    if in_time:
        evidence = {"evidence_attempt_id": facts.success_attempt_id, "evidence_at": facts.success_at}
    else:
        reasons.append(_FAIL.DEADLINE_PASSED)
        if facts.success_attempt_id is not None:
            evidence = {"late_success_attempt_id": facts.success_attempt_id, "late_success_at": facts.success_at}
            texts.append(
                f"the next run succeeded only at {_at(facts.success_at)}, after the deadline "
                f"{_at(facts.deadline_at)} (kept as evidence)"
            )
        elif facts.next_run_id is None:
            texts.append(f"no run was reported for the expected fire time by the deadline {_at(facts.deadline_at)}")
        else:
            texts.append(
                f"the next run has no qualifying success by the deadline {_at(facts.deadline_at)} "
                "(a scheduled attempt reported through a key bound to the tenant)"
            )
    if reasons:
        summary = "Failed: " + "; ".join(texts) + "."
        return CheckVerdict(
            action="fail",
            summary=summary,
            failure_reason=reasons[0],
            reasons=tuple(reasons),
            duplicate_check=duplicate_check,
            **evidence,
        )
    success = f"the next run succeeded at {_at(facts.success_at)}, before the deadline {_at(facts.deadline_at)}"
    if facts.has_ledger:
        return CheckVerdict(
            action="pass",
            summary=f"Passed: {success}; its ledger shows no possible duplicates.",
            duplicate_check=duplicate_check,
            **evidence,
        )
    if facts.is_confirmed:
        return CheckVerdict(
            action="pass",
            summary=f"Passed: {success}; no ledger, duplicates confirmed checked by a person.",
            duplicate_check=duplicate_check,
            **evidence,
        )
    return CheckVerdict(
        action="await_confirmation",
        summary=f"Awaiting confirmation: {success}, but it has no ledger, so duplicates could not be checked.",
        duplicate_check=duplicate_check,
        **evidence,
    )


# --------------------------------------------------------------------------------------------------
# Facts, set-based


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

    DESIGN.md rule 7: the ``attempt_succeeded`` timeline event names the alert that reported the
    success; that alert's delivery key must be bound to the run's tenant (or to all tenants, an
    admin's explicit choice). Earliest success first.
    """
    bound = TimelineEvent.objects.filter(attempt_id=OuterRef("pk"), kind="attempt_succeeded").filter(
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


def _with_next_run(checks: QuerySet[NextRunCheck]) -> QuerySet[NextRunCheck]:
    """Annotate each check with the run for its fire time (``found_run_id``) and whether an attempt
    of its recovered run is still queued (``has_stale_retry``)."""
    return checks.annotate(
        found_run_id=Subquery(_runs_for_check().order_by("id").values("pk")[:1]),
        has_stale_retry=Exists(
            Attempt.objects.filter(run_id=OuterRef("recovered_run_id"), status=Attempt.Status.QUEUED)
        ),
    )


@dataclass(frozen=True)
class _RunEvidence:
    success_attempt_id: int | None
    success_at: datetime | None
    has_ledger: bool
    possible_duplicate_count: int


def _run_evidence(run_ids: Iterable[int]) -> dict[int, _RunEvidence]:
    """One set query: each run's earliest qualifying success, whether it has a ledger, its duplicates.

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
            success_at=Subquery(_qualifying_successes(OuterRef("pk")).values("success_at")[:1]),
            has_ledger=_ledger_exists(OuterRef("pk")),
        )
        .values_list("pk", "success_attempt_id", "success_at", "has_ledger", "possible_duplicate_count")
    )
    return {
        pk: _RunEvidence(attempt_id, success_at, bool(ledger), duplicates or 0)
        for pk, attempt_id, success_at, ledger, duplicates in rows
    }


_NO_RUN = _RunEvidence(None, None, False, 0)


def _facts(row: NextRunCheck, evidence: dict[int, _RunEvidence], now: datetime) -> CheckFacts:
    run_id = row.found_run_id  # type: ignore[attr-defined]
    found = evidence.get(run_id, _NO_RUN) if run_id is not None else _NO_RUN
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
        is_confirmed=row.confirmed_at is not None,
    )


def next_run_check_facts(*, check: NextRunCheck, now: datetime | None = None) -> CheckFacts:
    """The facts about one check now (two queries); for pages and the confirm action."""
    row = _with_next_run(NextRunCheck.objects.filter(pk=check.pk)).get()
    return _facts(row, _run_evidence([row.found_run_id]), now or timezone.now())  # type: ignore[attr-defined]


def _change(row: NextRunCheck, verdict: CheckVerdict, facts: CheckFacts) -> CheckChange:
    return CheckChange(
        check=row,
        summary=verdict.summary,
        values=verdict.values(facts),
        data={"reasons": list(verdict.reasons), "duplicate_check": verdict.duplicate_check},
    )


def _record_awaiting(items: Sequence[tuple[NextRunCheck, CheckVerdict, CheckFacts]], now: datetime) -> None:
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
    updated = _update_each(rows, names, statuses=[NextRunCheck.Status.SCHEDULED], without_evidence=True)
    if updated != len(rows):  # only if a row escaped the claim's lock; undo the batch
        raise InvalidTransition("A claimed next-run check changed during the sweep.")
    timeline_events_record(
        [
            _check_event_build(
                row,
                kind="next_run_check_awaiting_confirmation",
                summary=verdict.summary,
                occurred_at=now,
                data={"duplicate_check": verdict.duplicate_check},
            )
            for row, verdict, _ in items
        ]
    )


# --------------------------------------------------------------------------------------------------
# The sweep


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
    failed_ids: list[int] = field(default_factory=list)


def _due_check_ids(now: datetime, limit: int) -> list[int]:
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
        _with_next_run(
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

    One query finds the due checks (scheduled, past the deadline or with a success of the next run);
    each batch of ``batch_size`` ids is claimed in one short transaction that locks the rows and
    reads their facts (one query), evaluates each (``next_run_check_evaluate``) and writes the
    outcomes: per batch one guarded UPDATE and one INSERT of timeline events for the passes, the
    same for the failures and for the checks now awaiting a person's confirmation. Safe to run
    twice or concurrently: locked rows are skipped, settled rows no longer match, and every write
    is guarded on the status.
    Side effects: check transitions and timeline events; per batch with failures, one
    ``runs.next_run_check_notify_failed`` task enqueued on commit (e-mail, handover reopen).
    Returns a ``SweepResult``.
    """
    now = now or timezone.now()
    result = SweepResult()
    ids = _due_check_ids(now, limit)
    result.due = len(ids)
    for start in range(0, len(ids), batch_size):
        chunk = ids[start : start + batch_size]
        failed: list[int] = []
        with transaction.atomic():
            if connection.vendor == "postgresql":
                # A batch's outcome is recomputed from the database by the next tick, so it need not
                # wait for its WAL flush: a crash can lose only the last batches (never part of one),
                # which the next sweep settles again; their follow-up task then finds no failed check.
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL synchronous_commit TO OFF")
            rows = _claim(chunk)
            result.skipped += len(chunk) - len(rows)
            evidence = _run_evidence(row.found_run_id for row in rows)  # type: ignore[attr-defined]
            passing: list[CheckChange] = []
            failing: list[CheckChange] = []
            awaiting: list[tuple[NextRunCheck, CheckVerdict, CheckFacts]] = []
            for row in rows:
                facts = _facts(row, evidence, now)
                verdict = next_run_check_evaluate(facts)
                if verdict.action == "pass":
                    passing.append(_change(row, verdict, facts))
                elif verdict.action == "fail":
                    failing.append(_change(row, verdict, facts))
                elif verdict.action == "await_confirmation":
                    awaiting.append((row, verdict, facts))
                else:
                    result.waiting += 1
            next_run_check_transition(action="pass", changes=passing, at=now)
            next_run_check_transition(action="fail", changes=failing, at=now, enqueue_follow_ups=False)
            _record_awaiting(awaiting, now)
            failed = [change.check.pk for change in failing]
            if failed:
                transaction.on_commit(lambda failed=failed: _enqueue_failed_follow_ups(failed))  # type: ignore[misc]
        result.passed += len(passing)
        result.failed += len(failing)
        result.awaiting_confirmation += len(awaiting)
        result.failed_ids.extend(failed)
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
        _with_next_run(
            NextRunCheck.objects.filter(
                status=NextRunCheck.Status.FAILED,
                failure_reason=NextRunCheck.FailureReason.DEADLINE_PASSED,
                late_success_attempt__isnull=True,
                failed_at__gte=now - LATE_SUCCESS_LOOKBACK,
            )
        )
        .filter(found_run_id__isnull=False)
        .select_related("target__job", "target__tenant", "recovered_run")
    )
    evidence = _run_evidence(row.found_run_id for row in rows)  # type: ignore[attr-defined]
    recorded = 0
    for row in rows:
        found = evidence.get(row.found_run_id, _NO_RUN)  # type: ignore[attr-defined]
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
                _check_event(
                    row,
                    kind="next_run_check_late_success",
                    summary=f"The next run succeeded at {_at(found.success_at)}, after the check failed "
                    f"(deadline {_at(row.deadline_at)}): kept as evidence, the check stays failed",
                    occurred_at=now,
                )
                recorded += 1
    return recorded


# --------------------------------------------------------------------------------------------------
# People's actions: waive, confirm


def _may_see_target(user: AbstractBaseUser, target: JobTarget) -> bool:
    from runs.selectors import target_is_visible

    return target_is_visible(user=user, target=target)


def next_run_check_waive(
    *,
    check: NextRunCheck,
    actor: AbstractBaseUser,
    owner: AbstractBaseUser | None,
    checkpoint: date | None,
    reason: str,
) -> NextRunCheck:
    """Waive a scheduled check (a next run far away): a checkpoint date, a reason and a named owner.

    Rules: the reason is not blank; the checkpoint is today or later (UTC date); the owner is an
    active person who can see the target. A waiver is never a pass, and only a ``scheduled`` check
    can be waived (``InvalidTransition``, 409, otherwise; waiving a waived check returns it).
    Raises ``DomainError`` (400) with field errors for a broken rule. Side effects: the transition
    and a ``next_run_check_waived`` timeline event.
    """
    errors: dict[str, list[str]] = {}
    reason = (reason or "").strip()
    if not reason:
        errors["reason"] = ["Say why the next run cannot be waited for."]
    if checkpoint is None:
        errors["checkpoint"] = ["Give the date the owner looks again."]
    elif checkpoint < timezone.now().astimezone(UTC).date():
        errors["checkpoint"] = ["The checkpoint date must not be in the past."]
    if owner is None or not owner.is_active:
        errors["owner"] = ["Name an active person as the owner of the waiver."]
    elif not _may_see_target(owner, check.target):
        errors["owner"] = [f"{owner.get_username()} has no role on this tenant or job."]
    if errors:
        detail = " ".join(message for messages in errors.values() for message in messages)
        raise DomainError(f"The waiver is incomplete: {detail}", errors=errors)
    assert owner is not None and checkpoint is not None
    return _transition_one(
        check,
        action="waive",
        summary=f"Next-run check waived until {checkpoint:%Y-%m-%d}, owner {owner.get_username()}: {reason}",
        values={
            "waived_by": actor,
            "waiver_owner": owner,
            "waiver_checkpoint": checkpoint,
            "waiver_reason": reason,
        },
        actor=actor,
        data={"checkpoint": checkpoint.isoformat(), "owner": owner.get_username()},
    )


def next_run_check_confirm(*, check: NextRunCheck, actor: AbstractBaseUser, note: str) -> NextRunCheck:
    """Confirm that a next run without a ledger re-emitted nothing, then settle the check.

    Only a check awaiting confirmation (scheduled, an in-time success found, no ledger) can be
    confirmed; ``InvalidTransition`` (409) otherwise. ``note`` (required; ``DomainError`` 400)
    says how duplicates were checked. The facts are read again: the check passes, or fails if a
    stale retry is queued or the ledger that has since appeared shows duplicates. Side effects: the
    confirmation, a ``next_run_check_confirmed`` event, then the transition and its event.
    """
    note = (note or "").strip()
    if not note:
        raise DomainError("Say how duplicates were checked.", errors={"note": ["This field is required."]})
    now = timezone.now()
    with transaction.atomic():
        updated = NextRunCheck.objects.filter(
            pk=check.pk,
            status=NextRunCheck.Status.SCHEDULED,
            evidence_attempt__isnull=False,
            duplicate_check=NextRunCheck.DuplicateCheck.NO_LEDGER,
            confirmed_at__isnull=True,
        ).update(confirmed_at=now, confirmed_by=actor, confirmation_note=note, updated_at=now)
        if not updated:
            current = NextRunCheck.objects.get(pk=check.pk)
            if current.confirmed_by_id == actor.pk and current.status != NextRunCheck.Status.SCHEDULED:
                return current  # the same person's repeated click
            raise InvalidTransition(
                f"Nothing awaits confirmation on this check (it is {current.status}"
                + (", already confirmed" if current.confirmed_at else "")
                + (", no success of the next run found yet" if current.evidence_attempt_id is None else "")
                + ")."
            )
        check = NextRunCheck.objects.select_related("target__job", "target__tenant", "recovered_run").get(pk=check.pk)
        _check_event(
            check,
            kind="next_run_check_confirmed",
            summary=f"{actor.get_username()} confirmed the next run re-emitted no records: {note}",
            occurred_at=now,
            actor=actor,
        )
        facts = next_run_check_facts(check=check, now=now)
        verdict = next_run_check_evaluate(facts)
        if verdict.action in ("pass", "fail"):
            next_run_check_transition(
                action=verdict.action, changes=[_change(check, verdict, facts)], at=now, actor=actor
            )
    check.refresh_from_db()
    return check


# --------------------------------------------------------------------------------------------------
# Follow-ups of a failed check (the Celery task calls these)


def handover_reopen_for_failed_check(*, check: NextRunCheck) -> None:
    """Reopen the open handover of the recovered run to ``recovering`` (the hook for the handover app).

    Delegates to ``handover.services.handover_reopen_for_failed_check`` when the handover app
    provides it (imported here, lazily: the handover app imports this module); does nothing
    otherwise. Idempotent on both sides: the follow-up task may run twice.
    """
    try:
        from handover.services import handover_reopen_for_failed_check as reopen
    except ImportError:  # the handover app without handovers yet
        return None
    reopen(check=check)
    return None


def next_run_check_failure_recipients(*, check: NextRunCheck) -> list[str]:
    """E-mail addresses told about a failed check: its creator, the escalation owner of the handover
    that asked for it, and the job's technical owners.

    Returns distinct, non-empty addresses in a stable order.
    """
    from guardian.shortcuts import get_users_with_perms

    from handover.services.checks import handover_escalation_owners_for_check

    people: list[AbstractBaseUser] = []
    if check.created_by_id:
        people.append(check.created_by)
    people.extend(handover_escalation_owners_for_check(check=check))
    owners = get_users_with_perms(
        check.target.job, only_with_perms_in=["act_as_technical_owner"], with_group_users=True
    )
    people.extend(owners)
    emails: list[str] = []
    for person in people:
        address = getattr(person, "email", "")
        if address and person.is_active and address not in emails:
            emails.append(address)
    return emails


def next_run_check_notify_failed(*, check_ids: Iterable[int]) -> int:
    """Run the follow-ups of failed checks: reopen the handover (hook) and e-mail the people responsible.

    Each check is claimed by setting ``failure_notified_at`` with a guarded UPDATE, so a repeated
    task does nothing twice; if sending fails the claim is released and the error re-raised (the
    task retries). No transaction is held across the mail call. Returns how many checks were
    notified. Mail: one message per check, no secrets or personal data beyond names.
    """
    done = 0
    for check in NextRunCheck.objects.filter(
        pk__in=list(check_ids), status=NextRunCheck.Status.FAILED, failure_notified_at__isnull=True
    ).select_related("target__job", "target__tenant", "created_by"):
        claimed = NextRunCheck.objects.filter(pk=check.pk, failure_notified_at__isnull=True).update(
            failure_notified_at=timezone.now()
        )
        if not claimed:
            continue
        try:
            handover_reopen_for_failed_check(check=check)
            recipients = next_run_check_failure_recipients(check=check)
            if recipients:
                target = check.target
                zone = target.timezone_override or target.job.timezone
                send_mail(
                    subject=f"[Handover] Next-run check failed: {target.job.key} / {target.tenant.slug} / "
                    f"{target.environment}",
                    message=(
                        f"The next run of {target.job.key} for {target.tenant.slug} ({target.environment}), "
                        f"expected at {_local(check.expected_at, zone)} ({_at(check.expected_at)}), "
                        f"did not pass its check.\n\n{check.result_summary}\n\n"
                        f"Check: {check.public_id}\n"
                    ),
                    from_email=None,
                    recipient_list=recipients,
                )
            else:
                logger.warning("failed next-run check %s has nobody to notify", check.public_id)
        except Exception:
            NextRunCheck.objects.filter(pk=check.pk).update(failure_notified_at=None)
            raise
        done += 1
    return done


# --------------------------------------------------------------------------------------------------
# Overlap: an attempt starts while an earlier run of the same target is still running

OVERLAP_PERMITTED = {Job.OverlapPolicy.ALLOW, Job.OverlapPolicy.REPLACE}
OVERLAP_WORDS = {
    Job.OverlapPolicy.ALLOW: "allows overlapping runs",
    Job.OverlapPolicy.REPLACE: "replaces the running run (it should be stopped now)",
    Job.OverlapPolicy.SKIP: "skips a run while another is running: this start is a breach",
    Job.OverlapPolicy.QUEUE: "queues a run until the running one ends: this start is a breach",
}


def attempt_overlap_record(*, attempt: Attempt, occurred_at: datetime | None = None) -> list[TimelineEvent]:
    """Record an overlap when ``attempt`` starts while an earlier run of its job, tenant and environment runs.

    Called by the attempt service when an attempt becomes ``running``. For each earlier run (by
    window) with a running attempt, one event goes on each timeline (``overlap_detected``, or
    ``overlap_breach`` when the job's overlap policy ``skip`` or ``queue`` forbids it), naming the
    other run and whether the policy permits it. Returns the events (none without overlap).
    Must run inside the attempt's transaction.
    """
    run = attempt.run
    active = list(
        Attempt.objects.filter(
            run__job_id=run.job_id,
            run__tenant_id=run.tenant_id,
            run__environment=run.environment,
            run__window_start__lt=run.window_start,
            status=Attempt.Status.RUNNING,
        )
        .exclude(run_id=run.pk)
        .select_related("run")
        .order_by("run__window_start", "number", "id")
    )
    if not active:
        return []
    job = run.job
    policy = Job.OverlapPolicy(job.overlap_policy)
    permitted = policy in OVERLAP_PERMITTED
    kind = "overlap_detected" if permitted else "overlap_breach"
    at = occurred_at or attempt.started_at or timezone.now()
    events: list[TimelineEvent] = []
    seen: set[int] = set()
    for other in active:
        if other.run_id in seen:
            continue
        seen.add(other.run_id)
        data = {
            "policy": policy.value,
            "is_permitted": permitted,
            "is_breach": not permitted,
            "started_run": str(run.public_id),
            "started_attempt": str(attempt.public_id),
            "active_run": str(other.run.public_id),
            "active_attempt": str(other.public_id),
        }
        verdict = f"overlap policy '{policy.value}' {OVERLAP_WORDS[policy]}"
        events.append(
            timeline_event_record(
                job=job,
                tenant=run.tenant,
                run=run,
                attempt=attempt,
                kind=kind,
                summary=f"Attempt {attempt.number} started while attempt {other.number} of the run for "
                f"{_at(other.run.window_start)}–{_at(other.run.window_end)} is still running; {verdict}",
                occurred_at=at,
                data=data,
            )
        )
        events.append(
            timeline_event_record(
                job=job,
                tenant=run.tenant,
                run=other.run,
                attempt=other,
                kind=kind,
                summary=f"While attempt {other.number} was still running, attempt {attempt.number} of the run for "
                f"{_at(run.window_start)}–{_at(run.window_end)} started; {verdict}",
                occurred_at=at,
                data=data,
            )
        )
    return events


# --------------------------------------------------------------------------------------------------
# Missed runs


MISSED_RUN_LOOKBACK_SECONDS = 2 * 24 * 3600
MISSED_RUN_MAX_SLOTS_PER_TARGET = 500


def run_sweep_missed(
    *,
    now: datetime | None = None,
    lookback_seconds: int | None = None,
    max_slots_per_target: int = MISSED_RUN_MAX_SLOTS_PER_TARGET,
) -> int:
    """Create one ``missed`` run for each fire time of a success-reporting target that never reported.

    Targets: active, ``reports_successes``, job not paused. A fire time is missed when its deadline
    (fire time + grace) has passed and no run has its scheduled time or its window. The walk
    starts at the target's creation when it never reported, else at the newer of its creation and
    the older of (its latest scheduled run, now minus ``lookback_seconds``, default
    ``HANDOVER_MISSED_RUN_LOOKBACK_SECONDS`` or 2 days), so a long outage is walked from its start;
    at most ``max_slots_per_target`` fire times per target and tick (the next tick continues).
    Once per fire time: the run identity constraint refuses a second run, and the ``run_missed``
    event is written only with the run that was created. A report arriving later updates the same
    run (its status then comes from the attempt). Returns how many missed runs were created.
    """
    now = now or timezone.now()
    lookback = timedelta(
        seconds=lookback_seconds
        if lookback_seconds is not None
        else getattr(settings, "HANDOVER_MISSED_RUN_LOOKBACK_SECONDS", MISSED_RUN_LOOKBACK_SECONDS)
    )
    targets = list(
        JobTarget.objects.filter(is_active=True, reports_successes=True, job__paused_at__isnull=True)
        .select_related("job", "tenant")
        .order_by("id")
    )
    if not targets:
        return 0
    # One set query: the latest scheduled run of every target.
    latest = {
        (row["job_id"], row["tenant_id"], row["environment"]): row["last"]
        for row in Run.objects.filter(job_id__in={t.job_id for t in targets}, scheduled_for__lte=now)
        .values("job_id", "tenant_id", "environment")
        .annotate(last=Max("scheduled_for"))
        .order_by()
    }
    created = 0
    for target in targets:
        last = latest.get((target.job_id, target.tenant_id, target.environment))
        try:
            created += _target_sweep_missed(target, now, last, lookback, max_slots_per_target)
        except schedule.ScheduleError as exc:
            logger.warning("missed-run sweep skipped target %s: %s", target.pk, exc)
    return created


def _target_sweep_missed(target: JobTarget, now: datetime, last: datetime | None, lookback: timedelta, cap: int) -> int:
    sched = target_schedule(target=target)
    horizon_end = now - timedelta(seconds=sched.grace_seconds)
    if last is None:
        start = target.created_at  # never reported: every fire time since the target exists
    else:
        # Re-check the lookback (a run may have arrived out of order); an outage longer than the
        # lookback is walked from its start, the latest run.
        start = max(min(last, now - lookback), target.created_at)
    if start >= horizon_end:
        return 0
    slots = _fire_times_between(sched, start, horizon_end, cap)
    if not slots:
        return 0
    identity = {"job_id": target.job_id, "tenant_id": target.tenant_id, "environment": target.environment}
    windows = {slot: sched.window(slot) for slot in slots}
    known = Run.objects.filter(**identity).filter(
        Q(scheduled_for__in=slots) | Q(window_start__in=[w[0] for w in windows.values() if w])
    )
    seen_times = set()
    seen_windows = set()
    for scheduled_for, window_start, window_end in known.values_list("scheduled_for", "window_start", "window_end"):
        seen_times.add(scheduled_for)
        seen_windows.add((window_start, window_end))
    created = 0
    for slot in slots:
        window = windows[slot]
        if window is None or slot in seen_times or window in seen_windows:
            continue
        deadline = slot + timedelta(seconds=sched.grace_seconds)
        try:
            with transaction.atomic():
                run = Run.objects.create(
                    job=target.job,
                    tenant=target.tenant,
                    environment=target.environment,
                    target=target,
                    window_start=window[0],
                    window_end=window[1],
                    scheduled_for=slot,
                    status=Run.Status.MISSED,
                    status_changed_at=now,
                )
                timeline_event_record(
                    job=target.job,
                    tenant=target.tenant,
                    run=run,
                    kind="run_missed",
                    summary=f"Missed: no run reported for the fire time {_local(slot, sched.timezone)} "
                    f"({_at(slot)}) by its deadline {_at(deadline)}",
                    occurred_at=deadline,
                    data={"fire_time": slot.isoformat(), "deadline": deadline.isoformat()},
                )
        except IntegrityError:  # a concurrent sweep or an alert created the run first
            continue
        created += 1
    return created

"""The ORM side of slot placement: the schedule in force for a target as ``SlotSchedule``, and the
facts rules 2 and 8 need (an execution id already known on a run; which slots already ran; an open
missed streak). The rules themselves live in ``runs.checks.schedule.slots``."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from runs.attempts.models import Attempt, Run
from runs.catalog.models import Job, JobTarget, Tenant
from runs.checks.models import MissedStreak
from runs.checks.schedule.cron import MICROSECOND
from runs.checks.schedule.fire_times import next_fire_time
from runs.checks.schedule.slots import (
    DEFAULT_INFERENCE_DEADLINE_SECONDS,
    SlotPlacement,
    SlotReport,
    SlotSchedule,
    TimeKind,
    slot_interval_seconds,
    slot_place,
)
from runs.checks.schedule.windows import processing_window

SCHEDULE_STARTED = (Attempt.Trigger.SCHEDULED, Attempt.Trigger.CATCH_UP)


def slot_schedule(*, job: Job, target: JobTarget | None) -> SlotSchedule:
    """The schedule in force for ``target`` (the job's, with the target's overrides) as placement reads it.

    ``active_from`` is the later of the job's and the target's (either may be empty).
    """
    starts = [at for at in (job.active_from, target.active_from if target else None) if at is not None]
    return SlotSchedule(
        cron=(target.schedule_override if target else "") or job.schedule,
        timezone=(target.timezone_override if target else "") or job.timezone,
        dst_gap=(target.dst_gap_override if target else "") or job.dst_gap_policy,
        dst_overlap=(target.dst_overlap_override if target else "") or job.dst_overlap_policy,
        grace_seconds=job.grace_seconds,
        early_tolerance_seconds=job.early_tolerance_seconds,
        starting_deadline_seconds=starting_deadline_seconds(job),
        active_from=max(starts) if starts else None,
        overlap_policy=job.overlap_policy,
    )


def starting_deadline_seconds(job: Job) -> int | None:
    """The job's starting deadline (seconds); ``expire_after`` is ``catch_up_all`` with its duration as one."""
    if job.starting_deadline_seconds is not None:
        return job.starting_deadline_seconds
    if job.missed_run_policy == Job.MissedRunPolicy.EXPIRE_AFTER:
        return job.missed_run_expire_after_seconds
    return None


def known_execution_slot(
    *, job: Job, tenant: Tenant, environment: str, execution_id: str, schedule: SlotSchedule, at: datetime
) -> datetime | None:
    """Rule 2: the slot of the run that already holds ``execution_id`` (slot at most two intervals before ``at``).

    One query; None when the id is not known on a recent run of this job, tenant and environment.
    """
    run = (
        Run.objects.filter(job=job, tenant=tenant, environment=environment, attempts__execution_id=execution_id)
        .exclude(scheduled_for__isnull=True)
        .order_by("-scheduled_for")
        .only("scheduled_for")
        .first()
    )
    if run is None or run.scheduled_for is None:
        return None
    interval = slot_interval_seconds(schedule, run.scheduled_for)
    if run.scheduled_for < at - timedelta(seconds=2 * interval):
        return None
    return run.scheduled_for


def report_place(
    *,
    job: Job,
    tenant: Tenant,
    environment: str,
    target: JobTarget | None,
    report: SlotReport,
    execution_id: str = "",
) -> SlotPlacement:
    """Place one report for (job, tenant, environment) by the Slot rules (``slot_place``).

    Reads, when the rules need them: the run already holding ``execution_id`` (rule 2, only for a
    report with no window and no scheduled time), and for a start time under ``queue`` or an open
    missed streak the slots within the inference horizon that already have a schedule-started
    attempt (rule 8; one query). Writes nothing.
    """
    schedule = slot_schedule(job=job, target=target)
    if report.window_end is None and report.time_kind != "scheduled" and execution_id and report.t is not None:
        known = known_execution_slot(
            job=job, tenant=tenant, environment=environment, execution_id=execution_id, schedule=schedule, at=report.t
        )
        if known is not None:
            report = replace(report, known_slot=known)
    if report.time_kind == "start" and report.t is not None:
        streak_open = target is not None and MissedStreak.objects.filter(target=target, closed_at__isnull=True).exists()
        if job.overlap_policy == Job.OverlapPolicy.QUEUE or streak_open:
            horizon = timedelta(seconds=schedule.starting_deadline_seconds or DEFAULT_INFERENCE_DEADLINE_SECONDS)
            taken = set(
                Run.objects.filter(
                    job=job,
                    tenant=tenant,
                    environment=environment,
                    scheduled_for__gte=report.t - 2 * horizon,
                    attempts__trigger__in=SCHEDULE_STARTED,
                ).values_list("scheduled_for", flat=True)
            )
            report = replace(report, infer_earlier=True, slot_taken=lambda slot: slot in taken)
    return slot_place(schedule, report)


def slot_window(*, job: Job, target: JobTarget | None, slot: datetime) -> tuple[datetime, datetime]:
    """The window a slot derives when the payload names none: ``[the fire time before slot, slot)``,
    floored to the job's ``window_alignment`` in the schedule in force (UTC). Raises ScheduleError.

    The one derivation ingestion, the missed-run sweep, next-run checks and re-placing share
    (docs/slots.md).
    """
    schedule = slot_schedule(job=job, target=target)
    start, end = processing_window(
        schedule.cron,
        schedule.timezone,
        slot,
        alignment=job.window_alignment,
        dst_gap=schedule.dst_gap,
        dst_overlap=schedule.dst_overlap,
    )
    return start.astimezone(UTC), end.astimezone(UTC)


def slot_of_time(schedule: SlotSchedule, at: datetime, *, received_at: datetime) -> datetime | None:
    """The slot a scheduled time ``at`` is placed on (Slot rules 4-7 through ``slot_place``), UTC.

    Used for times already stored on runs (a ``scheduled_for`` written before placement existed may
    be a second before its fire time, or minutes after it). None when the rules leave it unmatched.
    """
    placement = slot_place(schedule, SlotReport(received_at=received_at, t=at, time_kind=TimeKind.SCHEDULED))
    return placement.slot


def next_slot_after(schedule: SlotSchedule, after: datetime) -> datetime:
    """The first slot strictly after ``after`` and not before the target's ``active_from`` (UTC).

    Raises ScheduleError for a schedule that cannot fire.
    """
    if schedule.active_from is not None and after < schedule.active_from:
        after = schedule.active_from - MICROSECOND
    return next_fire_time(
        schedule.cron, schedule.timezone, after, dst_gap=schedule.dst_gap, dst_overlap=schedule.dst_overlap
    ).astimezone(UTC)

"""The schedule in force for a target (the job's, with the target's overrides), its next fire
times for a page, and its DST behaviour in words."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from runs.catalog.models import Job, JobTarget
from runs.checks.schedule.cron import ScheduleError, is_fixed_time, validate_timezone
from runs.checks.schedule.fire_times import next_fire_times
from runs.checks.schedule.windows import processing_window


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
        return next_fire_times(
            self.cron, self.timezone, after, count, dst_gap=self.dst_gap, dst_overlap=self.dst_overlap
        )

    def window(self, fire_time: datetime) -> tuple[datetime, datetime] | None:
        """The processing window (UTC) of the run at ``fire_time``; None when the alignment empties it."""
        try:
            start, end = processing_window(
                self.cron,
                self.timezone,
                fire_time,
                alignment=self.window_alignment,
                dst_gap=self.dst_gap,
                dst_overlap=self.dst_overlap,
            )
        except ScheduleError:
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
    except ScheduleError:
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
        fixed = is_fixed_time(sched.cron)
        zone = validate_timezone(sched.timezone)
    except ScheduleError as exc:
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


def fire_times_between(sched: TargetSchedule, start: datetime, end: datetime, cap: int) -> list[datetime]:
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

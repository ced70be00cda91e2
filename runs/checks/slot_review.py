"""What the slot rules ask a person to look at: runs that outlast their interval, runs recorded with a
window made up from an off-schedule time, and re-fires nobody has explained (docs/slots.md)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Exists, F, OuterRef, QuerySet
from django.db.models.functions import Coalesce

from runs.attempts.models import Attempt, Run
from runs.catalog.models import Job, JobTarget
from runs.checks.schedule.cron import ScheduleError
from runs.checks.schedule.slots import SlotSchedule, delay_words, slot_interval_seconds
from runs.checks.slot_placement import SCHEDULE_STARTED, slot_of_time, slot_schedule
from runs.timeline.models import TimelineEvent

RECENT_RUNS = 5  # "recent durations": the last five finished schedule-started executions of a target
RECENT_HORIZON = timedelta(days=30)
FABRICATED_SCAN_LIMIT = 500


@dataclass(frozen=True)
class DurationWarning:
    """Recent executions of one target that lasted longer than the interval to their next slot.

    ``over``: how many of the last ``of`` finished schedule-started executions did; ``longest_seconds``
    and ``interval_seconds``: the longest of them and its interval (seconds). Under overlap ``allow``
    the runs overlap; under ``skip``/``queue`` later slots are skipped or start late.
    """

    job: Job
    tenant_id: int
    environment: str
    over: int
    of: int
    longest_seconds: int
    interval_seconds: int

    @property
    def text(self) -> str:
        policy = self.job.overlap_policy
        effect = {
            Job.OverlapPolicy.ALLOW: "runs overlap",
            Job.OverlapPolicy.REPLACE: "each run is replaced by the next",
            Job.OverlapPolicy.SKIP: "slots are skipped while a run lasts",
            Job.OverlapPolicy.QUEUE: "slots queue up and start late",
        }.get(Job.OverlapPolicy(policy), "runs overlap")
        longest = delay_words(self.longest_seconds).rsplit(" ", 1)[0]
        interval = delay_words(self.interval_seconds).rsplit(" ", 1)[0]
        return (
            f"{self.over} of the last {self.of} runs lasted longer than the interval to the next slot "
            f"(longest {longest}, interval {interval}): under overlap '{policy}' {effect}"
        )


def _schedules(jobs: Iterable[Job], targets: dict[tuple[int, int, str], JobTarget]) -> dict[object, SlotSchedule]:
    cache: dict[object, SlotSchedule] = {}
    for job in jobs:
        cache[job.pk] = slot_schedule(job=job, target=None)
    for key, target in targets.items():
        cache[key] = slot_schedule(job=target.job, target=target)
    return cache


def duration_warnings(*, runs: QuerySet[Run], now: datetime) -> list[DurationWarning]:
    """Targets (job, tenant, environment) among ``runs`` whose recent executions outlast their interval.

    Reads the finished, schedule-started executions of the last 30 days (not duplicate triggers) of
    ``runs`` (one query; the caller scopes it: a run's target, a job, what a person may see), keeps the
    last five per target and compares each duration (end - start) with the interval from its run's
    slot to the next fire time of the schedule in force. A warning when at least one is longer.
    """
    rows = list(
        _recent_durations(Attempt.objects.filter(run__in=runs), now).values_list(
            "run__job_id", "run__tenant_id", "run__environment", "run__scheduled_for", "started_at", "ended_at"
        )[:2000]
    )
    per_target: dict[tuple[int, int, str], list[tuple[datetime, float]]] = defaultdict(list)
    for job_id, tenant_id, environment, slot, started, ended in rows:
        key = (job_id, tenant_id, environment)
        if slot is None or started is None or ended is None:  # filtered out by the query
            continue
        if len(per_target[key]) < RECENT_RUNS:
            per_target[key].append((slot, (ended - started).total_seconds()))
    if not per_target:
        return []
    jobs = Job.objects.in_bulk({key[0] for key in per_target})
    targets = {
        (t.job_id, t.tenant_id, t.environment): t
        for t in JobTarget.objects.filter(job_id__in=list(jobs)).select_related("job")
        if (t.job_id, t.tenant_id, t.environment) in per_target
    }
    schedules = _schedules(jobs.values(), targets)
    warnings = []
    for key, recent in sorted(per_target.items()):
        warning = _warning(jobs[key[0]], key, recent, schedules.get(key) or schedules[key[0]])
        if warning is not None:
            warnings.append(warning)
    return warnings


def _warning(
    job: Job, key: tuple[int, int, str], recent: list[tuple[datetime, float]], schedule: SlotSchedule
) -> DurationWarning | None:
    """The warning for one target's recent ``(slot, duration seconds)`` pairs; None when all fit."""
    over: list[tuple[float, float]] = []
    for slot, seconds in recent:
        try:
            interval = slot_interval_seconds(schedule, slot)
        except ScheduleError:
            return None
        if seconds > interval:
            over.append((seconds, interval))
    if not over:
        return None
    longest, interval = max(over)
    return DurationWarning(job, key[1], key[2], len(over), len(recent), int(longest), int(interval))


def _recent_durations(attempts: QuerySet[Attempt], now: datetime) -> QuerySet[Attempt]:
    return attempts.filter(
        trigger__in=SCHEDULE_STARTED,
        is_duplicate_trigger=False,
        started_at__isnull=False,
        ended_at__isnull=False,
        run__scheduled_for__isnull=False,
        started_at__gte=now - RECENT_HORIZON,
    ).order_by("-started_at", "-id")


def run_duration_warning(*, run: Run, now: datetime) -> DurationWarning | None:
    """``duration_warnings`` for the target of one run (its job, tenant, environment), one query."""
    rows = _recent_durations(
        Attempt.objects.filter(run__job_id=run.job_id, run__tenant_id=run.tenant_id, run__environment=run.environment),
        now,
    ).values_list("run__scheduled_for", "started_at", "ended_at")[:RECENT_RUNS]
    recent = [
        (slot, (ended - started).total_seconds())
        for slot, started, ended in rows
        if slot is not None and started is not None and ended is not None
    ]
    schedule = slot_schedule(job=run.job, target=run.target)
    return _warning(run.job, (run.job_id, run.tenant_id, run.environment), recent, schedule) if recent else None


@dataclass(frozen=True)
class FabricatedWindow:
    """A run whose window was made up from an off-schedule time: its window ends at its
    ``scheduled_for``, which is no fire time of the schedule in force; ``slot``: where the slot rules
    place that time now (None: nowhere), so a person can re-place its attempts there."""

    run: Run
    slot: datetime | None


def fabricated_window_runs(*, runs: QuerySet[Run], now: datetime, limit: int = 100) -> list[FabricatedWindow]:
    """Runs among ``runs`` recorded with a window that ends at an off-schedule scheduled time.

    Before slot placement, a scheduled time that was not a fire time produced a run whose window
    *ends* at that time (seconds long, sometimes). Such runs are listed, never merged silently: the
    candidates (window end = scheduled time; the newest ``FABRICATED_SCAN_LIMIT``) are kept when the
    scheduled time is no fire time of the schedule in force. Newest first, at most ``limit``.
    Queries: three (candidates, their jobs, their targets), and one more to load the runs found.
    """
    # Ordered by the run time (the slot, else the window's end; here both are the scheduled time) so that
    # the newest candidates come from ``runs_run_run_at_idx``: most runs' windows end at their slot, and
    # ordering by ``scheduled_for`` itself sorted every run of the history. Only what placement needs is
    # read of the candidates; the runs found (few or none) are loaded whole afterwards.
    candidates = list(
        runs.filter(scheduled_for__isnull=False, window_end=F("scheduled_for"))
        .order_by(Coalesce("scheduled_for", "window_end").desc(), "-id")
        .values_list("pk", "job_id", "target_id", "scheduled_for")[:FABRICATED_SCAN_LIMIT]
    )
    jobs = Job.objects.in_bulk({job_id for _, job_id, _, _ in candidates})
    targets = JobTarget.objects.in_bulk({target_id for _, _, target_id, _ in candidates if target_id is not None})
    schedules: dict[tuple[int, int | None], SlotSchedule] = {}
    placed: dict[tuple[SlotSchedule, datetime], datetime | None] = {}
    off_schedule: list[tuple[int, datetime | None]] = []
    for pk, job_id, target_id, scheduled_for in candidates:
        key = (job_id, target_id)
        if key not in schedules:
            schedules[key] = slot_schedule(
                job=jobs[job_id], target=targets.get(target_id) if target_id is not None else None
            )
        schedule = schedules[key]
        assert scheduled_for is not None  # filtered above
        if (schedule, scheduled_for) not in placed:  # the targets of a shared job fire at the same times
            placed[schedule, scheduled_for] = slot_of_time(schedule, scheduled_for, received_at=max(now, scheduled_for))
        slot = placed[schedule, scheduled_for]
        if slot is not None and slot == scheduled_for.astimezone(UTC):
            continue  # a fire time: the window is the one its slot derives
        off_schedule.append((pk, slot))
        if len(off_schedule) >= limit:
            break
    if not off_schedule:
        return []
    found = Run.objects.select_related("job", "tenant", "target").in_bulk([pk for pk, _ in off_schedule])
    return [FabricatedWindow(run=found[pk], slot=slot) for pk, slot in off_schedule]


def unexplained_events(*, run: Any, kind: str, explained_kind: str, **match: Any) -> QuerySet[TimelineEvent]:
    """Timeline events of ``kind`` on ``run`` (a run or an ``OuterRef`` to one) with no later
    ``explained_kind`` event on the same run: the flags a person must explain (re-fires, conflicting
    reports). ``match``: further filters on the flagged events. A queryset for ``Exists``."""
    explained = TimelineEvent.objects.filter(
        run_id=OuterRef("run_id"), kind=explained_kind, recorded_at__gte=OuterRef("recorded_at")
    )
    return TimelineEvent.objects.filter(run=run, kind=kind, **match).filter(~Exists(explained))


def unexplained_refires(runs: QuerySet[Run]) -> QuerySet[Run]:
    """Runs among ``runs`` with a ``refire`` event on an attempt the payload named again (the same
    execution) and no later ``refire_explained`` event: a person must explain the re-fire."""
    pending = unexplained_events(
        run=OuterRef("pk"),
        kind=TimelineEvent.Kind.REFIRE,
        explained_kind=TimelineEvent.Kind.REFIRE_EXPLAINED,
        data__same_attempt=True,
    )
    return runs.filter(Exists(pending))


def unexplained_conflicting_reports(runs: QuerySet[Run]) -> QuerySet[Run]:
    """Runs among ``runs`` with a ``conflicting_report`` event (an alert naming no execution of its own
    said something else about a run that succeeded) and no later ``conflicting_report_explained`` event."""
    pending = unexplained_events(
        run=OuterRef("pk"),
        kind=TimelineEvent.Kind.CONFLICTING_REPORT,
        explained_kind=TimelineEvent.Kind.CONFLICTING_REPORT_EXPLAINED,
    )
    return runs.filter(Exists(pending))


def run_fabricated_slot(*, run: Run, now: datetime) -> FabricatedWindow | None:
    """``fabricated_window_runs`` for one run already loaded (no query)."""
    if run.scheduled_for is None or run.window_end != run.scheduled_for:
        return None
    slot = slot_of_time(
        slot_schedule(job=run.job, target=run.target), run.scheduled_for, received_at=max(now, run.scheduled_for)
    )
    if slot is not None and slot == run.scheduled_for.astimezone(UTC):
        return None
    return FabricatedWindow(run=run, slot=slot)


def run_identity_flags(
    *, run: Run, now: datetime, refire_unexplained: bool, conflicting_unexplained: bool = False
) -> list[str]:
    """The run page's warnings from the slot rules: recent durations over the interval (its target),
    a window made up from an off-schedule time, an unexplained re-fire (``refire_unexplained``, from
    ``unexplained_refires``), an unexplained conflicting report (``conflicting_unexplained``, from
    ``unexplained_conflicting_reports``). Empty when none applies. One query."""
    flags = []
    warning = run_duration_warning(run=run, now=now)
    if warning is not None:
        flags.append(warning.text)
    item = run_fabricated_slot(run=run, now=now)
    if item is not None:
        flags.append(
            "The window ends at the scheduled time "
            f"{run.scheduled_for:%Y-%m-%d %H:%M:%S}Z, which is no fire time: it was made up before slot "
            "placement"
            + (f"; the slot rules place that time on {item.slot:%Y-%m-%d %H:%M}Z" if item.slot else "")
            + " (re-place its attempts there)"
        )
    if refire_unexplained:
        flags.append("An alert fired again after its resolve on the same execution: a person must explain it")
    if conflicting_unexplained:
        flags.append(
            "A report naming no execution of its own contradicts this run's success (see the timeline): "
            "a person must explain it"
        )
    return flags

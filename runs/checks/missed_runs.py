"""Missed runs (Celery beat): one ``missed`` run per fire time of a success-reporting target that
never reported under ``catch_up_all`` (and ``expire_after``); under ``latest_only`` and skip-overlap one
missed streak per outage instead (opened and closed with timeline events)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max, Q
from django.utils import timezone

from handover.core.rows import row_insert_unless_conflict
from runs.attempts.models import Run
from runs.catalog.models import Integration, Job, JobTarget, Tenant
from runs.checks.events import local_text, utc_text
from runs.checks.models import MissedStreak
from runs.checks.schedule.cron import MICROSECOND, ScheduleError
from runs.checks.schedule.slots import SlotSchedule, slot_interval_seconds
from runs.checks.schedules import fire_times_between, target_schedule
from runs.checks.slot_placement import slot_of_time, slot_schedule, slot_window
from runs.timeline.models import TimelineEvent
from runs.timeline.services import timeline_event_record

if TYPE_CHECKING:  # runs.alerts imports the checks slice: only the annotation needs the Alert model
    from runs.alerts.models import Alert

logger = logging.getLogger(__name__)


MISSED_RUN_LOOKBACK_SECONDS = 2 * 24 * 3600
MISSED_RUN_MAX_SLOTS_PER_TARGET = 500


def run_sweep_missed(
    *,
    now: datetime | None = None,
    lookback_seconds: int | None = None,
    max_slots_per_target: int = MISSED_RUN_MAX_SLOTS_PER_TARGET,
) -> int:
    """Create one ``missed`` run for each fire time of a success-reporting target that never reported.

    Targets: active, ``reports_successes``, neither the target nor its job paused
    (runs/catalog/pause.py); fire times before the target's or the job's last resume are not
    missed. A fire time is missed when its deadline
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
        JobTarget.objects.filter(
            is_active=True, reports_successes=True, paused_at__isnull=True, job__paused_at__isnull=True
        )
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
        if last is not None:
            missed_streak_close(target=target, ran_at=last)
        try:
            created += _target_sweep_missed(target, now, last, lookback, max_slots_per_target)
        except ScheduleError as exc:
            logger.warning("missed-run sweep skipped target %s: %s", target.pk, exc)
    return created


def _target_sweep_missed(target: JobTarget, now: datetime, last: datetime | None, lookback: timedelta, cap: int) -> int:
    sched = target_schedule(target=target)
    schedule = slot_schedule(job=target.job, target=target)
    horizon_end = now - timedelta(seconds=sched.grace_seconds)
    if last is None:
        start = target.created_at  # never reported: every fire time since the target exists
    else:
        # Re-check the lookback (a run may have arrived out of order); an outage longer than the
        # lookback is walked from its start, the latest run.
        start = max(min(last, now - lookback), target.created_at)
    if schedule.active_from is not None:  # Slot rule 6: no slot before the target is active
        start = max(start, schedule.active_from - MICROSECOND)
    for resumed_at in (target.resumed_at, target.job.resumed_at):  # a pause's fire times are not missed
        if resumed_at is not None:
            start = max(start, resumed_at)
    if start >= horizon_end:
        return 0
    slots = fire_times_between(sched, start, horizon_end, cap)
    if not slots:
        return 0
    windows = {slot: _window_or_none(target, slot) for slot in slots}
    covered = slots_covered(target=target, schedule=schedule, windows=windows, now=now)
    missing = [s for s in slots if windows[s] is not None and s not in covered]
    if streak_applies(target.job):
        return missed_streak_extend(target=target, slots=missing, timezone_name=sched.timezone)
    created = 0
    for slot in missing:
        window = windows[slot]
        assert window is not None
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
                    kind=TimelineEvent.Kind.RUN_MISSED,
                    summary=f"Missed: no run reported for the fire time {local_text(slot, sched.timezone)} "
                    f"({utc_text(slot)}) by its deadline {utc_text(deadline)}",
                    occurred_at=deadline,
                    data={"fire_time": slot.isoformat(), "deadline": deadline.isoformat()},
                )
        except IntegrityError:  # a concurrent sweep or an alert created the run first
            continue
        created += 1
    return created


def _window_or_none(target: JobTarget, slot: datetime) -> tuple[datetime, datetime] | None:
    """The window ``slot`` derives (``slot_window``, as ingestion derives it); None when the alignment empties it."""
    try:
        return slot_window(job=target.job, target=target, slot=slot)
    except ScheduleError:
        return None


def slots_covered(
    *,
    target: JobTarget,
    schedule: SlotSchedule,
    windows: dict[datetime, tuple[datetime, datetime] | None],
    now: datetime,
) -> set[datetime]:
    """The slots among ``windows`` (slot -> the window it derives; UTC) that a run of ``target`` stands for.

    A run covers the slot of its ``scheduled_for`` placed by the Slot rules (``slot_of_time``, the
    function ingestion places by), so a run recorded before placement existed -- its scheduled time a
    second before the fire time or minutes after it -- covers its real slot instead of leaving it to
    be marked missed; a run with the window a slot derives covers that slot too. One query over the
    slots' range widened by one interval on each side.
    """
    if not windows:
        return set()
    slots = sorted(windows)
    interval = timedelta(seconds=slot_interval_seconds(schedule, slots[0]))
    runs = Run.objects.filter(job_id=target.job_id, tenant_id=target.tenant_id, environment=target.environment).filter(
        Q(scheduled_for__gte=slots[0] - interval, scheduled_for__lte=slots[-1] + interval)
        | Q(window_start__in=[w[0] for w in windows.values() if w])
    )
    placed: set[datetime] = set()
    seen_windows: set[tuple[datetime, datetime]] = set()
    for scheduled_for, window_start, window_end in runs.values_list("scheduled_for", "window_start", "window_end"):
        seen_windows.add((window_start, window_end))
        if scheduled_for is None:
            continue
        if scheduled_for in windows:
            placed.add(scheduled_for)
            continue
        slot = slot_of_time(schedule, scheduled_for, received_at=max(now, scheduled_for))
        if slot is not None:
            placed.add(slot)
    return {slot for slot, window in windows.items() if slot in placed or window in seen_windows}


def streak_applies(job: Job) -> bool:
    """Missed slots are a streak (not a ``missed`` run each) under ``latest_only`` and skip-overlap."""
    return job.missed_run_policy == Job.MissedRunPolicy.LATEST_ONLY or job.overlap_policy == Job.OverlapPolicy.SKIP


def missed_streak_extend(*, target: JobTarget, slots: list[datetime], timezone_name: str) -> int:
    """Add missed ``slots`` (UTC, ascending) to the target's open streak, opening one if there is none.

    Opening writes a ``missed_streak_opened`` timeline event; extending writes nothing more (one row
    for a long outage, not one run per slot). Slots at or before the open streak's last slot are
    ignored (a second sweep changes nothing). Returns 0: no run is created.
    """
    latest = MissedStreak.objects.filter(target=target).order_by("-last_slot_at").first()
    if latest is not None:  # slots a streak (open or closed) already holds are not missed again
        slots = [slot for slot in slots if slot > latest.last_slot_at]
    if not slots:
        return 0
    with transaction.atomic():
        streak = MissedStreak.objects.select_for_update().filter(target=target, closed_at__isnull=True).first()
        if streak is None:
            streak = MissedStreak.objects.create(
                target=target, first_slot_at=slots[0], last_slot_at=slots[-1], slot_count=len(slots)
            )
            timeline_event_record(
                job=target.job,
                tenant=target.tenant,
                kind=TimelineEvent.Kind.MISSED_STREAK_OPENED,
                summary=f"Missed streak opened: no run for the fire time {local_text(slots[0], timezone_name)} "
                f"({utc_text(slots[0])}); under policy {target.job.missed_run_policy} / overlap "
                f"{target.job.overlap_policy} the streak is the record, not a missed run per slot",
                occurred_at=slots[0],
                data={"first_slot": slots[0].isoformat(), "slot_count": len(slots)},
            )
            return 0
        newer = [slot for slot in slots if slot > streak.last_slot_at]
        if newer:
            MissedStreak.objects.filter(pk=streak.pk).update(
                last_slot_at=newer[-1], slot_count=streak.slot_count + len(newer), updated_at=timezone.now()
            )
    return 0


def missed_streak_close(*, target: JobTarget, ran_at: datetime) -> MissedStreak | None:
    """Close the target's open streak when a run is scheduled after its last slot (``ran_at``, UTC).

    Writes a ``missed_streak_closed`` event with the streak's first and last slot and count. Returns the
    closed streak, or None when there was none to close.
    """
    with transaction.atomic():
        streak = (
            MissedStreak.objects.select_for_update()
            .filter(target=target, closed_at__isnull=True, last_slot_at__lt=ran_at)
            .first()
        )
        if streak is None:
            return None
        run = Run.objects.filter(
            job_id=target.job_id, tenant_id=target.tenant_id, environment=target.environment, scheduled_for=ran_at
        ).first()
        now = timezone.now()
        MissedStreak.objects.filter(pk=streak.pk).update(closed_at=now, closed_by_run=run, updated_at=now)
        streak.closed_at, streak.closed_by_run = now, run
        timeline_event_record(
            job=target.job,
            tenant=target.tenant,
            run=run,
            kind=TimelineEvent.Kind.MISSED_STREAK_CLOSED,
            summary=f"Missed streak closed: {streak.slot_count} slot{'s' if streak.slot_count != 1 else ''} missed "
            f"from {utc_text(streak.first_slot_at)} to {utc_text(streak.last_slot_at)}; the run for "
            f"{utc_text(ran_at)} was reported",
            occurred_at=ran_at,
            data={
                "first_slot": streak.first_slot_at.isoformat(),
                "last_slot": streak.last_slot_at.isoformat(),
                "slot_count": streak.slot_count,
            },
        )
    return streak


def run_missed_report(
    *,
    job: Job,
    tenant: Tenant,
    environment: str,
    target: JobTarget | None,
    window: tuple[datetime, datetime],
    slot: datetime | None,
    occurred_at: datetime,
    reporter: str,
    alert: Alert | None = None,
    actor_integration: Integration | None = None,
) -> Run | None:
    """Record a slot that a source reports as missed: a ``missed_reported`` event, never an attempt.

    The sweep's rule applies (docs/slots.md, "Missed runs"): under ``latest_only`` or skip-overlap (with
    a target) the target's missed streak is the record (``missed_streak_extend``) and the event is
    job-level with the tenant; otherwise the slot's run (``window``, UTC; ``slot`` its fire time) is
    created ``missed`` if new, or set ``missed`` when it has no attempt yet (``expected``/``unknown``);
    a run with attempts keeps the status they give, and the event says so. ``reporter`` names the
    integration in the summary. Call inside a transaction. Returns the run (None under a streak).
    """
    at = slot or window[1]
    if target is not None and streak_applies(job):
        zone = target_schedule(target=target).timezone
        missed_streak_extend(target=target, slots=[at], timezone_name=zone)
        timeline_event_record(
            job=job,
            tenant=tenant,
            alert=alert,
            kind=TimelineEvent.Kind.MISSED_REPORTED,
            summary=f"{reporter} reports the fire time {local_text(at, zone)} ({utc_text(at)}) missed; under policy "
            f"{job.missed_run_policy} / overlap {job.overlap_policy} the target's missed streak is the record",
            occurred_at=occurred_at,
            actor_integration=actor_integration,
            data={"fire_time": at.isoformat()},
        )
        return None
    run = Run(
        job=job,
        tenant=tenant,
        environment=environment,
        target=target if target is not None and target.is_active else None,
        window_start=window[0],
        window_end=window[1],
        scheduled_for=slot,
        status=Run.Status.MISSED,
        status_changed_at=timezone.now(),
    )
    created = row_insert_unless_conflict(run)
    if created:
        outcome = "the run is missed"
    else:
        run = Run.objects.get(
            job=job, tenant=tenant, environment=environment, window_start=window[0], window_end=window[1]
        )
        # a run with no attempt takes the schedule's verdict, as the sweep gives it; attempts decide otherwise
        now = timezone.now()
        moved = Run.objects.filter(
            pk=run.pk, status__in=(Run.Status.EXPECTED, Run.Status.UNKNOWN), attempts__isnull=True
        ).update(status=Run.Status.MISSED, status_changed_at=now, updated_at=now)
        if moved:
            run.status, run.status_changed_at = Run.Status.MISSED, now
            outcome = "the run had no attempt: it is missed"
        else:
            outcome = f"the run keeps its status ({run.status}): its attempts decide it"
    timeline_event_record(
        job=job,
        tenant=tenant,
        run=run,
        alert=alert,
        kind=TimelineEvent.Kind.MISSED_REPORTED,
        summary=f"{reporter} reports the fire time {utc_text(at)} missed; {outcome}",
        occurred_at=occurred_at,
        actor_integration=actor_integration,
        data={"fire_time": at.isoformat()},
    )
    return run

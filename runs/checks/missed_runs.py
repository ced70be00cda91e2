"""Missed runs (Celery beat): one ``missed`` run per fire time of a success-reporting target that
never reported."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max, Q
from django.utils import timezone

from runs.attempts.models import Run
from runs.catalog.models import JobTarget
from runs.checks.events import local_text, utc_text
from runs.checks.schedule.cron import ScheduleError
from runs.checks.schedules import fire_times_between, target_schedule
from runs.timeline.services import timeline_event_record

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
        except ScheduleError as exc:
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
    slots = fire_times_between(sched, start, horizon_end, cap)
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
                    summary=f"Missed: no run reported for the fire time {local_text(slot, sched.timezone)} "
                    f"({utc_text(slot)}) by its deadline {utc_text(deadline)}",
                    occurred_at=deadline,
                    data={"fire_time": slot.isoformat(), "deadline": deadline.isoformat()},
                )
        except IntegrityError:  # a concurrent sweep or an alert created the run first
            continue
        created += 1
    return created

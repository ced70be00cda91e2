"""Processing windows: ``[previous fire time, fire time)`` floored to the job's window alignment
(docs/architecture.md "Vocabulary": Window), and the fire time that closes a window a payload gives."""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime

from runs.checks.schedule.cron import (
    MICROSECOND,
    DstGapPolicy,
    DstOverlapPolicy,
    ScheduleError,
    WindowAlignment,
    policy_coerce,
    schedule_prepare,
    utc_coerce,
)
from runs.checks.schedule.dst import existing_instant
from runs.checks.schedule.fire_times import next_fire_time, previous_fire_time


def _floor(instant: datetime, zone: zoneinfo.ZoneInfo, alignment: WindowAlignment) -> datetime:
    """Floor a UTC instant to the start of its hour/day/month on the job zone's wall clock (UTC out)."""
    local = instant.astimezone(zone)
    if alignment is WindowAlignment.NONE:
        return instant
    if alignment is WindowAlignment.HOUR:
        wall = local.replace(minute=0, second=0, microsecond=0)
    elif alignment is WindowAlignment.DAY:
        wall = local.replace(hour=0, minute=0, second=0, microsecond=0)
    else:
        wall = local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    # Keep the fold: flooring 02:10 CET (second pass) to the hour gives 02:00 CET, not 02:00 CEST.
    # A floor that does not exist (midnight skipped, as in America/Santiago) becomes the first
    # instant after the gap.
    return existing_instant(wall.replace(tzinfo=None), zone, fold=local.fold)


def processing_window(
    cron: str,
    tz: str | zoneinfo.ZoneInfo,
    fire_time: datetime,
    *,
    alignment: WindowAlignment | str = WindowAlignment.NONE,
    dst_gap: DstGapPolicy | str = DstGapPolicy.NEXT_EXISTING,
    dst_overlap: DstOverlapPolicy | str = DstOverlapPolicy.FIRST,
) -> tuple[datetime, datetime]:
    """Return the half-open window ``[start, end)`` of the run scheduled at ``fire_time``, in ``tz``.

    ``[previous fire time, fire_time)``, computed on real instants (C01.C: the 2027-03-28 03:00 CEST
    gap-day run of ``30 2 * * *`` Berlin gets [01:30Z, 01:00Z), 23 h 30 min), then both ends floored
    to ``alignment`` on the job zone's wall clock (docs/architecture.md "Vocabulary"): ``0 2 * * *`` Berlin at
    2026-11-28T02:00+01:00 with ``day`` gives [2026-11-27T00:00+01:00, 2026-11-28T00:00+01:00).
    ``fire_time`` should be a slot of the schedule; the window ends at it as given.

    Raises ScheduleError for bad input, or when the window would be empty - which happens when the
    alignment is coarser than the schedule (an hourly job aligned to ``day``): a zero-length window
    would give every run of that day the same identity (Airflow #70089 made such a window).
    """
    cron, zone, gap, overlap = schedule_prepare(cron, tz, dst_gap, dst_overlap)
    unit = policy_coerce(WindowAlignment, alignment, "window alignment")
    end = utc_coerce("fire_time", fire_time)
    previous = previous_fire_time(cron, zone, end - MICROSECOND, dst_gap=gap, dst_overlap=overlap)
    start = previous.astimezone(UTC)
    window_start, window_end = _floor(start, zone, unit), _floor(end, zone, unit)
    if window_start >= window_end:
        raise ScheduleError(
            f"Aligning to {unit.value!r} leaves the run at {fire_time.isoformat()} an empty window: "
            f"{cron!r} fires more than once per {unit.value}. Use a finer window alignment."
        )
    return window_start.astimezone(zone), window_end.astimezone(zone)


def fire_time_closing_window(
    cron: str,
    tz: str | zoneinfo.ZoneInfo,
    window_end: datetime,
    *,
    dst_gap: DstGapPolicy | str = DstGapPolicy.NEXT_EXISTING,
    dst_overlap: DstOverlapPolicy | str = DstOverlapPolicy.FIRST,
) -> datetime:
    """Return the first fire time at or after ``window_end``, in ``tz``.

    For a payload that gives a window but no scheduled time: the run for ``[.., window_end)`` is
    expected at this instant (C12.A: the July window of ``0 0 1 * *`` closes at 2024-08-01T00:00Z,
    whose verification is due then + grace). Raises ScheduleError as ``next_fire_time`` does.
    """
    end = utc_coerce("window_end", window_end)
    return next_fire_time(cron, tz, end - MICROSECOND, dst_gap=dst_gap, dst_overlap=dst_overlap)

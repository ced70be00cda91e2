"""Next and previous fire times of a schedule, on the local calendar of the job's zone (cases rule 4)."""

from __future__ import annotations

import functools
import zoneinfo
from datetime import datetime
from itertools import islice

from runs.checks.schedule.cron import (
    MICROSECOND,
    SECOND,
    DstGapPolicy,
    DstOverlapPolicy,
    ScheduleError,
    is_fixed_time,
    schedule_prepare,
    utc_coerce,
)
from runs.checks.schedule.dst import fire_times_after, wall_resolve, wall_slots


def next_fire_times(
    cron: str,
    tz: str | zoneinfo.ZoneInfo,
    after: datetime,
    count: int = 1,
    *,
    dst_gap: DstGapPolicy | str = DstGapPolicy.NEXT_EXISTING,
    dst_overlap: DstOverlapPolicy | str = DstOverlapPolicy.FIRST,
) -> list[datetime]:
    """Return the next ``count`` fire times strictly after the instant ``after``.

    ``after`` is any aware datetime; results are aware datetimes in ``tz`` (ascending, distinct
    instants). Computed on the job zone's local calendar (rule 4; C04: never "last + 24 h"), with the
    DST policy for fixed-time entries and wall-clock semantics for wildcard ones (rule 3; C01, C02,
    C03). Fewer than ``count`` come back only when the schedule has no slot within 50 years.

    Raises ScheduleError for a bad cron, zone, policy, naive ``after`` or negative ``count``.
    Sources: cases C01.A/B, C02.A, C03.A, C04, C05, C06, C07.A/C, C13.
    """
    cron, zone, gap, overlap = schedule_prepare(cron, tz, dst_gap, dst_overlap)
    start = utc_coerce("after", after)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ScheduleError(f"count must be a whole number >= 0; got {count!r}.")
    return [instant.astimezone(zone) for instant in islice(fire_times_after(cron, zone, start, gap, overlap), count)]


# Placing a storm's reports asks for the same few fire times again and again (one job failing for a
# thousand tenants names one window): the answers are pure functions of their arguments, kept here.
FIRE_TIME_CACHE_SIZE = 4096


@functools.lru_cache(maxsize=FIRE_TIME_CACHE_SIZE)
def next_fire_time(
    cron: str,
    tz: str | zoneinfo.ZoneInfo,
    after: datetime,
    *,
    dst_gap: DstGapPolicy | str = DstGapPolicy.NEXT_EXISTING,
    dst_overlap: DstOverlapPolicy | str = DstOverlapPolicy.FIRST,
) -> datetime:
    """Return the first fire time strictly after ``after``, in ``tz`` (see ``next_fire_times``).

    Raises ScheduleError as ``next_fire_times`` does, and when there is no slot within 50 years.
    Pure, so its answers are cached (``FIRE_TIME_CACHE_SIZE`` most recent argument sets).
    """
    found = next_fire_times(cron, tz, after, 1, dst_gap=dst_gap, dst_overlap=dst_overlap)
    if not found:
        raise ScheduleError(f"{cron!r} has no fire time within 50 years after {after.isoformat()}.")
    return found[0]


@functools.lru_cache(maxsize=FIRE_TIME_CACHE_SIZE)
def previous_fire_time(
    cron: str,
    tz: str | zoneinfo.ZoneInfo,
    at_or_before: datetime,
    *,
    dst_gap: DstGapPolicy | str = DstGapPolicy.NEXT_EXISTING,
    dst_overlap: DstOverlapPolicy | str = DstOverlapPolicy.FIRST,
) -> datetime:
    """Return the most recent fire time at or before the instant ``at_or_before``, in ``tz``.

    Never returns a slot that is still in the future: at 05:30Z on 2024-11-03 the most recent
    ``0 1 * * *`` America/New_York slot is 01:00 EDT (05:00Z), not 01:00 EST (06:00Z) (C02.C,
    Airflow #70089). Same policies as ``next_fire_times`` (C06.B: leap day).

    Raises ScheduleError for bad input or when there is no slot within the 50 years before.
    Pure, so its answers are cached like ``next_fire_time``'s.
    """
    cron, zone, gap, overlap = schedule_prepare(cron, tz, dst_gap, dst_overlap)
    limit = utc_coerce("at_or_before", at_or_before)
    fixed = is_fixed_time(cron)
    # Walk wall slots backwards only to find *some* fire time <= limit (an anchor); then walk forwards
    # from it, which sorts out shifted and repeated slots exactly as next_fire_times does.
    anchor: datetime | None = None
    for wall in wall_slots(cron, limit.astimezone(zone).replace(tzinfo=None) + SECOND, reverse=True):
        earlier = [i for i in wall_resolve(wall, zone, fixed=fixed, gap=gap, overlap=overlap) if i <= limit]
        if earlier:
            anchor = min(earlier)
            break
    if anchor is None:
        raise ScheduleError(f"{cron!r} has no fire time within 50 years before {at_or_before.isoformat()}.")
    result = anchor
    for instant in fire_times_after(cron, zone, anchor - MICROSECOND, gap, overlap):
        if instant > limit:
            break
        result = instant
    return result.astimezone(zone)

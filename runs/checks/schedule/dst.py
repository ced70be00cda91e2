"""Wall-clock slots to real instants: cronsim walks the naive local calendar, this module maps each
slot to zero, one or two UTC instants under the DST policies (cases rule 3; C01, C02, C03).

See docs/architecture.md "Package notes" for the DST traps: every comparison here is on UTC datetimes."""

from __future__ import annotations

import heapq
import zoneinfo
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from cronsim import CronSim

from runs.checks.schedule.cron import SECOND, DstGapPolicy, DstOverlapPolicy, is_fixed_time

# Real DST/zone transitions are at most 24 h long (Pacific/Apia skipped 2011-12-30). We probe the
# zone's offsets this far around an instant to size the look-back for shifted/repeated slots.
_PROBE_HOURS = 26


def wall_slots(cron: str, start: datetime, *, reverse: bool = False) -> Iterator[datetime]:
    """Naive local slots strictly after (before, if ``reverse``) the naive ``start``, whole seconds.

    A naive datetime makes cronsim walk the plain calendar, with no DST handling of its own. The
    iterator ends when cronsim finds no slot within 50 years.
    """
    return CronSim(" ".join(cron.split()), start.replace(microsecond=0), reverse=reverse)


def _transition_at(zone: zoneinfo.ZoneInfo, before: datetime, after: datetime) -> datetime:
    """The first UTC second in ``(before, after]`` at which ``zone``'s offset differs from ``before``'s."""
    offset = before.astimezone(zone).utcoffset()
    lo, hi = before, after
    while hi - lo > SECOND:
        mid = lo + SECOND * ((hi - lo) // SECOND // 2)
        if mid.astimezone(zone).utcoffset() == offset:
            lo = mid
        else:
            hi = mid
    return hi


def wall_interpretations(wall: datetime, zone: zoneinfo.ZoneInfo) -> tuple[datetime, datetime]:
    """The UTC instants of ``wall`` read with ``fold=0`` and ``fold=1`` (PEP 495).

    Equal: an ordinary time. fold=0 earlier: a repeated (fall-back) time, fold=0 is its first
    occurrence. fold=0 *later*: a non-existent (spring-forward gap) time; fold=0 applies the offset from
    before the jump, i.e. "wall time + gap length" (02:30 -> 03:30 CEST), fold=1 the offset after it.
    """
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    return first, second


def existing_instant(wall: datetime, zone: zoneinfo.ZoneInfo, fold: int = 0) -> datetime:
    """The UTC instant of a local wall time; in a gap, the first instant after the gap."""
    first, second = wall_interpretations(wall, zone)
    if first > second:
        return _transition_at(zone, second, first)
    return second if fold else first


def wall_resolve(
    wall: datetime, zone: zoneinfo.ZoneInfo, *, fixed: bool, gap: DstGapPolicy, overlap: DstOverlapPolicy
) -> list[datetime]:
    """The UTC instants at which wall-clock slot ``wall`` fires (zero, one or two; cases rule 3)."""
    first, second = wall_interpretations(wall, zone)
    if first == second:
        return [first]
    if first < second:  # the wall clock shows this time twice (fall-back)
        if not fixed or overlap is DstOverlapPolicy.BOTH:
            return [first, second]  # wildcard entries run in both copies of the hour (C03)
        return [first] if overlap is DstOverlapPolicy.FIRST else [second]
    # The wall clock never shows this time (spring-forward gap).
    if not fixed or gap is DstGapPolicy.SKIP:
        return []  # wildcard entries follow the new clock: the slot does not exist (C01 skip alternative)
    if gap is DstGapPolicy.SHIFT:
        return [first]  # old offset: wall + gap length
    return [_transition_at(zone, second, first)]  # Debian: once, right after the jump (C01.A/B)


def _offset_spread(zone: zoneinfo.ZoneInfo, around: datetime) -> timedelta:
    """Largest minus smallest UTC offset of ``zone`` within +-26 h of ``around`` (0 for UTC)."""
    offsets = [
        (around + timedelta(hours=hours)).astimezone(zone).utcoffset() or timedelta(0)
        for hours in range(-_PROBE_HOURS, _PROBE_HOURS + 1)
    ]
    return max(offsets) - min(offsets)


def fire_times_after(
    cron: str, zone: zoneinfo.ZoneInfo, after: datetime, gap: DstGapPolicy, overlap: DstOverlapPolicy
) -> Iterator[datetime]:
    """Every fire time strictly after the UTC instant ``after``, ascending, without repeats, in UTC.

    Wall slots are mapped to instants one by one, but the instants do not come out in wall order: a
    shifted gap slot (02:30 -> 03:30 CEST) lands after the 03:00 slot, and both copies of a repeated
    02:00 sit around 02:30 CEST. So we keep the mapped instants in a heap and release an instant only
    once no later wall slot can produce anything earlier. Every instant produced from wall slot ``w`` is
    at or after the first moment the clock reads ``w`` or later, which is >= min(both readings of w);
    that moment never decreases as ``w`` grows, so it is a safe release bound.

    For the same reason we start the walk a little *before* ``after``'s wall time: a slot just before
    it may fire after ``after`` when a transition lies within its length (the spread of offsets).
    """
    fixed = is_fixed_time(cron)
    local_after = after.astimezone(zone).replace(tzinfo=None)
    start = local_after - _offset_spread(zone, after) - SECOND
    pending: list[datetime] = []
    last: datetime | None = None
    for wall in wall_slots(cron, start):
        for instant in wall_resolve(wall, zone, fixed=fixed, gap=gap, overlap=overlap):
            if instant > after:
                heapq.heappush(pending, instant)
        bound = min(wall_interpretations(wall, zone))
        while pending and pending[0] < bound:
            instant = heapq.heappop(pending)
            if instant != last:  # several gap slots can collapse onto the same instant (Debian: run once)
                last = instant
                yield instant
    while pending:
        instant = heapq.heappop(pending)
        if instant != last:
            last = instant
            yield instant

"""Runs that overlap: a ``concurrencyPolicy: Forbid`` executor simulated (C09), and a run-started
event attributed to its slot, flagged when it is an extra start (C02.B)."""

from __future__ import annotations

import zoneinfo
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from runs.checks.schedule.cron import (
    MICROSECOND,
    DstGapPolicy,
    DstOverlapPolicy,
    schedule_prepare,
    seconds_coerce,
    utc_coerce,
    zone_coerce,
)
from runs.checks.schedule.dst import fire_times_after, wall_interpretations
from runs.checks.schedule.fire_times import previous_fire_time


class ForbidRun(NamedTuple):
    """One run in a Forbid timeline: the slot it belongs to and when it actually started."""

    slot: datetime
    started_at: datetime


@dataclass(frozen=True)
class ForbidTimeline:
    """What a ``concurrencyPolicy: Forbid`` executor does with a job longer than its interval.

    ``runs``: started runs attributed to their own slot (a late start belongs to the slot it was
    created for, not the next one; C09.B). ``skipped_overlap``: slots skipped because a run was
    active: "skipped: overlap", never "missed". ``pending_slot``: a slot that came due while the last
    run was still active when the horizon ended (it may still start late).
    """

    runs: tuple[ForbidRun, ...]
    skipped_overlap: tuple[datetime, ...]
    pending_slot: datetime | None


def forbid_timeline(
    cron: str,
    tz: str | zoneinfo.ZoneInfo,
    *,
    horizon_start: datetime,
    horizon_end: datetime,
    run_duration_seconds: float,
    starting_deadline_seconds: float | None = None,
    dst_gap: DstGapPolicy | str = DstGapPolicy.NEXT_EXISTING,
    dst_overlap: DstOverlapPolicy | str = DstOverlapPolicy.FIRST,
) -> ForbidTimeline:
    """Simulate a Kubernetes CronJob with ``concurrencyPolicy: Forbid`` over ``[horizon_start, horizon_end]``.

    Every run lasts ``run_duration_seconds``. A slot that comes due while a run is active is held;
    a newer held slot replaces an older one (which is skipped). When the active run ends (within the
    horizon) the controller starts the held slot at once, unless ``slot + starting_deadline_seconds
    < end`` (too late; Kubernetes ``tooLate``), in which case it is skipped. C09.A (deadline 300 s):
    runs 00:00, 03:00, 06:00; C09.B (no deadline): 00:00, 02:00 started 02:10, 04:00 at 04:20, 06:00
    at 06:30. Datetimes come back in the job's zone. Raises ScheduleError for bad input.
    """
    cron, zone, gap, overlap = schedule_prepare(cron, tz, dst_gap, dst_overlap)
    first, last = utc_coerce("horizon_start", horizon_start), utc_coerce("horizon_end", horizon_end)
    duration = timedelta(seconds=seconds_coerce("run_duration_seconds", run_duration_seconds) or 0.0)
    deadline = seconds_coerce("starting_deadline_seconds", starting_deadline_seconds, allow_none=True)

    runs: list[ForbidRun] = []
    skipped: list[datetime] = []
    busy_until: datetime | None = None  # end of the active run
    held: datetime | None = None  # the newest slot that came due while a run was active

    def resync(at: datetime) -> None:
        # The controller looks again when the active run has ended by `at`.
        nonlocal busy_until, held
        if busy_until is None or busy_until > at or held is None:
            return
        if deadline is None or held + timedelta(seconds=deadline) >= busy_until:
            runs.append(ForbidRun(held, busy_until))
            busy_until = busy_until + duration
        else:
            skipped.append(held)
        held = None

    for slot in fire_times_after(cron, zone, first - MICROSECOND, gap, overlap):
        if slot > last:
            break
        resync(slot)
        if busy_until is None or busy_until <= slot:
            runs.append(ForbidRun(slot, slot))
            busy_until = slot + duration
        else:
            if held is not None:
                skipped.append(held)
            held = slot
    resync(last)
    return ForbidTimeline(
        runs=tuple(ForbidRun(r.slot.astimezone(zone), r.started_at.astimezone(zone)) for r in runs),
        skipped_overlap=tuple(s.astimezone(zone) for s in sorted(skipped)),
        pending_slot=held.astimezone(zone) if held else None,
    )


@dataclass(frozen=True)
class EventClassification:
    """How a run-started event relates to the schedule (C02.B).

    ``slot``: the slot the event belongs to (most recent slot at or before it, job zone).
    ``is_duplicate_start``: that slot already has a started run, so this is an unexpected extra
    start, not a new logical run. ``overlaps_active_run``: another run was still active.
    ``in_dst_overlap``: the event's local time is a repeated (fall-back) wall time.
    """

    slot: datetime
    is_duplicate_start: bool
    overlaps_active_run: bool
    is_new_logical_run: bool
    in_dst_overlap: bool


def classify_event(
    cron: str,
    tz: str | zoneinfo.ZoneInfo,
    event_at: datetime,
    *,
    started_slots: Iterable[datetime] = (),
    active_slots: Iterable[datetime] = (),
    dst_gap: DstGapPolicy | str = DstGapPolicy.NEXT_EXISTING,
    dst_overlap: DstOverlapPolicy | str = DstOverlapPolicy.FIRST,
) -> EventClassification:
    """Attribute a run-started event at ``event_at`` to its slot and flag extra starts.

    ``started_slots``: slots that already have a started run; ``active_slots``: slots whose run is
    still active. With the default ``first`` overlap policy, a start at 01:00Z on 2023-10-29 for
    ``0 2 * * *`` Berlin (02:00 CET, the repeated hour) belongs to the 00:00Z slot; if that slot has
    started, it is a duplicate start overlapping the active run, not a new logical run (C02.B,
    Kubernetes #121594). Raises ScheduleError for bad input.
    """
    zone = zone_coerce(tz)
    at = utc_coerce("event_at", event_at)
    slot = previous_fire_time(cron, zone, at, dst_gap=dst_gap, dst_overlap=dst_overlap)
    started = {utc_coerce("started_slots", s) for s in started_slots}
    active = {utc_coerce("active_slots", s) for s in active_slots}
    duplicate = slot.astimezone(UTC) in started
    first, second = wall_interpretations(at.astimezone(zone).replace(tzinfo=None), zone)
    return EventClassification(
        slot=slot,
        is_duplicate_start=duplicate,
        overlaps_active_run=bool(active),
        is_new_logical_run=not duplicate,
        in_dst_overlap=first < second,
    )

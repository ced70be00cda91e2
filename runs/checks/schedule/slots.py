"""Slot placement: which fire time of the schedule in force a report belongs to (pure, no ORM).

One function, ``slot_place``, applies the eight Slot rules of ``docs/slots.md`` in order; ingestion,
custom integrations, the missed-run sweep and next-run checks all place through it (the ORM-facing
caller is ``runs.checks.slot_placement``). Every instant in and out is aware; results are UTC.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from handover.core.durations import seconds_in_words
from runs.checks.schedule.cron import (
    MICROSECOND,
    DstGapPolicy,
    DstOverlapPolicy,
    ScheduleError,
    is_fixed_time,
    schedule_prepare,
    utc_coerce,
)
from runs.checks.schedule.dst import fire_times_after, wall_interpretations
from runs.checks.schedule.fire_times import next_fire_time, previous_fire_time
from runs.checks.schedule.windows import fire_time_closing_window

DEFAULT_EARLY_TOLERANCE_SECONDS = 60
DEFAULT_INFERENCE_DEADLINE_SECONDS = 24 * 3600
TZ_HINT = "time-zone or DST policy mismatch?"
DST_HINT = "DST policy mismatch?"


class TimeKind:
    """What the report's time ``t`` is (rule 4): only scheduled and start times place with tolerance."""

    SCHEDULED = "scheduled"
    START = "start"
    DETECTION = "detection"  # Alertmanager/Grafana ``startsAt``, an end or receive time: tolerance 0


@dataclass(frozen=True)
class SlotSchedule:
    """The schedule in force for a target, with the settings placement reads (seconds; UTC instants)."""

    cron: str
    timezone: str
    dst_gap: str = DstGapPolicy.NEXT_EXISTING
    dst_overlap: str = DstOverlapPolicy.FIRST
    grace_seconds: int = 1800
    early_tolerance_seconds: int = DEFAULT_EARLY_TOLERANCE_SECONDS
    starting_deadline_seconds: int | None = None
    active_from: datetime | None = None
    overlap_policy: str = "allow"


@dataclass(frozen=True)
class SlotReport:
    """What a report says about time. ``window_end``: a payload window's end (rule 1); ``known_slot``:
    the slot of the run that already holds this execution id (rule 2, found by the caller); ``is_manual``:
    a ``manual_rerun``/``manual_replay`` (rule 3); ``t``/``time_kind``: scheduled time, else start, else a
    detection time (rule 4); ``slot_taken(slot)``: whether a slot already has a schedule-started
    attempt, and ``infer_earlier``: the overlap policy is ``queue`` or a missed streak is open (rule 8)."""

    received_at: datetime
    t: datetime | None = None
    time_kind: str = TimeKind.SCHEDULED
    window_end: datetime | None = None
    known_slot: datetime | None = None
    is_manual: bool = False
    infer_earlier: bool = False
    slot_taken: Callable[[datetime], bool] | None = None


@dataclass(frozen=True)
class SlotPlacement:
    """Where a report goes. ``slot`` (UTC) is None when unmatched (``reason``, ``nearest``: the two
    nearest fire times). ``rule``: the rule that placed it. ``offset_seconds``: t − slot (negative:
    early). ``tolerance_seconds``: the ``e`` used. Flags: ``is_late`` (t later than slot + grace),
    ``is_inferred`` (rule 8), ``hint`` (a time-zone or DST policy mismatch)."""

    slot: datetime | None
    rule: int
    t: datetime | None = None
    offset_seconds: int | None = None
    tolerance_seconds: int = 0
    is_late: bool = False
    is_inferred: bool = False
    hint: str = ""
    reason: str = ""
    nearest: tuple[datetime, ...] = field(default_factory=tuple)

    @property
    def is_flagged(self) -> bool:
        """Late, inferred or mismatched: a person may re-place it onto another slot."""
        return self.is_late or self.is_inferred or bool(self.hint)


def placement_describe(placement: SlotPlacement, zone_name: str) -> str:
    """One line for the run page: "reported 00:59:59, 1 s early: slot 01:00" (wall times in ``zone_name``)."""
    if placement.slot is None:
        return f"not placed: {placement.reason}"
    zone = ZoneInfo(zone_name)
    slot = placement.slot.astimezone(zone)
    text = f"slot {slot:%Y-%m-%d %H:%M}"
    if placement.t is not None and placement.offset_seconds:
        reported = placement.t.astimezone(zone)
        text = f"reported {reported:%H:%M:%S}, {delay_words(placement.offset_seconds)}: {text}"
    flags = [w for w, on in (("late", placement.is_late), ("slot inferred", placement.is_inferred)) if on]
    if placement.hint:
        flags.append(placement.hint)
    return text + (f" ({'; '.join(flags)})" if flags else "")


def delay_words(offset_seconds: int) -> str:
    """An offset in words: "1 second early", "1 hour 17 minutes late" (seconds; negative is early)."""
    return f"{seconds_in_words(abs(offset_seconds))} {'early' if offset_seconds < 0 else 'late'}"


def slot_place(schedule: SlotSchedule, report: SlotReport) -> SlotPlacement:
    """Place a report on one slot of ``schedule`` by the first Slot rule that applies.

    1. a payload window: the fire time that closes it; 2. an execution id already known on a run:
    that run's slot; 3. a manual run with neither window nor scheduled time: unmatched; 4.–6. the
    nearest-slot rule on ``t`` with ``e = min(early_tolerance_seconds, gap/4)`` (0 for a detection
    time), then the unmatched cases (future, before ``active_from``, past the starting deadline, a
    cron that cannot fire) and the late flag with the time-zone hint; 7. repeated and skipped DST
    hours by wall-clock time; 8. inferred earlier slots under ``queue`` or an open missed streak.
    Never raises: a schedule that cannot be read is an unmatched placement.
    """
    try:
        cron, zone, gap, overlap = schedule_prepare(
            schedule.cron, schedule.timezone, schedule.dst_gap, schedule.dst_overlap
        )
        if report.window_end is not None:
            slot = fire_time_closing_window(cron, zone, report.window_end, dst_gap=gap, dst_overlap=overlap)
            return SlotPlacement(slot=slot.astimezone(UTC), rule=1)
        if report.known_slot is not None:
            return SlotPlacement(slot=utc_coerce("known_slot", report.known_slot), rule=2)
        if report.is_manual and report.time_kind != TimeKind.SCHEDULED:
            return SlotPlacement(slot=None, rule=3, reason="a manual run names no window")
        if report.t is None:
            return SlotPlacement(slot=None, rule=4, reason="the report names no time to place it by")
        return _place_by_time(schedule, report, utc_coerce("t", report.t))
    except ScheduleError as exc:
        return SlotPlacement(slot=None, rule=6, t=report.t, reason=f"the schedule cannot fire: {exc}")


def _neighbours(schedule: SlotSchedule, t: datetime) -> tuple[datetime | None, datetime]:
    """``f`` (latest fire time <= t, None if there is none) and ``f⁺`` (the next), UTC."""
    kwargs = {"dst_gap": schedule.dst_gap, "dst_overlap": schedule.dst_overlap}
    try:
        f: datetime | None = previous_fire_time(schedule.cron, schedule.timezone, t, **kwargs).astimezone(UTC)
    except ScheduleError:
        f = None
    f_next = next_fire_time(schedule.cron, schedule.timezone, t, **kwargs).astimezone(UTC)
    return f, f_next


def _tolerance(schedule: SlotSchedule, report: SlotReport, f: datetime | None, f_next: datetime) -> int:
    if report.time_kind == TimeKind.DETECTION:
        return 0
    gap = (f_next - f).total_seconds() if f is not None else float("inf")
    return int(min(schedule.early_tolerance_seconds, gap / 4))


def _place_by_time(schedule: SlotSchedule, report: SlotReport, t: datetime) -> SlotPlacement:
    f, f_next = _neighbours(schedule, t)
    e = _tolerance(schedule, report, f, f_next)
    nearest = tuple(x for x in (f, f_next) if x is not None)
    wall = _dst_wall_slot(schedule, t, f, f_next, e)
    if wall is not None:
        slot, hint, rule = wall
    elif f_next - t <= timedelta(seconds=e) or f is None:
        slot, hint, rule = f_next, "", 5
    else:
        slot, hint, rule = f, "", 5

    def unmatched(reason: str) -> SlotPlacement:
        return SlotPlacement(slot=None, rule=6, t=t, tolerance_seconds=e, reason=reason, nearest=nearest)

    if t > report.received_at + timedelta(seconds=e):
        return unmatched(f"the reported time {t:%Y-%m-%d %H:%M:%S}Z is in the future (received earlier)")
    if schedule.active_from is not None and slot < schedule.active_from:
        return unmatched(f"the slot {slot:%Y-%m-%d %H:%M}Z is before the target is active")
    deadline = schedule.starting_deadline_seconds
    if report.time_kind != TimeKind.DETECTION and deadline is not None and t > slot + timedelta(seconds=deadline):
        return unmatched(f"started {int((t - slot).total_seconds())} s after the slot, past the starting deadline")
    inferred = _inferred_slot(schedule, report, slot) if rule == 5 else None
    if inferred is not None:
        slot = inferred
    offset = int((t - slot).total_seconds())
    if rule == 7 and not hint:  # the repeated hour: compared by wall-clock time, not by instant
        offset = int((_wall(t, schedule) - _wall(slot, schedule)).total_seconds())
    late = report.time_kind != TimeKind.DETECTION and offset > schedule.grace_seconds
    if late and not hint and _whole_hours_off(t, slot, f_next, schedule.grace_seconds):
        hint = TZ_HINT
    return SlotPlacement(
        slot=slot,
        rule=8 if inferred is not None else rule,
        t=t,
        offset_seconds=offset,
        tolerance_seconds=e,
        is_late=late and inferred is None,
        is_inferred=inferred is not None,
        hint=hint,
        nearest=nearest,
    )


def _wall(instant: datetime, schedule: SlotSchedule) -> datetime:
    return instant.astimezone(ZoneInfo(schedule.timezone)).replace(tzinfo=None)


def _whole_hours_off(t: datetime, f: datetime, f_next: datetime, grace_seconds: int) -> bool:
    """True when t is, within grace, a whole number (>= 1) of hours away from ``f`` or ``f⁺``."""
    for base in (f, f_next):
        seconds = abs((t - base).total_seconds())
        hours = round(seconds / 3600)
        if hours >= 1 and abs(seconds - hours * 3600) <= grace_seconds:
            return True
    return False


def _dst_wall_slot(
    schedule: SlotSchedule, t: datetime, f: datetime | None, f_next: datetime, e: int
) -> tuple[datetime, str, int] | None:
    """Rule 7 for fixed-time entries: a repeated hour read by wall-clock time, a skipped slot's report.

    Repeated hour: when ``t``'s wall time occurs twice and is within ``e`` of a slot's wall time, ``t``
    belongs to that slot (the occurrence the overlap policy keeps; under ``both`` both are slots and the
    nearest-slot rule already decides). Gap under ``skip``: a report at the first instant after the gap
    (within ``e``) belongs to the skipped wall slot, flagged "DST policy mismatch?".
    """
    if not is_fixed_time(schedule.cron):
        return None
    _, zone, gap, overlap = schedule_prepare(schedule.cron, schedule.timezone, schedule.dst_gap, schedule.dst_overlap)
    local = t.astimezone(zone).replace(tzinfo=None)
    first, second = wall_interpretations(local, zone)
    if first < second and overlap is not DstOverlapPolicy.BOTH:
        for candidate in (f, f_next):
            if candidate is None:
                continue
            slot_wall = candidate.astimezone(zone).replace(tzinfo=None)
            if abs((local - slot_wall).total_seconds()) <= e:
                return candidate, "", 7
        return None
    if gap is DstGapPolicy.SKIP:
        kept = next(fire_times_after(schedule.cron, zone, t - timedelta(seconds=e) - MICROSECOND, gap, overlap))
        lenient = next(
            fire_times_after(
                schedule.cron, zone, t - timedelta(seconds=e) - MICROSECOND, DstGapPolicy.NEXT_EXISTING, overlap
            )
        )
        if lenient != kept and lenient <= t + timedelta(seconds=e):
            return lenient, DST_HINT, 7
    return None


def _inferred_slot(schedule: SlotSchedule, report: SlotReport, slot: datetime) -> datetime | None:
    """Rule 8: a start on a slot that already ran goes to the earliest free earlier slot within the
    starting deadline (default 24 h), when the overlap policy is ``queue`` or a missed streak is open."""
    if report.time_kind != TimeKind.START or not report.infer_earlier or report.slot_taken is None:
        return None
    if not report.slot_taken(slot):
        return None
    horizon = schedule.starting_deadline_seconds or DEFAULT_INFERENCE_DEADLINE_SECONDS
    _, zone, gap, overlap = schedule_prepare(schedule.cron, schedule.timezone, schedule.dst_gap, schedule.dst_overlap)
    earliest = slot - timedelta(seconds=horizon)
    for candidate in fire_times_after(schedule.cron, zone, earliest - MICROSECOND, gap, overlap):
        if candidate >= slot:
            return None
        if schedule.active_from is not None and candidate < schedule.active_from:
            continue
        if not report.slot_taken(candidate):
            return candidate.astimezone(UTC)
    return None


def slot_interval_seconds(schedule: SlotSchedule, slot: datetime) -> float:
    """Seconds from ``slot`` to the next fire time (for "two intervals" look-backs and duration warnings)."""
    after = next_fire_time(
        schedule.cron, schedule.timezone, slot, dst_gap=schedule.dst_gap, dst_overlap=schedule.dst_overlap
    )
    return (after.astimezone(UTC) - slot.astimezone(UTC)).total_seconds()

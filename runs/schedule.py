"""Schedule arithmetic: fire times, processing windows, deadlines, missed slots and run identity keys.

Pure functions: no ORM, no Django settings, no dependence on the server's or Django's ``TIME_ZONE``
(cases README rule 4, case C13). Instants go in as aware datetimes (any offset) and come out as
aware datetimes in the job's IANA zone, so the UTC offset is visible; callers convert to UTC.

Semantics are those of ``tests/data/cases-README.md`` ("Reference semantics"):

- rule 1: the cron dialect is Debian/Vixie cron as implemented by healthchecks' ``cronsim``
  (five fields; the ``L``, ``LW``, ``5L`` and ``1#2`` extensions are accepted);
- rule 2: day-of-month and day-of-week are OR-ed unless one of them starts with ``*`` (C05);
- rule 3: DST. *Fixed-time* entries (minute and hour fields do not start with ``*``) follow the
  job's DST policy (``DstGapPolicy`` x ``DstOverlapPolicy``, default = Debian cron: a slot in a
  spring-forward gap runs once at the first instant after the gap, a repeated slot runs at its first
  occurrence; C01, C02). *Wildcard* entries follow the wall clock: gap slots are dropped, repeated
  slots run twice (C03);
- rule 4: the next slot is computed on the local calendar of the job's zone, never "last + 24 h" (C04).

How: cronsim enumerates the *wall-clock* slots (naive local datetimes, a pure calendar walk), and
this module maps every wall slot to real instants itself. We do not use cronsim's own time-zone
handling because it only implements the default policy and, for an ``after`` in the second pass of
a repeated hour, returns a fixed-time slot from the first pass that is *earlier* than ``after``
(``CronSim("45 2 * * *", 02:30 CET on 2023-10-29)`` gives 02:45 CEST = 00:45Z < 01:30Z).

DST traps used throughout: two aware datetimes that share a ``ZoneInfo`` compare and subtract as
*wall-clock* values, ignoring ``fold`` (02:00 CEST == 02:00 CET), and ``+ timedelta`` adds wall time;
and a repeated wall time never equals a datetime in another tzinfo, even for the same instant (PEP 495).
So every comparison and every ``+ timedelta`` here happens on UTC datetimes, and we convert to the
job's zone only on the way out. Callers comparing results should do the same (``.astimezone(UTC)``).
"""

from __future__ import annotations

import functools
import heapq
import zoneinfo
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from itertools import islice
from typing import NamedTuple, TypeVar

from cronsim import CronSim, CronSimError

__all__ = [
    "AlertFold",
    "AlertInstanceKey",
    "DstGapPolicy",
    "DstOverlapPolicy",
    "EventClassification",
    "ForbidRun",
    "ForbidTimeline",
    "IdentityError",
    "MissedRunPolicy",
    "MissedSlots",
    "ReplayGuard",
    "RunIdentity",
    "ScheduleError",
    "WindowAlignment",
    "alert_instance_key",
    "check_deadline",
    "classify_event",
    "fire_time_closing_window",
    "fold_alert_deliveries",
    "forbid_timeline",
    "is_due",
    "is_fixed_time",
    "is_overdue",
    "missed_slots",
    "next_fire_time",
    "next_fire_times",
    "previous_fire_time",
    "processing_window",
    "replay_guard",
    "run_identity",
    "trigger_key",
    "validate_cron",
    "validate_timezone",
]

_SECOND = timedelta(seconds=1)
_MICROSECOND = timedelta(microseconds=1)
_FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week")
# Real DST/zone transitions are at most 24 h long (Pacific/Apia skipped 2011-12-30). We probe the
# zone's offsets this far around an instant to size the look-back for shifted/repeated slots.
_PROBE_HOURS = 26


class ScheduleError(ValueError):
    """A cron expression, time zone, policy or instant that the schedule functions cannot use.

    The message is meant for a person (it names the field or value at fault).
    """


class IdentityError(ValueError):
    """An event that carries no usable identity (no fingerprint, no run id and no slot, ...)."""


class DstGapPolicy(StrEnum):
    """What a fixed-time slot inside a spring-forward gap does (DESIGN "Policies"; cases rule 3, C01)."""

    NEXT_EXISTING = "next_existing"  # Debian cron, cronsim, Dagster: once, at the first instant after the gap
    SKIP = "skip"  # EventBridge Scheduler, robfig/cron (Kubernetes), Spring, node-cron
    SHIFT = "shift"  # Elastic Watcher, croner, python `schedule`: wall time + gap length (02:30 -> 03:30)


class DstOverlapPolicy(StrEnum):
    """Which occurrence of a repeated wall time a fixed-time slot runs at (cases rule 3, C02)."""

    FIRST = "first"  # Debian cron, cronsim
    SECOND = "second"  # Dagster
    BOTH = "both"  # what Kubernetes/croniter do; offered for executors that really run twice


class MissedRunPolicy(StrEnum):
    """Which missed slots an executor starts after an outage (DESIGN "Policies"; C08)."""

    CATCH_UP_ALL = "catch_up_all"
    LATEST_ONLY = "latest_only"
    EXPIRE_AFTER = "expire_after"


class WindowAlignment(StrEnum):
    """The unit a derived processing window is floored to, in the job's zone (DESIGN "Window")."""

    NONE = "none"
    HOUR = "hour"
    DAY = "day"
    MONTH = "month"


# --------------------------------------------------------------------------------------------------
# Validation and coercion


@functools.cache
def _known_zone_names() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def validate_timezone(name: str) -> zoneinfo.ZoneInfo:
    """Return the IANA zone called ``name``.

    Raises ScheduleError for an unknown name and for ``localtime``/``Factory``, whose meaning depends
    on the server (cases rule 4: nothing may depend on the server's zone).
    """
    if not isinstance(name, str) or not name.strip():
        raise ScheduleError("A time zone is required, e.g. 'Europe/Berlin' or 'UTC'.")
    if name in ("localtime", "Factory"):
        raise ScheduleError(f"{name!r} is not a usable time zone here: give an IANA name like 'Europe/Berlin'.")
    if name not in _known_zone_names():
        hint = next((z for z in sorted(_known_zone_names()) if z.casefold() == name.strip().casefold()), None)
        suffix = f" Did you mean {hint!r}?" if hint else " Use an IANA name like 'Europe/Berlin' or 'UTC'."
        raise ScheduleError(f"Unknown time zone {name!r}.{suffix}")
    return zoneinfo.ZoneInfo(name)


def validate_cron(expr: str) -> None:
    """Check that ``expr`` is a five-field Debian/Vixie cron expression that fires at least once.

    Accepts what cronsim accepts for five fields (names like ``MON``/``JAN``, ranges, steps, lists,
    and the ``L``, ``LW``, ``5L``, ``1#2`` extensions; cases rule 1). Rejects six-field (seconds)
    expressions and ``@daily``-style macros, which cronsim does not read as Debian cron does.

    Raises ScheduleError naming the field at fault.
    """
    if not isinstance(expr, str) or not expr.strip():
        raise ScheduleError("A cron expression is required, e.g. '30 2 * * *'.")
    fields = expr.split()
    if fields[0].startswith("@"):
        raise ScheduleError(
            f"Macros like {fields[0]!r} are not supported: write the five fields (e.g. '0 0 * * *' for @daily)."
        )
    if len(fields) != 5:
        raise ScheduleError(
            f"A cron expression has five fields (minute hour day-of-month month day-of-week); "
            f"{expr.strip()!r} has {len(fields)}."
        )
    try:
        slots = CronSim(" ".join(fields), datetime(2000, 1, 1))
    except CronSimError as exc:
        name = str(exc).removeprefix("Bad ")
        if name in _FIELD_NAMES:
            detail = " (out of range, or no listed month has that day)" if name == "day-of-month" else ""
            text = fields[_FIELD_NAMES.index(name)]
            raise ScheduleError(f"Invalid {name} field {text!r} in cron expression {expr.strip()!r}{detail}.") from exc
        raise ScheduleError(f"Invalid cron expression {expr.strip()!r}: {exc}.") from exc
    try:
        next(slots)
    except StopIteration:
        raise ScheduleError(f"The cron expression {expr.strip()!r} never fires.") from None


def is_fixed_time(cron: str) -> bool:
    """Return True when neither the minute nor the hour field starts with ``*`` (cases rule 3).

    Fixed-time entries follow the DST policy; wildcard ones (``* 9 * * *``, ``0 */2 * * *``) follow
    the wall clock. Raises ScheduleError for an invalid expression.
    """
    validate_cron(cron)
    minute, hour = cron.split()[:2]
    return not minute.startswith("*") and not hour.startswith("*")


def _zone(tz: str | zoneinfo.ZoneInfo) -> zoneinfo.ZoneInfo:
    if isinstance(tz, zoneinfo.ZoneInfo):
        return tz
    return validate_timezone(tz)


def _utc(name: str, value: datetime) -> datetime:
    """``value`` as a UTC datetime; a naive value is refused (its meaning would depend on a zone)."""
    if not isinstance(value, datetime):
        raise ScheduleError(f"{name} must be a datetime, not {type(value).__name__}.")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ScheduleError(f"{name} must be an aware datetime (with a UTC offset); got {value.isoformat()}.")
    return value.astimezone(UTC)


_P = TypeVar("_P", bound=StrEnum)


def _policy(kind: type[_P], value: _P | str, label: str) -> _P:
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(member.value for member in kind)
        raise ScheduleError(f"Unknown {label} {value!r}; expected one of {allowed}.") from None


def _seconds(name: str, value: float | None, *, allow_none: bool = False) -> float | None:
    if value is None:
        if allow_none:
            return None
        raise ScheduleError(f"{name} is required.")
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ScheduleError(f"{name} must be a number of seconds >= 0; got {value!r}.")
    return float(value)


# --------------------------------------------------------------------------------------------------
# Wall-clock slots -> instants


def _wall_slots(cron: str, start: datetime, *, reverse: bool = False) -> Iterator[datetime]:
    """Naive local slots strictly after (before, if ``reverse``) the naive ``start``, whole seconds.

    A naive datetime makes cronsim walk the plain calendar, with no DST handling of its own. The
    iterator ends when cronsim finds no slot within 50 years.
    """
    return CronSim(" ".join(cron.split()), start.replace(microsecond=0), reverse=reverse)


def _transition_at(zone: zoneinfo.ZoneInfo, before: datetime, after: datetime) -> datetime:
    """The first UTC second in ``(before, after]`` at which ``zone``'s offset differs from ``before``'s."""
    offset = before.astimezone(zone).utcoffset()
    lo, hi = before, after
    while hi - lo > _SECOND:
        mid = lo + _SECOND * ((hi - lo) // _SECOND // 2)
        if mid.astimezone(zone).utcoffset() == offset:
            lo = mid
        else:
            hi = mid
    return hi


def _interpretations(wall: datetime, zone: zoneinfo.ZoneInfo) -> tuple[datetime, datetime]:
    """The UTC instants of ``wall`` read with ``fold=0`` and ``fold=1`` (PEP 495).

    Equal: an ordinary time. fold=0 earlier: a repeated (fall-back) time, fold=0 is its first
    occurrence. fold=0 *later*: a non-existent (spring-forward gap) time; fold=0 applies the offset from
    before the jump, i.e. "wall time + gap length" (02:30 -> 03:30 CEST), fold=1 the offset after it.
    """
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    return first, second


def _existing(wall: datetime, zone: zoneinfo.ZoneInfo, fold: int = 0) -> datetime:
    """The UTC instant of a local wall time; in a gap, the first instant after the gap."""
    first, second = _interpretations(wall, zone)
    if first > second:
        return _transition_at(zone, second, first)
    return second if fold else first


def _resolve(
    wall: datetime, zone: zoneinfo.ZoneInfo, *, fixed: bool, gap: DstGapPolicy, overlap: DstOverlapPolicy
) -> list[datetime]:
    """The UTC instants at which wall-clock slot ``wall`` fires (zero, one or two; cases rule 3)."""
    first, second = _interpretations(wall, zone)
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


def _fire_times_after(
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
    start = local_after - _offset_spread(zone, after) - _SECOND
    pending: list[datetime] = []
    last: datetime | None = None
    for wall in _wall_slots(cron, start):
        for instant in _resolve(wall, zone, fixed=fixed, gap=gap, overlap=overlap):
            if instant > after:
                heapq.heappush(pending, instant)
        bound = min(_interpretations(wall, zone))
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


def _prepare(
    cron: str, tz: str | zoneinfo.ZoneInfo, dst_gap: DstGapPolicy | str, dst_overlap: DstOverlapPolicy | str
) -> tuple[str, zoneinfo.ZoneInfo, DstGapPolicy, DstOverlapPolicy]:
    validate_cron(cron)
    return (
        " ".join(cron.split()),
        _zone(tz),
        _policy(DstGapPolicy, dst_gap, "DST gap policy"),
        _policy(DstOverlapPolicy, dst_overlap, "DST overlap policy"),
    )


# --------------------------------------------------------------------------------------------------
# Fire times


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
    cron, zone, gap, overlap = _prepare(cron, tz, dst_gap, dst_overlap)
    start = _utc("after", after)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ScheduleError(f"count must be a whole number >= 0; got {count!r}.")
    return [instant.astimezone(zone) for instant in islice(_fire_times_after(cron, zone, start, gap, overlap), count)]


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
    """
    found = next_fire_times(cron, tz, after, 1, dst_gap=dst_gap, dst_overlap=dst_overlap)
    if not found:
        raise ScheduleError(f"{cron!r} has no fire time within 50 years after {after.isoformat()}.")
    return found[0]


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
    """
    cron, zone, gap, overlap = _prepare(cron, tz, dst_gap, dst_overlap)
    limit = _utc("at_or_before", at_or_before)
    fixed = is_fixed_time(cron)
    # Walk wall slots backwards only to find *some* fire time <= limit (an anchor); then walk forwards
    # from it, which sorts out shifted and repeated slots exactly as next_fire_times does.
    anchor: datetime | None = None
    for wall in _wall_slots(cron, limit.astimezone(zone).replace(tzinfo=None) + _SECOND, reverse=True):
        earlier = [i for i in _resolve(wall, zone, fixed=fixed, gap=gap, overlap=overlap) if i <= limit]
        if earlier:
            anchor = min(earlier)
            break
    if anchor is None:
        raise ScheduleError(f"{cron!r} has no fire time within 50 years before {at_or_before.isoformat()}.")
    result = anchor
    for instant in _fire_times_after(cron, zone, anchor - _MICROSECOND, gap, overlap):
        if instant > limit:
            break
        result = instant
    return result.astimezone(zone)


# --------------------------------------------------------------------------------------------------
# Processing windows


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
    return _existing(wall.replace(tzinfo=None), zone, fold=local.fold)


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
    to ``alignment`` on the job zone's wall clock (DESIGN "Window"): ``0 2 * * *`` Berlin at
    2026-11-28T02:00+01:00 with ``day`` gives [2026-11-27T00:00+01:00, 2026-11-28T00:00+01:00).
    ``fire_time`` should be a slot of the schedule; the window ends at it as given.

    Raises ScheduleError for bad input, or when the window would be empty - which happens when the
    alignment is coarser than the schedule (an hourly job aligned to ``day``): a zero-length window
    would give every run of that day the same identity (Airflow #70089 made such a window).
    """
    cron, zone, gap, overlap = _prepare(cron, tz, dst_gap, dst_overlap)
    unit = _policy(WindowAlignment, alignment, "window alignment")
    end = _utc("fire_time", fire_time)
    previous = previous_fire_time(cron, zone, end - _MICROSECOND, dst_gap=gap, dst_overlap=overlap)
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
    end = _utc("window_end", window_end)
    return next_fire_time(cron, tz, end - _MICROSECOND, dst_gap=dst_gap, dst_overlap=dst_overlap)


# --------------------------------------------------------------------------------------------------
# Deadlines, due checks, missed slots, Forbid concurrency


def check_deadline(next_fire: datetime, grace_seconds: float) -> datetime:
    """Return the instant a run expected at ``next_fire`` is overdue: ``next_fire + grace`` (rule 4).

    The grace is real elapsed seconds, added in UTC: ``aware + timedelta`` on a ZoneInfo datetime
    adds wall-clock time, which is an hour off across a DST change. Returned in ``next_fire``'s zone
    (C07.B: 09:35 PDT + 30 min -> 10:05 PDT, Healthchecks ``get_grace_start`` + ``grace``).
    Raises ScheduleError for a naive ``next_fire`` or a negative grace.
    """
    grace = _seconds("grace_seconds", grace_seconds)
    assert grace is not None
    return (_utc("next_fire", next_fire) + timedelta(seconds=grace)).astimezone(next_fire.tzinfo)


def is_overdue(next_fire: datetime, grace_seconds: float, now: datetime) -> bool:
    """Return True when ``now`` is at or past ``check_deadline(next_fire, grace_seconds)``.

    At the deadline itself the run is overdue (Healthchecks ``get_status``: ``now >= grace_end`` ->
    down). Raises ScheduleError for naive datetimes or a negative grace.
    """
    return _utc("now", now) >= check_deadline(next_fire, grace_seconds).astimezone(UTC)


def is_due(
    cron: str,
    tz: str | zoneinfo.ZoneInfo,
    last_run: datetime,
    now: datetime,
    *,
    dst_gap: DstGapPolicy | str = DstGapPolicy.NEXT_EXISTING,
    dst_overlap: DstOverlapPolicy | str = DstOverlapPolicy.FIRST,
) -> bool:
    """Return True when a slot falls in ``(last_run, now]``, i.e. a run is due at ``now``.

    Compares real instants, not local wall hours: an hourly job that ran at 01:00 PDT is due again at
    01:00 PST one real hour later (C03.B, Celery #10107). Raises ScheduleError for bad input.
    """
    found = next_fire_times(cron, tz, last_run, 1, dst_gap=dst_gap, dst_overlap=dst_overlap)
    return bool(found) and found[0].astimezone(UTC) <= _utc("now", now)


@dataclass(frozen=True)
class MissedSlots:
    """The slots after ``last_scheduled`` that came due by ``now``, and what the executor will do.

    All datetimes are in the job's zone. ``slots``: every slot in ``(last_scheduled, now]``.
    ``considered``: those not too late under a starting deadline. ``to_run``: the slots a run is
    expected for under the missed-run policy. ``skipped``: every other slot (one grouped "skipped
    while scheduler down" record, not one page each). ``next_slot``: the first slot after ``now``;
    if no run arrives by ``check_deadline(next_slot, grace)`` the schedule has stalled (C08.A).
    """

    slots: tuple[datetime, ...]
    considered: tuple[datetime, ...]
    to_run: tuple[datetime, ...]
    skipped: tuple[datetime, ...]
    next_slot: datetime | None

    @property
    def missed_slot_count(self) -> int:
        return len(self.slots)

    @property
    def first_missed(self) -> datetime | None:
        return self.slots[0] if self.slots else None

    @property
    def last_missed(self) -> datetime | None:
        return self.slots[-1] if self.slots else None


def missed_slots(
    cron: str,
    tz: str | zoneinfo.ZoneInfo,
    last_scheduled: datetime,
    now: datetime,
    *,
    policy: MissedRunPolicy | str = MissedRunPolicy.CATCH_UP_ALL,
    expire_after_seconds: float | None = None,
    starting_deadline_seconds: float | None = None,
    dst_gap: DstGapPolicy | str = DstGapPolicy.NEXT_EXISTING,
    dst_overlap: DstOverlapPolicy | str = DstOverlapPolicy.FIRST,
) -> MissedSlots:
    """Return the slots in ``(last_scheduled, now]`` and which of them should get a run.

    ``starting_deadline_seconds`` (Kubernetes ``startingDeadlineSeconds``): a slot is too late when
    ``slot + deadline < now`` and is not considered at all (C08.B: 200 s at 10:21:30 leaves 10:19,
    10:20, 10:21). ``policy``: ``catch_up_all`` runs every considered slot; ``latest_only`` only the
    most recent (Kubernetes v2 controller, Airflow catchup=False; C08.A: 1 run for 10:21, 112
    skipped); ``expire_after`` runs those with ``slot + expire_after_seconds >= now``. There is no cap
    on the backlog: the old Kubernetes controller stopped for good after 100 missed slots (C08).

    Raises ScheduleError for bad input, or ``expire_after`` without ``expire_after_seconds``.
    """
    cron, zone, gap, overlap = _prepare(cron, tz, dst_gap, dst_overlap)
    chosen = _policy(MissedRunPolicy, policy, "missed-run policy")
    start, end = _utc("last_scheduled", last_scheduled), _utc("now", now)
    deadline = _seconds("starting_deadline_seconds", starting_deadline_seconds, allow_none=True)
    expire = _seconds(
        "expire_after_seconds", expire_after_seconds, allow_none=chosen is not MissedRunPolicy.EXPIRE_AFTER
    )

    slots: list[datetime] = []
    next_slot: datetime | None = None
    for instant in _fire_times_after(cron, zone, start, gap, overlap):
        if instant > end:
            next_slot = instant
            break
        slots.append(instant)
    considered = [s for s in slots if deadline is None or s + timedelta(seconds=deadline) >= end]
    if chosen is MissedRunPolicy.LATEST_ONLY:
        to_run = considered[-1:]
    elif chosen is MissedRunPolicy.EXPIRE_AFTER:
        assert expire is not None
        to_run = [s for s in considered if s + timedelta(seconds=expire) >= end]
    else:
        to_run = considered
    run_set = set(to_run)

    def local(values: Iterable[datetime]) -> tuple[datetime, ...]:
        return tuple(v.astimezone(zone) for v in values)

    return MissedSlots(
        slots=local(slots),
        considered=local(considered),
        to_run=local(to_run),
        skipped=local(s for s in slots if s not in run_set),
        next_slot=next_slot.astimezone(zone) if next_slot else None,
    )


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
    cron, zone, gap, overlap = _prepare(cron, tz, dst_gap, dst_overlap)
    first, last = _utc("horizon_start", horizon_start), _utc("horizon_end", horizon_end)
    duration = timedelta(seconds=_seconds("run_duration_seconds", run_duration_seconds) or 0.0)
    deadline = _seconds("starting_deadline_seconds", starting_deadline_seconds, allow_none=True)

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

    for slot in _fire_times_after(cron, zone, first - _MICROSECOND, gap, overlap):
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
    zone = _zone(tz)
    at = _utc("event_at", event_at)
    slot = previous_fire_time(cron, zone, at, dst_gap=dst_gap, dst_overlap=dst_overlap)
    started = {_utc("started_slots", s) for s in started_slots}
    active = {_utc("active_slots", s) for s in active_slots}
    duplicate = slot.astimezone(UTC) in started
    first, second = _interpretations(at.astimezone(zone).replace(tzinfo=None), zone)
    return EventClassification(
        slot=slot,
        is_duplicate_start=duplicate,
        overlaps_active_run=bool(active),
        is_new_logical_run=not duplicate,
        in_dst_overlap=first < second,
    )


# --------------------------------------------------------------------------------------------------
# Identity keys (cases rule 5). Dedup is by identity, never by a time window.


class RunIdentity(NamedTuple):
    """A logical run: (job, tenant, environment, window_start, window_end), window in UTC."""

    job: str
    tenant: str
    environment: str
    window_start: datetime
    window_end: datetime


def run_identity(
    *, job: str, tenant: str, environment: str, window_start: datetime, window_end: datetime
) -> RunIdentity:
    """Return the identity of a logical run; the trigger kind is an attribute, not part of it.

    A manual run for June and the scheduled run for July both "dated" 2024-07-01 are two runs (C12.A,
    Airflow #41208). Raises IdentityError for a naive, empty or reversed window.
    """
    try:
        start, end = _utc("window_start", window_start), _utc("window_end", window_end)
    except ScheduleError as exc:
        raise IdentityError(str(exc)) from exc
    if start >= end:
        raise IdentityError(f"A window must end after it starts; got [{start.isoformat()}, {end.isoformat()}).")
    return RunIdentity(job, tenant, environment, start, end)


def trigger_key(
    *, job: str, tenant: str, environment: str, run_id: str | None = None, slot: datetime | None = None
) -> tuple[str, ...]:
    """Return the dedup key of a trigger: its explicit run id, else (job, tenant, environment, slot).

    Run ids are scoped to the job (Airflow's ``scheduled__<date>`` repeats across DAGs). Two triggers
    0.5 s apart with different run ids are two runs; the same run id twice is one (C12.B, Airflow
    #28486). A receipt timestamp is never a key: without run id and slot, IdentityError.
    """
    if run_id:
        return (job, "run_id", run_id)
    if slot is None:
        raise IdentityError("A trigger needs a run id or the slot it is for; a receipt time is not an identity.")
    try:
        at = _utc("slot", slot)
    except ScheduleError as exc:
        raise IdentityError(str(exc)) from exc
    return (job, tenant, environment, "slot", at.isoformat())


class AlertInstanceKey(NamedTuple):
    """An alert instance: Alertmanager fingerprint + ``startsAt`` (as a UTC instant)."""

    fingerprint: str
    starts_at: datetime


def _parse_instant(name: str, value: object) -> datetime:
    if not isinstance(value, str):
        raise IdentityError(f"{name} must be an ISO 8601 string; got {value!r}.")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise IdentityError(f"{name} is not an ISO 8601 time: {value!r}.") from None
    if parsed.tzinfo is None:
        raise IdentityError(f"{name} has no UTC offset: {value!r}.")
    return parsed.astimezone(UTC)


def alert_instance_key(alert: Mapping[str, object]) -> AlertInstanceKey:
    """Return (fingerprint, startsAt) for one Alertmanager alert (C10).

    Fingerprint alone is wrong (a resolved alert that fires again keeps it, with a new startsAt);
    groupKey alone is wrong (one group carries many alerts). Raises IdentityError when either is
    missing or malformed.
    """
    fingerprint = alert.get("fingerprint")
    if not isinstance(fingerprint, str) or not fingerprint:
        raise IdentityError("An alert needs a non-empty 'fingerprint'.")
    return AlertInstanceKey(fingerprint, _parse_instant("startsAt", alert.get("startsAt")))


@dataclass(frozen=True)
class AlertFold:
    """Alert instances after folding deliveries in.

    ``instances``: status (``firing``/``resolved``) per instance, known ones included.
    ``new_instance_keys``: instances first seen in these deliveries (one notification each).
    ``duplicate_count``: alerts that repeated a known instance (HA peer, resend, repeat_interval) or
    arrived stale for a resolved one.
    """

    deliveries_recorded: int
    instances: Mapping[AlertInstanceKey, str]
    new_instance_keys: tuple[AlertInstanceKey, ...]
    duplicate_count: int

    @property
    def open_count(self) -> int:
        return sum(1 for status in self.instances.values() if status == "firing")


def fold_alert_deliveries(
    deliveries: Iterable[Mapping[str, object]], *, known: Mapping[AlertInstanceKey, str] | None = None
) -> AlertFold:
    """Fan out each delivery's ``alerts[]`` and dedupe per alert instance (C10.A/B/C).

    Every delivery is recorded; an alert opens an instance the first time its key is seen; a
    ``resolved`` alert closes it; resolved is terminal (a stale ``firing`` does not reopen it - a real
    re-fire has a new startsAt). Two HA peers 40 s apart and a repeat after 4 h collapse alike.
    Raises IdentityError for an alert without fingerprint or startsAt.
    """
    instances: dict[AlertInstanceKey, str] = dict(known or {})
    new: list[AlertInstanceKey] = []
    deliveries_recorded = duplicates = 0
    for delivery in deliveries:
        deliveries_recorded += 1
        alerts = delivery.get("alerts", [])
        if not isinstance(alerts, list):
            raise IdentityError("A delivery's 'alerts' must be a list.")
        for alert in alerts:
            key = alert_instance_key(alert)
            status = "resolved" if alert.get("status") == "resolved" else "firing"
            previous = instances.get(key)
            if previous is None:
                new.append(key)
                instances[key] = status
            elif previous == "firing" and status == "resolved":
                instances[key] = status
            else:
                duplicates += 1
    return AlertFold(deliveries_recorded, instances, tuple(new), duplicates)


@dataclass(frozen=True)
class ReplayGuard:
    """Executor events folded by attempt key (the executor's task id; C11).

    ``attempts_recorded``: distinct keys. ``side_effects_applied``: keys whose first ``succeeded``
    claimed the side effect. ``duplicate_deliveries``: further ``succeeded`` events for a claimed key
    (suppressed, reported as duplicate delivery, not a second attempt). ``redelivery_gaps_seconds``:
    seconds between repeated ``received`` events for one key (a broker visibility timeout).
    """

    attempts_recorded: int
    side_effects_applied: int
    duplicate_deliveries: int
    redelivery_gaps_seconds: tuple[float, ...]


def replay_guard(events: Iterable[Mapping[str, object]]) -> ReplayGuard:
    """Fold ``{"t", "event", "task_id"}`` events: one attempt and one side effect per task id (C11).

    The side effect is claimed on the key before it runs, so the second ``succeeded`` of a task
    redelivered after the Redis visibility timeout is a duplicate delivery (Celery #2481). Raises
    IdentityError for an event without task id or time.
    """
    seen: set[str] = set()
    claimed: set[str] = set()
    last_received: dict[str, datetime] = {}
    gaps: list[float] = []
    duplicates = 0
    for event in events:
        task_id = event.get("task_id")
        if not isinstance(task_id, str) or not task_id:
            raise IdentityError("An executor event needs a 'task_id'.")
        at = _parse_instant("t", event.get("t"))
        seen.add(task_id)
        if event.get("event") == "received":
            if task_id in last_received:
                gaps.append((at - last_received[task_id]).total_seconds())
            last_received[task_id] = at
        elif event.get("event") == "succeeded":
            if task_id in claimed:
                duplicates += 1
            else:
                claimed.add(task_id)
    return ReplayGuard(len(seen), len(claimed), duplicates, tuple(gaps))

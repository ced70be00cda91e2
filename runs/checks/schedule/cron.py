"""Cron expressions, time zones and policies: the errors, the policy enums, and validation and
coercion of every input the schedule functions take (cases rules 1 and 4).

The schedule package's semantics (cron dialect, DST policies, the traps of aware datetimes) are in
docs/architecture.md, "Package notes"; "cases rule N" and "C01"... refer to tests/data/cases-README.md.
"""

from __future__ import annotations

import functools
import zoneinfo
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TypeVar

from cronsim import CronSim, CronSimError

SECOND = timedelta(seconds=1)
MICROSECOND = timedelta(microseconds=1)
_FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week")


class ScheduleError(ValueError):
    """A cron expression, time zone, policy or instant that the schedule functions cannot use.

    The message is meant for a person (it names the field or value at fault).
    """


class DstGapPolicy(StrEnum):
    """What a fixed-time slot inside a spring-forward gap does (docs/architecture.md "Vocabulary"; C01)."""

    NEXT_EXISTING = "next_existing"  # Debian cron, cronsim, Dagster: once, at the first instant after the gap
    SKIP = "skip"  # EventBridge Scheduler, robfig/cron (Kubernetes), Spring, node-cron
    SHIFT = "shift"  # Elastic Watcher, croner, python `schedule`: wall time + gap length (02:30 -> 03:30)


class DstOverlapPolicy(StrEnum):
    """Which occurrence of a repeated wall time a fixed-time slot runs at (cases rule 3, C02)."""

    FIRST = "first"  # Debian cron, cronsim
    SECOND = "second"  # Dagster
    BOTH = "both"  # what Kubernetes/croniter do; offered for executors that really run twice


class MissedRunPolicy(StrEnum):
    """Which missed slots an executor starts after an outage (docs/architecture.md "Vocabulary": Policies; C08)."""

    CATCH_UP_ALL = "catch_up_all"
    LATEST_ONLY = "latest_only"
    EXPIRE_AFTER = "expire_after"


class WindowAlignment(StrEnum):
    """The unit a derived processing window is floored to, in the job's zone (docs/architecture.md "Vocabulary")."""

    NONE = "none"
    HOUR = "hour"
    DAY = "day"
    MONTH = "month"


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


def zone_coerce(tz: str | zoneinfo.ZoneInfo) -> zoneinfo.ZoneInfo:
    if isinstance(tz, zoneinfo.ZoneInfo):
        return tz
    return validate_timezone(tz)


def utc_coerce(name: str, value: datetime) -> datetime:
    """``value`` as a UTC datetime; a naive value is refused (its meaning would depend on a zone)."""
    if not isinstance(value, datetime):
        raise ScheduleError(f"{name} must be a datetime, not {type(value).__name__}.")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ScheduleError(f"{name} must be an aware datetime (with a UTC offset); got {value.isoformat()}.")
    return value.astimezone(UTC)


_P = TypeVar("_P", bound=StrEnum)


def policy_coerce(kind: type[_P], value: _P | str, label: str) -> _P:
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(member.value for member in kind)
        raise ScheduleError(f"Unknown {label} {value!r}; expected one of {allowed}.") from None


def seconds_coerce(name: str, value: float | None, *, allow_none: bool = False) -> float | None:
    if value is None:
        if allow_none:
            return None
        raise ScheduleError(f"{name} is required.")
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ScheduleError(f"{name} must be a number of seconds >= 0; got {value!r}.")
    return float(value)


@functools.lru_cache(maxsize=1024)
def schedule_prepare(
    cron: str, tz: str | zoneinfo.ZoneInfo, dst_gap: DstGapPolicy | str, dst_overlap: DstOverlapPolicy | str
) -> tuple[str, zoneinfo.ZoneInfo, DstGapPolicy, DstOverlapPolicy]:
    """``(cron with single spaces, zone, gap policy, overlap policy)``, each checked: raises ScheduleError for
    a cron, zone or policy that is not one. Pure, so its answers are cached (every placement asks)."""
    validate_cron(cron)
    return (
        " ".join(cron.split()),
        zone_coerce(tz),
        policy_coerce(DstGapPolicy, dst_gap, "DST gap policy"),
        policy_coerce(DstOverlapPolicy, dst_overlap, "DST overlap policy"),
    )


# --- validation where a schedule is saved (a job, a target's override) --------------------------------------

# A calendar walk long enough to meet every day-of-month/day-of-week combination of a month, starting in a
# leap year (so 29 February is met too).
_WALK_START = datetime(2000, 1, 1)
_WALK_END = datetime(2001, 1, 1)


def cron_problem(expr: str) -> str | None:
    """Why ``expr`` cannot be a job's schedule, in words; None when it is a usable five-field cron.

    Uses cronsim's own message for a bad field ("Bad minute", "Bad day-of-month", ...) and says so
    separately when every field is valid but no date matches (``0 0 30 2 *``: it can never fire).
    """
    if not isinstance(expr, str) or not expr.strip():
        return "A cron expression is required, e.g. '30 2 * * *'."
    fields = expr.split()
    if fields[0].startswith("@"):
        return f"Macros like {fields[0]!r} are not supported: write the five fields (e.g. '0 0 * * *' for @daily)."
    if len(fields) != 5:
        return (
            f"A cron expression has five fields (minute hour day-of-month month day-of-week); "
            f"{expr.strip()!r} has {len(fields)}."
        )
    text = " ".join(fields)
    try:
        slots = CronSim(text, _WALK_START)
    except CronSimError as exc:
        if str(exc) == "Bad day-of-month" and _parses(" ".join([*fields[:3], "*", fields[4]])):
            return f"The cron expression {text!r} can never fire: none of its months has that day of the month."
        return f"{exc} in the cron expression {text!r} (cronsim: minute hour day-of-month month day-of-week)."
    try:
        next(slots)
    except StopIteration:
        return f"The cron expression {text!r} can never fire."
    return None


def _parses(expr: str) -> bool:
    try:
        CronSim(expr, _WALK_START)
    except CronSimError:
        return False
    return True


def alignment_problem(expr: str, alignment: WindowAlignment | str) -> str | None:
    """Why ``alignment`` is coarser than the shortest gap of ``expr``, in words; None when it fits.

    A derived window is floored to the alignment in the job's zone, so two fire times inside one hour
    (``hour``), one day (``day``) or one calendar month (``month``) would get the same, or an empty,
    window. The test is on wall-clock slots: every listed minute fires in each hour the cron fires, and
    every listed hour on each day; months are walked over a leap year. ``expr`` must be valid.
    """
    unit = policy_coerce(WindowAlignment, alignment, "window alignment")
    if unit == WindowAlignment.NONE:
        return None
    cron = CronSim(" ".join(expr.split()), _WALK_START)
    twice: str | None = None
    if len(cron.minutes) > 1:
        twice = "hour"
    elif len(cron.hours) > 1 and unit != WindowAlignment.HOUR:
        twice = "day"
    elif unit == WindowAlignment.MONTH:
        previous: datetime | None = None
        for slot in cron:
            if slot >= _WALK_END:
                break
            if previous is not None and (previous.year, previous.month) == (slot.year, slot.month):
                twice = "month"
                break
            previous = slot
    if twice is None:
        return None
    finest = {"hour": "'none'", "day": "'hour' or 'none'", "month": "'day', 'hour' or 'none'"}[twice]
    return (
        f"A window alignment of {unit.value!r} is coarser than the schedule: {expr.strip()!r} fires more than "
        f"once in one {twice}, so those runs would share a window. Use {finest}, or a schedule that fires at "
        f"most once per {unit.value}."
    )


def dst_both_problem(dst_overlap: DstOverlapPolicy | str, alignment: WindowAlignment | str) -> str | None:
    """Why the DST overlap policy ``both`` does not fit ``alignment``; None when it does.

    Under ``both`` a repeated wall time is two slots (docs/architecture.md "Vocabulary": Slot, rule 7),
    which only windows aligned to ``none`` or ``hour`` keep apart.
    """
    overlap = policy_coerce(DstOverlapPolicy, dst_overlap, "DST overlap policy")
    unit = policy_coerce(WindowAlignment, alignment, "window alignment")
    if overlap == DstOverlapPolicy.BOTH and unit not in (WindowAlignment.NONE, WindowAlignment.HOUR):
        return (
            f"The DST overlap policy 'both' runs a repeated hour twice; it needs a window alignment of "
            f"'none' or 'hour', not {unit.value!r}."
        )
    return None


def timezone_problem(name: str) -> str | None:
    """Why ``name`` is not a usable IANA zone, in words (``validate_timezone``'s message); None when it is."""
    try:
        validate_timezone(name)
    except ScheduleError as exc:
        return str(exc)
    except ValueError:  # e.g. a NUL character in the name
        return f"Unknown time zone {name!r}. Use an IANA name like 'Europe/Berlin' or 'UTC'."
    return None

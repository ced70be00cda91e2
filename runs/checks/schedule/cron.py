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


def schedule_prepare(
    cron: str, tz: str | zoneinfo.ZoneInfo, dst_gap: DstGapPolicy | str, dst_overlap: DstOverlapPolicy | str
) -> tuple[str, zoneinfo.ZoneInfo, DstGapPolicy, DstOverlapPolicy]:
    validate_cron(cron)
    return (
        " ".join(cron.split()),
        zone_coerce(tz),
        policy_coerce(DstGapPolicy, dst_gap, "DST gap policy"),
        policy_coerce(DstOverlapPolicy, dst_overlap, "DST overlap policy"),
    )

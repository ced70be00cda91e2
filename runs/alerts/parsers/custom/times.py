"""Times in a custom payload (``parse_time``): ISO 8601 to nanoseconds, epochs in four units, naive
times read in the mapping's zone (first occurrence in a DST overlap, refused in a gap)."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from runs.alerts.parsers.base import TimeFormatError
from runs.alerts.parsers.custom.vocabulary import TIME_FORMATS

_FRACTION = re.compile(r"[.,](\d+)")
_NUMBER = re.compile(r"[+-]?\d+(\.\d+)?")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_GO_ZERO_YEAR = "0001-01-01T00:00:00"


def zone_or_none(name: str | None) -> ZoneInfo | None:
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise TimeFormatError(f"unknown time zone {name!r}") from exc


def _place_naive(naive: datetime, zone: ZoneInfo | None, shown: str) -> datetime:
    """Read a naive wall time in ``zone``: first occurrence in a DST overlap, refused in a DST gap."""
    if zone is None:
        raise TimeFormatError(f"{shown!r} has no UTC offset and the mapping names no `timezone` to read it in")
    first = naive.replace(tzinfo=zone, fold=0)
    if first.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != naive:
        raise TimeFormatError(f"{shown!r} does not exist in {zone.key} (the clocks skipped it: a DST gap)")
    return first.astimezone(UTC)


def _epoch(number: Decimal, unit: str, shown: str) -> datetime:
    if unit == "auto":
        magnitude = abs(number)
        unit = (
            "epoch_s"
            if magnitude < Decimal(10**11)
            else "epoch_ms"
            if magnitude < Decimal(10**14)
            else "epoch_us"
            if magnitude < Decimal(10**17)
            else "epoch_ns"
        )
    scales: dict[str, Decimal] = {
        "epoch_s": Decimal(10**6),
        "epoch_ms": Decimal(10**3),
        "epoch_us": Decimal(1),
        "epoch_ns": Decimal(1) / 1000,
    }
    scale = scales[unit]
    try:
        micros = int(number * scale)
        return _EPOCH + timedelta(microseconds=micros)
    except (OverflowError, InvalidOperation) as exc:
        raise TimeFormatError(f"{shown!r} is out of range as {unit.replace('_', ' ')}") from exc


def parse_time(value: Any, *, time_format: str = "auto", timezone: str | None = None) -> datetime | None:
    """Parse a time the way ``TIME_FORMATS`` describe; return an aware UTC datetime (``None`` for null/"").

    ``iso``: ISO 8601 / RFC 3339, ``T`` or a space, an offset or ``Z``, any number of fractional digits
    (kept to microseconds); a naive time or a bare date is read in ``timezone`` (first occurrence in a
    DST overlap; a time in a DST gap is refused). ``epoch_*``: a number or a digit string in that unit.
    ``auto``: numbers and digit strings are epochs told apart by magnitude (< 1e11 seconds, < 1e14
    milliseconds, < 1e17 microseconds, else nanoseconds), anything else ISO. Go's zero time
    (``0001-01-01T00:00:00Z``, "not set") gives ``None``. Raises ``TimeFormatError``.
    """
    if value is None or value == "":
        return None
    if time_format not in TIME_FORMATS:
        raise TimeFormatError(f"unknown time format {time_format!r}")
    if isinstance(value, bool):
        raise TimeFormatError(f"{value!r} is not a time")
    shown = str(value)
    numeric = isinstance(value, (int, float)) or (isinstance(value, str) and _NUMBER.fullmatch(value.strip()))
    if time_format.startswith("epoch") or (time_format == "auto" and numeric):
        if not numeric:
            raise TimeFormatError(f"{shown!r} is not an epoch number")
        try:
            number = Decimal(value.strip()) if isinstance(value, str) else Decimal(str(value))
        except InvalidOperation as exc:
            raise TimeFormatError(f"{shown!r} is not an epoch number") from exc
        return _epoch(number, time_format, shown)
    if not isinstance(value, str):
        raise TimeFormatError(f"{shown!r} is not a timestamp string")
    return _parse_iso(value.strip(), zone_or_none(timezone))


def _parse_iso(text: str, zone: ZoneInfo | None) -> datetime | None:
    if text.startswith(_GO_ZERO_YEAR):
        return None  # Go's zero time (Nomad, Kubernetes): "not set", e.g. a running task's FinishedAt
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        day = date.fromisoformat(text)
        return _place_naive(datetime(day.year, day.month, day.day), zone, text)
    normalised = text
    if normalised[-1:] in ("Z", "z"):
        normalised = normalised[:-1] + "+00:00"
    # Python keeps microseconds: cut nanoseconds (Go, Nomad, Kubernetes) to six digits, never round up.
    normalised = _FRACTION.sub(lambda m: "." + (m.group(1) + "000000")[:6], normalised, count=1)
    try:
        parsed = datetime.fromisoformat(normalised)
    except ValueError as exc:
        raise TimeFormatError(f"{text!r} is not an ISO 8601 time") from exc
    try:
        if parsed.tzinfo is None:
            return _place_naive(parsed, zone, text)
        return parsed.astimezone(UTC)
    except OverflowError:  # e.g. 9999-12-31T23:00-05:00 is in the year 10000 in UTC
        raise TimeFormatError(f"{text!r} is outside the years 1 to 9999 in UTC") from None

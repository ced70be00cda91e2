"""The one way times are written: instants in a zone with its abbreviation, windows as a range.

Pages use the template tags built on this (``when`` for an instant, ``window`` for a window, in
``handover.templatetags.handover_tags``); text that is not a page (a needs-attention title, a
notification) uses these functions, so both read the same.
"""

from __future__ import annotations

import zoneinfo
from datetime import datetime


def clock(value: datetime) -> str:
    """``HH:MM``, or ``HH:MM:SS`` when the time has seconds (a window's edges are usually whole minutes)."""
    return f"{value:%H:%M:%S}" if value.second else f"{value:%H:%M}"


def window_parts(start: datetime, end: datetime, zone_name: str) -> tuple[str, str, str, str]:
    """A window ``[start, end)`` in ``zone_name`` as ``(first, joint, last, zone label)``.

    Within a day ``("2026-11-28 02:00", "–", "03:00", "CET")``; across days
    ``("2026-11-28 00:00", " – ", "2026-11-29 00:00", "CET")``; across a DST change the first edge
    carries its own abbreviation (``"2026-10-25 00:00 CEST"``). Seconds are cut.
    """
    zone = zoneinfo.ZoneInfo(zone_name)
    first, last = start.replace(microsecond=0).astimezone(zone), end.replace(microsecond=0).astimezone(zone)
    same_label = first.tzname() == last.tzname()
    if same_label and first.date() == last.date():
        return f"{first:%Y-%m-%d} {clock(first)}", "–", clock(last), str(last.tzname())
    first_text = f"{first:%Y-%m-%d} {clock(first)}" + ("" if same_label else f" {first.tzname()}")
    return first_text, " – ", f"{last:%Y-%m-%d} {clock(last)}", str(last.tzname())


def window_text(start: datetime, end: datetime, zone_name: str) -> str:
    """A window as plain text in the job's zone: ``2026-11-28 02:00–03:00 CET`` (see ``window_parts``)."""
    first, joint, last, label = window_parts(start, end, zone_name)
    return f"{first}{joint}{last} {label}"

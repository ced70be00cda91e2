"""Lengths of time in words: the one way pages, notes and reasons write a duration."""

from __future__ import annotations

from datetime import timedelta

UNITS = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


def seconds_in_words(value: int | float | timedelta | None) -> str:
    """A length of time in words, its two largest units: 1800 -> "30 minutes", 5400 -> "1 hour 30 minutes".

    ``value``: whole seconds (a model's ``*_seconds`` field) or a timedelta; empty when None. Below
    one second it says "0 seconds"; a negative length is written with a leading minus sign. The one
    way the pages write a duration (grace, tolerances, an attempt's length, a beat's silence).
    """
    if value is None or value == "":
        return ""
    seconds = int(value.total_seconds() if isinstance(value, timedelta) else value)
    rest = abs(seconds)
    parts = []
    for name, size in UNITS:
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count} {name}{'' if count == 1 else 's'}")
    words = " ".join(parts[:2]) or "0 seconds"
    return f"-{words}" if seconds < 0 else words

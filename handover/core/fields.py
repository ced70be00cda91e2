"""What every API shape shares: text without NUL, instants inside the range the app computes with,
enums that answer null rather than ``""``, and links that are an http(s) URL or null.

The API's contract (docs/api-changes.md): a value the database or the schedule arithmetic cannot
use is refused with a 400 naming the field, never stored and never a 500; an answer matches its
own schema (an empty enum or link is ``null``, documented as nullable).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import URLValidator
from rest_framework import serializers

NUL = "\x00"
NUL_MESSAGE = "Null characters are not allowed."

# The instants the API accepts: wide enough for any real schedule or window, narrow enough that
# converting to any zone, adding a grace period or walking a cron year stays inside datetime's range
# (years 1 and 9999 overflow the schedule arithmetic).
TIME_MIN = datetime(1970, 1, 1, tzinfo=UTC)
TIME_MAX = datetime(2200, 1, 1, tzinfo=UTC)
TIME_RANGE_MESSAGE = "Give a time from 1970-01-01 up to (not including) 2200-01-01 UTC."

_http_url = URLValidator(schemes=["http", "https"])


def has_nul(value: Any) -> bool:
    """Whether ``value`` (a string, or JSON-shaped lists and dicts, keys included) holds a NUL character."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if NUL in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def time_in_range(value: datetime) -> bool:
    """Whether the aware ``value`` lies in ``[TIME_MIN, TIME_MAX)``."""
    try:
        return TIME_MIN <= value.astimezone(UTC) < TIME_MAX
    except OverflowError:  # an offset that pushes the instant past year 1 or 9999
        return False


def http_url_or_none(value: str | None) -> str | None:
    """``value`` when it is an absolute http(s) URL; None for ``""``, None or anything else."""
    if not value:
        return None
    try:
        _http_url(value)
    except DjangoValidationError:
        return None
    return value


class BoundedDateTimeField(serializers.DateTimeField):
    """An ISO 8601 instant inside ``[TIME_MIN, TIME_MAX)``; outside it is a field error (400), never a 500."""

    def to_internal_value(self, value: Any) -> datetime:
        parsed = super().to_internal_value(value)
        if not time_in_range(parsed):
            raise serializers.ValidationError(TIME_RANGE_MESSAGE)
        return parsed


class BlankAsNullChoiceField(serializers.ChoiceField):
    """A read-only enum whose empty value (``""`` in the column) is answered as null, documented nullable."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("read_only", True)
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)

    def to_representation(self, value: Any) -> Any:
        if value in ("", None):
            return None
        return super().to_representation(value)


class HttpUrlOrNullField(serializers.URLField):
    """A read-only link: an absolute http(s) URL, or null when there is none (never ``""``)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("read_only", True)
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)

    def to_representation(self, value: Any) -> str | None:  # type: ignore[override]  # null: no link
        return http_url_or_none(value)


class TextField(serializers.CharField):
    """A text field that takes only a JSON string, as the schema says (``type: string``): DRF's
    ``CharField`` turns a number into its digits, so ``"description": 1.4e16`` was stored as
    ``"1.4e+16"``. Raises the field's 400 ``invalid`` otherwise.

    The one text rule of the API's input: every text field of an input serializer is a ``TextField``
    (or a subclass), never DRF's ``CharField``; a form body's values are strings, so forms pass."""

    default_error_messages = {"invalid": "Must be text (a JSON string)."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class HttpUrlField(TextField, serializers.URLField):
    """An absolute http(s) URL as input, given as a JSON string (DRF's URLField also takes ftp)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators.append(URLValidator(schemes=["http", "https"], message="Give an http(s) URL."))

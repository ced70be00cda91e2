"""JMESPath with a few pure string functions, ``{{ }}`` templates, and field specs compiled from a
mapping (an expression, a template or a constant); errors are ``MappingError`` with a message for a person."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import jmespath
from jmespath import exceptions as jmespath_errors
from jmespath import functions as jmespath_functions

from runs.alerts.parsers.base import TimeFormatError
from runs.alerts.parsers.custom.times import parse_time
from runs.alerts.parsers.custom.vocabulary import FIELDS, IDENTITY_FIELDS, MAX_EXPRESSION_CHARS, TIME_FORMATS

_TEMPLATE_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)


# The post's receive time, for ``received_at()`` while a document is mapped (set by ``receive_time``).
_RECEIVED_AT: ContextVar[datetime | None] = ContextVar("custom_mapping_received_at", default=None)
MAX_REGEX_CHARS = 200
MAX_REGEX_TEXT_CHARS = 10_000
_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(ms|[smhdw]?)\s*$")
_ISO_DURATION = re.compile(r"^P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


@contextmanager
def receive_time(at: datetime | None) -> Iterator[None]:
    """Make ``received_at()`` answer ``at`` (aware; None: the function answers null) while mapping."""
    token = _RECEIVED_AT.set(at)
    try:
        yield
    finally:
        _RECEIVED_AT.reset(token)


def _iso_text(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def _as_datetime(value: Any, time_format: str = "auto") -> datetime:
    """A time function's argument as an aware UTC datetime; ``MappingError`` in plain words otherwise."""
    try:
        parsed = parse_time(value, time_format=time_format, timezone="UTC")
    except TimeFormatError as exc:
        raise MappingError(str(exc)) from exc
    if parsed is None:
        raise MappingError("found no time")
    return parsed


def _as_seconds(duration: Any, unit: str = "s") -> float:
    """Seconds of a duration: a number of ``unit`` (``ms``, ``s``, ``m``, ``h``, ``d``, ``w``; seconds by
    default), ``90s``/``15m``/``2h``/``1d``/``1w``/``500ms``, or ISO 8601 ``PT1H30M``."""
    if isinstance(duration, bool):
        raise MappingError(f"{duration!r} is not a duration")
    if isinstance(duration, (int, float)):
        if unit not in _DURATION_UNITS:
            raise MappingError(f"the unit {unit!r} is not one of {', '.join(_DURATION_UNITS)}")
        return float(duration) * _DURATION_UNITS[unit]
    if isinstance(duration, str):
        match = _DURATION.match(duration)
        if match:
            return float(match.group(1)) * _DURATION_UNITS[match.group(2) or "s"]
        iso = _ISO_DURATION.match(duration.strip().upper())
        if iso and any(iso.groups()):
            weeks, days, hours, minutes, seconds = (float(g) if g else 0.0 for g in iso.groups())
            return weeks * 604800 + days * 86400 + hours * 3600 + minutes * 60 + seconds
    raise MappingError(f"{duration!r} is not a duration (seconds, 15m, 2h, 1d or ISO 8601 PT1H)")


def _shift(value: Any, duration: Any, rest: tuple[Any, ...], sign: int) -> str:
    if len(rest) > 1 or (rest and not isinstance(rest[0], str)):
        raise MappingError("add/sub(t, duration, unit): the unit is one of ms, s, m, h, d, w")
    moment = _as_datetime(value)
    try:
        return _iso_text(moment + sign * timedelta(seconds=_as_seconds(duration, rest[0] if rest else "s")))
    except OverflowError as exc:
        raise MappingError("the result is out of range") from exc


def _window_of(value: Any, period: str) -> list[str]:
    moment = _as_datetime(value)
    if period == "hour":
        start = moment.replace(minute=0, second=0, microsecond=0)
        end = start + timedelta(hours=1)
    elif period == "day":
        start = moment.replace(hour=0, minute=0, second=0, microsecond=0)
        end = start + timedelta(days=1)
    elif period == "week":  # ISO weeks: Monday 00:00
        start = moment.replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=moment.weekday())
        end = start + timedelta(days=7)
    elif period == "month":
        start = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    elif period == "year":
        start = moment.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
        end = start.replace(year=start.year + 1)
    else:  # a duration: the window of that length starting at the given time
        start = moment
        end = moment + timedelta(seconds=_as_seconds(period))
        if end <= start:
            raise MappingError(f"the period {period!r} is not positive")
    return [_iso_text(start), _iso_text(end)]


def _truthy(value: Any) -> bool:
    """JMESPath's truth: false, null, "", [] and {} are false; everything else (0 included) is true."""
    if isinstance(value, bool):
        return value
    return value is not None and not (isinstance(value, (str, list, dict)) and not value)


class _Functions(jmespath_functions.Functions):
    """Extra JMESPath functions: pure, bounded helpers for text, time, defaults and conditions (no I/O).

    Times are ISO 8601 strings in UTC (``2026-11-28T01:00:00+00:00``) so that they chain: a time
    function's result is any other's input and any time field's value.
    """

    @jmespath_functions.signature()
    def _func_received_at(self) -> str | None:
        at = _RECEIVED_AT.get()
        return _iso_text(at) if at is not None else None

    # to_datetime(value[, format]): JMESPath has no optional arguments, so the format rides a variadic tail
    # A null time in gives null out (a field that is not there yet), as JMESPath's own functions do.
    @jmespath_functions.signature({"types": ["string", "number", "null"], "variadic": True})
    def _func_to_datetime(self, value: Any, *rest: Any) -> str | None:
        time_format = rest[0] if rest else "auto"
        if len(rest) > 1 or time_format not in TIME_FORMATS:
            raise MappingError(f"to_datetime(value, format): the format is one of {', '.join(TIME_FORMATS)}")
        return None if value is None else _iso_text(_as_datetime(value, time_format))

    # add(t, duration[, unit]) and sub(...): a number is seconds unless a unit (ms, s, m, h, d, w) follows
    @jmespath_functions.signature(
        {"types": ["string", "number", "null"]}, {"types": ["string", "number", "null"], "variadic": True}
    )
    def _func_add(self, value: Any, duration: Any, *rest: Any) -> str | None:
        return None if value is None or duration is None else _shift(value, duration, rest, 1)

    @jmespath_functions.signature(
        {"types": ["string", "number", "null"]}, {"types": ["string", "number", "null"], "variadic": True}
    )
    def _func_sub(self, value: Any, duration: Any, *rest: Any) -> str | None:
        return None if value is None or duration is None else _shift(value, duration, rest, -1)

    @jmespath_functions.signature({"types": ["string", "number", "null"]}, {"types": ["string"]})
    def _func_window_of(self, value: Any, period: str) -> list[str] | None:
        return None if value is None else _window_of(value, period)

    # regex_group(text, pattern[, group]): the group (default 1) of the first match, or null
    @jmespath_functions.signature({"types": ["string"]}, {"types": ["string", "number"], "variadic": True})
    def _func_regex_group(self, text: str, pattern: Any, *rest: Any) -> str | None:
        group = rest[0] if rest else 1
        if not isinstance(pattern, str) or len(rest) > 1 or isinstance(group, str):
            raise MappingError("regex_group(text, pattern, group): a pattern string, then a group number")
        if len(pattern) > MAX_REGEX_CHARS:
            raise MappingError(f"regex_group: a pattern holds at most {MAX_REGEX_CHARS} characters")
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise MappingError(f"regex_group: {pattern!r} is not a regular expression ({exc})") from exc
        match = compiled.search(text[:MAX_REGEX_TEXT_CHARS])
        if match is None:
            return None
        try:
            return match.group(int(group))
        except IndexError as exc:
            raise MappingError(f"regex_group: the pattern has no group {int(group)}") from exc

    @jmespath_functions.signature({"types": []}, {"types": []}, {"types": []})
    def _func_if(self, condition: Any, then: Any, otherwise: Any) -> Any:
        return then if _truthy(condition) else otherwise

    @jmespath_functions.signature({"types": [], "variadic": True})
    def _func_coalesce(self, *values: Any) -> Any:
        return next((v for v in values if v not in (None, "")), None)

    @jmespath_functions.signature({"types": ["string"]}, {"types": ["string"]})
    def _func_split(self, text: str, separator: str) -> list[str]:
        if not separator:
            return list(text)
        return text.split(separator)

    @jmespath_functions.signature({"types": ["string"]})
    def _func_lower(self, text: str) -> str:
        return text.lower()

    @jmespath_functions.signature({"types": ["string"]})
    def _func_upper(self, text: str) -> str:
        return text.upper()

    @jmespath_functions.signature({"types": ["string"]})
    def _func_trim(self, text: str) -> str:
        return text.strip()

    @jmespath_functions.signature({"types": ["string"]}, {"types": ["string"]}, {"types": ["string"]})
    def _func_replace(self, text: str, old: str, new: str) -> str:
        if not old:
            return text
        return text.replace(old, new)


_OPTIONS = jmespath.Options(custom_functions=_Functions())
FUNCTION_NAMES = frozenset(_Functions.FUNCTION_TABLE)


class MappingError(ValueError):
    """A mapping expression that cannot be compiled or evaluated; the message is for a person."""


def _function_names(node: Any) -> set[str]:
    names: set[str] = set()
    if isinstance(node, dict):
        if node.get("type") == "function_expression":
            names.add(str(node.get("value")))
        for child in node.get("children", []):
            names |= _function_names(child)
    return names


def compile_expression(text: Any) -> Any:
    """Compile one JMESPath expression; raise ``MappingError`` naming what is wrong.

    Unknown function names are refused here (JMESPath itself only notices them when evaluating).
    """
    if not isinstance(text, str) or not text.strip():
        raise MappingError("an expression must be a non-empty string")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise MappingError(f"an expression holds at most {MAX_EXPRESSION_CHARS} characters")
    try:
        compiled = jmespath.compile(text)
    except jmespath_errors.JMESPathError as exc:
        raise MappingError(f"`{text}` is not a valid JMESPath expression: {_one_line(exc)}") from exc
    unknown = sorted(_function_names(compiled.parsed) - FUNCTION_NAMES)
    if unknown:
        raise MappingError(f"`{text}` calls unknown function{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}()")
    return compiled


def _one_line(exc: Exception) -> str:
    text = str(exc).strip()
    return " ".join(text.split()) if text else type(exc).__name__


def plain_words(exc: Exception) -> str:
    """A JMESPath evaluation error in plain words (the library's own messages quote Python internals)."""
    if isinstance(exc, jmespath_errors.JMESPathTypeError):
        expected = " or ".join(str(t) for t in exc.expected_types)
        article = "an" if str(exc.actual_type)[:1] in "aeiou" else "a"
        got = "nothing (null)" if exc.actual_type == "null" else f"{article} {exc.actual_type}"
        return f"{exc.function_name}() got {got} where it needs {expected}"
    if isinstance(exc, jmespath_errors.ArityError):  # VariadictArityError too
        at_least = "at least " if isinstance(exc, jmespath_errors.VariadictArityError) else ""
        return f"{exc.function_name}() takes {at_least}{exc.expected_arity} argument(s), not {exc.actual_arity}"
    if isinstance(exc, jmespath_errors.UnknownFunctionError):
        return _one_line(exc).replace("Unknown function: ", "no function ")
    return _one_line(exc)


def jmespath_search(compiled: Any, data: Any) -> Any:
    try:
        return compiled.search(data, options=_OPTIONS)
    except jmespath_errors.JMESPathError as exc:
        raise MappingError(f"`{compiled.expression}` failed: {plain_words(exc)}") from exc
    except (TypeError, ValueError, OverflowError) as exc:  # e.g. sort_by over mixed types
        raise MappingError(f"`{compiled.expression}` failed: {_one_line(exc)}") from exc


def as_text(value: Any) -> str:
    """How a placeholder prints a value: strings as they are, whole floats without ``.0``, JSON else."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


@dataclass
class FieldSpec:
    """A compiled field spec: an expression, a template, or a constant (plus a time format)."""

    name: str
    shown: str  # how the editor shows the spec
    evaluate: Callable[[Any], tuple[Any, str]]  # record -> (value, what found nothing / "")
    time_format: str | None = None
    optional: bool = False  # an error here is a warning on the record, never a problem


def _spec_path(text: Any) -> Callable[[Any], tuple[Any, str]]:
    compiled = compile_expression(text)

    def evaluate(record: Any) -> tuple[Any, str]:
        value = jmespath_search(compiled, record)
        return value, ("" if value not in (None, "") else f"`{text}` found nothing")

    return evaluate


def _spec_template(text: Any) -> Callable[[Any], tuple[Any, str]]:
    if not isinstance(text, str) or not text:
        raise MappingError("a template must be a non-empty string")
    if len(text) > MAX_EXPRESSION_CHARS * 2:
        raise MappingError(f"a template holds at most {MAX_EXPRESSION_CHARS * 2} characters")
    pieces: list[str | Any] = []
    position = 0
    for match in _TEMPLATE_PLACEHOLDER.finditer(text):
        pieces.append(text[position : match.start()])
        pieces.append(compile_expression(match.group(1).strip()))
        position = match.end()
    rest = text[position:]
    if "{{" in rest or "}}" in rest:
        raise MappingError(f"the template `{text}` has an unbalanced {{{{ or }}}}")
    pieces.append(rest)
    if not any(not isinstance(p, str) for p in pieces):
        raise MappingError(f"the template `{text}` has no {{{{ placeholder }}}}; use a value for a constant")

    def evaluate(record: Any) -> tuple[Any, str]:
        out: list[str] = []
        for piece in pieces:
            if isinstance(piece, str):
                out.append(piece)
                continue
            value = jmespath_search(piece, record)
            if value in (None, ""):
                return None, f"`{piece.expression}` in the template found nothing"
            out.append(as_text(value))
        return "".join(out), ""

    return evaluate


def compile_field(name: str, spec: Any) -> FieldSpec:
    """Compile the spec of field ``name``; raise ``MappingError`` for an unusable one."""
    time_format = None
    if isinstance(spec, str):
        return FieldSpec(name=name, shown=spec, evaluate=_spec_path(spec))
    if not isinstance(spec, Mapping):
        raise MappingError("give a JMESPath expression, or an object with `path`, `template` or `value`")
    unknown = sorted(set(spec) - {"path", "template", "value", "format", "optional"})
    if unknown:
        raise MappingError(f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}")
    chosen = [k for k in ("path", "template", "value") if k in spec]
    if len(chosen) != 1:
        raise MappingError("give exactly one of `path`, `template` or `value`")
    if "format" in spec:
        if FIELDS.get(name) != "time":
            raise MappingError("`format` applies to time fields only")
        if spec["format"] not in TIME_FORMATS:
            raise MappingError(f"`format` must be one of {', '.join(TIME_FORMATS)}")
        time_format = spec["format"]
    optional = spec.get("optional", False)
    if not isinstance(optional, bool):
        raise MappingError("`optional` is true or false")
    if optional and (name in IDENTITY_FIELDS or name == "correlate_by"):
        raise MappingError(f"{name} identifies the run or attempt: it is never optional")
    kind = chosen[0]
    if kind == "path":
        return FieldSpec(name, str(spec["path"]), _spec_path(spec["path"]), time_format, optional)
    if kind == "template":
        return FieldSpec(name, str(spec["template"]), _spec_template(spec["template"]), time_format, optional)
    constant = spec["value"]
    if constant is None or isinstance(constant, (dict, list)):
        raise MappingError("a `value` must be a string, number or boolean")
    shown = json.dumps(constant, ensure_ascii=False)
    return FieldSpec(name, shown, lambda _record: (constant, ""), time_format, optional)

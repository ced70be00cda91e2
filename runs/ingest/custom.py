"""Custom integrations: any JSON payload mapped to runs and attempts by configuration, no code.

A ``custom`` integration keeps its mapping in ``Integration.settings["mapping"]`` (a JSON object;
export/import is that object as it stands). Expressions are JMESPath (https://jmespath.org, the
query language AWS and Grafana tooling use for JSON), evaluated by the ``jmespath`` library with a
few extra pure string functions (``split``, ``lower``, ``upper``, ``replace``, ``trim``). A small
template form composes strings: literal text with ``{{ <JMESPath> }}`` placeholders. Nothing else
runs: no attribute access, no imports, no loops beyond what JMESPath itself defines.

The mapping::

    {
      "records": "Events[?Topic=='Allocation'].Payload.Allocation",  # optional splitter
      "fields": {                                  # field -> spec (see below); unmapped fields stay empty
        "job_key": "split(JobID, '/periodic-')[0]",
        "tenant": "Namespace",
        "scheduled_for": {"path": "split(JobID, '/periodic-')[1]", "format": "epoch_s"},
        "execution_id": "ID",
        "status": "ClientStatus",
        "log_url": {"template": "https://nomad.example/ui/allocations/{{ ID }}"},
        ...
      },
      "status_map": {"complete": "succeeded", "lost": "failed"},   # source value -> our status
      "trigger_map": {"Naginator": "automatic_retry"},               # source value -> our trigger
      "defaults": {"environment": "prod"},       # used when a field is unmapped or finds nothing
      "timezone": "Europe/Berlin",               # zone of naive times and bare dates (else they are garbled)
      "time_format": "auto",                     # default format of time fields (see TIME_FORMATS)
      "window_rule": "payload_or_schedule",      # see WINDOW_RULES
      "scheduled_for_rule": "exact"              # see SCHEDULED_FOR_RULES
    }

A field spec is a JMESPath expression (a string), or an object with exactly one of ``path`` (an
expression), ``template`` (text with ``{{ expression }}`` placeholders) or ``value`` (a constant),
plus ``format`` for time fields. Fields: see ``FIELDS``.

Rules:

- ``records`` selects the records of a post (a list; an object is one record; an empty list gives
  no alert). Without it the body is one record. At most ``MAX_RECORDS`` per post.
- Status and trigger values are looked up in their map (exactly, then ignoring case); a value that is
  already one of ours passes; any other value is a problem ("has no mapping"). ``status_map`` may also
  map to ``resolved``/``acknowledged``: such a record is a resolve/acknowledge signal, never a status.
- Times (``parse_time``): ISO 8601 with an offset, fractional seconds to nanoseconds (kept to
  microseconds), ``Z``; epoch seconds, milliseconds, microseconds or nanoseconds (numbers or digit
  strings; ``auto`` tells them apart by magnitude); naive times and bare dates in the mapping's
  ``timezone`` -- an ambiguous wall time (DST overlap) takes its first occurrence, a wall time in a
  DST gap never existed and is a problem.
- Window: with ``payload_or_schedule`` (default) a window found in the payload wins, else the
  mechanism derives it from ``scheduled_for`` and the job's schedule; ``payload`` requires the
  window; ``schedule`` ignores payload windows. ``scheduled_for_rule`` ``latest_fire_at_or_before``
  reads the ``scheduled_for`` field as a time at or after the fire time (a build's start) and lets
  the mechanism take the job's latest fire time at or before it.
- Dedup key (computed from the raw body, before redaction): the ``dedup_key`` field when mapped,
  else the JSON list of the mapped identity (job, tenant, environment, window, scheduled time,
  execution id, attempt number); the mapped status is always appended, so a "running" and a
  "failed" of one execution are two alerts. A record with problems uses the SHA-256 of its own
  canonical JSON instead, so different unmappable records never merge while a re-sent one does.
- Never raises for a bad mapping: an expression error, a field that finds nothing, a value that
  cannot be converted, a status with no mapping all become the record's ``problems`` (the alert is
  ``unmatched`` with those reasons and is reprocessed after the mapping is fixed). Only a body that
  is not JSON, or a post with too many records, is a format error (400).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import jmespath
from jmespath import exceptions as jmespath_errors
from jmespath import functions as jmespath_functions

from runs.ingest.base import (
    AlertKind,
    FormatError,
    InvalidItem,
    ParsedAlert,
    ParseResult,
    TimeFormatError,
    summarise_error,
)

SOURCE = "custom"
DEFAULT_SETTINGS: dict[str, Any] = {"mapping": {}, "default_tenant": None, "default_environment": None}
# Secret-looking key names anywhere in the payload are redacted by the mechanism's rules; a custom
# payload has no fixed secret paths of its own.
REDACT_PATHS: tuple[str, ...] = ()

MAX_RECORDS = 1000
MAX_EXPRESSION_CHARS = 1000
STATUSES = ("queued", "running", "succeeded", "failed", "timed_out")
SIGNALS = {"resolved": AlertKind.RESOLVE, "acknowledged": AlertKind.ACKNOWLEDGE}
TRIGGERS = ("scheduled", "automatic_retry", "manual_replay", "catch_up")
TERMINAL = ("succeeded", "failed", "timed_out")
TIME_FORMATS = ("auto", "iso", "epoch_s", "epoch_ms", "epoch_us", "epoch_ns")
WINDOW_RULES = ("payload_or_schedule", "payload", "schedule")
SCHEDULED_FOR_RULES = ("exact", "latest_fire_at_or_before")
MAPPING_KEYS = (
    "records",
    "fields",
    "status_map",
    "trigger_map",
    "defaults",
    "timezone",
    "time_format",
    "window_rule",
    "scheduled_for_rule",
)

# field -> kind of value it holds
FIELDS: dict[str, str] = {
    "job_key": "text",
    "tenant": "text",
    "environment": "text",
    "window_start": "time",
    "window_end": "time",
    "scheduled_for": "time",
    "execution_id": "text",
    "attempt_number": "integer",
    "trigger": "trigger",
    "status": "status",
    "scheduled_at": "time",
    "started_at": "time",
    "ended_at": "time",
    "error_summary": "long_text",
    "correlation_ref": "text",
    "log_url": "url",
    "config_version": "text",
    "dedup_key": "text",
    "group_ref": "text",
    "summary": "text",
    "occurred_at": "time",
}
FIELD_HELP: dict[str, str] = {
    "job_key": "the registered job's key",
    "tenant": "the tenant's slug",
    "environment": "prod, staging, ...",
    "window_start": "start of the processing window (with window_end)",
    "window_end": "end of the processing window (with window_start)",
    "scheduled_for": "the fire time of the run (or, with latest_fire_at_or_before, a time at or after it)",
    "execution_id": "the executor's id of this attempt",
    "attempt_number": "1 for the first attempt",
    "trigger": "scheduled, automatic_retry, manual_replay, catch_up (through trigger_map)",
    "status": "queued, running, succeeded, failed, timed_out (through status_map)",
    "scheduled_at": "when this attempt was meant to start",
    "started_at": "when this attempt started",
    "ended_at": "when this attempt ended",
    "error_summary": "the error, cut to 2,000 characters",
    "correlation_ref": "a trace or correlation id",
    "log_url": "an http(s) link to the logs",
    "config_version": "the effective configuration version",
    "dedup_key": "the sender's own event key (the status is appended)",
    "group_ref": "the sender's incident key, for resolve/acknowledge signals",
    "summary": "one human line for the inbox",
    "occurred_at": "when the reported thing happened",
}
# What every attempt record needs (a default counts); the window is checked on its own.
REQUIRED = ("job_key", "tenant", "environment", "execution_id", "status")
_TEMPLATE_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_FRACTION = re.compile(r"[.,](\d+)")
_NUMBER = re.compile(r"[+-]?\d+(\.\d+)?")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_GO_ZERO_YEAR = "0001-01-01T00:00:00"


# What the "new custom integration" form starts from: every common field, to be edited to the payload.
STARTER_MAPPING: dict[str, Any] = {
    "records": None,
    "fields": {
        "job_key": "job",
        "tenant": "tenant",
        "environment": "environment",
        "scheduled_for": "scheduled_for",
        "execution_id": "run_id",
        "attempt_number": "attempt",
        "status": "status",
        "started_at": "started_at",
        "ended_at": "ended_at",
        "error_summary": "error",
        "correlation_ref": "trace_id",
        "log_url": "log_url",
    },
    "status_map": {"ok": "succeeded", "error": "failed"},
    "defaults": {"environment": "prod"},
    "timezone": "UTC",
}


# --- JMESPath with a few pure string functions ----------------------------------------------------


class _Functions(jmespath_functions.Functions):
    """Extra JMESPath functions: pure, bounded string helpers (no I/O, no code)."""

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
FUNCTION_NAMES = frozenset(_Functions.FUNCTION_TABLE)  # type: ignore[attr-defined]


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


def _search(compiled: Any, data: Any) -> Any:
    try:
        return compiled.search(data, options=_OPTIONS)
    except jmespath_errors.JMESPathError as exc:
        raise MappingError(f"`{compiled.expression}` failed: {_one_line(exc)}") from exc
    except (TypeError, ValueError, OverflowError) as exc:  # e.g. sort_by over mixed types
        raise MappingError(f"`{compiled.expression}` failed: {_one_line(exc)}") from exc


def _as_text(value: Any) -> str:
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


# --- field specs --------------------------------------------------------------------------------


@dataclass
class FieldSpec:
    """A compiled field spec: an expression, a template, or a constant (plus a time format)."""

    name: str
    shown: str  # how the editor shows the spec
    evaluate: Callable[[Any], tuple[Any, str]]  # record -> (value, what found nothing / "")
    time_format: str | None = None


def _spec_path(text: Any) -> Callable[[Any], tuple[Any, str]]:
    compiled = compile_expression(text)

    def evaluate(record: Any) -> tuple[Any, str]:
        value = _search(compiled, record)
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
            value = _search(piece, record)
            if value in (None, ""):
                return None, f"`{piece.expression}` in the template found nothing"
            out.append(_as_text(value))
        return "".join(out), ""

    return evaluate


def compile_field(name: str, spec: Any) -> FieldSpec:
    """Compile the spec of field ``name``; raise ``MappingError`` for an unusable one."""
    time_format = None
    if isinstance(spec, str):
        return FieldSpec(name=name, shown=spec, evaluate=_spec_path(spec))
    if not isinstance(spec, Mapping):
        raise MappingError("give a JMESPath expression, or an object with `path`, `template` or `value`")
    unknown = sorted(set(spec) - {"path", "template", "value", "format"})
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
    kind = chosen[0]
    if kind == "path":
        return FieldSpec(name, str(spec["path"]), _spec_path(spec["path"]), time_format)
    if kind == "template":
        return FieldSpec(name, str(spec["template"]), _spec_template(spec["template"]), time_format)
    constant = spec["value"]
    if constant is None or isinstance(constant, (dict, list)):
        raise MappingError("a `value` must be a string, number or boolean")
    return FieldSpec(name, json.dumps(constant, ensure_ascii=False), lambda _record: (constant, ""), time_format)


# --- time -----------------------------------------------------------------------------------------


def _zone(name: str | None) -> ZoneInfo | None:
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
    scale = {"epoch_s": 10**6, "epoch_ms": 10**3, "epoch_us": 1, "epoch_ns": Decimal(1) / 1000}[unit]
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
    return _parse_iso(value.strip(), _zone(timezone))


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
    if parsed.tzinfo is None:
        return _place_naive(parsed, zone, text)
    return parsed.astimezone(UTC)


# --- the compiled mapping -----------------------------------------------------------------------


@dataclass
class CompiledMapping:
    """A mapping ready to evaluate, with every error found while compiling it (path -> messages)."""

    raw: Mapping[str, Any]
    records: Any | None = None  # compiled splitter
    fields: dict[str, FieldSpec] = field(default_factory=dict)
    status_map: dict[str, str] = field(default_factory=dict)
    trigger_map: dict[str, str] = field(default_factory=dict)
    defaults: dict[str, Any] = field(default_factory=dict)
    timezone: str | None = None
    time_format: str = "auto"
    window_rule: str = "payload_or_schedule"
    scheduled_for_rule: str = "exact"
    errors: dict[str, list[str]] = field(default_factory=dict)

    def add_error(self, path: str, message: str) -> None:
        self.errors.setdefault(path, []).append(message)


def _compile_value_map(compiled: CompiledMapping, name: str, value: Any, allowed: tuple[str, ...]) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        compiled.add_error(name, "must be an object of source value -> our value")
        return {}
    result: dict[str, str] = {}
    for source_value, ours in value.items():
        if ours not in allowed:
            compiled.add_error(f"{name}.{source_value}", f"{ours!r} is not one of {', '.join(allowed)}")
            continue
        result[str(source_value)] = str(ours)
    return result


def compile_mapping(mapping: Any) -> CompiledMapping:
    """Compile a mapping (see the module docstring); never raises: errors are collected by path.

    Paths name the offending part: ``fields.status``, ``status_map.down``, ``timezone``, ``records``,
    ``defaults.tenant``, ``mapping`` (the whole), ``fields`` (a required field neither mapped nor
    defaulted).
    """
    if mapping is None:
        mapping = {}
    compiled = CompiledMapping(raw=mapping if isinstance(mapping, Mapping) else {})
    if not isinstance(mapping, Mapping):
        compiled.add_error("mapping", "the mapping must be a JSON object")
        return compiled
    for key in sorted(set(mapping) - set(MAPPING_KEYS)):
        compiled.add_error(key, f"unknown key; a mapping has {', '.join(MAPPING_KEYS)}")
    if mapping.get("records") not in (None, ""):
        try:
            compiled.records = compile_expression(mapping["records"])
        except MappingError as exc:
            compiled.add_error("records", str(exc))
    fields = mapping.get("fields") or {}
    if not isinstance(fields, Mapping):
        compiled.add_error("fields", "must be an object of field -> expression")
        fields = {}
    for name, spec in fields.items():
        if name not in FIELDS:
            compiled.add_error(f"fields.{name}", f"unknown field; fields are {', '.join(FIELDS)}")
            continue
        if spec in (None, ""):
            continue
        try:
            compiled.fields[name] = compile_field(name, spec)
        except MappingError as exc:
            compiled.add_error(f"fields.{name}", str(exc))
    compiled.status_map = _compile_value_map(compiled, "status_map", mapping.get("status_map"), (*STATUSES, *SIGNALS))
    compiled.trigger_map = _compile_value_map(compiled, "trigger_map", mapping.get("trigger_map"), TRIGGERS)
    defaults = mapping.get("defaults") or {}
    if not isinstance(defaults, Mapping):
        compiled.add_error("defaults", "must be an object of field -> value")
        defaults = {}
    for name, value in defaults.items():
        if name not in FIELDS:
            compiled.add_error(f"defaults.{name}", f"unknown field; fields are {', '.join(FIELDS)}")
        elif isinstance(value, (dict, list)):
            compiled.add_error(f"defaults.{name}", "a default must be a string, number or boolean")
        elif value not in (None, ""):
            compiled.defaults[name] = value
    zone = mapping.get("timezone")
    if zone not in (None, ""):
        try:
            _zone(str(zone))
            compiled.timezone = str(zone)
        except TimeFormatError as exc:
            compiled.add_error("timezone", f"{exc}; use an IANA name like 'Europe/Berlin'")
    for key, allowed in (
        ("time_format", TIME_FORMATS),
        ("window_rule", WINDOW_RULES),
        ("scheduled_for_rule", SCHEDULED_FOR_RULES),
    ):
        value = mapping.get(key)
        if value in (None, ""):
            continue
        if value not in allowed:
            compiled.add_error(key, f"must be one of {', '.join(allowed)}")
        else:
            setattr(compiled, key, value)
    return compiled


def mapping_errors(mapping: Any) -> dict[str, list[str]]:
    """Every error of a mapping that is about to be saved: compile errors, and required fields unmapped.

    Returns path -> messages (empty when the mapping can be saved).
    """
    compiled = compile_mapping(mapping)
    errors = dict(compiled.errors)
    if "mapping" in errors:
        return errors
    for name in REQUIRED:
        if name not in compiled.fields and name not in compiled.defaults and f"fields.{name}" not in errors:
            errors.setdefault(f"fields.{name}", []).append(
                f"{name} is required: map it or give it a default ({FIELD_HELP[name]})"
            )
    has_window = "window_start" in compiled.fields and "window_end" in compiled.fields
    if ("window_start" in compiled.fields) != ("window_end" in compiled.fields):
        missing = "window_end" if "window_start" in compiled.fields else "window_start"
        errors.setdefault(f"fields.{missing}", []).append("window_start and window_end go together")
    has_scheduled = "scheduled_for" in compiled.fields or "scheduled_for" in compiled.defaults
    needs_scheduled = compiled.window_rule == "schedule" or compiled.scheduled_for_rule != "exact"
    if compiled.window_rule == "payload" and not has_window:
        errors.setdefault("window_rule", []).append("the rule `payload` needs window_start and window_end mapped")
    elif (needs_scheduled or not has_window) and not has_scheduled and "fields.scheduled_for" not in errors:
        errors.setdefault("fields.scheduled_for", []).append(
            "map scheduled_for (or window_start and window_end): without them no run can be placed"
        )
    return errors


# --- evaluation -----------------------------------------------------------------------------------


@dataclass
class FieldResult:
    """One field of one record as the editor shows it: what was found, what it became, what went wrong."""

    name: str
    spec: str = ""  # the expression/template as written ("" when unmapped)
    found: Any = None  # the raw value the spec produced
    value: Any = None  # the converted value (datetimes aware UTC)
    source: str = "unmapped"  # mapping | default | unmapped
    error: str = ""
    missing: str = ""  # an optional field whose spec found nothing ("`x` found nothing")


@dataclass
class MappedRecord:
    """One record of a post: per-field results, the ParsedAlert the mechanism gets, and warnings."""

    index: int
    fields: dict[str, FieldResult]
    alert: ParsedAlert
    warnings: list[str] = field(default_factory=list)


@dataclass
class MappingOutcome:
    """What a mapping made of one body: its records, errors of the mapping itself, and notes."""

    records: list[MappedRecord]
    mapping_errors: dict[str, list[str]]
    notes: dict[str, Any] = field(default_factory=dict)


def _lookup(table: Mapping[str, str], key: str) -> str | None:
    if key in table:
        return table[key]
    folded = key.casefold()
    return next((v for k, v in table.items() if k.casefold() == folded), None)


def _map_key(value: Any) -> str:
    return _as_text(value).strip() if isinstance(value, (str, int, float, bool)) else ""


def _convert(name: str, value: Any, compiled: CompiledMapping, spec: FieldSpec | None) -> Any:
    """Convert a found value to the field's type; raise ``MappingError`` with a message for a person."""
    kind = FIELDS[name]
    if kind == "time":
        time_format = (spec.time_format if spec else None) or compiled.time_format
        try:
            return parse_time(value, time_format=time_format, timezone=compiled.timezone)
        except TimeFormatError as exc:
            raise MappingError(str(exc)) from exc
    if kind == "integer":
        if isinstance(value, bool):
            raise MappingError(f"{value!r} is not a whole number")
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, str) and value.strip().lstrip("+").isdigit():
            value = int(value.strip())
        if not isinstance(value, int):
            raise MappingError(f"{value!r} is not a whole number")
        if value < 1:
            raise MappingError(f"{value} is not an attempt number (they start at 1)")
        return value
    if kind in ("status", "trigger"):
        key = _map_key(value)
        if not key:
            raise MappingError(f"{value!r} is not a {kind} value")
        table = compiled.status_map if kind == "status" else compiled.trigger_map
        allowed = (*STATUSES, *SIGNALS) if kind == "status" else TRIGGERS
        mapped = _lookup(table, key)
        if mapped is None and key.casefold() in allowed:
            mapped = key.casefold()
        if mapped is None:
            ours = STATUSES if kind == "status" else TRIGGERS
            raise MappingError(f"the value {key!r} has no mapping: add it to {kind}_map (to one of {', '.join(ours)})")
        return mapped
    if kind == "long_text" and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return summarise_error("; ".join(v for v in value if v))
    if isinstance(value, bool) or isinstance(value, (dict, list)):
        if kind == "long_text":
            return summarise_error(_as_text(value))
        raise MappingError(f"found {type(value).__name__} {_as_text(value)[:80]!r}, not text")
    text = _as_text(value).strip()
    if kind == "long_text":
        return summarise_error(text)
    return text


def _evaluate_field(name: str, record: Any, compiled: CompiledMapping) -> FieldResult:
    spec = compiled.fields.get(name)
    result = FieldResult(name=name, spec=spec.shown if spec else "")
    if f"fields.{name}" in compiled.errors:
        result.error = "; ".join(compiled.errors[f"fields.{name}"])
        return result
    missing = "not mapped"
    if spec is not None:
        try:
            result.found, missing = spec.evaluate(record)
        except MappingError as exc:
            result.error = str(exc)
            return result
        if not missing:
            result.source = "mapping"
            try:
                result.value = _convert(name, result.found, compiled, spec)
            except MappingError as exc:
                result.error = f"{exc} (found by `{spec.shown}`)"
            return result
    if name in compiled.defaults:
        result.source = "default"
        result.found = compiled.defaults[name]
        try:
            result.value = _convert(name, result.found, compiled, spec)
        except MappingError as exc:
            result.error = f"the default {exc}"
        return result
    result.found = None
    result.missing = missing if spec is not None else ""
    if name in REQUIRED:
        result.error = f"{missing} and the mapping has no default"
    return result


def _canonical(record: Any) -> str:
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def map_record(record: Any, compiled: CompiledMapping, index: int = 0) -> MappedRecord:
    """Evaluate every field of one record and build its ``ParsedAlert`` (problems filled, never raises)."""
    results = {name: _evaluate_field(name, record, compiled) for name in FIELDS}
    values = {name: r.value for name, r in results.items()}
    problems = [f"{name}: {r.error}" for name, r in results.items() if r.error]
    warnings: list[str] = []

    status = values["status"]
    kind = SIGNALS.get(status, AlertKind.ATTEMPT) if status else AlertKind.ATTEMPT
    if kind != AlertKind.ATTEMPT:
        # A signal names the attempt by the sender's incident key or by execution id; no status of its own.
        problems = [p for p in problems if not p.startswith("execution_id:") or not values["group_ref"]]
    log_url = values["log_url"] or ""
    if log_url and not log_url.startswith(("http://", "https://")):
        warnings.append(f"log_url {log_url[:80]!r} is not an http(s) link: dropped")
        log_url = ""

    # The window: a payload window wins (unless the rule ignores it); else the scheduled time places it.
    window_start, window_end = values["window_start"], values["window_end"]
    if compiled.window_rule == "schedule":
        window_start = window_end = None
    elif (window_start is None) != (window_end is None) and not results["window_start"].error:
        if not results["window_end"].error:
            missing = "window_end" if window_end is None else "window_start"
            problems.append(f"window: {missing} found nothing while the other end was found")
        window_start = window_end = None
    elif window_start and window_end and window_end <= window_start:
        problems.append(f"window: window_end {_iso(window_end)} is not after window_start {_iso(window_start)}")
        window_start = window_end = None
    scheduled_for = values["scheduled_for"]
    details: dict[str, Any] = {}
    if scheduled_for is not None and compiled.scheduled_for_rule == "latest_fire_at_or_before":
        # The mechanism takes the job's latest fire time at or before this instant (a build's start).
        details["scheduled_for_rule"] = "latest_fire_at_or_before_starts_at"
        details["starts_at"] = scheduled_for.isoformat()
        scheduled_for = None
    has_window = window_start is not None and window_end is not None
    if kind == AlertKind.ATTEMPT and not has_window and not details and scheduled_for is None:
        if not any(p.startswith(("window", "scheduled_for")) for p in problems):
            found_nothing = [r.missing for r in (results["window_start"], results["window_end"]) if r.missing]
            if compiled.window_rule != "payload":
                found_nothing += [results["scheduled_for"].missing] if results["scheduled_for"].missing else []
            why = f" ({'; '.join(found_nothing)})" if found_nothing else ""
            if compiled.window_rule == "payload":
                problems.append(f"window: the rule `payload` needs window_start and window_end, and found none{why}")
            else:
                problems.append(f"window: found neither a window nor a scheduled time in the record{why}")
    if warnings:
        details["mapping_warnings"] = warnings

    job_key, tenant, environment = values["job_key"] or None, values["tenant"] or None, values["environment"] or None
    execution_id = values["execution_id"] or None
    state = status or ""
    if problems:
        dedup = json.dumps(["unmapped", hashlib.sha256(_canonical(record).encode()).hexdigest()])
    elif values["dedup_key"]:
        dedup = json.dumps(["key", values["dedup_key"], state], ensure_ascii=False)
    else:
        identity = [
            job_key,
            tenant,
            environment,
            _iso(window_start),
            _iso(window_end),
            _iso(scheduled_for) or details.get("starts_at"),
            execution_id,
            values["attempt_number"],
            state,
        ]
        dedup = json.dumps(identity, ensure_ascii=False)
    attempt_status = status if kind == AlertKind.ATTEMPT else None
    occurred_at = values["occurred_at"] or (
        values["ended_at"] if attempt_status in TERMINAL else values["started_at"] or values["scheduled_at"]
    )
    summary = values["summary"] or " ".join(str(p) for p in (job_key, execution_id, status) if p)
    alert = ParsedAlert(
        dedup_key=dedup,
        kind=kind,
        job_key=job_key,
        tenant=tenant,
        environment=environment,
        window_start=window_start if has_window else None,
        window_end=window_end if has_window else None,
        scheduled_for=scheduled_for,
        execution_id=execution_id,
        attempt_number=values["attempt_number"],
        trigger=values["trigger"],
        status=attempt_status,
        scheduled_at=values["scheduled_at"],
        started_at=values["started_at"],
        ended_at=values["ended_at"],
        error_summary=values["error_summary"] or "",
        correlation_ref=values["correlation_ref"] or "",
        log_url=log_url,
        config_version=values["config_version"] or "",
        occurred_at=occurred_at,
        group_ref=values["group_ref"] or "",
        summary=summary[:200],
        problems=problems,
        details=details,
    )
    return MappedRecord(index=index, fields=results, alert=alert, warnings=warnings)


def map_document(document: Any, mapping: Any) -> MappingOutcome:
    """Apply ``mapping`` to a parsed JSON ``document``: split it into records and map each one.

    Never raises for a bad mapping or an odd document: a splitter that fails or finds nothing usable
    gives one record (the whole document) carrying that problem, so the post lands ``unmatched`` and
    can be reprocessed after a fix. Raises ``FormatError`` only for more than ``MAX_RECORDS`` records.
    """
    compiled = compile_mapping(mapping)
    errors = {k: v for k, v in compiled.errors.items()}
    splitter_problem = ""
    items: list[Any] = [document]
    if "records" in compiled.errors:
        splitter_problem = "records: " + "; ".join(compiled.errors["records"])
    elif compiled.records is not None:
        try:
            found = _search(compiled.records, document)
        except MappingError as exc:
            found, splitter_problem = None, f"records: {exc}"
        if isinstance(found, list):
            items = found
        elif isinstance(found, Mapping):
            items = [found]
        elif not splitter_problem:
            splitter_problem = (
                f"records: `{compiled.records.expression}` found nothing"
                if found is None
                else f"records: `{compiled.records.expression}` found {type(found).__name__}, not a list of records"
            )
    if len(items) > MAX_RECORDS:
        raise FormatError(f"a post holds at most {MAX_RECORDS} records, not {len(items)}", field="records")
    records = []
    for index, item in enumerate(items):
        mapped = map_record(item, compiled, index)
        if splitter_problem:
            mapped.alert.problems.insert(0, splitter_problem)
            mapped.alert.dedup_key = json.dumps(["unmapped", hashlib.sha256(_canonical(item).encode()).hexdigest()])
        records.append(mapped)
    notes = {"records_found": 0} if not items else {}
    return MappingOutcome(records=records, mapping_errors=errors, notes=notes)


def load_json(body: bytes) -> Any:
    """Decode a post's body as JSON; raise ``FormatError`` (400) when it is not JSON."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise FormatError(f"The body is not valid JSON: {exc}", field="body") from exc


def parse(body: bytes, *, settings: Mapping[str, Any], received_at: datetime) -> ParseResult:
    """Map a post with the integration's ``settings["mapping"]`` into records, in post order.

    Raises ``FormatError`` for a body that is not JSON or carries more than ``MAX_RECORDS`` records.
    Every other fault (a bad mapping, a missing field, an unmapped status) is a record's ``problems``.
    """
    document = load_json(body)
    outcome = map_document(document, settings.get("mapping"))
    alerts: list[ParsedAlert | InvalidItem] = [r.alert for r in outcome.records]
    return ParseResult(alerts=alerts, notes=outcome.notes)

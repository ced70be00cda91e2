"""Compiling and validating a mapping: ``compile_mapping`` collects every error by path and never
raises; ``mapping_errors`` adds what a mapping must have before it is saved (required fields, a window
or a scheduled time)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runs.alerts.parsers.base import TimeFormatError
from runs.alerts.parsers.custom.expressions import FieldSpec, MappingError, compile_expression, compile_field
from runs.alerts.parsers.custom.times import zone_or_none
from runs.alerts.parsers.custom.vocabulary import (
    CORRELATED_FIELDS,
    EVENT_STATUSES,
    FIELD_HELP,
    FIELDS,
    MAPPING_KEYS,
    REQUIRED,
    SCHEDULED_FOR_RULES,
    SIGNALS,
    STATUSES,
    TIME_FORMATS,
    TRIGGERS,
    WINDOW_RULES,
)


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
    correlate_by: FieldSpec | None = None  # the id the events of one execution share (correlation)
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
    if mapping.get("correlate_by") not in (None, ""):
        try:
            compiled.correlate_by = compile_field("correlate_by", mapping["correlate_by"])
        except MappingError as exc:
            compiled.add_error("correlate_by", str(exc))
    compiled.status_map = _compile_value_map(
        compiled, "status_map", mapping.get("status_map"), (*STATUSES, *SIGNALS, *EVENT_STATUSES)
    )
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
            zone_or_none(str(zone))
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
    # With correlation, job, tenant, environment and window may come from the earlier event of the execution.
    correlated = CORRELATED_FIELDS if compiled.correlate_by is not None else ()
    for name in REQUIRED:
        if name in correlated:
            continue
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
    elif (
        (needs_scheduled or not has_window)
        and not has_scheduled
        and not correlated
        and "fields.scheduled_for" not in errors
    ):
        errors.setdefault("fields.scheduled_for", []).append(
            "map scheduled_for (or window_start and window_end): without them no run can be placed"
        )
    return errors

"""Evaluating a compiled mapping: each field of a record found, converted and checked, the record's
``ParsedAlert`` with its problems and dedup key, and a document split into records."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from runs.alerts.parsers.base import AlertKind, FormatError, ParsedAlert, TimeFormatError, sha256_text, summarise_error
from runs.alerts.parsers.custom.compiler import CompiledMapping, compile_mapping
from runs.alerts.parsers.custom.expressions import FieldSpec, MappingError, as_text, jmespath_search, receive_time
from runs.alerts.parsers.custom.times import parse_time
from runs.alerts.parsers.custom.vocabulary import (
    CORRELATED_FIELDS,
    EVENT_STATUSES,
    FIELDS,
    MAX_RECORDS,
    REQUIRED,
    SIGNALS,
    STATUSES,
    TERMINAL,
    TRIGGERS,
)


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
    return as_text(value).strip() if isinstance(value, (str, int, float, bool)) else ""


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
        allowed = (*STATUSES, *SIGNALS, *EVENT_STATUSES) if kind == "status" else TRIGGERS
        mapped = _lookup(table, key)
        if mapped is None and key.casefold() in allowed:
            mapped = key.casefold()
        if mapped is None:
            ours = STATUSES if kind == "status" else TRIGGERS  # kept short: received/missed are in the docs
            raise MappingError(f"the value {key!r} has no mapping: add it to {kind}_map (to one of {', '.join(ours)})")
        return mapped
    if kind == "long_text" and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return summarise_error("; ".join(v for v in value if v))
    if isinstance(value, bool):  # a condition's false is an answer, not a fault: text "true"/"false"
        return as_text(value)
    if isinstance(value, (dict, list)):
        if kind == "long_text":
            return summarise_error(as_text(value))
        raise MappingError(f"found {type(value).__name__} {as_text(value)[:80]!r}, not text")
    text = as_text(value).strip()
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


PROBLEM_MAX_CHARS = 160


def short_problems(problems: list[str]) -> list[str]:
    """Unmatched reasons as stored on the alert: each names its field first and is cut to
    ``PROBLEM_MAX_CHARS`` (the editor shows every field's message whole)."""
    return [p if len(p) <= PROBLEM_MAX_CHARS else p[: PROBLEM_MAX_CHARS - 1] + "…" for p in problems]


def _canonical(record: Any) -> str:
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _correlation_key(record: Any, compiled: CompiledMapping) -> tuple[str, str]:
    """``(the record's correlate_by value as text, a problem naming correlate_by or "")``; ``("", "")``
    for a mapping without correlation."""
    spec = compiled.correlate_by
    if spec is None:
        if "correlate_by" in compiled.errors:
            return "", "correlate_by: " + "; ".join(compiled.errors["correlate_by"])
        return "", ""
    try:
        found, missing = spec.evaluate(record)
    except MappingError as exc:
        return "", f"correlate_by: {exc}"
    if missing:
        return "", f"correlate_by: {missing}"
    if isinstance(found, (dict, list)):
        return "", f"correlate_by: found {type(found).__name__}, not text (by `{spec.shown}`)"
    return as_text(found).strip(), ""


def _lacks_identity(results: dict[str, FieldResult]) -> bool:
    """True when the record's own mapping finds no job, no tenant, or neither a window nor a scheduled time
    (a default does not count): such a record takes them from the earlier event it correlates with."""

    def own(name: str) -> bool:
        return results[name].source == "mapping" and not results[name].error

    has_time = (own("window_start") and own("window_end")) or own("scheduled_for")
    return not (own("job_key") and own("tenant") and has_time)


def map_record(record: Any, compiled: CompiledMapping, index: int = 0) -> MappedRecord:
    """Evaluate every field of one record and build its ``ParsedAlert`` (problems filled, never raises)."""
    results = {name: _evaluate_field(name, record, compiled) for name in FIELDS}
    correlation_key, correlation_problem = _correlation_key(record, compiled)
    correlates = bool(correlation_key) and _lacks_identity(results)
    if correlates:
        # Job, tenant, environment and window come from the earlier event of the execution (the mechanism
        # looks it up): what this record lacks is not a problem, and a default never outranks that event.
        for name in CORRELATED_FIELDS:
            if results[name].source != "mapping":
                results[name].error, results[name].value = "", None
    warnings: list[str] = []
    for name, result in results.items():
        spec = compiled.fields.get(name)
        if result.error and spec is not None and spec.optional:
            # an optional field that fails is left empty with a warning: the alert still maps
            warnings.append(f"{name} (optional) left empty: {result.error}")
            result.value = None
    values = {name: r.value for name, r in results.items()}
    problems = [
        f"{name}: {r.error}"
        for name, r in results.items()
        if r.error and not (compiled.fields.get(name) is not None and compiled.fields[name].optional)
    ]

    if correlation_problem and _lacks_identity(results):
        problems.append(correlation_problem)

    status = values["status"]
    kind = (SIGNALS.get(status) or EVENT_STATUSES.get(status) or AlertKind.ATTEMPT) if status else AlertKind.ATTEMPT
    if kind in SIGNALS.values():
        # A signal names the attempt by the sender's incident key or by execution id; no status of its own.
        problems = [p for p in problems if not p.startswith("execution_id:") or not values["group_ref"]]
    elif kind == AlertKind.MISSED:
        # A slot that never ran has no execution of its own.
        problems = [p for p in problems if not p.startswith("execution_id:")]
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
    if kind != AlertKind.RESOLVE and kind != AlertKind.ACKNOWLEDGE and not correlates:
        needs_window = not has_window and not details and scheduled_for is None
    else:
        needs_window = False
    if needs_window:
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
    problems = short_problems(problems)

    job_key, tenant, environment = values["job_key"] or None, values["tenant"] or None, values["environment"] or None
    execution_id = values["execution_id"] or None
    state = status or ""
    if problems:
        dedup = json.dumps(["unmapped", sha256_text(_canonical(record))])
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
        # A new start under a reused execution id is a new alert, not a re-send (docs/slots.md).
        if values["started_at"] is not None:
            identity.append(_iso(values["started_at"]))
        if correlation_key:
            identity.append(["correlate_by", correlation_key])
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
        correlation_key=correlation_key,
        summary=summary[:200],
        problems=problems,
        details=details,
    )
    return MappedRecord(index=index, fields=results, alert=alert, warnings=warnings)


def map_document(document: Any, mapping: Any, *, received_at: datetime | None = None) -> MappingOutcome:
    """Apply ``mapping`` to a parsed JSON ``document``: split it into records and map each one.

    ``received_at`` (aware) is what the mapping's ``received_at()`` answers (null without it).

    Never raises for a bad mapping or an odd document: a splitter that fails or finds nothing usable
    gives one record (the whole document) carrying that problem, so the post lands ``unmatched`` and
    can be reprocessed after a fix. Raises ``FormatError`` only for more than ``MAX_RECORDS`` records.
    """
    with receive_time(received_at):
        return _map_document(document, compile_mapping(mapping))


def _map_document(document: Any, compiled: CompiledMapping) -> MappingOutcome:
    errors = {k: v for k, v in compiled.errors.items()}
    splitter_problem = ""
    items: list[Any] = [document]
    if "records" in compiled.errors:
        splitter_problem = "records: " + "; ".join(compiled.errors["records"])
    elif compiled.records is not None:
        try:
            found = jmespath_search(compiled.records, document)
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
            mapped.alert.dedup_key = json.dumps(["unmapped", sha256_text(_canonical(item))])
        records.append(mapped)
    notes = {"records_found": 0} if not items else {}
    return MappingOutcome(records=records, mapping_errors=errors, notes=notes)

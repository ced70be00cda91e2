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

The adapter is a package (``runs.ingest.get_adapter`` imports it like any parser module; everything
public is re-exported here): ``parser`` (the adapter interface: ``SOURCE``, ``DEFAULT_SETTINGS``,
``REDACT_PATHS``, ``parse``), ``vocabulary`` (fields, statuses, rules, the starter mapping),
``expressions`` (JMESPath and templates, compiled field specs), ``times`` (``parse_time``),
``compiler`` (compiling and validating a mapping: errors by path) and ``evaluation`` (mapping a
document's records to ``ParsedAlert``s, never raising for a bad mapping).
"""

from __future__ import annotations

from runs.ingest.custom.compiler import CompiledMapping, compile_mapping, mapping_errors
from runs.ingest.custom.evaluation import FieldResult, MappedRecord, MappingOutcome, map_document, map_record
from runs.ingest.custom.expressions import FUNCTION_NAMES, FieldSpec, MappingError, compile_expression, compile_field
from runs.ingest.custom.parser import DEFAULT_SETTINGS, REDACT_PATHS, SOURCE, load_json, parse
from runs.ingest.custom.times import parse_time
from runs.ingest.custom.vocabulary import (
    FIELD_HELP,
    FIELDS,
    MAPPING_KEYS,
    MAX_EXPRESSION_CHARS,
    MAX_RECORDS,
    REQUIRED,
    SCHEDULED_FOR_RULES,
    SIGNALS,
    STARTER_MAPPING,
    STATUSES,
    TERMINAL,
    TIME_FORMATS,
    TRIGGERS,
    WINDOW_RULES,
)

__all__ = [
    "CompiledMapping",
    "DEFAULT_SETTINGS",
    "FIELDS",
    "FIELD_HELP",
    "FUNCTION_NAMES",
    "FieldResult",
    "FieldSpec",
    "MAPPING_KEYS",
    "MAX_EXPRESSION_CHARS",
    "MAX_RECORDS",
    "MappedRecord",
    "MappingError",
    "MappingOutcome",
    "REDACT_PATHS",
    "REQUIRED",
    "SCHEDULED_FOR_RULES",
    "SIGNALS",
    "SOURCE",
    "STARTER_MAPPING",
    "STATUSES",
    "TERMINAL",
    "TIME_FORMATS",
    "TRIGGERS",
    "WINDOW_RULES",
    "compile_expression",
    "compile_field",
    "compile_mapping",
    "load_json",
    "map_document",
    "map_record",
    "mapping_errors",
    "parse",
    "parse_time",
]

"""The adapter interface of the custom source: its settings, and ``parse`` (body in, records out).

Custom integrations map any JSON payload to runs and attempts by configuration, no code. This docstring
is the reference of the mapping language (people's guide: ``docs/custom-integrations.md``).

A ``custom`` integration keeps its mapping in ``Integration.settings["mapping"]`` (a JSON object;
export/import is that object as it stands). Expressions are JMESPath (https://jmespath.org, the
query language AWS and Grafana tooling use for JSON), evaluated by the ``jmespath`` library with a
few extra pure functions (``runs.alerts.parsers.custom.expressions``): text (``split``, ``lower``,
``upper``, ``replace``, ``trim``, ``regex_group(text, pattern[, group])``), time (``received_at()``,
``to_datetime(value[, epoch_s|epoch_ms|iso|auto])``, ``add(t, duration)``, ``sub(t, duration)``,
``window_of(t, hour|day|week|month|year|duration)`` -- times are ISO 8601 UTC strings, durations
seconds, ``15m``/``2h``/``1d`` or ISO ``PT1H``), defaults and conditions (``coalesce(a, b, ...)``,
``if(condition, then, else)``). A small
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
      "scheduled_for_rule": "exact",             # see SCHEDULED_FOR_RULES
      "correlate_by": "run_id"                   # optional: the id the events of one execution share
    }

A field spec is a JMESPath expression (a string), or an object with exactly one of ``path`` (an
expression), ``template`` (text with ``{{ expression }}`` placeholders) or ``value`` (a constant),
plus ``format`` for time fields and ``optional: true`` (an error in that field -- an expression
that fails, a value that cannot be converted -- leaves it empty with a warning instead of making the
alert unmatched; identity fields, ``IDENTITY_FIELDS`` in ``vocabulary``, are never optional). A
``false`` found for a text field is the text ``false``. Fields: ``FIELDS`` in ``vocabulary``.

Rules:

- ``records`` selects the records of a post (a list; an object is one record; an empty list gives
  no alert). Without it the body is one record. At most ``MAX_RECORDS`` per post.
- Status and trigger values are looked up in their map (exactly, then ignoring case); a value that is
  already one of ours passes; any other value is a problem ("has no mapping"). ``status_map`` may also
  map to ``resolved``/``acknowledged``: such a record is a resolve/acknowledge signal, never a status.
- Times (``times.parse_time``): ISO 8601 with an offset, fractional seconds to nanoseconds (kept to
  microseconds), ``Z``; epoch seconds, milliseconds, microseconds or nanoseconds (numbers or digit
  strings; ``auto`` tells them apart by magnitude); naive times and bare dates in the mapping's
  ``timezone`` -- an ambiguous wall time (DST overlap) takes its first occurrence, a wall time in a
  DST gap never existed and is a problem.
- Correlation: with ``correlate_by`` (a spec like a field's, never optional) every record carries its
  value as ``correlation_key``; a record whose own mapping finds no job, no tenant, or neither a window
  nor a scheduled time (defaults do not count) is not faulted for them: the mechanism takes them from
  the earlier event with the same value (``runs.alerts.correlation``). ``status_map`` may map to
  ``received`` (registers identity, no attempt) and ``missed`` (a slot that never ran: no execution id).
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

The adapter is the package ``runs/alerts/parsers/custom/`` (``runs.alerts.parsers.registry`` maps the
``custom`` slug to this module), one module per step, each imported from where it is defined: ``parser``
(this adapter interface: ``SOURCE``, ``DEFAULT_SETTINGS``, ``REDACT_PATHS``, ``parse``), ``vocabulary``
(fields, statuses, rules, the starter mapping), ``expressions`` (JMESPath and templates, compiled field
specs), ``times`` (``parse_time``), ``compiler`` (compiling and validating a mapping: errors by path) and
``evaluation`` (mapping a document's records to ``ParsedAlert``s, never raising for a bad mapping).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from runs.alerts.parsers import base
from runs.alerts.parsers.base import FormatError, InvalidItem, ParsedAlert, ParseResult
from runs.alerts.parsers.custom.evaluation import map_document

SOURCE = "custom"
DEFAULT_SETTINGS: dict[str, Any] = {"mapping": {}, "default_tenant": None, "default_environment": None}
# Secret-looking key names anywhere in the payload are redacted by the mechanism's rules; a custom
# payload has no fixed secret paths of its own.
REDACT_PATHS: tuple[str, ...] = ()


def load_json(body: bytes) -> Any:
    """Decode a post's body with the shared loader (``runs.alerts.parsers.base.load_json``: depth-limited,
    finite numbers only); raise ``FormatError`` (400) when it is not JSON Handover accepts."""
    try:
        return base.load_json(body)
    except ValueError as exc:
        raise FormatError(f"The body is not valid JSON: {exc}", field="body") from exc


def parse(body: bytes, *, settings: Mapping[str, Any], received_at: datetime) -> ParseResult:
    """Map a post with the integration's ``settings["mapping"]`` into records, in post order.

    Raises ``FormatError`` for a body that is not JSON or carries more than ``MAX_RECORDS`` records.
    Every other fault (a bad mapping, a missing field, an unmapped status) is a record's ``problems``.
    """
    document = load_json(body)
    outcome = map_document(document, settings.get("mapping"), received_at=received_at)
    alerts: list[ParsedAlert | InvalidItem] = [r.alert for r in outcome.records]
    return ParseResult(alerts=alerts, notes=outcome.notes)

"""The contract between the ingestion mechanism and the per-source parsers.

A source is a pure parser module ``runs/ingest/<source>.py`` (no ORM, no settings access)
plus declarative integration settings. Each module exposes:

- ``SOURCE: str`` -- the API slug (``POST /api/v1/alerts/<SOURCE>/``).
- ``DEFAULT_SETTINGS: dict`` -- per-source defaults (which label carries the tenant, ...);
  an integration's own ``settings`` JSON is laid over them (see ``merged_settings``).
- ``REDACT_PATHS: tuple[str, ...]`` -- dotted JSON paths (``*`` matches any key or list index)
  whose values are secrets and are replaced before the body is stored (DESIGN.md rule 8).
- ``parse(body: bytes, *, settings: Mapping[str, Any], received_at: datetime) -> ParseResult``
  -- raises ``FormatError`` when the post as a whole breaks the source's own format (the
  mechanism answers 400 and stores the Delivery ``rejected``). A record that is valid for the
  source but lacks or garbles one of *our* conventions is returned with ``problems`` filled in
  (it becomes an ``unmatched`` alert). In a batch, an item that breaks the source's format is
  returned as an ``InvalidItem`` (it becomes a ``rejected`` alert; the rest are processed).

Optional hooks:

- ``credential_from_body(body: bytes) -> str | None`` -- for senders that carry the key in the
  body (PagerDuty's ``routing_key``); the ``Authorization: Bearer`` header wins when both exist.
- ``render_response(*, delivery_id, alerts: list[dict], error: FormatError | None) -> tuple[int, dict]``
  -- for senders that expect their own response shape (PagerDuty Events v2).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

ERROR_SUMMARY_MAX_CHARS = 2000


class AlertKind:
    """What a parsed record reports; the mechanism applies each kind differently."""

    ATTEMPT = "attempt"  # a state of one technical execution: creates/moves an Attempt
    RUN = "run"  # about the run as a whole (Airflow DAG-level failure): timeline event on the run only
    RESOLVE = "resolve"  # a resolve signal: timeline event on the attempt, never a status change
    ACKNOWLEDGE = "acknowledge"  # someone acknowledged the alert: timeline event only
    DEFINITION = "definition"  # describes the job definition (a Kubernetes CronJob): compared, no run


class FormatError(Exception):
    """The post breaks the source's own format (invalid JSON, wrong shape, a required field missing).

    ``field`` is a dotted path naming the offending field (``""`` for the body as a whole);
    ``errors`` maps field paths to messages when there are several.
    """

    def __init__(self, message: str, *, field: str = "", errors: dict[str, list[str]] | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.errors = errors or ({field: [message]} if field else {})


@dataclass
class AttemptState:
    """Another attempt of the same run that one record also reports on.

    Airflow's retry callback announces the next try (``status="queued"``); a Kubernetes Job object
    reports its earlier failed pods beside the newest one. The mechanism applies these in order of
    ``number`` around the record's own attempt, each through the attempt transition service.
    """

    execution_id: str
    number: int | None
    trigger: str
    status: str
    scheduled_at: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    error_summary: str = ""


@dataclass
class ParsedAlert:
    """One record parsed out of a post, in Handover's vocabulary (DESIGN.md).

    All datetimes are aware (UTC or with the sender's offset); the mechanism stores them in UTC.
    ``dedup_key`` is the source's key *including the alert's state* (each adapter documents its
    recipe); the mechanism makes it unique per integration. ``problems`` lists convention fields
    that are missing or garbled -- non-empty means the alert is ``unmatched`` with those reasons
    (the mechanism adds "job not registered", "tenant not available", "no window" itself).
    """

    dedup_key: str
    kind: str = AlertKind.ATTEMPT
    # identity of the run
    job_key: str | None = None
    tenant: str | None = None
    environment: str | None = None
    window_start: datetime | None = None
    window_end: datetime | None = None
    scheduled_for: datetime | None = None
    # the attempt
    execution_id: str | None = None
    attempt_number: int | None = None
    trigger: str | None = None  # scheduled | automatic_retry | manual_replay | catch_up
    status: str | None = None  # queued | running | succeeded | failed | timed_out
    scheduled_at: datetime | None = None  # when this attempt was meant to start (retry time)
    started_at: datetime | None = None
    ended_at: datetime | None = None
    error_summary: str = ""
    correlation_ref: str = ""
    log_url: str = ""
    config_version: str = ""
    replay_key: str = ""
    runner_items: dict[str, list[str]] | None = None  # {"attempted": [...], "completed": [...], "failed": [...]}
    # the event itself
    occurred_at: datetime | None = None  # when the reported thing happened (None: the received time)
    group_ref: str = ""  # the source's incident/group key (PagerDuty dedup_key) to find earlier alerts
    summary: str = ""  # one human line for the inbox and timeline
    related_attempts: list[AttemptState] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)  # normalised extras kept for display


@dataclass
class InvalidItem:
    """An item of a batch that breaks the source's format; stored as a ``rejected`` alert."""

    field: str
    message: str
    dedup_key: str = ""


@dataclass
class ParseResult:
    """What ``parse`` returns: records in post order, plus facts about the post as a whole."""

    alerts: list[ParsedAlert | InvalidItem]
    notes: dict[str, Any] = field(default_factory=dict)  # e.g. {"truncated_alerts": 7}
    response: dict[str, Any] = field(default_factory=dict)  # extra fields for a source's own response


# --- helpers shared by parsers -------------------------------------------------------------------

_FRACTION = re.compile(r"(\.\d{1,6})\d*")
_GO_ZERO_YEAR = "0001-01-01"


class TimeFormatError(ValueError):
    """A timestamp that cannot be placed: naive, a date only, or not RFC 3339."""


def parse_timestamp(value: Any) -> datetime | None:
    """Parse an RFC 3339 timestamp with an offset; fractional seconds up to 9 digits (kept to µs).

    ``None``/``""`` and Go's zero time (``0001-01-01T00:00:00Z``, "not set") give ``None``.
    Raises ``TimeFormatError`` with a message a person can act on for naive times, bare dates
    and anything else that is not a timestamp. Returns an aware datetime in UTC.
    """
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise TimeFormatError(f"{value!r} is not a timestamp string")
    text = value.strip()
    if text.startswith(_GO_ZERO_YEAR):
        return None
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        raise TimeFormatError(f"{text!r} is a date, not a timestamp with a time and an offset")
    normalised = _FRACTION.sub(lambda m: m.group(1), text.replace("z", "Z"), count=1)
    normalised = normalised.replace("Z", "+00:00")
    try:
        parsed = datetime.fromisoformat(normalised)
    except ValueError as exc:
        raise TimeFormatError(f"{text!r} is not an RFC 3339 timestamp") from exc
    if parsed.tzinfo is None:
        raise TimeFormatError(f"{text!r} has no UTC offset, so it cannot be placed in time")
    return parsed.astimezone(UTC)


def parse_epoch(value: Any, *, unit: str = "auto") -> datetime:
    """Parse epoch seconds or milliseconds (``unit`` = ``s``, ``ms`` or ``auto``: > 10^11 means ms).

    Raises ``TimeFormatError``. Returns an aware datetime in UTC.
    """
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise TimeFormatError(f"{value!r} is not an epoch number") from exc
    if unit == "ms" or (unit == "auto" and abs(number) > 1e11):
        number /= 1000.0
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=number)


def summarise_error(text: Any) -> str:
    """Cut an error text to ``ERROR_SUMMARY_MAX_CHARS`` whole characters (Unicode intact)."""
    if text is None:
        return ""
    return str(text)[:ERROR_SUMMARY_MAX_CHARS]


def dig(data: Any, path: str, default: Any = None) -> Any:
    """Read a dotted path (``params.tenant``, ``alerts.0.labels.job``) from parsed JSON; no errors."""
    current = data
    for part in path.split("."):
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.lstrip("-").isdigit() and -len(current) <= int(part) < len(current):
            current = current[int(part)]
        else:
            return default
    return current


def merged_settings(defaults: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """Lay an integration's settings over the source defaults (one level deep, dicts merged)."""
    result: dict[str, Any] = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in defaults.items()}
    for key, value in (overrides or {}).items():
        if isinstance(value, Mapping) and isinstance(result.get(key), dict):
            result[key].update(value)
        else:
            result[key] = value
    return result


def read_integer(value: Any, name: str, problems: list[str]) -> int | None:
    """Read an integer that may arrive as a string ("2"); on garbage, add a problem and return None."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        problems.append(f"{name} {value!r} is not an integer")
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("+").isdigit():
        return int(value.strip())
    problems.append(f"{name} {value!r} is not an integer")
    return None


def read_timestamp(value: Any, name: str, problems: list[str]) -> datetime | None:
    """Read an optional convention timestamp; on garbage, add a problem (naming ``name``) and return None."""
    try:
        return parse_timestamp(value)
    except TimeFormatError as exc:
        problems.append(f"{name}: {exc}")
        return None

"""The contract between the ingestion mechanism and the per-source parsers.

A source is a pure parser module ``runs/alerts/parsers/<source>.py`` (or a package, like ``custom/``,
whose ``parser`` module is registered; no ORM, no settings access) plus declarative integration
settings. Each module exposes:

- ``SOURCE: str`` -- the API slug (``POST /api/v1/alerts/<SOURCE>/``).
- ``DEFAULT_SETTINGS: dict`` -- per-source defaults (which label carries the tenant, ...);
  an integration's own ``settings`` JSON is laid over them (see ``merged_settings``).
- ``REDACT_PATHS: tuple[str, ...]`` -- dotted JSON paths (``*`` matches any key or list index)
  whose values are secrets and are replaced before the body is stored (rule 8 in docs/architecture.md).
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

Shared helpers: ``load_json``, the one JSON loader every parser uses (depth-limited, finite numbers
only); ``decode_body``, how a post's bytes become the text parsers and the stored body share;
``unstorable_characters`` and ``storable_text`` for what a database text column cannot hold;
timestamps, integers and dotted paths (``dig``); ``PathReader`` for the sources whose conventions are
read through configured dotted paths (Alertmanager and Grafana labels and annotations, PagerDuty custom
details); ``http_link`` and ``sha256_json`` for links and dedup keys.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import TextChoices

ERROR_SUMMARY_MAX_CHARS = 2000
# Containers nested deeper than this are refused (400): real payloads stay under 15 levels, and deeper
# ones would exhaust the recursion of whatever walks them after parsing (redaction, display, JSON columns).
MAX_JSON_DEPTH = 64


class AlertKind(TextChoices):
    """What a parsed record reports; the mechanism applies each kind differently (``Alert.Kind``)."""

    ATTEMPT = "attempt", "Attempt"  # a state of one technical execution: creates/moves an Attempt
    RUN = "run", "Run"  # about the run as a whole (Airflow DAG-level failure): timeline event on the run only
    RESOLVE = "resolve", "Resolve"  # a resolve signal: timeline event on the attempt, never a status change
    ACKNOWLEDGE = "acknowledge", "Acknowledge"  # someone acknowledged the alert: timeline event only
    DEFINITION = "definition", "Definition"  # describes the job definition (a Kubernetes CronJob): compared, no run
    # registers an execution's identity (job, tenant, environment, window) for the events that correlate
    # with it: places its run, creates no attempt
    IDENTITY = "identity", "Identity"
    MISSED = "missed", "Missed"  # the source reports that a slot never ran: a missed_reported event, no attempt


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
    """One record parsed out of a post, in Handover's vocabulary (docs/architecture.md "Vocabulary").

    All datetimes are aware (UTC or with the sender's offset); the mechanism stores them in UTC.
    ``dedup_key`` is the source's key *including the alert's state* (each adapter documents its
    recipe); the mechanism makes it unique per integration. ``problems`` lists convention fields
    that are missing or garbled -- non-empty means the alert is ``unmatched`` with those reasons
    (the mechanism adds "job not registered", "tenant not available", "no window" itself).
    """

    dedup_key: str
    kind: AlertKind = AlertKind.ATTEMPT
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
    trigger: str | None = None  # scheduled | automatic_retry | manual_replay | manual_rerun | catch_up
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
    # the id the events of one execution share (a custom mapping's ``correlate_by``): a record that lacks
    # job, tenant or window takes them from an earlier alert of the integration with the same key
    correlation_key: str = ""
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


# --- the body: decoding and the one JSON loader -----------------------------------------------------


class JsonLoadError(ValueError):
    """A body (or an embedded document) that is not JSON Handover accepts: invalid, nested deeper than
    ``MAX_JSON_DEPTH``, or holding a number that is not finite (``NaN``, ``Infinity``, ``1e400``)."""


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonLoadError(f"the number {text[:40]} is out of range")
    return value


def _not_a_number(text: str) -> float:
    raise JsonLoadError(f"{text} is not a JSON number")


def json_depth_exceeds(document: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when ``document`` nests lists and objects more than ``limit`` levels (the document is level 1).

    Iterative (a stack, not recursion), so any depth is measured safely.
    """
    if not isinstance(document, (dict, list)):
        return False
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


# The body the mechanism parsed already, with its document: ``load_json`` of that very body returns it
# once (``json_preparsed``), so a post's JSON is parsed once for redaction, its secrets and its parser.
_PREPARSED: ContextVar[tuple[bytes | str, Any] | None] = ContextVar("handover_preparsed_json", default=None)


@dataclass(frozen=True)
class JsonBody:
    """A post's body parsed by ``load_json`` once: ``ok`` False when it is not JSON Handover accepts."""

    ok: bool
    document: Any = None
    shadowed: tuple[dict[str, Any], ...] = ()  # ``json_loads_noting_repeats``: values a repeated key hides


def json_body(body: bytes | str) -> JsonBody:
    """``load_json(body)`` as a ``JsonBody``: never raises (a refused body is ``ok=False``)."""
    try:
        return JsonBody(True, *_parse_json(body))
    except JsonLoadError:
        return JsonBody(False)


def json_loads_noting_repeats(text: bytes | str, **options: Any) -> tuple[Any, tuple[dict[str, Any], ...]]:
    """``json.loads(text, **options)``, and the values hidden by a key an object repeats.

    The document is the one ``json.loads`` builds (a repeated key keeps its last value); each earlier
    value is returned as ``{key: value}``, in text order (none when no key repeats): it is in the text
    alone, so whatever rewrites the text from the document or looks for secrets in it (redaction) must
    know. Raises what ``json.loads`` raises.
    """
    shadowed: list[dict[str, Any]] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        node = dict(items)
        if len(node) != len(items):
            seen: set[str] = set()
            for index in range(len(items) - 1, -1, -1):  # the last of each key is the document's
                name, value = items[index]
                if name in seen:
                    shadowed.append({name: value})
                seen.add(name)
        return node

    return json.loads(text, object_pairs_hook=pairs, **options), tuple(shadowed)


@contextmanager
def json_preparsed(body: bytes | str, parsed: JsonBody) -> Iterator[None]:
    """Within the block, the first ``load_json`` of ``body`` (the same bytes) returns ``parsed.document``
    instead of parsing it again; later calls, and calls for any other text, parse as usual. A body that
    was refused (``ok`` False) is parsed again by its parser, which words its own refusal."""
    token = _PREPARSED.set((body, parsed.document) if parsed.ok else None)
    try:
        yield
    finally:
        _PREPARSED.reset(token)


def load_json(body: bytes | str) -> Any:
    """Parse a JSON body (or a JSON string inside one) the way every parser must.

    ``body`` as bytes is decoded as ``json.loads`` does (UTF-8, or UTF-16/32 by their byte pattern); the
    mechanism hands parsers the UTF-8 text ``decode_body`` made, parsed once already (``json_preparsed``).
    Raises ``JsonLoadError`` (a ``ValueError``, which the parsers turn into their own 400) for invalid
    JSON, containers nested more than ``MAX_JSON_DEPTH`` levels (also when the nesting is too deep for
    the decoder itself), and numbers that are not finite. Returns the document.
    """
    memo = _PREPARSED.get()
    if memo is not None and (memo[0] is body or memo[0] == body):
        _PREPARSED.set(None)  # once: a parser reading the body twice gets a document of its own
        return memo[1]
    return _parse_json(body)[0]


def _parse_json(body: bytes | str) -> tuple[Any, tuple[dict[str, Any], ...]]:
    """``load_json``'s parse (without the memo), and the values repeated keys hide."""
    try:
        document, shadowed = json_loads_noting_repeats(body, parse_float=_finite_float, parse_constant=_not_a_number)
    except RecursionError:
        raise JsonLoadError(f"the document is nested more than {MAX_JSON_DEPTH} levels deep") from None
    except JsonLoadError:
        raise
    except (ValueError, UnicodeDecodeError) as exc:
        raise JsonLoadError(str(exc)) from exc
    if isinstance(document, (dict, list)) and json_depth_exceeds(document):
        raise JsonLoadError(f"the document is nested more than {MAX_JSON_DEPTH} levels deep")
    return document, shadowed


# What a database text column cannot hold: NUL (PostgreSQL refuses it in text and JSON) and lone
# surrogates (no UTF-8 spelling; a str holds them only as unpaired halves, e.g. from a JSON "\ud800").
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def unstorable_characters(text: str) -> list[str]:
    """The distinct characters of ``text`` a database text column cannot hold, as ``U+XXXX`` names."""
    return sorted({f"U+{ord(char):04X}" for char in _UNSTORABLE.findall(text)})


def document_unstorable_characters(document: Any) -> list[str]:
    """``unstorable_characters`` of every text of a parsed JSON document, keys included, as one sorted
    list of ``U+XXXX`` names. Iterative (a stack): safe at any depth."""
    names: set[str] = set()
    stack = [document]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            names.update(unstorable_characters(node))
        elif isinstance(node, dict):
            stack.extend(key for key in node if isinstance(key, str))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return sorted(names)


def storable_text(text: str) -> str:
    """``text`` with NUL and lone surrogates replaced by U+FFFD (the replacement character)."""
    return _UNSTORABLE.sub(REPLACEMENT, text) if _UNSTORABLE.search(text) else text


_BOMS = (  # longest first: the UTF-32 LE mark begins with the UTF-16 LE one
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_CHARSET = re.compile(r";\s*charset\s*=\s*\"?([^\s;\"]+)", re.IGNORECASE)


@dataclass(frozen=True)
class DecodedBody:
    """A post's body as text, and how it was decoded."""

    text: str
    encoding: str  # the codec used ("utf-8", "utf-16", "iso8859-1", ...)
    source: str  # "declared" (Content-Type charset), "bom", or "default" (UTF-8)
    is_escaped: bool  # undecodable bytes or NUL characters were written as ``\xNN``

    def notes(self) -> dict[str, Any]:
        """What the delivery notes about the decoding: nothing for plain UTF-8."""
        if self.source == "default" and not self.is_escaped:
            return {}
        return {"body_encoding": self.encoding, "body_encoding_from": self.source, "body_escaped": self.is_escaped}


def decode_body(raw: bytes, content_type: str = "") -> DecodedBody:
    """Decode a post's bytes: by the declared charset (``Content-Type: ...; charset=``), else by a byte
    order mark (UTF-8/16/32), else as UTF-8.

    An unknown charset falls back to BOM detection and UTF-8. Bytes the codec cannot decode and NUL
    characters (which no database text column holds) are written as ``\\xNN`` -- still invalid JSON,
    as the raw bytes were. A leading byte order mark is dropped. Pure: the caller hashes the raw bytes.
    """
    encoding, source = "", "default"
    match = _CHARSET.search(content_type or "")
    if match:
        try:
            encoding, source = codecs.lookup(match.group(1)).name, "declared"
        except LookupError:
            encoding = ""
    if not encoding:
        for bom, codec in _BOMS:
            if raw.startswith(bom):
                encoding, source = codec, "bom"
                break
    encoding = encoding or "utf-8"
    escaped = False
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError:
        text, escaped = raw.decode(encoding, errors="backslashreplace"), True
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\x00" in text:
        text, escaped = text.replace("\x00", "\\x00"), True
    return DecodedBody(text=text, encoding=encoding, source=source, is_escaped=escaped)


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
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # e.g. 9999-12-31T23:00-05:00 is in the year 10000 in UTC
        raise TimeFormatError(f"{text!r} is outside the years 1 to 9999 in UTC") from None


def parse_epoch(value: Any, *, unit: str = "auto") -> datetime:
    """Parse epoch seconds or milliseconds (``unit`` = ``s``, ``ms`` or ``auto``: > 10^11 means ms).

    Raises ``TimeFormatError`` (also for a number outside the years 1 to 9999). Returns an aware datetime in UTC.
    """
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise TimeFormatError(f"{value!r} is not an epoch number") from exc
    if unit == "ms" or (unit == "auto" and abs(number) > 1e11):
        number /= 1000.0
    try:
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=number)
    except (OverflowError, ValueError):  # beyond the years 1 to 9999, or not a number (NaN)
        raise TimeFormatError(f"{value!r} is not an epoch time between the years 1 and 9999") from None


def summarise_error(text: Any) -> str:
    """Cut an error text to ``ERROR_SUMMARY_MAX_CHARS`` whole characters (Unicode intact)."""
    if text is None:
        return ""
    return str(text)[:ERROR_SUMMARY_MAX_CHARS]


def as_mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a JSON object (a mapping), else an empty one: for optional nested objects."""
    return value if isinstance(value, Mapping) else {}


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


# Keys an integration's settings may hold that are not the adapter's conventions: checked elsewhere
# (a custom integration's ``mapping``: ``runs.alerts.mapping``, when it is saved).
SETTINGS_CHECKED_ELSEWHERE = frozenset({"mapping"})


def settings_problems(defaults: Mapping[str, Any], overrides: Any) -> dict[str, str]:
    """What is wrong with an integration's ``settings`` (free JSON) for a source whose defaults are ``defaults``.

    Returns setting key -> what is wrong, worded after the key ("is a list, not a text"; the "" key:
    the settings as a whole, "are a list, not ..."); empty when every key the adapter knows has the
    shape of its default. The rule, by the default's shape:
    a key ending in ``_from`` (paths tried in order) takes a text or a list of texts; any other text
    or empty default (``default_tenant``, a template, a separator) takes one text; a list default
    takes a text or a list shaped as its items; a table (``tenant_aliases``, ``status_map``) maps
    texts to values shaped as its own; a number or flag takes the same. ``None`` returns a key to its
    default. Keys the adapter does not know are left alone (nothing reads them). Raises nothing.
    """
    if overrides is None:
        return {}
    if not isinstance(overrides, Mapping):
        return {"": f"are {_json_kind(overrides)}, not a JSON object of setting names to values"}
    problems: dict[str, str] = {}
    for key, value in overrides.items():
        if key in SETTINGS_CHECKED_ELSEWHERE or key not in defaults or value is None:
            continue
        problem = _setting_problem(defaults[key], value, top=True, paths=str(key).endswith("_from"))
        if problem:
            problems[key] = problem
    return problems


def settings_in_force(defaults: Mapping[str, Any], overrides: Any) -> tuple[dict[str, Any], list[str]]:
    """The settings a post is parsed with, and why the integration's own settings are not all used.

    Returns (``merged_settings`` of ``defaults`` and the usable part of ``overrides``, one sentence per
    problem of ``settings_problems``); a setting written as one text where the default is a list of
    texts is in force as that list of one, so every parser reads a list. A record parsed while the
    list of sentences is not empty is not placed: its problems carry the sentences, so it is stored
    ``unmatched`` until the settings are corrected and it is reprocessed (a wrong setting must not
    place it on a job, tenant or environment by a default).
    """
    problems = settings_problems(defaults, overrides)
    if "" in problems:
        usable: Any = {}
    else:
        usable = {key: value for key, value in (overrides or {}).items() if key not in problems}
    merged = merged_settings(defaults, _texts_listed(defaults, usable))
    sentences = [
        f"this integration's {'settings' if key == '' else f'setting `{key}`'} {problem}: correct "
        f"{'them' if key == '' else 'it'} (the integration's conventions, or its settings in the admin), then reprocess"
        for key, problem in sorted(problems.items())
    ]
    return merged, sentences


def _texts_listed(defaults: Mapping[str, Any], usable: Any) -> Any:
    """``usable`` with one text written where a list of texts is the default read as that list of one.

    ``settings_problems`` lets a person write one text for a list of texts (``"DeadlineExceeded"`` for
    ``["DeadlineExceeded"]``); parsers read such a setting as a list (``x in setting``), and a text
    would be read by its letters instead (``"" in "Deadline"`` is true; ``None in "x"`` raises).
    """
    if not isinstance(usable, Mapping):
        return usable
    return {
        key: [value]
        if isinstance(value, str)
        and isinstance(defaults.get(key), list)
        and isinstance(next(iter(defaults[key]), ""), str)
        else value
        for key, value in usable.items()
    }


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a true/false value"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return "a text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a table"
    return "empty" if value is None else type(value).__name__


def _setting_problem(default: Any, value: Any, *, top: bool, paths: bool) -> str:
    """Empty when ``value`` has the shape of ``default`` (see ``settings_problems``), else what it is instead."""
    if isinstance(default, bool) or isinstance(default, int | float):
        wanted = "true or false" if isinstance(default, bool) else "a number"
        fits = type(value) is type(default) or (
            not isinstance(default, bool) and isinstance(value, int | float) and not isinstance(value, bool)
        )
        return "" if fits else f"is {_json_kind(value)}, not {wanted}"
    if isinstance(default, Mapping):
        if not isinstance(value, Mapping):
            return f"is {_json_kind(value)}, not a table of names to values"
        sample = next(iter(default.values()), "")
        for name, item in value.items():
            problem = _setting_problem(sample, item, top=False, paths=False)
            if problem:
                return f"maps {str(name)[:60]!r} to a value that {problem}"
        return ""
    if isinstance(default, list):
        sample = default[0] if default else ""
        texts = top and isinstance(sample, str)  # paths tried in order: one text is a list of one
        if texts and isinstance(value, str):
            return ""
        if not isinstance(value, list):
            return f"is {_json_kind(value)}, not {'a text or a list of texts' if texts else 'a list'}"
        for item in value:
            problem = _setting_problem(sample, item, top=False, paths=False)
            if problem:
                return f"holds an item that {problem}"
        return ""
    # a text, or empty by default
    if isinstance(value, str):
        return ""
    if top and paths and isinstance(value, list):
        # paths tried in order: an item that is not one is named, as in a list default's items
        wrong = [item for item in value if not isinstance(item, str)]
        return f"holds an item that is {_json_kind(wrong[0])}, not a text" if wrong else ""
    return f"is {_json_kind(value)}, not {'a text or a list of texts' if top and paths else 'a text'}"


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
        try:
            return int(value.strip())
        except ValueError:  # digits int() does not read ("²"), or more than Python converts
            pass
    problems.append(f"{name} {value!r} is not an integer")
    return None


def read_timestamp(value: Any, name: str, problems: list[str]) -> datetime | None:
    """Read an optional convention timestamp; on garbage, add a problem (naming ``name``) and return None."""
    try:
        return parse_timestamp(value)
    except TimeFormatError as exc:
        problems.append(f"{name}: {exc}")
        return None


# --- conventions read through configured dotted paths (Alertmanager, Grafana, PagerDuty) --------------

TRIGGERS = ("scheduled", "automatic_retry", "manual_replay", "manual_rerun", "catch_up")


def quote_path(path: str) -> str:
    """Name a configured path as written: ``payload.group`` -> "`payload.group`"."""
    return f"`{path}`"


def describe_label_path(path: str) -> str:
    """Name a path the way a rule author thinks of it: ``labels.tenant`` -> "`tenant` label",
    ``annotations.window_start`` -> "`window_start` annotation"; any other path as written."""
    section, _, name = path.partition(".")
    if section in ("labels", "annotations") and name:
        return f"`{name}` {section[:-1]}"
    return quote_path(path)


@dataclass
class PathReader:
    """Read one record's conventions through the dotted paths an integration's settings name.

    A setting (``spec``) is a path (``"labels.tenant"``), a list of paths ("this, else that") or empty
    (not configured); ``""`` counts as absent. Whatever is missing or garbled is added to ``problems``
    as a sentence naming the field through ``describe`` (a label, an annotation, a path). Pure: no ORM.
    """

    data: Mapping[str, Any]
    problems: list[str]
    describe: Callable[[str], str] = quote_path

    @staticmethod
    def paths(spec: Any) -> list[str]:
        """The paths of a setting, in the order they are tried."""
        if not spec:
            return []
        return [spec] if isinstance(spec, str) else [str(path) for path in spec]

    def first(self, spec: Any) -> tuple[str, Any]:
        """The first configured path with a value, and that value; ``(first path or "", None)`` if none."""
        paths = self.paths(spec)
        for path in paths:
            value = dig(self.data, path)
            if value is not None and value != "":
                return path, value
        return (paths[0] if paths else ""), None

    def text(self, spec: Any, concept: str, *, required: bool = False, default: str | None = None) -> str | None:
        """Read a text convention (stripped); a missing required one with no ``default`` adds a problem."""
        path, value = self.first(spec)
        if value is None:
            if default:
                return str(default)
            if required:
                names = " or ".join(self.describe(p) for p in self.paths(spec)) or f"setting for the {concept}"
                self.problems.append(f"no {names}: the {concept} is unknown")
            return None
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            self.problems.append(f"{self.describe(path)} {value!r} is not text")
            return None
        return str(value).strip()

    def time(self, spec: Any) -> datetime | None:
        """Read an optional timestamp convention (``read_timestamp``)."""
        path, value = self.first(spec)
        return read_timestamp(value, self.describe(path), self.problems)

    def integer(self, spec: Any) -> int | None:
        """Read an optional integer convention that may arrive as a string (``read_integer``)."""
        path, value = self.first(spec)
        return read_integer(value, self.describe(path), self.problems)

    def run_identity(
        self, settings: Mapping[str, Any], *, required: bool = True
    ) -> tuple[str | None, str | None, str | None]:
        """The job key, tenant and environment through ``job_from``, ``tenant_from`` and ``environment_from``.

        The tenant and environment fall back to the integration's ``default_tenant`` and
        ``default_environment``; with ``required``, each one still unknown is a problem.
        """
        job_key = self.text(settings.get("job_from"), "job", required=required)
        tenant = self.text(
            settings.get("tenant_from"), "tenant", required=required, default=settings.get("default_tenant")
        )
        environment = self.text(
            settings.get("environment_from"),
            "environment",
            required=required,
            default=settings.get("default_environment"),
        )
        return job_key, tenant, environment

    def window(self, settings: Mapping[str, Any]) -> tuple[datetime | None, datetime | None]:
        """The window through ``window_start_from`` and ``window_end_from``: both ends or neither.

        A garbled or lone end is a problem (a missing window is the mechanism's to report).
        """
        start_path, start_raw = self.first(settings.get("window_start_from"))
        end_path, end_raw = self.first(settings.get("window_end_from"))
        start = read_timestamp(start_raw, self.describe(start_path), self.problems)
        end = read_timestamp(end_raw, self.describe(end_path), self.problems)
        if (start_raw is None) != (end_raw is None):
            missing, which = (end_path, "end") if end_raw is None else (start_path, "start")
            where = self.describe(missing) if missing else f"the window {which} (no setting names it)"
            self.problems.append(f"{where} is missing: a window needs both its start and its end")
            return None, None
        if start and end and start >= end:
            self.problems.append(f"window start {start.isoformat()} is not before window end {end.isoformat()}")
            return None, None
        return (start, end) if start and end else (None, None)

    def trigger(self, spec: Any, attempt_number: int | None) -> str | None:
        """The configured trigger, else one implied by the attempt number (1 scheduled, higher a retry)."""
        path, value = self.first(spec)
        if value is not None:
            if value in TRIGGERS:
                return str(value)
            self.problems.append(f"{self.describe(path)} {value!r} is not one of {', '.join(TRIGGERS)}")
            return None
        if attempt_number is None:
            return None
        return "scheduled" if attempt_number <= 1 else "automatic_retry"


def http_link(value: Any) -> str:
    """Keep only http(s) links (links taken from payloads are shown only if http(s)); ``""`` is no link."""
    if isinstance(value, str) and value.strip().lower().startswith(("https://", "http://")):
        return value.strip()
    return ""


def sha256_text(text: str) -> str:
    """SHA-256 hex of ``text`` as UTF-8; a lone surrogate (from a JSON ``"\\ud800"``) is hashed as its
    own code unit (``surrogatepass``), so such text still has its one key and never fails."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def sha256_json(parts: Any) -> str:
    """SHA-256 hex of ``parts`` as canonical JSON (sorted keys, no whitespace, UTF-8): a dedup key."""
    return sha256_text(json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False))


def storable_data(value: Any) -> Any:
    """JSON-ready ``value`` (dicts, lists, strings; keys too) with ``storable_text`` applied to every string."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable_data(k) if isinstance(k, str) else k: storable_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [storable_data(v) for v in value]
    return value

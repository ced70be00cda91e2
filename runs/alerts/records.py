"""The Alert row of one parsed record: ``pending``, ``duplicate`` or ``rejected``, with its dedup hash
and the redacted fields shown on the alert; and the mending of what the database cannot hold as sent
(rule 9 in docs/architecture.md): free text is mended and noted, an unstorable identity rejects the alert."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import DatabaseError, models
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.models import F, Q
from django.utils import timezone

from handover.core.rows import row_insert_unless_conflict
from runs.alerts.models import Alert, Delivery
from runs.alerts.parsers.base import (
    AlertKind,
    AttemptState,
    InvalidItem,
    ParsedAlert,
    storable_text,
    unstorable_characters,
)
from runs.alerts.redaction import record_redacted, redact_secret_keys, redact_text
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Job, Tenant

_NOT_DISPLAYED = frozenset({"problems", "dedup_key"})
_DISPLAYED_FIELDS = [f.name for f in dataclasses.fields(ParsedAlert) if f.name not in _NOT_DISPLAYED]
_EMPTY: tuple[object, ...] = (None, "", [], {})


def _display_value(value: Any) -> Any:
    """``value`` as JSON-ready data for display: times in UTC ISO 8601, every string (keys too) redacted."""
    if isinstance(value, str):
        # Labels, annotations and details are free text from the sender: they may carry e-mails or tokens.
        # Storable too: a rejected alert shows its identity as sent, with U+FFFD for what cannot be stored.
        return storable_text(redact_text(value))
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, dict):
        return {
            storable_text(redact_text(k if isinstance(k, str) else json.dumps(k))): _display_value(v)  # JSON's key
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_display_value(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _display_value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


def _record_fields(record: ParsedAlert) -> dict[str, Any]:
    """The record's non-empty fields (not its problems or dedup key) as shown on the alert, redacted.

    Built field by field: copying the whole record and redacting its JSON text cost more than the
    alert's SQL, and redacting each string keeps the redaction from ever meeting JSON escapes.
    """
    kept = {}
    for name in _DISPLAYED_FIELDS:
        value = getattr(record, name)
        if value not in _EMPTY:
            kept[name] = _display_value(value)
    # values under secret key names (and the integration's own redaction names) go as well
    redacted: dict[str, Any] = redact_secret_keys(kept)
    return redacted


# --- what the database cannot hold as sent (rule 9 in docs/architecture.md) ---------------------------------


def column_max_length(model: type[models.Model], name: str) -> int | None:
    """The ``max_length`` of a model's text column (None: unbounded)."""
    return model._meta.get_field(name).max_length  # type: ignore[union-attr]


def column_integer_range(model: type[models.Model], name: str) -> tuple[int, int]:
    """The range an integer column holds on every supported database: PostgreSQL's, which Django's base
    operations list per field type (SQLite would take 64 bits, so a post must not depend on the database)."""
    field = model._meta.get_field(name)
    if not isinstance(field, models.Field):
        raise TypeError(f"{model.__name__}.{name} is not a column")
    return BaseDatabaseOperations.integer_field_ranges[field.get_internal_type()]


def column_fit(text: str, model: type[models.Model], name: str) -> str:
    """``text`` made storable in one column, silently: NUL and lone surrogates as U+FFFD, cut to its length.

    For text Handover derives after a record was mended (redaction may lengthen it); what the sender
    sent is mended by ``record_mend``, which notes each change.
    """
    limit = column_max_length(model, name)
    text = storable_text(text)
    return text[:limit] if limit is not None else text


# Identity: the record's attribute, how a person names it, and every column that must hold it exactly.
# The limit is the smallest of those columns' lengths (a job key longer than Job.key matches no job).
IDENTITY_COLUMNS: dict[str, tuple[str, tuple[tuple[type[models.Model], str], ...]]] = {
    "job_key": ("job", ((Job, "key"), (Alert, "job_key"))),
    "tenant": ("tenant", ((Tenant, "slug"), (Alert, "tenant_slug"))),
    "environment": ("environment", ((Run, "environment"), (Alert, "environment"))),
    "execution_id": ("execution id", ((Attempt, "execution_id"), (Alert, "execution_id"))),
    "status": ("status", ((Attempt, "status"),)),
    "correlation_key": ("correlation key", ((Alert, "correlation_key"),)),
}
# Free text: the record's attribute, how a person names it, and the column it is stored in (an
# unbounded column has only its characters mended). A link that does not fit is dropped, not cut.
TEXT_COLUMNS: dict[str, tuple[str, tuple[type[models.Model], str]]] = {
    "error_summary": ("error", (Attempt, "error_summary")),
    "correlation_ref": ("correlation reference", (Attempt, "correlation_ref")),
    "log_url": ("log link", (Attempt, "log_url")),
    "config_version": ("configuration version", (Attempt, "config_version")),
    "replay_key": ("replay key", (Attempt, "replay_key")),
    "summary": ("summary", (Alert, "summary")),
    "group_ref": ("group reference", (Alert, "group_ref")),
}
_DROPPED_WHEN_LONG = frozenset({"log_url"})


@dataclass
class RecordMend:
    """A record as the database can hold it: ``record`` (a copy when anything changed), one sentence per
    mend in ``notes``, and ``refusal`` -- why an identity field cannot be stored exactly ("" when it can)."""

    record: ParsedAlert
    notes: list[str] = dataclasses.field(default_factory=list)
    refusal: str = ""


def _identity_refusal(label: str, value: str, columns: tuple[tuple[type[models.Model], str], ...]) -> str:
    bad = unstorable_characters(value)
    if bad:
        return f"the {label} holds {', '.join(bad)}, which the database cannot store: the alert is rejected"
    limits = [limit for model, name in columns if (limit := column_max_length(model, name)) is not None]
    if limits and len(value) > min(limits):
        return (
            f"the {label} is {len(value)} characters long, at most {min(limits)} can be stored: the alert is rejected"
        )
    return ""


def _mend_text(label: str, value: str, column: tuple[type[models.Model], str], notes: list[str], *, drop: bool) -> str:
    bad = unstorable_characters(value)
    if bad:
        value = storable_text(value)
        notes.append(f"{label}: {', '.join(bad)} replaced by U+FFFD (the database cannot store it)")
    limit = column_max_length(*column)
    if limit is not None and len(value) > limit:
        if drop:
            notes.append(f"{label} dropped: {len(value)} characters, longer than the {limit} a link can have here")
            return ""
        notes.append(f"{label} cut to {limit} characters (it had {len(value)})")
        value = value[:limit]
    return value


def _mend_data(value: Any, path: str, notes: list[str]) -> Any:
    """Strings in parsed extras (details, runner items), keys too, made storable; each change noted by path."""
    if isinstance(value, str):
        bad = unstorable_characters(value)
        if bad:
            notes.append(f"{path}: {', '.join(bad)} replaced by U+FFFD (the database cannot store it)")
            return storable_text(value)
        return value
    if isinstance(value, dict):
        mended: dict[Any, Any] = {}
        for key, child in value.items():
            name = _mend_data(key, f"{path} key", notes) if isinstance(key, str) else key
            mended[name] = _mend_data(child, f"{path}.{name}", notes)
        return mended
    if isinstance(value, list):
        return [_mend_data(child, f"{path}.{index}", notes) for index, child in enumerate(value)]
    return value


def _attempt_number(number: int | None, label: str, notes: list[str]) -> int | None:
    low, high = column_integer_range(Attempt, "number")
    if number is not None and not low <= number <= high:
        notes.append(f"{label} {number} is outside {low}..{high}: stored as no number")
        return None
    return number


def _related_mend(related: AttemptState, index: int, notes: list[str]) -> AttemptState:
    label = f"related attempt {index + 1}"
    changes: dict[str, Any] = {}
    if related.error_summary:
        column = TEXT_COLUMNS["error_summary"][1]
        error = _mend_text(f"{label} error", related.error_summary, column, notes, drop=False)
        if error != related.error_summary:
            changes["error_summary"] = error
    number = _attempt_number(related.number, f"{label} number", notes)
    if number != related.number:
        changes["number"] = number
    return dataclasses.replace(related, **changes) if changes else related


def record_mend(record: ParsedAlert) -> RecordMend:
    """Make a parsed record storable, or say why it cannot be (rule 9 in docs/architecture.md).

    Identity (``IDENTITY_COLUMNS``: job, tenant, environment, execution id -- its own and that of every
    related attempt -- and status) must be stored exactly: a NUL or lone surrogate, or a value longer than
    the shortest column holding it, sets ``refusal`` (naming the field and the limit) and nothing is
    mended. Otherwise free text (``TEXT_COLUMNS``, the details and runner items) is mended -- NUL and lone
    surrogates become U+FFFD, text is cut to its column, a link that does not fit is dropped -- and a
    source attempt number outside the column's integer range becomes None; each change adds a note.
    Window and times need nothing: every aware datetime Python holds fits both databases' columns. The
    dedup key is left as sent (its hash is computed from the raw key; its display is mended on storing).
    Pure: no queries. Returns the record itself (not a copy) when nothing needed mending.
    """
    for name, (label, columns) in IDENTITY_COLUMNS.items():
        value = getattr(record, name)
        if isinstance(value, str) and (refusal := _identity_refusal(label, value, columns)):
            return RecordMend(record=record, refusal=refusal)
    for index, state in enumerate(record.related_attempts):
        label = f"execution id of related attempt {index + 1}"
        if refusal := _identity_refusal(label, state.execution_id, IDENTITY_COLUMNS["execution_id"][1]):
            return RecordMend(record=record, refusal=refusal)
    if record.kind == AlertKind.ATTEMPT and record.status and record.status not in Attempt.Status.values:
        return RecordMend(record=record, refusal=f"the status {record.status!r} is not one Handover stores")
    notes: list[str] = []
    changes: dict[str, Any] = {}
    for name, (label, column) in TEXT_COLUMNS.items():
        value = getattr(record, name)
        if value and (mended := _mend_text(label, value, column, notes, drop=name in _DROPPED_WHEN_LONG)) != value:
            changes[name] = mended
    number = _attempt_number(record.attempt_number, "attempt number", notes)
    if number != record.attempt_number:
        changes["attempt_number"] = number
    for name, label in (("details", "details"), ("runner_items", "items")):
        value = getattr(record, name)
        if value and (mended := _mend_data(value, label, notes)) != value:
            changes[name] = mended
    related = [_related_mend(state, index, notes) for index, state in enumerate(record.related_attempts)]
    if any(new is not old for new, old in zip(related, record.related_attempts, strict=True)):
        changes["related_attempts"] = related
    if bad := unstorable_characters(record.dedup_key):
        notes.append(f"dedup key: {', '.join(bad)} shown as U+FFFD (it is matched as sent)")
    return RecordMend(record=dataclasses.replace(record, **changes) if changes else record, notes=notes)


def dedup_hash(key: str) -> str:
    """SHA-256 hex of a source's dedup key (computed from the raw, unredacted values)."""
    return hashlib.sha256(key.encode("utf-8", errors="surrogatepass")).hexdigest()


def alert_values(
    *,
    delivery: Delivery,
    index: int,
    record: ParsedAlert,
    mend: RecordMend | None = None,
    shown: ParsedAlert | None = None,
) -> dict[str, Any]:
    """The column values of the Alert row of one parsed record (``mend`` as in ``alert_record``), as a dict
    of field name to value: the dedup hash of the raw key, every text field redacted and fitted.
    ``shown``: ``record_redacted(record)`` when the caller has it already. Pure."""
    integration = delivery.integration
    hashed = dedup_hash(record.dedup_key)  # the raw key: only its hash is stored
    # every text field as stored and shown (the dedup key stays raw)
    record = shown if shown is not None else record_redacted(record)
    return {
        "delivery": delivery,
        "integration": integration,
        "index": index,
        "source": integration.source,
        "kind": record.kind,
        "dedup_key": storable_text(redact_text(record.dedup_key))[:2000],
        "dedup_hash": hashed,
        "fields": _record_fields(record),
        "job_key": column_fit(record.job_key or "", Alert, "job_key"),
        "tenant_slug": column_fit(record.tenant or "", Alert, "tenant_slug"),
        "environment": column_fit(record.environment or "", Alert, "environment"),
        "execution_id": column_fit(record.execution_id or "", Alert, "execution_id"),
        "summary": column_fit(redact_text(record.summary or ""), Alert, "summary"),
        "group_ref": column_fit(record.group_ref or "", Alert, "group_ref"),
        "correlation_key": record.correlation_key or "",  # fits: record_mend refuses a longer one
        "mend_notes": mend.notes if mend else [],
    }


def alert_record(
    *, delivery: Delivery, index: int, record: ParsedAlert | InvalidItem, mend: RecordMend | None = None
) -> tuple[Alert, bool]:
    """Insert the Alert row for one parsed record: ``pending``, ``duplicate`` or ``rejected``.

    ``mend`` is ``record_mend``'s verdict on a ``ParsedAlert`` (``record`` is then its mended record):
    its notes are kept on the alert (``mend_notes``), and a refusal stores the alert ``rejected`` with
    that reason (an identity the database cannot hold exactly is shown mended, never applied).

    Returns the alert and whether it was created now: a record whose (delivery, index) already has
    its Alert (recorded before a crash, or by a concurrent sweep) returns that one, unchanged.
    The partial unique index on (integration, dedup hash) decides which of several concurrent posts
    of one alert is the original (on PostgreSQL a loser's INSERT waits until the original's
    transaction -- which applies it too -- has committed); the others become ``duplicate`` rows
    pointing at it, with its run and attempt (a re-sent unmatched alert also bumps the original's
    ``repeat_count``, so the inbox shows one).
    """
    integration = delivery.integration
    if isinstance(record, InvalidItem):
        alert = Alert(
            delivery=delivery,
            integration=integration,
            index=index,
            source=integration.source,
            outcome=Alert.Outcome.REJECTED,
            reason=redact_text(f"{record.field}: {record.message}"),
            fields={"field": record.field},
            outcome_at=timezone.now(),
        )
        if row_insert_unless_conflict(alert):
            return alert, True
        return Alert.objects.get(delivery=delivery, index=index), False
    values = alert_values(delivery=delivery, index=index, record=record, mend=mend)
    hashed = values["dedup_hash"]
    if mend and mend.refusal:
        alert = Alert(**values, outcome=Alert.Outcome.REJECTED, reason=mend.refusal, outcome_at=timezone.now())
    else:
        alert = Alert(**values, outcome=Alert.Outcome.PENDING)
    if row_insert_unless_conflict(alert):
        return alert, True
    holders = list(
        Alert.objects.filter(
            Q(delivery=delivery, index=index) | Q(integration=integration, dedup_hash=hashed, duplicate_of__isnull=True)
        ).select_related("run", "attempt")
    )
    for holder in holders:
        if holder.delivery_id == delivery.pk and holder.index == index:
            return holder, False
    if not holders:  # conflicting rows are committed before the INSERT gives up, and never deleted
        raise DatabaseError(f"alert {index} of delivery {delivery.pk} conflicts with a row that cannot be found")
    original = holders[0]
    Alert.objects.filter(pk=original.pk).update(repeat_count=F("repeat_count") + 1)
    duplicate = Alert(
        **values,
        duplicate_of=original,
        outcome=Alert.Outcome.DUPLICATE,
        reason=f"same alert as {original.public_id} (received {original.created_at:%Y-%m-%d %H:%M:%S}Z)",
        run=original.run,
        attempt=original.attempt,
        outcome_at=timezone.now(),
    )
    duplicate.save(force_insert=True)
    return duplicate, True

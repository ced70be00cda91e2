"""The Alert row of one parsed record: ``pending``, ``duplicate`` or ``rejected``, with its dedup hash
and the redacted fields shown on the alert."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from django.db import DatabaseError
from django.db.models import F, Q
from django.utils import timezone

from handover.core.rows import row_insert_unless_conflict
from runs.alerts.models import Alert, Delivery
from runs.alerts.parsers.base import InvalidItem, ParsedAlert
from runs.alerts.redaction import record_redacted, redact_secret_keys, redact_text

_NOT_DISPLAYED = frozenset({"problems", "dedup_key"})
_DISPLAYED_FIELDS = [f.name for f in dataclasses.fields(ParsedAlert) if f.name not in _NOT_DISPLAYED]
_EMPTY = (None, "", [], {})


def _display_value(value: Any) -> Any:
    """``value`` as JSON-ready data for display: times in UTC ISO 8601, every string (keys too) redacted."""
    if isinstance(value, str):
        # Labels, annotations and details are free text from the sender: they may carry e-mails or tokens.
        return redact_text(value)
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, dict):
        return {
            redact_text(k if isinstance(k, str) else json.dumps(k)): _display_value(v)  # JSON's key spelling
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
    return redact_secret_keys(kept)


def dedup_hash(key: str) -> str:
    """SHA-256 hex of a source's dedup key (computed from the raw, unredacted values)."""
    return hashlib.sha256(key.encode("utf-8", errors="surrogatepass")).hexdigest()


def alert_record(*, delivery: Delivery, index: int, record: ParsedAlert | InvalidItem) -> tuple[Alert, bool]:
    """Insert the Alert row for one parsed record: ``pending``, ``duplicate`` or ``rejected``.

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
    hashed = dedup_hash(record.dedup_key)  # the raw key: only its hash is stored
    record = record_redacted(record)  # every text field as stored and shown (the dedup key stays raw)
    values = {
        "delivery": delivery,
        "integration": integration,
        "index": index,
        "source": integration.source,
        "kind": record.kind,
        "dedup_key": redact_text(record.dedup_key)[:2000],
        "dedup_hash": hashed,
        "fields": _record_fields(record),
        "job_key": (record.job_key or "")[:300],
        "tenant_slug": (record.tenant or "")[:300],
        "environment": (record.environment or "")[:100],
        "execution_id": (record.execution_id or "")[:300],
        "summary": redact_text(record.summary or "")[:500],
        "group_ref": (record.group_ref or "")[:300],
    }
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

"""Redacting the text already stored, again, with today's rules (rule 8 in docs/architecture.md).

Rows written before a rule existed (or before an integration named an extra redaction name) may
hold a secret in clear. ``stored_text_redact`` reads every stored free-text column -- delivery
bodies, alert fields, attempt errors and log links, timeline summaries, handover texts and their
revisions, replay reasons -- runs the ingestion's own redaction over it (``runs.alerts.redaction``:
deterministic tokens, so a value redacted twice gives the same token) and writes back what changed.
Then, when anything changed, it writes one audit event with the counts, and compacts the database so the old text is not
left in free pages: ``PRAGMA secure_delete=ON`` and ``VACUUM`` on SQLite, ``VACUUM FULL`` of the
touched tables on PostgreSQL. Backups taken before still hold the old text (docs/security.md).

It works on the models it is given (``apps``): the migration that runs it passes its historical
models, ``manage.py redact_stored_text`` the current ones. Each table is rewritten in its own
transaction; on PostgreSQL the timeline's append-only trigger (``runs_timelineevent_append_only``,
migration ``0002``) is disabled and enabled again inside the timeline's transaction, so a failure
leaves it enabled. VACUUM cannot run inside a transaction: it is skipped (and said so) when the
caller holds one. Running it twice changes nothing the second time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, models, transaction
from django.utils import timezone

from runs.alerts.parsers.registry import get_adapter
from runs.alerts.redaction import integration_redact_names, redact_body, redact_data, redact_text
from runs.audit.models import AuditEvent

BATCH = 500
TIMELINE_TRIGGER = "runs_timelineevent_append_only"

# (app label, model) -> its free-text columns; JSON columns are listed in JSON_FIELDS. A column a
# model (historical or current) does not have is skipped.
TEXT_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("runs", "Delivery"): ("reason",),
    ("runs", "Alert"): (
        "dedup_key",
        "reason",
        "job_key",
        "tenant_slug",
        "environment",
        "execution_id",
        "summary",
        "group_ref",
    ),
    ("runs", "Attempt"): (
        "execution_id",
        "error_summary",
        "log_url",
        "correlation_ref",
        "config_version",
        "abandon_reason",
    ),
    ("runs", "TimelineEvent"): ("summary",),
    ("handover", "Handover"): (
        "expected_output",
        "definitely_happened",
        "may_have_happened",
        "next_action",
        "affected",
        "business_impact",
        "deadlines",
        "recent_changes",
        "defect_ref",
        "supportability_ticket",
        "reopen_reason",
    ),
    ("handover", "HandoverRevision"): ("text",),
    ("handover", "ResidualException"): ("description",),
    ("approvals", "ReplayRequest"): ("reason", "fix_reference", "close_reason"),
    ("approvals", "Approval"): ("comment", "acceptance_reason", "void_reason"),
}
JSON_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("runs", "Delivery"): ("response_body",),
    ("runs", "Alert"): ("fields",),
}


@dataclass
class StoredTextResult:
    """What one pass changed: rows rewritten per ``app_label.Model``, and the tables compacted."""

    rows: dict[str, int] = field(default_factory=dict)
    vacuumed: list[str] = field(default_factory=list)
    vacuum_skipped: str = ""

    @property
    def total(self) -> int:
        return sum(self.rows.values())


def _columns(model: type[models.Model], names: tuple[str, ...]) -> list[str]:
    present = {f.name for f in model._meta.get_fields() if getattr(f, "concrete", False)}
    return [n for n in names if n in present]


def _fit(model: type[models.Model], name: str, value: str) -> str:
    limit = getattr(model._meta.get_field(name), "max_length", None)
    return value[:limit] if limit else value


def _rewrite(
    model: type[models.Model],
    text_columns: list[str],
    json_columns: list[str],
    *,
    body: Callable[[Any], str | None] | None = None,
    dry_run: bool,
) -> int:
    """Redact ``model``'s columns row by row; write changed rows in batches (in the caller's transaction)."""
    columns = text_columns + json_columns + (["body"] if body is not None else [])
    if not columns:
        return 0
    queryset = model._default_manager.order_by("pk")
    if body is not None:
        queryset = queryset.select_related("integration")
    changed_rows: list[models.Model] = []
    changed_columns: set[str] = set()
    count = 0
    # Attempt execution ids are unique per run: a redacted id never takes one that exists.
    taken: set[tuple[Any, str]] = set()
    if "execution_id" in text_columns and model._meta.model_name == "attempt":
        taken = set(model._default_manager.values_list("run_id", "execution_id"))
    for row in queryset.iterator(chunk_size=BATCH):
        row_changed = False
        for name in text_columns:
            value = getattr(row, name)
            if not isinstance(value, str) or not value:
                continue
            new = _fit(model, name, redact_text(value))
            if new == value:
                continue
            if taken and name == "execution_id":
                if (row.run_id, new) in taken:  # type: ignore[attr-defined]
                    continue
                taken.add((row.run_id, new))  # type: ignore[attr-defined]
            setattr(row, name, new)
            changed_columns.add(name)
            row_changed = True
        for name in json_columns:
            value = getattr(row, name)
            if value in (None, "", {}, []):
                continue
            new_data = redact_data(value)
            if new_data != value:
                setattr(row, name, new_data)
                changed_columns.add(name)
                row_changed = True
        if body is not None:
            new_body = body(row)
            if new_body is not None:
                row.body = new_body  # type: ignore[attr-defined]
                changed_columns.add("body")
                row_changed = True
        if row_changed:
            count += 1
            changed_rows.append(row)
        if len(changed_rows) >= BATCH:
            if not dry_run:
                model._default_manager.bulk_update(changed_rows, sorted(changed_columns))
            changed_rows = []
    if changed_rows and not dry_run:
        model._default_manager.bulk_update(changed_rows, sorted(changed_columns))
    return count


def _delivery_body(row: Any) -> str | None:
    """The delivery's body redacted with its source's field paths and its integration's extra names."""
    if not row.body:
        return None
    integration = row.integration
    adapter = get_adapter(integration.source)
    paths = adapter.REDACT_PATHS if adapter is not None else ()
    new = redact_body(row.body, paths, integration_redact_names(integration.settings))
    return new if new != row.body else None


def _vacuum(tables: list[str], result: StoredTextResult) -> None:
    if connection.in_atomic_block:
        result.vacuum_skipped = "inside a transaction"
        return
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA secure_delete=ON")
            cursor.execute("VACUUM")
            result.vacuumed = ["(the whole SQLite file)"]
        elif connection.vendor == "postgresql":
            for table in tables:
                cursor.execute(f"VACUUM FULL {connection.ops.quote_name(table)}")
                result.vacuumed.append(table)
        else:
            result.vacuum_skipped = f"no VACUUM for {connection.vendor}"


def stored_text_redact(*, apps: Any, dry_run: bool = False, vacuum: bool = True) -> StoredTextResult:
    """Redact every stored free-text column again with today's rules; audit it once; compact the tables.

    ``apps``: the model registry to use (a migration's historical ``apps`` or ``django.apps.apps``).
    ``dry_run`` counts the rows that would change and writes nothing (no audit event, no VACUUM).
    Side effects: the changed rows (each table in its own transaction; the timeline's trigger is
    disabled and re-enabled inside its transaction on PostgreSQL); when any row changed, one
    AuditEvent ``redaction_rerun`` with the counts per model, then VACUUM (see the module docstring). Raises
    the database's errors (nothing is half-written within a table). Returns the counts.
    """
    result = StoredTextResult()
    tables: list[str] = []
    for (app_label, model_name), names in TEXT_FIELDS.items():
        try:
            model = apps.get_model(app_label, model_name)
        except LookupError:  # an app without this model at this point of its history
            continue
        text_columns = _columns(model, names)
        json_columns = _columns(model, JSON_FIELDS.get((app_label, model_name), ()))
        is_delivery = (app_label, model_name) == ("runs", "Delivery")
        is_timeline = (app_label, model_name) == ("runs", "TimelineEvent")
        with transaction.atomic():
            trigger = is_timeline and connection.vendor == "postgresql" and not dry_run
            table = connection.ops.quote_name(model._meta.db_table)
            if trigger:
                with connection.cursor() as cursor:
                    cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER {TIMELINE_TRIGGER}")
            count = _rewrite(
                model,
                text_columns,
                json_columns,
                body=_delivery_body if is_delivery else None,
                dry_run=dry_run,
            )
            if trigger:
                with connection.cursor() as cursor:
                    cursor.execute(f"ALTER TABLE {table} ENABLE TRIGGER {TIMELINE_TRIGGER}")
        result.rows[f"{app_label}.{model_name}"] = count
        if count:
            tables.append(model._meta.db_table)
    if dry_run:
        return result
    if not result.total:  # a fresh database, or a second run: no act to record, nothing to compact
        result.vacuum_skipped = "nothing changed"
        return result
    audit_event = apps.get_model("runs", "AuditEvent")
    audit_event._default_manager.create(
        occurred_at=timezone.now(),
        action=AuditEvent.Action.REDACTION_RERUN.value,  # a historical model knows no members
        summary=f"Stored text redacted again with the current rules: {result.total} row(s) changed",
        is_all_tenants=True,
        data={"rows": result.rows},
    )
    if vacuum:
        _vacuum(tables, result)
    else:
        result.vacuum_skipped = "not asked for"
    return result

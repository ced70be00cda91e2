"""The one transition function of next-run checks (docs/architecture.md "State machines"): a guarded bulk UPDATE, the
timeline events, and the follow-ups of failed checks enqueued on commit."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

from django.db import connection, transaction
from django.db.models import Field
from django.utils import timezone

from handover.core.errors import InvalidTransition
from handover.core.people import Person
from runs.checks.events import check_event_build
from runs.checks.models import NextRunCheck
from runs.timeline.models import TimelineEvent
from runs.timeline.services import timeline_events_record

# The timeline event each final status writes.
CHECK_EVENT_KINDS = {
    NextRunCheck.Status.PASSED: TimelineEvent.Kind.NEXT_RUN_CHECK_PASSED,
    NextRunCheck.Status.FAILED: TimelineEvent.Kind.NEXT_RUN_CHECK_FAILED,
    NextRunCheck.Status.WAIVED: TimelineEvent.Kind.NEXT_RUN_CHECK_WAIVED,
}


def _concrete_field(name: str) -> Field[Any, Any]:
    """The NextRunCheck column ``name`` (a concrete field, never a relation's reverse side)."""
    column = NextRunCheck._meta.get_field(name)
    if not isinstance(column, Field):
        raise TypeError(f"{name} is not a column of NextRunCheck")
    return column


def checks_update_each(
    rows: Sequence[NextRunCheck], names: Iterable[str], *, statuses: Iterable[str], without_evidence: bool = False
) -> int:
    """UPDATE the ``names`` columns of each row from its attributes, guarded on its status (and, with
    ``without_evidence``, on having no evidence yet). Returns how many rows changed.

    One statement shape with one parameter set per row (``executemany``, pipelined by psycopg).
    Django's ``bulk_update`` would build one CASE per column and row, which costs milliseconds per
    row to compile; one ``QuerySet.update`` per row costs a round trip and a compile each.
    """
    meta = NextRunCheck._meta
    fields = [_concrete_field(name) for name in sorted(set(names))]
    quote = connection.ops.quote_name
    allowed = [str(status) for status in statuses]
    in_allowed = f"IN ({', '.join(['%s'] * len(allowed))})"
    no_evidence = f" AND {quote('evidence_attempt_id')} IS NULL" if without_evidence else ""
    table, pk = quote(meta.db_table), quote(meta.pk.column)
    values = []
    for row in rows:
        prepared = [f.get_db_prep_save(getattr(row, f.attname), connection) for f in fields]
        # choices enums go to the driver as their plain value
        values.append([row.pk, *(v.value if isinstance(v, Enum) else v for v in prepared)])
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # One statement for the batch: the rows to write joined in from a VALUES list (each
            # column cast, since VALUES of parameters are untyped).
            columns = ", ".join(quote(f.column) for f in fields)
            casts = [f.cast_db_type(connection) for f in fields]  # type: ignore[attr-defined]  # Django has it; the stubs lack it
            sets = ", ".join(
                f"{quote(f.column)} = v.{quote(f.column)}::{cast}" for f, cast in zip(fields, casts, strict=True)
            )
            row_sql = f"({', '.join(['%s'] * (len(fields) + 1))})"
            cursor.execute(
                f"UPDATE {table} AS t SET {sets} FROM (VALUES {', '.join([row_sql] * len(values))})"
                f" AS v(id, {columns}) WHERE t.{pk} = v.id::bigint AND t.{quote('status')} {in_allowed}"
                + no_evidence.replace(" AND ", " AND t.", 1),
                [param for row_values in values for param in row_values] + allowed,
            )
        else:
            sets = ", ".join(f"{quote(f.column)} = %s" for f in fields)
            cursor.executemany(
                f"UPDATE {table} SET {sets} WHERE {pk} = %s AND {quote('status')} {in_allowed}{no_evidence}",
                [[*row_values[1:], row_values[0], *allowed] for row_values in values],
            )
        return int(cursor.rowcount)


_STAMP = {"pass": "passed_at", "fail": "failed_at", "waive": "waived_at"}


@dataclass
class CheckChange:
    """One check in a transition: the summary of its timeline event and the columns it writes.

    ``values`` maps field names (or ``*_id`` attnames) to values: evidence, failure reason, waiver.
    """

    check: NextRunCheck
    summary: str
    values: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)


def next_run_check_transition(
    *,
    action: str,
    changes: Sequence[CheckChange],
    at: datetime | None = None,
    actor: Person | None = None,
) -> list[NextRunCheck]:
    """Move checks along ``NextRunCheck.TRANSITIONS`` (``pass``, ``fail``, ``waive``): the only status writer.

    One guarded UPDATE for all ``changes`` (a bulk update filtered on the allowed source statuses)
    sets the status, its ``*_at`` stamp and each check's ``values``; one INSERT writes their
    ``next_run_check_<status>`` timeline events, in the same transaction. All or nothing: if the
    guard leaves out any row, nothing is written. For a single check that already has the target
    status, it is returned unchanged (idempotent); otherwise ``InvalidTransition`` (409) names the
    current status. The sweep passes the rows its claim transaction holds locked, so the guard
    matches them all. A failed check is its own follow-up outbox entry (``failure_notified_at``
    empty): the handover app sweeps it (reopen, e-mail). Returns the checks, updated
    in memory.
    """
    allowed_from, target_status = NextRunCheck.TRANSITIONS[action]
    if not changes:
        return []
    now = at or timezone.now()
    stamp = _STAMP[action]
    meta = NextRunCheck._meta
    names = {"status", "status_changed_at", stamp, "updated_at"}
    checks = [change.check for change in changes]
    for change in changes:
        for name, value in change.values.items():
            names.add(meta.get_field(name).name)
            setattr(change.check, name, value)
        change.check.status = target_status
        change.check.status_changed_at = now
        setattr(change.check, stamp, now)
        change.check.updated_at = timezone.now()
    # No savepoint: inside the sweep's claim transaction that would cost two statements per batch.
    # A partial write is undone by raising inside the block; a refusal without any write is raised
    # after it, so it never poisons a caller's transaction.
    with transaction.atomic(savepoint=False):
        updated = checks_update_each(checks, names, statuses=allowed_from)
        if updated == len(checks):
            timeline_events_record(
                [
                    check_event_build(
                        change.check,
                        kind=CHECK_EVENT_KINDS[NextRunCheck.Status(target_status)],
                        summary=change.summary,
                        occurred_at=now,
                        actor=actor,
                        data=change.data,
                    )
                    for change in changes
                ]
            )
        elif updated:
            raise InvalidTransition("Some of the checks moved meanwhile; none was changed.")
    if updated == len(checks):
        return checks
    if len(checks) == 1:
        current = NextRunCheck.objects.get(pk=checks[0].pk)
        if current.status == target_status:
            return [current]
        raise InvalidTransition(
            f"The next-run check is {current.status}; it cannot become {target_status} "
            f"(allowed from: {', '.join(sorted(allowed_from))})."
        )
    raise InvalidTransition(f"None of the checks can become {target_status}.")


def check_transition_one(
    check: NextRunCheck,
    *,
    action: str,
    summary: str,
    values: dict[str, Any] | None = None,
    actor: Person | None = None,
    data: dict[str, Any] | None = None,
    at: datetime | None = None,
) -> NextRunCheck:
    change = CheckChange(check=check, summary=summary, values=values or {}, data=data or {})
    return next_run_check_transition(action=action, changes=[change], at=at, actor=actor)[0]

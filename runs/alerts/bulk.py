"""The set-based apply path of a post's chunk (PostgreSQL): new runs written a segment at a time.

An alert storm is mostly one shape: a failed (or finished) execution of a registered job, reported with
its window or scheduled time, for a run nobody reported before -- one shared job failing for a thousand
tenants, a backlog re-sent after an outage. Applied one by one, each such record costs eight statements
(its alert, its run, the run's lock and attempts read back, its attempt, its event, its alert's outcome).
Here consecutive records of that shape (a *segment*) are written with one statement per table for the
whole segment: the alerts (``INSERT ... ON CONFLICT DO NOTHING RETURNING``: dedup under concurrency as
for one row), the runs (likewise, on the unique run identity), the attempts, the timeline events, and
one UPDATE of the alerts' outcomes; runner reports join the chunk's one INSERT as before.

Every rule of the row-by-row path holds because a record is taken here only when that path would do
exactly these writes, decided before anything is written (``fast_candidate``: pure, or reading only the
post's cached job, tenant and target):

- the record is an attempt report naming its execution and a storable status other than ``running``
  (a running attempt checks overlaps with other runs); no correlation key, no alert instance
  (``<fingerprint>@<startsAt>``), no related attempts, no manual trigger; its identity resolves with no
  problem, placed by its window or scheduled time (placement then reads no run);
- its alert is new (a conflict -- a re-send, or the same delivery's index recorded by a concurrent
  sweep -- goes the row-by-row way, which makes it the duplicate it is);
- its run is new: created by this INSERT, in this transaction, so it has no attempt yet -- the attempt
  is number 1, its trigger decided against no earlier execution (never a duplicate trigger, never a
  repeated source number), the run's status that of its one attempt. A run that exists (an earlier
  post, a concurrent one now committed) sends the record the row-by-row way, its alert already recorded.

A segment never holds two records of one run identity or one dedup key, and ends before any record not
taken here, which is then applied row by row in post order: what one record's writes can change, a
later record's decision never reads within a segment. The records of a segment that go the row-by-row
way are applied after the segment's writes, which cannot concern them (new runs of other identities).
SQLite keeps the row-by-row path (``set_path_enabled``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings as django_settings
from django.db import connection
from django.utils import timezone

from handover.core.errors import InvalidTransition
from handover.core.rows import rows_insert_unless_conflict
from runs.alerts.apply import alert_apply_in_transaction, new_attempt_events, own_report, runner_report
from runs.alerts.context import PostContext
from runs.alerts.identity import MANUAL_TRIGGERS, RecordIdentity, record_identity, run_status_for_new_run
from runs.alerts.instances import record_names_instance
from runs.alerts.models import Alert, Delivery
from runs.alerts.parsers.base import AlertKind, InvalidItem, ParsedAlert
from runs.alerts.records import RecordMend, alert_values, record_mend
from runs.alerts.redaction import record_redacted
from runs.attempts.models import Attempt, Run
from runs.attempts.services import attempt_build, attempt_created_event_build
from runs.timeline.models import TimelineEvent
from runs.timeline.services import timeline_events_record

# One record applied row by row inside the caller's transaction: ``runs.alerts.receive._alert_receive``.
ReceiveOne = Callable[[Delivery, int, ParsedAlert | InvalidItem, PostContext], Alert]


def set_path_enabled() -> bool:
    """True when a post's chunks take the set-based path: on PostgreSQL, unless
    ``HANDOVER_INGEST_SET_PATH`` is off (then every record is applied row by row, as on SQLite)."""
    return connection.vendor == "postgresql" and bool(getattr(django_settings, "HANDOVER_INGEST_SET_PATH", True))


@dataclass
class FastRecord:
    """One record the set-based path takes: its index in the post, the record as parsed (``raw``) and
    mended (``record``, as the row-by-row path applies it), its redacted form (what is stored and
    applied), its identity, and its unsaved alert and run."""

    index: int
    raw: ParsedAlert
    record: ParsedAlert
    shown: ParsedAlert
    mend: RecordMend
    ident: RecordIdentity
    alert: Alert
    run: Run

    @property
    def run_identity(self) -> tuple[int, int, str, datetime, datetime]:
        run = self.run
        assert run.window_start is not None and run.window_end is not None
        return (run.job_id, run.tenant_id, run.environment, run.window_start, run.window_end)


def _shape_fits(record: ParsedAlert) -> bool:
    """The record's shape allows the set-based path (the first half of ``fast_candidate``). Pure."""
    return (
        record.kind == AlertKind.ATTEMPT
        and bool(record.execution_id)
        and bool(record.status)
        and record.status != Attempt.Status.RUNNING
        and not record.correlation_key
        and not record.related_attempts
        and record.trigger not in MANUAL_TRIGGERS
        and ((record.window_start is not None and record.window_end is not None) or record.scheduled_for is not None)
        and not record_names_instance(record)
    )


def fast_candidate(
    delivery: Delivery, index: int, record: ParsedAlert | InvalidItem, ctx: PostContext
) -> FastRecord | None:
    """The record as the set-based path would write it, or None when it must be applied row by row.

    Reads nothing but the post's cached job, tenant and target (``PostContext``); writes nothing.
    """
    if isinstance(record, InvalidItem) or not _shape_fits(record):
        return None
    mend = record_mend(record)
    if mend.refusal:
        return None
    shown = record_redacted(mend.record)
    status = run_status_for_new_run(shown)
    if status is None or not _shape_fits(shown):
        return None
    ident = record_identity(shown, ctx, need_window=True, received_at=delivery.received_at)
    if ident.problems or ident.window_start is None or ident.window_end is None:
        return None
    assert ident.job is not None and ident.tenant is not None and ident.environment
    target = ctx.target(ident.job, ident.tenant, ident.environment)
    run = Run(
        job=ident.job,
        tenant=ident.tenant,
        environment=ident.environment,
        window_start=ident.window_start,
        window_end=ident.window_end,
        target=target if target is not None and target.is_active else None,
        scheduled_for=ident.scheduled_for,
        status=status,
        status_changed_at=timezone.now(),
    )
    alert = Alert(
        **alert_values(delivery=delivery, index=index, record=mend.record, mend=mend, shown=shown),
        outcome=Alert.Outcome.PENDING,
    )
    return FastRecord(
        index=index, raw=record, record=mend.record, shown=shown, mend=mend, ident=ident, alert=alert, run=run
    )


def alerts_receive_set(
    delivery: Delivery,
    chunk: list[tuple[int, ParsedAlert | InvalidItem]],
    ctx: PostContext,
    receive_one: ReceiveOne,
) -> list[Alert]:
    """Record and apply ``chunk`` (records with their index in the post) inside the caller's transaction.

    Consecutive records ``fast_candidate`` takes are written as segments (``segment_apply``); every other
    record is applied by ``receive_one`` in its place in post order. Returns the alerts in post order.
    Raises what the writes raise (a ``DatabaseError``: the caller rolls the chunk back and applies it row
    by row).
    """
    alerts: list[Alert] = []
    segment: list[FastRecord] = []
    identities: set[tuple[int, int, str, datetime, datetime]] = set()
    hashes: set[str] = set()
    for index, record in chunk:
        candidate = fast_candidate(delivery, index, record, ctx)
        if candidate is None or candidate.run_identity in identities or candidate.alert.dedup_hash in hashes:
            alerts.extend(segment_apply(delivery, segment, ctx, receive_one))
            segment, identities, hashes = [], set(), set()
        if candidate is None:
            alerts.append(receive_one(delivery, index, record, ctx))
            continue
        segment.append(candidate)
        identities.add(candidate.run_identity)
        hashes.add(candidate.alert.dedup_hash)
    alerts.extend(segment_apply(delivery, segment, ctx, receive_one))
    return alerts


def segment_apply(
    delivery: Delivery, segment: list[FastRecord], ctx: PostContext, receive_one: ReceiveOne
) -> list[Alert]:
    """Write one segment (records of distinct run identities and dedup keys) in five statements: the alerts,
    the runs, the attempts, the timeline events, the alerts' outcomes; then apply row by row, in post order,
    the records whose alert or run already existed. Returns the segment's alerts in post order."""
    if not segment:
        return []
    integration = ctx.key.integration
    received_at = delivery.received_at
    recorded = rows_insert_unless_conflict([fast.alert for fast in segment])
    fresh_alerts = [fast for fast, new in zip(segment, recorded, strict=True) if new]
    created = rows_insert_unless_conflict([fast.run for fast in fresh_alerts]) if fresh_alerts else []
    fresh = [fast for fast, new in zip(fresh_alerts, created, strict=True) if new]
    if fresh:
        reports = [own_report(fast.shown, fast.run, fast.ident, execution_id=fast.shown.execution_id) for fast in fresh]
        attempts = [
            attempt_build(run=fast.run, report=report, received_at=received_at, earlier=[])
            for fast, report in zip(fresh, reports, strict=True)
        ]
        Attempt.objects.bulk_create(attempts)
        events: list[TimelineEvent] = []
        now = timezone.now()
        for fast, report, attempt in zip(fresh, reports, attempts, strict=True):
            shown, alert = fast.shown, fast.alert
            events.append(
                attempt_created_event_build(
                    attempt=attempt,
                    report=report,
                    fallback=shown.occurred_at or received_at,
                    alert=alert,
                    actor_integration=integration,
                )
            )
            events.extend(
                new_attempt_events(alert, shown, fast.run, attempt, fast.ident, report, integration, received_at)
            )
            if shown.runner_items:
                ctx.runner_reports.append(runner_report(alert, shown, attempt, received_at))
            alert.outcome, alert.reason, alert.is_stale = Alert.Outcome.ACCEPTED, "", False
            alert.run, alert.attempt, alert.outcome_at, alert.updated_at = fast.run, attempt, now, now
        timeline_events_record(events)
        alerts_accept(fresh, at=now)
    alerts = []
    for fast, new in zip(segment, recorded, strict=True):
        if not new:  # a re-send, or recorded meanwhile: the row-by-row path says which
            alerts.append(receive_one(delivery, fast.index, fast.raw, ctx))
        elif fast.run.pk is None:  # the run exists: apply the recorded pending alert row by row
            alerts.append(alert_apply_in_transaction(fast.alert, fast.record, ctx, received_at=received_at))
        else:
            alerts.append(fast.alert)
    return alerts


def alerts_accept(records: list[FastRecord], *, at: datetime) -> None:
    """Settle the segment's ``pending`` alerts ``accepted`` with their run and attempt, as ``alert_finish``
    does one by one (no reason, not stale, ``outcome_at`` ``at``), in ONE UPDATE joined to the arrays of
    their ids (``bulk_update`` would build a CASE per row and field). The alerts were inserted by this
    transaction, so none can have left ``pending``; the guard is kept anyway (``Alert.TRANSITIONS``)."""
    allowed_from, _ = Alert.TRANSITIONS[Alert.ACTION_FOR_OUTCOME[Alert.Outcome.ACCEPTED]]
    alert_table = Alert._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {alert_table} AS a
               SET outcome = %s, reason = '', is_stale = false, outcome_at = %s, updated_at = %s,
                   run_id = v.run_id, attempt_id = v.attempt_id
              FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[]) AS v(id, run_id, attempt_id)
             WHERE a.id = v.id AND a.outcome = ANY(%s)
            """,
            [
                Alert.Outcome.ACCEPTED.value,
                at,
                at,
                [fast.alert.pk for fast in records],
                [fast.run.pk for fast in records],
                [fast.alert.attempt_id for fast in records],
                [str(outcome) for outcome in allowed_from],
            ],
        )
        if cursor.rowcount != len(records):
            raise InvalidTransition(f"{len(records) - cursor.rowcount} alert(s) of the segment left pending meanwhile")

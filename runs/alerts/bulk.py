"""The set-based apply path of a post's chunk (PostgreSQL): new runs written a segment at a time.

An alert storm is mostly one shape: a failed (or finished) execution of a registered job, reported with
its window or scheduled time, for a run nobody reported before -- one shared job failing for a thousand
tenants, a backlog re-sent after an outage. Applied one by one, each such record costs eight statements
(its alert, its run, the run's lock and attempts read back, its attempt, its event, its alert's outcome).
Here consecutive records of that shape (a *segment*) are written with one statement per table for the
whole segment, inside a savepoint: the runs (``INSERT ... ON CONFLICT DO NOTHING RETURNING`` on the
unique run identity), the attempts, the alerts -- inserted ``accepted`` with their run and attempt, so
no second write of each alert (``ON CONFLICT DO NOTHING`` on the dedup and position keys: dedup under
concurrency as for one row) -- and the timeline events; runner reports join the chunk's one INSERT.

Every rule of the row-by-row path holds because a record is taken here only when that path would do
exactly these writes, decided before anything is written (``fast_candidate``: pure, or reading only the
post's cached job, tenant and target):

- the record is an attempt report naming its execution and a storable status other than ``running``
  (a running attempt checks overlaps with other runs); no correlation key, no alert instance
  (``<fingerprint>@<startsAt>``), no related attempts, no manual trigger; its identity resolves with no
  problem, placed by its window or scheduled time (placement then reads no run);
- its run is new: created by this INSERT, in this transaction, so it has no attempt yet -- the attempt
  is number 1, its trigger decided against no earlier execution (never a duplicate trigger, never a
  repeated source number), the run's status that of its one attempt. A run that exists (an earlier
  post, a concurrent one now committed; a re-send's) sends the record the row-by-row way;
- its alert is new: should one conflict (a re-send of an alert that left no run, the same delivery's
  index recorded by a concurrent sweep, a concurrent post of the same alert now committed), the
  savepoint is rolled back and the whole segment goes the row-by-row way, which makes each record what
  it is (its original's duplicate).

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
from django.db import connection, transaction
from django.utils import timezone

from handover.core.rows import rows_insert, rows_insert_unless_conflict
from runs.alerts.apply import new_attempt_events, own_report, runner_report
from runs.alerts.context import PostContext
from runs.alerts.identity import MANUAL_TRIGGERS, RecordIdentity, record_identity, run_status_for_new_run
from runs.alerts.instances import record_names_instance
from runs.alerts.models import Alert, Delivery
from runs.alerts.parsers.base import AlertKind, InvalidItem, ParsedAlert
from runs.alerts.records import RecordMend, alert_values, record_mend
from runs.alerts.redaction import record_redacted
from runs.attempts.models import Attempt, Run, RunnerReport
from runs.attempts.services import attempt_build, attempt_created_event_build
from runs.timeline.models import TimelineEvent
from runs.timeline.services import timeline_events_record

# One record applied row by row inside the caller's transaction: ``runs.alerts.receive._alert_receive``.
ReceiveOne = Callable[[Delivery, int, ParsedAlert | InvalidItem, PostContext], Alert]


def set_path_enabled() -> bool:
    """True when a post's chunks take the set-based path: on PostgreSQL, unless
    ``HANDOVER_INGEST_SET_PATH`` is off (then every record is applied row by row, as on SQLite)."""
    return connection.vendor == "postgresql" and django_settings.HANDOVER_INGEST_SET_PATH


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
    """Write one segment (records of distinct run identities and dedup keys), then apply row by row, in
    post order, the records it did not write. Returns the segment's alerts in post order.

    The writes (``segment_write``: runs, attempts, alerts -- already ``accepted`` -- and timeline events,
    one INSERT each) run inside a savepoint; a record whose run exists is left to the row-by-row path (a
    re-send's run always exists). Should an alert's INSERT conflict (a re-send of an alert that left no
    run, or a concurrent post that recorded the same alert and committed), the savepoint is rolled back and
    the whole segment goes row by row, which makes each record what it is (its original's duplicate).
    """
    if not segment:
        return []
    point = transaction.savepoint()
    written = segment_write(delivery, segment, ctx)
    if written is None:
        transaction.savepoint_rollback(point)
        written = set()
    else:
        transaction.savepoint_commit(point)
    return [
        fast.alert if fast.index in written else receive_one(delivery, fast.index, fast.raw, ctx) for fast in segment
    ]


def segment_write(delivery: Delivery, todo: list[FastRecord], ctx: PostContext) -> set[int] | None:
    """The set-based writes of a segment's records: their new runs
    (``INSERT ... ON CONFLICT DO NOTHING``; a record whose run exists is left out), the attempts (number 1),
    the alerts settled ``accepted`` with their run and attempt (as ``alert_finish`` would: no reason, not
    stale), their timeline events, and their runner reports queued on ``ctx``. Returns the indexes of the
    records written, or None when an alert conflicted (the caller rolls the writes back)."""
    integration = ctx.key.integration
    received_at = delivery.received_at
    created = rows_insert_unless_conflict([fast.run for fast in todo])
    fresh = [fast for fast, new in zip(todo, created, strict=True) if new]
    if not fresh:
        return set()
    reports = [own_report(fast.shown, fast.run, fast.ident, execution_id=fast.shown.execution_id) for fast in fresh]
    attempts = [
        attempt_build(run=fast.run, report=report, received_at=received_at, earlier=[])
        for fast, report in zip(fresh, reports, strict=True)
    ]
    rows_insert(attempts)
    now = timezone.now()
    for fast, attempt in zip(fresh, attempts, strict=True):
        alert = fast.alert
        alert.outcome, alert.reason, alert.is_stale = Alert.Outcome.ACCEPTED, "", False
        alert.run, alert.attempt, alert.outcome_at = fast.run, attempt, now
    if not all(rows_insert_unless_conflict([fast.alert for fast in fresh])):
        return None
    events: list[TimelineEvent] = []
    reports_of_runners: list[RunnerReport] = []
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
        events.extend(new_attempt_events(alert, shown, fast.run, attempt, fast.ident, report, integration, received_at))
        if shown.runner_items:
            reports_of_runners.append(runner_report(alert, shown, attempt, received_at))
    timeline_events_record(events)
    ctx.runner_reports.extend(reports_of_runners)
    return {fast.index for fast in fresh}

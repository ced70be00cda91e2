"""Applying one ``pending`` alert: its attempts and run status, a resolve/acknowledge signal, or a job
definition compared with the schedule in force; and the alert's outcome."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from handover.core.errors import InvalidTransition
from runs.alerts.context import PostContext, runner_reports_write
from runs.alerts.correlation import (
    correlated_identity,
    correlation_lock,
    correlation_waiting_reprocess,
    record_correlates,
)
from runs.alerts.identity import (
    RecordIdentity,
    record_identity,
    run_for_identity,
    run_status_for_new_run,
    schedule_in_force,
)
from runs.alerts.instances import InstanceFacts, InstanceVerdict, alert_instance_classify, execution_for_report
from runs.alerts.models import Alert
from runs.alerts.parsers.base import AlertKind, ParsedAlert, storable_text
from runs.alerts.records import column_fit, column_max_length
from runs.alerts.redaction import record_redacted, redact_text
from runs.attempts.details import AttemptDetails
from runs.attempts.models import Attempt, Run, RunnerReport
from runs.attempts.services import (
    AttemptReportResult,
    attempt_details_change,
    attempt_report_apply,
    run_status_refresh,
)
from runs.catalog.models import Integration, IntegrationKey
from runs.checks.missed_runs import run_missed_report
from runs.timeline.models import TimelineEvent, TimelineEventKind
from runs.timeline.services import timeline_event_build, timeline_event_record, timeline_events_record


def alert_finish(
    alert: Alert,
    outcome: str,
    *,
    reason: str = "",
    run: Run | None = None,
    attempt: Attempt | None = None,
    stale: bool = False,
) -> Alert:
    """Settle a ``pending`` alert with ``outcome`` (``accepted``, ``unmatched``, ``rejected`` or ``duplicate``: the
    table ``Alert.TRANSITIONS``), its reason, run and attempt. Raises InvalidTransition (409) for an
    alert that is not pending any more (the UPDATE is guarded on the table's sources). Returns the alert.
    """
    allowed_from, target = Alert.TRANSITIONS[Alert.ACTION_FOR_OUTCOME[Alert.Outcome(outcome)]]
    now = timezone.now()
    reason = storable_text(reason)  # reasons may quote what the sender sent
    updated = Alert.objects.filter(pk=alert.pk, outcome__in=allowed_from).update(
        outcome=outcome,
        reason=reason[:4000],
        run=run,
        attempt=attempt,
        is_stale=stale,
        outcome_at=now,
        updated_at=now,
    )
    if not updated:
        raise InvalidTransition(f"Alert {alert.public_id} is not pending any more; it cannot become {target}.")
    alert.outcome, alert.reason, alert.run, alert.attempt, alert.is_stale = (
        outcome,
        reason,
        run,
        attempt,
        stale,
    )
    alert.outcome_at = now
    return alert


def alert_apply(*, alert: Alert, record: ParsedAlert, key: IntegrationKey, settings: dict[str, Any]) -> Alert:
    """Apply one ``pending`` alert: resolve its identity, then create or move its run and attempts.

    Outcome ``accepted`` (with ``is_stale`` for a late earlier-state report) or ``unmatched`` with
    every reason found (job not registered, tenant not available to the key, no window, garbled
    convention fields). Runs in one transaction holding the alert's row lock, so a sweep and a
    request cannot apply the same alert twice. Returns the alert with its outcome. (A post's new
    alerts are applied in the transaction that records them: ``_alert_receive``.)
    """
    with transaction.atomic():
        locked = Alert.objects.select_for_update().filter(pk=alert.pk, outcome=Alert.Outcome.PENDING).first()
        if locked is None:  # already applied by someone else
            alert.refresh_from_db()
            return alert
        ctx = PostContext(key=key, settings=settings)
        alert = alert_apply_in_transaction(alert, record, ctx)
        runner_reports_write(ctx)
        return alert


def alert_apply_in_transaction(
    alert: Alert, record: ParsedAlert, ctx: PostContext, *, received_at: datetime | None = None
) -> Alert:
    """``alert_apply`` inside the caller's transaction, for an alert no one else can be applying.

    ``received_at``: when the body applied was received (default: the alert's own delivery; a newer
    body re-applying an ``unmatched`` original passes its own).
    """
    # Identity and free text as stored (deterministic tokens): a reprocessed body, stored redacted,
    # names the same run and attempt.
    record = record_redacted(record)
    received_at = received_at or alert.delivery.received_at
    integration = ctx.key.integration

    if record.kind in (AlertKind.RESOLVE, AlertKind.ACKNOWLEDGE):
        return _apply_signal(alert, record, ctx, received_at)
    instance = alert_instance_classify(alert=alert, record=record)
    if instance.verdict in (InstanceVerdict.STALE, InstanceVerdict.HA_PEER):
        return _instance_duplicate(alert, record, instance, integration, received_at)
    if instance.verdict == InstanceVerdict.REFIRE and record.details.get("execution_id_inferred"):
        # The adapter derived the id: the new instance is a new attempt, placed by the Slot rules.
        record = dataclasses.replace(record, execution_id=f"{instance.fingerprint}#{instance.starts_at}")
    alert = _apply_placed(alert, record, ctx, received_at, instance)
    if record.correlation_key and not record_correlates(record):
        # an event that carries its own identity: the alerts waiting on its key can now be placed
        correlation_waiting_reprocess(alert=alert)
    return alert


def _apply_placed(
    alert: Alert, record: ParsedAlert, ctx: PostContext, received_at: datetime, instance: InstanceFacts
) -> Alert:
    """Resolve the record's identity (its own, or correlated), then apply it by kind."""
    integration = ctx.key.integration
    if record.correlation_key:
        correlation_lock(integration_id=alert.integration_id, key=record.correlation_key)
    if record_correlates(record):
        ident = correlated_identity(alert, record, ctx)
        if not ident.problems:
            _alert_identity_fill(alert, ident)
    else:
        need_window = record.kind != AlertKind.DEFINITION
        ident = record_identity(record, ctx, need_window=need_window, received_at=received_at)
    if ident.problems:
        return alert_finish(alert, Alert.Outcome.UNMATCHED, reason="; ".join(ident.problems))
    assert ident.job is not None
    if record.kind == AlertKind.DEFINITION:
        return _apply_definition(alert, record, ident, integration, received_at, ctx)
    if record.kind == AlertKind.MISSED:
        return _apply_missed(alert, record, ident, integration, received_at, ctx)
    if record.kind == AlertKind.IDENTITY:
        return _apply_identity(alert, record, ident, integration, received_at, ctx)

    new_run_status = run_status_for_new_run(record)
    run, created = run_for_identity(ident, ctx, status=new_run_status)
    if record.kind == AlertKind.RUN:
        summary = record.summary or "The scheduler reported on the run as a whole"
        _run_event(alert, run, TimelineEvent.Kind.RUN_REPORTED, summary, record.occurred_at or received_at, integration)
        return alert_finish(alert, Alert.Outcome.ACCEPTED, run=run)

    status_is_set = created and new_run_status is not None
    alert = _apply_attempts(alert, record, run, ident, integration, received_at, ctx, run_status_is_set=status_is_set)
    if instance.verdict == InstanceVerdict.REFIRE and alert.attempt is not None:
        _refire_record(alert, record, instance, integration, received_at)
    return alert


def _instance_duplicate(
    alert: Alert, record: ParsedAlert, instance: InstanceFacts, integration: Integration, received_at: datetime
) -> Alert:
    """A stale firing or an HA peer's view of an instance already applied: a ``duplicate`` of that
    instance's alert, with its run and attempt; details it changes are kept (``attempt_details_change``)."""
    original = instance.earlier
    assert original is not None
    if instance.verdict == InstanceVerdict.STALE:
        reason = (
            f"stale: this instance (startsAt {instance.starts_at}) was already resolved; a firing after its "
            "resolve changes nothing"
        )
    else:
        peer_starts = original.group_ref.removeprefix(f"{instance.fingerprint}@")
        reason = f"same instance; the peer's startsAt differs ({instance.starts_at} here, {peer_starts} first)"
    now = timezone.now()
    Alert.objects.filter(pk=original.pk).update(repeat_count=F("repeat_count") + 1)
    Alert.objects.filter(pk=alert.pk).update(duplicate_of=original, updated_at=now)
    alert.duplicate_of = original
    alert = alert_finish(
        alert,
        Alert.Outcome.DUPLICATE,
        reason=reason,
        run=original.run,
        attempt=original.attempt,
        stale=instance.verdict == InstanceVerdict.STALE,
    )
    if instance.verdict == InstanceVerdict.HA_PEER and original.attempt is not None:
        duplicate_details_apply(alert=alert, record=record, attempt=original.attempt, received_at=received_at)
    return alert


def _refire_record(
    alert: Alert, record: ParsedAlert, instance: InstanceFacts, integration: Integration, received_at: datetime
) -> None:
    """The ``refire`` event of an alert that fired again after its previous instance's resolve.

    On the attempt the payload names (the same execution as before: a flag a person must explain) or
    on the new attempt an adapter-derived id made for the new instance.
    """
    attempt = alert.attempt
    assert attempt is not None and instance.earlier is not None
    same = instance.earlier.attempt_id == attempt.pk
    previous = instance.earlier.group_ref.removeprefix(f"{instance.fingerprint}@")
    summary = (
        f"Re-fire: {alert.source} alert {instance.fingerprint} fired again (startsAt {instance.starts_at}) "
        f"after its instance of {previous} was resolved; "
        + (
            f"the payload names the same execution, so it belongs to attempt {attempt.number}: a person must explain it"
            if same
            else f"a new attempt {attempt.number} ({attempt.execution_id})"
        )
    )
    data = {"fingerprint": instance.fingerprint, "starts_at": instance.starts_at, "same_attempt": same}
    at = record.occurred_at or received_at
    _run_event(alert, attempt.run, TimelineEvent.Kind.REFIRE, summary, at, integration, attempt=attempt, data=data)


def alert_duplicate_apply(*, alert: Alert, record: ParsedAlert, ctx: PostContext) -> Alert:
    """What a dedup-level duplicate (same integration and dedup key as an earlier original) still does.

    - Its original is ``unmatched``: the original is applied again from this newer body, under this
      delivery's key binding (Alertmanager re-sends a corrected alert under the same fingerprint and
      ``startsAt``); the duplicate then points at the run and attempt the original got.
    - Its original reported an attempt: details that differ (error, end time, log link) are kept as an
      ``attempt_details_changed`` event (``duplicate_details_apply``).
    Call inside the transaction that recorded the duplicate, with the record as parsed. Returns the
    duplicate, updated.
    """
    if alert.duplicate_of_id is None or record.kind not in (
        AlertKind.ATTEMPT,
        AlertKind.RUN,
        AlertKind.IDENTITY,
        AlertKind.MISSED,
    ):
        return alert
    original = (
        Alert.objects.select_for_update(of=("self",))
        .select_related("delivery", "integration", "attempt__run__job")
        .get(pk=alert.duplicate_of_id)
    )
    received_at = alert.delivery.received_at
    if original.outcome == Alert.Outcome.UNMATCHED and original.duplicate_of_id is None:
        return original_reapply(original=original, source=alert, record=record, ctx=ctx, received_at=received_at)
    if original.attempt is None:
        return alert
    if (
        record.group_ref
        and Alert.objects.filter(
            integration_id=alert.integration_id,
            group_ref=record_redacted(record).group_ref,
            kind=AlertKind.RESOLVE,
            outcome=Alert.Outcome.ACCEPTED,
        ).exists()
    ):
        # a firing of an instance already resolved is stale: it changes nothing, not even details
        Alert.objects.filter(pk=alert.pk).update(is_stale=True)
        alert.is_stale = True
        return alert
    duplicate_details_apply(alert=alert, record=record, attempt=original.attempt, received_at=received_at)
    return alert


def original_reapply(
    *, original: Alert, source: Alert, record: ParsedAlert, ctx: PostContext, received_at: datetime
) -> Alert:
    """Apply an ``unmatched`` original again from ``record``, the body of its newer duplicate ``source``.

    The original takes the newer body's identity columns (job, tenant, environment, execution id) and
    outcome; ``source`` points at the run and attempt it got, its reason saying so. Call inside a
    transaction holding the original's row lock. Returns ``source``, updated.
    """
    shown = record_redacted(record)
    Alert.objects.filter(pk=original.pk).update(
        outcome=Alert.Outcome.PENDING,
        job_key=column_fit(shown.job_key or "", Alert, "job_key"),
        tenant_slug=column_fit(shown.tenant or "", Alert, "tenant_slug"),
        environment=column_fit(shown.environment or "", Alert, "environment"),
        execution_id=column_fit(shown.execution_id or "", Alert, "execution_id"),
    )
    original.outcome = Alert.Outcome.PENDING
    original = alert_apply_in_transaction(original, record, ctx, received_at=received_at)
    reason = (
        f"same alert as {original.public_id}, which was unmatched: applied again from this newer body "
        f"({original.outcome}{': ' + original.reason if original.reason else ''})"
    )
    Alert.objects.filter(pk=source.pk).update(
        run=original.run, attempt=original.attempt, reason=storable_text(reason)[:4000], updated_at=timezone.now()
    )
    source.run, source.attempt, source.reason = original.run, original.attempt, reason
    return source


def duplicate_details_apply(*, alert: Alert, record: ParsedAlert, attempt: Attempt, received_at: datetime) -> bool:
    """A duplicate whose normalised details (error, end time, log link) differ from its attempt's: applied
    as one ``attempt_details_changed`` event (``attempt_details_change``), never dropped silently.

    ``record`` as parsed (redacted here). Returns whether anything changed.
    """
    if record.kind != AlertKind.ATTEMPT:
        return False
    record = record_redacted(record)
    report = AttemptDetails(
        execution_id=attempt.execution_id,
        status=attempt.status,
        ended_at=record.ended_at,
        error_summary=column_fit(redact_text(record.error_summary), Attempt, "error_summary"),
        log_url=_log_link_fit(record.log_url),
    )
    changed = attempt_details_change(
        attempt=attempt,
        report=report,
        alert=alert,
        actor_integration=alert.integration,
        at=record.occurred_at or received_at,
        include_missing=True,
    )
    return changed


def _log_link_fit(link: str) -> str:
    """A log link as stored: "" when it does not fit its column (a link is never cut)."""
    return link if len(link) <= (column_max_length(Attempt, "log_url") or len(link)) else ""


def _apply_attempts(
    alert: Alert,
    record: ParsedAlert,
    run: Run,
    ident: RecordIdentity,
    integration: Integration,
    received_at: datetime,
    ctx: PostContext,
    *,
    run_status_is_set: bool = False,
) -> Alert:
    """Create or move the attempts the alert reports, then the run's status.

    The alert's own attempt (``own_report``) and the related ones it also reports
    (``_related_reports``) are applied in order of the source's numbers (``_reports_apply``); a new own
    attempt gets its events (``new_attempt_events``); runner items are queued on ``ctx`` for after the
    alerts. ``run_status_is_set``: the run was created by this alert with the status of its one attempt
    (``new_run_status``), so there is nothing to refresh.
    """
    if not record.execution_id or not record.status:
        return alert_finish(alert, Alert.Outcome.UNMATCHED, reason="no execution id or status in the alert")
    own = own_report(record, run, ident)
    if record.details.get("execution_id_inferred") and _conflicts_with_success(run, own.execution_id):
        return _conflicting_report(alert, record, run, integration, received_at)
    own_result = _reports_apply(alert, record, run, own, integration, received_at)
    attempt = own_result.attempt
    if record.runner_items:
        ctx.runner_reports.append(runner_report(alert, record, attempt, received_at))
    if own_result.created:
        timeline_events_record(new_attempt_events(alert, record, run, attempt, ident, own, integration, received_at))
    if not run_status_is_set:
        run_status_refresh(run=run)
    reason = ""
    if own_result.stale:
        reason = (
            f"stale: attempt {attempt.number} is already {attempt.status}; this earlier-state report changes nothing"
        )
    return alert_finish(alert, Alert.Outcome.ACCEPTED, reason=reason, run=run, attempt=attempt, stale=own_result.stale)


def own_report(
    record: ParsedAlert, run: Run, ident: RecordIdentity, *, execution_id: str | None = None
) -> AttemptDetails:
    """What the record says about its own attempt, as stored: the execution id for the run
    (``execution_for_report``, or ``execution_id`` when the caller knows it: the record's own on a run
    created in its transaction), the trigger an integration key may give, the slot placement, and the
    redacted text fitted to its columns. Call with a redacted record that names an execution and a status."""
    assert record.execution_id and record.status
    placement = ident.placement
    trigger = record.trigger
    if trigger == Attempt.Trigger.MANUAL_REPLAY:
        # manual_replay is only an attempt linked to an approved replay request (reported with the
        # job's runner credential); through an integration key it is a manual re-run, always flagged.
        trigger = Attempt.Trigger.MANUAL_RERUN
    return AttemptDetails(
        # an executor that reuses one id across retries: <id>#<retry ordinal> (docs/slots.md)
        execution_id=execution_id if execution_id is not None else execution_for_report(run=run, record=record),
        status=record.status,
        source_number=_source_number(record.attempt_number),
        trigger=trigger,
        scheduled_at=record.scheduled_at or _reported_slot_time(record, ident),
        started_at=record.started_at,
        ended_at=record.ended_at,
        # Mended on receipt (records.record_mend); fitted again after redaction, which may lengthen text.
        error_summary=column_fit(redact_text(record.error_summary), Attempt, "error_summary"),
        correlation_ref=column_fit(record.correlation_ref, Attempt, "correlation_ref"),
        # redacted with the record: user info, e-mails, credential query parameters
        log_url=_log_link_fit(record.log_url),
        config_version=column_fit(record.config_version, Attempt, "config_version"),
        slot_offset_seconds=placement.offset_seconds if placement else None,
        slot_tolerance_seconds=placement.tolerance_seconds if placement and placement.t else None,
        is_slot_late=bool(placement and placement.is_late),
        is_slot_inferred=bool(placement and placement.is_inferred),
        slot_hint=placement.hint if placement else "",
    )


def _related_reports(record: ParsedAlert, own: AttemptDetails) -> list[AttemptDetails]:
    """The other attempts of the run the record also reports (``ParsedAlert.related_attempts``), their
    errors redacted; they share the own attempt's configuration version."""
    return [
        AttemptDetails(
            execution_id=r.execution_id,
            status=r.status,
            source_number=_source_number(r.number),
            trigger=r.trigger,
            scheduled_at=r.scheduled_at,
            started_at=r.started_at,
            ended_at=r.ended_at,
            error_summary=redact_text(r.error_summary),
            # the same object describes them: a Kubernetes Job's pods share its configuration
            config_version=own.config_version,
        )
        for r in record.related_attempts
    ]


def _reports_apply(
    alert: Alert, record: ParsedAlert, run: Run, own: AttemptDetails, integration: Integration, received_at: datetime
) -> AttemptReportResult:
    """Apply the own and related reports (``attempt_report_apply``) in order of the source's numbers
    (unnumbered last, the own one after a related one of its number). Only the own report's events take
    the record's ``occurred_at``. Returns the own report's result."""
    big = 1 << 30
    reports = sorted([*_related_reports(record, own), own], key=lambda r: (r.source_number or big, r is not own))
    own_result = None
    for report in reports:
        result = attempt_report_apply(
            run=run,
            report=report,
            received_at=received_at,
            alert=alert,
            actor_integration=integration,
            occurred_at=record.occurred_at if report is own else None,
        )
        if report is own:
            own_result = result
    assert own_result is not None
    return own_result


def runner_report(alert: Alert, record: ParsedAlert, attempt: Attempt, received_at: datetime) -> RunnerReport:
    """The record's runner items (ids attempted, completed, failed) on its attempt, unsaved: written
    after the post's alerts (``runner_reports_write``)."""
    items = record.runner_items or {}
    return RunnerReport(
        attempt=attempt,
        alert=alert,
        attempted_ids=items.get("attempted", []),
        completed_ids=items.get("completed", []),
        failed_ids=items.get("failed", []),
        reported_at=record.occurred_at or received_at,
    )


def new_attempt_events(
    alert: Alert,
    record: ParsedAlert,
    run: Run,
    attempt: Attempt,
    ident: RecordIdentity,
    own: AttemptDetails,
    integration: Integration,
    received_at: datetime,
) -> list[TimelineEvent]:
    """The events a newly created own attempt adds beside its status event, unsaved: a manual re-run around
    the approval process, retries exhausted, and the placement's schedule mismatches (``ident.notes``)."""
    events: list[TimelineEvent] = []

    def new_attempt_event(kind: TimelineEventKind, summary: str, at: datetime) -> None:
        events.append(_run_event_build(alert, run, kind, summary, at, integration, attempt=attempt))

    if attempt.trigger == Attempt.Trigger.MANUAL_RERUN:
        # A replay_key is honoured only with the job's runner credential: on an integration key,
        # no replay dispatched by Handover carries this attempt.
        summary = (
            f"Attempt {attempt.number} is a manual re-run (manual_rerun) that went around the approval process "
            "(no replay dispatched by Handover carries it)"
        )
        new_attempt_event(
            TimelineEvent.Kind.MANUAL_REPLAY_UNAPPROVED, summary, own.started_at or own.scheduled_at or received_at
        )
    exhausted = record.details.get("exhausted_retry_condition")
    if exhausted:
        earlier = record.details.get("earlier_invocations_failed")
        summary = f"Retries exhausted ({exhausted})" + (
            f"; {earlier} earlier invocation{'s' if earlier != 1 else ''} also failed" if earlier else ""
        )
        new_attempt_event(TimelineEvent.Kind.RETRIES_EXHAUSTED, summary, record.occurred_at or received_at)
    for note in ident.notes:
        new_attempt_event(TimelineEvent.Kind.SCHEDULE_MISMATCH, note, record.occurred_at or received_at)
    return events


def _run_event(
    alert: Alert,
    run: Run,
    kind: TimelineEventKind,
    summary: str,
    occurred_at: datetime,
    integration: Integration,
    *,
    attempt: Attempt | None = None,
    data: dict[str, Any] | None = None,
) -> None:
    """One timeline event of ``kind`` on ``run`` (and ``attempt``, when given) for ``alert``, its actor the
    integration; ``occurred_at`` is UTC. The one writer of this module's run and attempt events."""
    _run_event_build(alert, run, kind, summary, occurred_at, integration, attempt=attempt, data=data).save(
        force_insert=True
    )


def _run_event_build(
    alert: Alert,
    run: Run,
    kind: TimelineEventKind,
    summary: str,
    occurred_at: datetime,
    integration: Integration,
    *,
    attempt: Attempt | None = None,
    data: dict[str, Any] | None = None,
) -> TimelineEvent:
    """``_run_event``'s event, unsaved (``timeline_event_build``), for writers that insert several at once."""
    return timeline_event_build(
        job=run.job,
        run=run,
        attempt=attempt,
        alert=alert,
        kind=kind,
        summary=summary,
        occurred_at=occurred_at,
        actor_integration=integration,
        data=data,
    )


def _reported_slot_time(record: ParsedAlert, ident: RecordIdentity) -> datetime | None:
    """The scheduled time as reported, kept on the attempt when it is not the run's slot."""
    if record.scheduled_for is not None and record.scheduled_for != ident.scheduled_for:
        return record.scheduled_for
    return None


SOURCE_NUMBER_MAX = 2_147_483_647


def _source_number(value: int | None) -> int | None:
    """The source's attempt number as stored: an out-of-range number is kept as null (rule 9)."""
    if value is None or not 1 <= value <= SOURCE_NUMBER_MAX:
        return None
    return value


def _conflicts_with_success(run: Run, execution_id: str) -> bool:
    """An adapter-inferred execution id, new on a run that already has a succeeded attempt."""
    attempts = run.attempts.all()
    return (
        attempts.filter(status=Attempt.Status.SUCCEEDED).exists()
        and not attempts.filter(execution_id=execution_id).exists()
    )


def _conflicting_report(
    alert: Alert, record: ParsedAlert, run: Run, integration: Integration, received_at: datetime
) -> Alert:
    """An alert naming no execution of its own, on a run that succeeded: a ``conflicting_report`` event
    (needs attention), no attempt, the run's status unchanged."""
    summary = (
        f"Conflicting report: {alert.source} says {record.status} for this run, which already has a "
        "succeeded attempt; the alert names no execution of its own, so no attempt was created"
    )
    at = record.occurred_at or received_at
    _run_event(alert, run, TimelineEvent.Kind.CONFLICTING_REPORT, summary, at, integration)
    return alert_finish(
        alert,
        Alert.Outcome.ACCEPTED,
        reason="conflicting report: the run already succeeded and the alert names no execution of its own",
        run=run,
    )


def _apply_signal(alert: Alert, record: ParsedAlert, ctx: PostContext, received_at: datetime) -> Alert:
    """Resolve/acknowledge: a timeline event on the attempt it concerns; never a status change."""
    attempt: Attempt | None = None
    if record.group_ref:
        earlier = (
            Alert.objects.filter(
                integration=alert.integration,
                group_ref=record.group_ref,
                attempt__isnull=False,
                outcome=Alert.Outcome.ACCEPTED,
                kind=AlertKind.ATTEMPT,
            )
            .exclude(pk=alert.pk)
            .select_related("attempt__run__job", "attempt__run__tenant")
            .order_by("-attempt__number", "-created_at", "-id")
            .first()
        )
        attempt = earlier.attempt if earlier else None
    if attempt is None and record.execution_id:
        ident = record_identity(record, ctx, need_window=True, received_at=received_at)
        if ident.problems:
            return alert_finish(alert, Alert.Outcome.UNMATCHED, reason="; ".join(ident.problems))
        assert ident.window_start is not None and ident.window_end is not None  # need_window: no problem, a window
        attempt = (
            Attempt.objects.filter(
                run__job=ident.job,
                run__tenant=ident.tenant,
                run__environment=ident.environment,
                run__window_start=ident.window_start,
                run__window_end=ident.window_end,
                execution_id=record.execution_id,
            )
            .select_related("run__job", "run__tenant")
            .first()
        )
    if attempt is None:
        # the record's own problems too: a wrong integration setting (``settings_in_force``) is named
        # on every alert of the post, and may be why no earlier alert was accepted
        nothing = f"nothing to {record.kind}: no earlier alert of this integration reported the attempt it names"
        return alert_finish(alert, Alert.Outcome.UNMATCHED, reason="; ".join([nothing, *record.problems]))
    kind = TimelineEvent.Kind.RESOLVED if record.kind == AlertKind.RESOLVE else TimelineEvent.Kind.ACKNOWLEDGED
    # The sender's own line (PagerDuty's "acknowledged by on-call") says who or why; keep it.
    # named by the integration ("nomad-prod"), not the source slug ("custom")
    summary = (
        f"{alert.integration.name}: {kind.value} on attempt {attempt.number} ({attempt.execution_id})"
        + (" — a resolve is not a success" if kind == TimelineEvent.Kind.RESOLVED else "")
        + (f" — {alert.summary}" if alert.summary else "")
    )
    at = record.occurred_at or received_at
    _run_event(alert, attempt.run, kind, summary, at, alert.integration, attempt=attempt)
    return alert_finish(alert, Alert.Outcome.ACCEPTED, run=attempt.run, attempt=attempt)


def _apply_definition(
    alert: Alert,
    record: ParsedAlert,
    ident: RecordIdentity,
    integration: Integration,
    received_at: datetime,
    ctx: PostContext,
) -> Alert:
    """A job definition (Kubernetes CronJob): compare its schedule and zone with the schedule in force.

    The schedule in force is the job's with the target's overrides (``schedule_in_force``) for the
    alert's tenant and environment. Agreement records nothing; a mismatch writes one job-level timeline
    event (with the tenant) and is named in the alert's reason. A definition without a time zone runs
    in the controller's zone (usually UTC), so it is compared as UTC. Never creates a run or attempt.
    """
    job = ident.job
    assert job is not None
    cron, zone, _ = schedule_in_force(job, ident.tenant, ident.environment, ctx)
    seen_schedule = record.details.get("schedule")
    seen_zone = record.details.get("timezone") or record.details.get("timeZone") or "UTC"
    mismatches = []
    if seen_schedule and str(seen_schedule).split() != cron.split():
        mismatches.append(f"schedule {seen_schedule!r} (registered {cron!r})")
    if seen_schedule and seen_zone != zone:
        mismatches.append(f"time zone {seen_zone!r} (registered {zone!r})")
    if mismatches:
        timeline_event_record(
            job=job,
            tenant=ident.tenant,
            alert=alert,
            kind=TimelineEvent.Kind.DEFINITION_MISMATCH,
            summary=f"{integration.source} reports {', '.join(mismatches)}",
            occurred_at=record.occurred_at or received_at,
            actor_integration=integration,
        )
    return alert_finish(alert, Alert.Outcome.ACCEPTED, reason="; ".join(mismatches))


def _alert_identity_fill(alert: Alert, ident: RecordIdentity) -> None:
    """Show a correlated alert's job, tenant and environment (taken from the earlier event) on its row."""
    assert ident.job is not None and ident.tenant is not None
    values = {"job_key": ident.job.key, "tenant_slug": ident.tenant.slug, "environment": ident.environment or ""}
    Alert.objects.filter(pk=alert.pk).update(**values)
    alert.job_key, alert.tenant_slug, alert.environment = (
        values["job_key"],
        values["tenant_slug"],
        values["environment"],
    )


def _apply_identity(
    alert: Alert,
    record: ParsedAlert,
    ident: RecordIdentity,
    integration: Integration,
    received_at: datetime,
    ctx: PostContext,
) -> Alert:
    """A ``received`` record: registers the execution's identity for the events that correlate with it.

    Places its run (created ``expected`` if new: the executor has the work, nothing ran yet) and creates no
    attempt. Writes a ``run_reported`` event only when it created the run (a repeat says nothing new).
    """
    run, created = run_for_identity(ident, ctx, status=Run.Status.EXPECTED)
    if created:
        summary = (
            f"{integration.name}: execution {record.execution_id or record.correlation_key} received "
            "(its job, tenant and window are registered; no attempt yet)"
        )
        _run_event(alert, run, TimelineEvent.Kind.RUN_REPORTED, summary, record.occurred_at or received_at, integration)
    return alert_finish(alert, Alert.Outcome.ACCEPTED, reason="identity registered; no attempt", run=run)


def _apply_missed(
    alert: Alert,
    record: ParsedAlert,
    ident: RecordIdentity,
    integration: Integration,
    received_at: datetime,
    ctx: PostContext,
) -> Alert:
    """A reported ``missed``: a ``missed_reported`` event by the missed-run rule (``run_missed_report``), no attempt."""
    assert ident.job is not None and ident.tenant is not None and ident.environment
    assert ident.window_start is not None and ident.window_end is not None
    run = run_missed_report(
        job=ident.job,
        tenant=ident.tenant,
        environment=ident.environment,
        target=ctx.target(ident.job, ident.tenant, ident.environment),
        window=(ident.window_start, ident.window_end),
        slot=ident.scheduled_for,
        occurred_at=record.occurred_at or received_at,
        reporter=integration.name,
        alert=alert,
        actor_integration=integration,
    )
    reason = "" if run is not None else "missed: recorded on the target's missed streak (no run per slot)"
    return alert_finish(alert, Alert.Outcome.ACCEPTED, reason=reason, run=run)

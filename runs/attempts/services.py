"""Attempts and the run status derived from them: the only code that assigns either ``status``.

Transition table: ``Attempt.TRANSITIONS`` (queued -> running -> succeeded | failed | timed_out, or
abandoned). Terminal states never move back; a late earlier-state report is *stale*, not an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from handover.core.errors import InvalidTransition
from handover.core.rows import row_insert_unless_conflict
from runs.alerts.models import Alert
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Integration
from runs.checks.overlaps import attempt_overlap_record
from runs.timeline.services import timeline_event_record

RUN_STATUS_FOR_ATTEMPT = {
    Attempt.Status.QUEUED: Run.Status.RUNNING,
    Attempt.Status.RUNNING: Run.Status.RUNNING,
    Attempt.Status.SUCCEEDED: Run.Status.SUCCEEDED,
    Attempt.Status.FAILED: Run.Status.FAILED,
    Attempt.Status.TIMED_OUT: Run.Status.FAILED,
    Attempt.Status.ABANDONED: Run.Status.FAILED,
}
STATUS_WORDS = {
    "queued": "queued",
    "running": "running",
    "succeeded": "succeeded",
    "failed": "failed",
    "timed_out": "timed out",
    "abandoned": "abandoned",
}


@dataclass
class AttemptReport:
    """What one alert says about one attempt (times are aware, UTC)."""

    execution_id: str
    status: str
    number: int = 1
    trigger: str = Attempt.Trigger.SCHEDULED
    scheduled_at: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    error_summary: str = ""
    correlation_ref: str = ""
    log_url: str = ""
    config_version: str = ""
    replay_key: str = ""


@dataclass
class AttemptReportResult:
    """The attempt, and what the report did: ``created``, ``changed`` (status moved) or ``stale``."""

    attempt: Attempt
    created: bool
    changed: bool
    stale: bool


def _event_time(report: AttemptReport, fallback: datetime) -> datetime:
    if report.status in Attempt.TERMINAL and report.ended_at:
        return report.ended_at
    if report.status == Attempt.Status.RUNNING and report.started_at:
        return report.started_at
    if report.status == Attempt.Status.QUEUED and report.scheduled_at:
        return report.scheduled_at
    return fallback


def _attempt_summary(attempt: Attempt, status: str) -> str:
    text = f"Attempt {attempt.number} ({attempt.execution_id}) {STATUS_WORDS.get(status, status)}"
    if status == Attempt.Status.QUEUED and attempt.scheduled_at:
        text += f" for {attempt.scheduled_at.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z"
    if attempt.error_summary and status in (Attempt.Status.FAILED, Attempt.Status.TIMED_OUT):
        text += f": {attempt.error_summary[:200]}"
    return text


def run_status_refresh(*, run: Run) -> Run:
    """Set ``run.status`` from its highest-numbered attempt (ties: the latest created).

    A run with no attempt keeps its status (the schedule sweep sets ``expected``/``missed``).
    Writes no timeline event: the attempt's own event already says what changed.
    """
    latest = run.attempts.order_by("-number", "-created_at", "-id").first()
    if latest is None:
        return run
    status = RUN_STATUS_FOR_ATTEMPT[Attempt.Status(latest.status)]
    if run.status != status:
        now = timezone.now()
        Run.objects.filter(pk=run.pk).update(status=status, status_changed_at=now, updated_at=now)
        run.status, run.status_changed_at = status, now
    return run


def attempt_report_apply(
    *,
    run: Run,
    report: AttemptReport,
    received_at: datetime,
    occurred_at: datetime | None = None,
    alert: Alert | None = None,
    actor_integration: Integration | None = None,
    data: dict[str, Any] | None = None,
) -> AttemptReportResult:
    """Create the attempt a report names, or move it along its transition table.

    Must run inside a transaction. A new attempt is created directly in the reported status; an
    existing one moves only forward (``Attempt.TRANSITIONS``); a report of the status it already
    has fills in missing details and changes nothing else; an earlier-state report on a terminal
    or later attempt is stale. Each status change writes one timeline event; the run's status is
    refreshed by the caller (``run_status_refresh``) once all reports of an alert are applied.
    An event's time is the report's own (end, start or scheduled time for the status), else
    ``occurred_at`` (when the source says the reported thing happened), else ``received_at``.
    An attempt that starts running records any overlap with an earlier run of its target
    (``runs.checks.overlaps.attempt_overlap_record``).
    """
    fallback = occurred_at or received_at
    attempt = Attempt(
        run=run,
        execution_id=report.execution_id,
        number=report.number,
        trigger=report.trigger,
        status=report.status,
        status_changed_at=received_at,
        scheduled_at=report.scheduled_at,
        started_at=report.started_at,
        ended_at=report.ended_at,
        error_summary=report.error_summary,
        correlation_ref=report.correlation_ref[:300],
        log_url=report.log_url,
        config_version=report.config_version,
        replay_key=report.replay_key,
    )
    # Insert first (one statement for a new attempt); when (run, execution_id) is taken -- by an
    # earlier report, or a concurrent post now committed -- continue as an update, under its row lock.
    created = row_insert_unless_conflict(attempt)
    if not created:
        attempt = Attempt.objects.select_for_update().get(run=run, execution_id=report.execution_id)
    if created:
        timeline_event_record(
            job=run.job,
            run=run,
            attempt=attempt,
            alert=alert,
            kind=f"attempt_{report.status}",
            summary=_attempt_summary(attempt, report.status),
            occurred_at=_event_time(report, fallback),
            actor_integration=actor_integration,
            data=data,
        )
        if report.status == Attempt.Status.RUNNING:
            attempt_overlap_record(attempt=attempt, occurred_at=_event_time(report, fallback))
        return AttemptReportResult(attempt=attempt, created=True, changed=True, stale=False)

    changed = stale = False
    if report.status != attempt.status:
        allowed_from, target = Attempt.TRANSITIONS[Attempt.ACTION_FOR_STATUS[Attempt.Status(report.status)]]
        if attempt.status in allowed_from:
            attempt = attempt_transition(
                attempt=attempt,
                status=target,
                at=received_at,
                details=report,
                alert=alert,
                actor_integration=actor_integration,
                occurred_at=_event_time(report, fallback),
                data=data,
            )
            changed = True
        else:
            stale = True
    if not stale:
        _fill_missing_details(attempt, report)
    return AttemptReportResult(attempt=attempt, created=False, changed=changed, stale=stale)


def _fill_missing_details(attempt: Attempt, report: AttemptReport) -> None:
    """Copy details the attempt does not have yet (a later alert often knows the end time)."""
    updates: dict[str, Any] = {}
    for name in ("scheduled_at", "started_at", "ended_at", "correlation_ref", "log_url", "config_version"):
        value = getattr(report, name)
        if value and not getattr(attempt, name):
            updates[name] = value
    if report.error_summary and not attempt.error_summary:
        updates["error_summary"] = report.error_summary
    if updates:
        Attempt.objects.filter(pk=attempt.pk).update(**updates, updated_at=timezone.now())
        for name, value in updates.items():
            setattr(attempt, name, value)


def attempt_transition(
    *,
    attempt: Attempt,
    status: str,
    at: datetime | None = None,
    details: AttemptReport | None = None,
    reason: str = "",
    actor_user: AbstractBaseUser | None = None,
    alert: Alert | None = None,
    actor_integration: Integration | None = None,
    occurred_at: datetime | None = None,
    data: dict[str, Any] | None = None,
) -> Attempt:
    """Move an attempt to ``status`` with a guarded UPDATE, writing its timeline event.

    The UPDATE is filtered on the primary key *and* the allowed source statuses. If no row changed
    and the attempt already has ``status``, it is returned unchanged (idempotent); otherwise
    ``InvalidTransition`` (HTTP 409) names the current status. ``abandoned`` needs ``reason`` and
    ``actor_user``. Refreshes the run's status. Runs in its own transaction (or the caller's).
    Moving to ``running`` records any overlap with an earlier run (``attempt_overlap_record``).
    """
    action = Attempt.ACTION_FOR_STATUS[Attempt.Status(status)]
    allowed_from, target = Attempt.TRANSITIONS[action]
    now = at or timezone.now()
    values: dict[str, Any] = {"status": target, "status_changed_at": now, "updated_at": timezone.now()}
    if details is not None:
        for name in (
            "started_at",
            "ended_at",
            "error_summary",
            "correlation_ref",
            "log_url",
            "config_version",
        ):
            value = getattr(details, name)
            if value:
                values[name] = value
    if target == Attempt.Status.ABANDONED:
        if not reason or actor_user is None:
            raise InvalidTransition("Abandoning an attempt needs a person and a reason.")
        values.update(abandon_reason=reason, abandoned_by=actor_user, ended_at=attempt.ended_at or now)
    with transaction.atomic():
        updated = Attempt.objects.filter(pk=attempt.pk, status__in=allowed_from).update(**values)
        if not updated:
            current = Attempt.objects.get(pk=attempt.pk)
            if current.status == target:
                return current
            raise InvalidTransition(
                f"Attempt {current.number} is {current.status}; it cannot become {target} "
                f"(allowed from: {', '.join(sorted(allowed_from)) or 'nothing'})."
            )
        attempt.refresh_from_db()
        timeline_event_record(
            job=attempt.run.job,
            run=attempt.run,
            attempt=attempt,
            alert=alert,
            kind=f"attempt_{target}",
            summary=_attempt_summary(attempt, target) + (f" — {reason}" if reason else ""),
            occurred_at=occurred_at or now,
            actor_user=actor_user,
            actor_integration=actor_integration,
            data=data,
        )
        if target == Attempt.Status.RUNNING:
            attempt_overlap_record(attempt=attempt, occurred_at=occurred_at or now)
        run_status_refresh(run=attempt.run)
    return attempt


def attempt_abandon(*, attempt: Attempt, actor: AbstractBaseUser, reason: str) -> Attempt:
    """A person's decision that an attempt will never report: ``abandoned`` with the reason."""
    return attempt_transition(attempt=attempt, status=Attempt.Status.ABANDONED, reason=reason, actor_user=actor)

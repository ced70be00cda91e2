"""Writing the timeline: the one place TimelineEvent rows are created."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from handover.core.people import Person
from handover.core.rows import rows_insert
from runs.alerts.models import Alert
from runs.alerts.redaction import redact_text
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Integration, Job, Tenant
from runs.timeline.models import TimelineEvent, TimelineEventKind


def timeline_event_build(
    *,
    job: Job,
    kind: TimelineEventKind,
    summary: str,
    occurred_at: datetime | None = None,
    tenant: Tenant | None = None,
    run: Run | None = None,
    attempt: Attempt | None = None,
    alert: Alert | None = None,
    actor: Person | None = None,
    actor_integration: Integration | None = None,
    data: dict[str, Any] | None = None,
) -> TimelineEvent:
    """Build one unsaved event, for ``timeline_events_record`` (several at once).

    ``occurred_at`` (UTC) defaults to now; the actor is the person, else the integration, else the
    system. ``summary`` is redacted (secrets and personal data become ``‹redacted:…›`` tokens,
    ``runs.alerts.redaction``) and cut to 500 characters.
    """
    now = timezone.now()
    if run is not None and tenant is None:
        tenant = run.tenant
    actor_kind = (
        TimelineEvent.ActorKind.PERSON
        if actor is not None
        else TimelineEvent.ActorKind.INTEGRATION
        if actor_integration is not None
        else TimelineEvent.ActorKind.SYSTEM
    )
    return TimelineEvent(
        job=job,
        tenant=tenant,
        run=run,
        attempt=attempt,
        alert=alert,
        kind=kind,
        summary=redact_text(summary)[:500],
        occurred_at=occurred_at or now,
        recorded_at=now,
        actor_kind=actor_kind,
        actor_user=actor,
        actor_integration=actor_integration,
        data=data or {},
    )


def timeline_event_record(
    *,
    job: Job,
    kind: TimelineEventKind,
    summary: str,
    occurred_at: datetime | None = None,
    tenant: Tenant | None = None,
    run: Run | None = None,
    attempt: Attempt | None = None,
    alert: Alert | None = None,
    actor: Person | None = None,
    actor_integration: Integration | None = None,
    data: dict[str, Any] | None = None,
) -> TimelineEvent:
    """Append one event. Call inside the transaction of the change it records.

    ``occurred_at`` (UTC) defaults to now; the actor is the person, else the integration, else the
    system. ``summary`` is redacted and cut to 500 characters (``timeline_event_build``). Returns the new row.
    """
    event = timeline_event_build(
        job=job,
        kind=kind,
        summary=summary,
        occurred_at=occurred_at,
        tenant=tenant,
        run=run,
        attempt=attempt,
        alert=alert,
        actor=actor,
        actor_integration=actor_integration,
        data=data,
    )
    event.save(force_insert=True)
    return event


def timeline_events_record(events: list[TimelineEvent]) -> list[TimelineEvent]:
    """Append several events built with ``timeline_event_build`` in one INSERT (a sweep's batch).

    Call inside the transaction of the changes they record. Returns the saved rows.
    """
    return rows_insert(events)

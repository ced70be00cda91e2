"""What every part of the checks shares: times in words, and a check's timeline event."""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime
from typing import Any

from handover.core.people import Person
from runs.checks.models import NextRunCheck
from runs.timeline.models import TimelineEvent, TimelineEventKind
from runs.timeline.services import timeline_event_build, timeline_events_record


def utc_text(value: datetime | None) -> str:
    return f"{value.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z" if value else "—"


def local_text(value: datetime, zone: str) -> str:
    local = value.astimezone(zoneinfo.ZoneInfo(zone))
    return f"{local:%Y-%m-%d %H:%M} {local.tzname()}"


def check_event_build(
    check: NextRunCheck,
    *,
    kind: TimelineEventKind,
    summary: str,
    occurred_at: datetime,
    actor: Person | None = None,
    data: dict[str, Any] | None = None,
) -> TimelineEvent:
    """A check's (unsaved) timeline event: on the recovered run's timeline, else job-level with the tenant."""
    target = check.target
    return timeline_event_build(
        job=target.job,
        tenant=target.tenant,
        run=check.recovered_run if check.recovered_run_id else None,
        kind=kind,
        summary=summary,
        occurred_at=occurred_at,
        actor=actor,
        data={"check": str(check.public_id), "expected_at": check.expected_at.isoformat(), **(data or {})},
    )


def check_event_record(check: NextRunCheck, **kwargs: Any) -> TimelineEvent:
    return timeline_events_record([check_event_build(check, **kwargs)])[0]

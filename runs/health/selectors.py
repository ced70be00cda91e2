"""Heartbeats: how long ago a periodic process last ticked (for ``/healthz`` and the checks page)."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from runs.health.models import Heartbeat


def heartbeat_age_seconds(*, name: str = Heartbeat.BEAT, now: datetime | None = None) -> float | None:
    """Seconds since the process ``name`` last ticked, to 0.1 s; None when it never did. One query."""
    beat_at = Heartbeat.objects.filter(name=name).values_list("beat_at", flat=True).first()
    if beat_at is None:
        return None
    return round(((now or timezone.now()) - beat_at).total_seconds(), 1)

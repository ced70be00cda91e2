"""Heartbeats: record that a periodic process ticked (one upserted row per name)."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from runs.health.models import Heartbeat


def heartbeat_record(*, name: str, at: datetime | None = None) -> Heartbeat:
    """Record that the process ``name`` (e.g. ``Heartbeat.BEAT``) ticked at ``at`` (aware; default now).

    One statement, ``INSERT ... ON CONFLICT (name) DO UPDATE SET beat_at`` (PostgreSQL and SQLite),
    so two ticks at once (two beats, a redelivered task) never fail on the unique name and the
    table keeps one row per name. Returns the heartbeat as written (its ``pk`` may be unset).
    """
    heartbeat = Heartbeat(name=name, beat_at=at or timezone.now())
    Heartbeat.objects.bulk_create([heartbeat], update_conflicts=True, unique_fields=["name"], update_fields=["beat_at"])
    return heartbeat

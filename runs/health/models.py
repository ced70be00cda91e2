"""Heartbeats: the last tick of a periodic process, one row per name (the Celery beat's for ``/healthz``).

A row, not a file: web, workers and beat may run on different hosts, and the database is the one
thing they all share. Each tick upserts its row, so the table never grows.
"""

from __future__ import annotations

from django.db import models


class Heartbeat(models.Model):
    """When a periodic process last ticked. ``name`` says which (``Heartbeat.BEAT``: the beat's sweep)."""

    BEAT = "beat"

    name = models.CharField(max_length=50, help_text="the process that ticks, e.g. 'beat'")
    beat_at = models.DateTimeField(help_text="when it last ticked (UTC)")

    class Meta:
        constraints = [
            # one row per process: each tick upserts it (INSERT ... ON CONFLICT (name) DO UPDATE)
            models.UniqueConstraint(
                fields=["name"], name="runs_heartbeat_name_unique", violation_error_code="duplicate_heartbeat"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name}: {self.beat_at.isoformat()}"

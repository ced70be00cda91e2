"""Celery tasks of the runs app: sweepers that re-find due work in the database (STYLE.md §6)."""

from __future__ import annotations

import logging
from datetime import datetime

from celery import shared_task
from django.conf import settings
from django.utils import timezone

logger = logging.getLogger(__name__)


def _heartbeat_path() -> object:
    return settings.VAR_DIR / "beat-heartbeat"


def beat_heartbeat_age_seconds() -> float | None:
    """Seconds since the last sweep tick wrote its heartbeat, or None when it never ran."""
    path = _heartbeat_path()
    try:
        stamp = datetime.fromisoformat(path.read_text().strip())  # type: ignore[attr-defined]
    except (OSError, ValueError):
        return None
    return round((timezone.now() - stamp).total_seconds(), 1)


@shared_task(name="runs.alert_sweep_pending")
def alert_sweep_pending() -> int:
    """Beat tick: write the heartbeat, then finish alerts a crash left ``pending``. Returns the count."""
    from runs.services import alert_sweep_pending as sweep

    _heartbeat_path().write_text(timezone.now().isoformat())  # type: ignore[attr-defined]
    done = sweep()
    if done:
        logger.info("alert sweep applied %d pending alerts", done)
    return done

"""Celery tasks of the alerts slice: the beat tick that finishes alerts a crash left ``pending``."""

from __future__ import annotations

import logging

from celery import shared_task

logger = logging.getLogger(__name__)


@shared_task(name="runs.alert_sweep_pending")
def alert_sweep_pending() -> int:
    """Beat tick: write the beat's heartbeat, finish alerts a crash left ``pending``, prune refusal counters.

    Returns the count of alerts finished. Refused-request counters older than 30 days are deleted
    (``runs.alerts.refusals.refused_request_prune``: one set-based DELETE, harmless when repeated).

    The heartbeat is a database row (``Heartbeat.BEAT``, upserted), so ``/healthz`` on any host
    reads the same ``beat_age_seconds``.
    """
    from runs.alerts.refusals import refused_request_prune
    from runs.alerts.triage import alert_sweep_pending as sweep
    from runs.health.models import Heartbeat
    from runs.health.services import heartbeat_record

    heartbeat_record(name=Heartbeat.BEAT)
    done = sweep()
    refused_request_prune()
    if done:
        logger.info("alert sweep applied %d pending alerts", done)
    return done

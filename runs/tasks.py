"""Celery tasks of the runs app: sweepers that re-find due work in the database (STYLE.md §6)."""

from __future__ import annotations

import logging
from smtplib import SMTPException

from celery import shared_task

logger = logging.getLogger(__name__)


@shared_task(name="runs.alert_sweep_pending")
def alert_sweep_pending() -> int:
    """Beat tick: write the beat's heartbeat, then finish alerts a crash left ``pending``. Returns the count.

    The heartbeat is a database row (``Heartbeat.BEAT``, upserted), so ``/healthz`` on any host
    reads the same ``beat_age_seconds``.
    """
    from runs.models.heartbeats import Heartbeat
    from runs.services.heartbeats import heartbeat_record
    from runs.services.ingest.triage import alert_sweep_pending as sweep

    heartbeat_record(name=Heartbeat.BEAT)
    done = sweep()
    if done:
        logger.info("alert sweep applied %d pending alerts", done)
    return done


@shared_task(name="runs.next_run_check_sweep")
def next_run_check_sweep() -> dict[str, int]:
    """Beat tick: settle due next-run checks and record late successes (set-based; safe to overlap).

    Enqueues only follow-ups (``runs.next_run_check_notify_failed``, one per claimed batch with
    failures, and again for failed checks whose follow-up never ran). Returns the counts of the sweep.
    """
    from runs.services.checks.sweep import next_run_check_sweep as sweep

    result = sweep()
    if result.due or result.late_successes or result.follow_ups_resent:
        logger.info(
            "next-run sweep: due=%d passed=%d failed=%d awaiting=%d skipped=%d late=%d follow-ups resent=%d",
            result.due,
            result.passed,
            result.failed,
            result.awaiting_confirmation,
            result.skipped,
            result.late_successes,
            result.follow_ups_resent,
        )
    return {
        "due": result.due,
        "passed": result.passed,
        "failed": result.failed,
        "awaiting_confirmation": result.awaiting_confirmation,
        "skipped": result.skipped,
        "late_successes": result.late_successes,
    }


@shared_task(name="runs.retention_purge")
def retention_purge() -> dict[str, int]:
    """Beat tick (hourly): blank delivery bodies and remove work-ledger items past the retention age.

    Set-based, in small batches; safe to overlap and to repeat. Returns the counts.
    """
    from runs.services.retention import retention_purge as purge

    result = purge()
    if result.total:
        logger.info(
            "retention purge: %d delivery bodies, %d work items, %d ledger files",
            result.delivery_bodies,
            result.work_items,
            result.load_files,
        )
    return {
        "delivery_bodies": result.delivery_bodies,
        "work_items": result.work_items,
        "load_files": result.load_files,
    }


@shared_task(name="runs.run_sweep_missed")
def run_sweep_missed() -> int:
    """Beat tick: create one ``missed`` run per fire time of a success-reporting target that never reported."""
    from runs.services.checks.missed_runs import run_sweep_missed as sweep

    created = sweep()
    if created:
        logger.info("missed-run sweep created %d missed runs", created)
    return created


@shared_task(
    name="runs.next_run_check_notify_failed",
    autoretry_for=(OSError, SMTPException),
    retry_backoff=30,
    retry_jitter=True,
    max_retries=5,
)
def next_run_check_notify_failed(check_ids: list[int]) -> int:
    """Follow-ups of failed checks: reopen the handover (hook) and e-mail the people responsible.

    ``check_ids``: primary keys of failed checks (one sweep batch). Idempotent: each check is
    claimed once (``failure_notified_at``); transient mail errors are retried with backoff.
    """
    from runs.services.checks.follow_ups import next_run_check_notify_failed as notify

    return notify(check_ids=check_ids)


@shared_task(name="runs.work_item_load_run", soft_time_limit=1800, time_limit=1900)
def work_item_load_run(load_id: int) -> str:
    """Run a large work-ledger upload (the batch of ``load_id``) that the request queued; return its status.

    Idempotent: a batch already ``committed`` or ``failed`` is left alone (a redelivered message
    changes nothing), and the service serialises two runners of one batch. Bad input is recorded
    on the loads (``failed``, with line and column), not retried; an unexpected error is recorded
    too and the bytes kept, so a person can retry it. Time limits: 30 minutes (a million-row load
    takes well under one).
    """
    from runs.ledger_files import LedgerInputError
    from runs.models.ledger import WorkItemLoad
    from runs.services.ledger.batches import work_item_load_run as run_load

    load = WorkItemLoad.objects.filter(pk=load_id).defer("content").first()
    if load is None:
        logger.warning("work-ledger load %s is gone", load_id)
        return "missing"
    if load.status in (WorkItemLoad.Status.COMMITTED, WorkItemLoad.Status.FAILED):
        return load.status
    try:
        return run_load(load_id=load_id).status
    except LedgerInputError:
        return WorkItemLoad.Status.FAILED

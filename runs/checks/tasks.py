"""Celery tasks of next-run checks: the sweeps and the follow-ups of failed checks."""

from __future__ import annotations

import logging
from smtplib import SMTPException

from celery import shared_task

logger = logging.getLogger(__name__)


@shared_task(name="runs.next_run_check_sweep")
def next_run_check_sweep() -> dict[str, int]:
    """Beat tick: settle due next-run checks and record late successes (set-based; safe to overlap).

    Enqueues only follow-ups (``runs.next_run_check_notify_failed``, one per claimed batch with
    failures, and again for failed checks whose follow-up never ran). Returns the counts of the sweep.
    """
    from runs.checks.sweep import next_run_check_sweep as sweep

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


@shared_task(name="runs.run_sweep_missed")
def run_sweep_missed() -> int:
    """Beat tick: create one ``missed`` run per fire time of a success-reporting target that never reported."""
    from runs.checks.missed_runs import run_sweep_missed as sweep

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
    from runs.checks.follow_ups import next_run_check_notify_failed as notify

    return notify(check_ids=check_ids)

"""Celery tasks of next-run checks: the sweeps (the follow-ups of failed checks are the handover app's)."""

from __future__ import annotations

import logging

from celery import shared_task

logger = logging.getLogger(__name__)


@shared_task(name="runs.next_run_check_sweep")
def next_run_check_sweep() -> dict[str, int]:
    """Beat tick: settle due next-run checks and record late successes (set-based; safe to overlap).

    Enqueues nothing: a failed check waits in the follow-up outbox the handover app sweeps.
    Returns the counts of the sweep.
    """
    from runs.checks.sweep import next_run_check_sweep as sweep

    result = sweep()
    if result.due or result.late_successes:
        logger.info(
            "next-run sweep: due=%d passed=%d failed=%d awaiting=%d skipped=%d late=%d",
            result.due,
            result.passed,
            result.failed,
            result.awaiting_confirmation,
            result.skipped,
            result.late_successes,
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

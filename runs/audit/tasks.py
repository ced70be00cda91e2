"""Celery task of retention: the hourly purge."""

from __future__ import annotations

import logging

from celery import shared_task

logger = logging.getLogger(__name__)


@shared_task(name="runs.retention_purge")
def retention_purge() -> dict[str, int]:
    """Beat tick (hourly): blank delivery bodies and remove work-ledger items past the retention age.

    Set-based, in small batches; safe to overlap and to repeat. Returns the counts.
    """
    from runs.audit.retention import retention_purge as purge

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

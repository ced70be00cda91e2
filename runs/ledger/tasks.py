"""Celery task of the work ledger: large loads run in the worker."""

from __future__ import annotations

import logging

from celery import shared_task

logger = logging.getLogger(__name__)


@shared_task(name="runs.work_item_load_run", soft_time_limit=1800, time_limit=1900)
def work_item_load_run(load_id: int) -> str:
    """Run a large work-ledger upload (the batch of ``load_id``) that the request queued; return its status.

    Idempotent: a batch already ``committed``, ``failed``, ``discarded`` or waiting for a person's
    confirmation is left alone (a redelivered message
    changes nothing), and the service serialises two runners of one batch. Bad input is recorded
    on the loads (``failed``, with line and column), not retried; an unexpected error is recorded
    too and the bytes kept, so a person can retry it. Time limits: 30 minutes (a million-row load
    takes well under one).
    """
    from runs.ledger.batches import work_item_load_run as run_load
    from runs.ledger.files import LedgerInputError
    from runs.ledger.models import WorkItemLoad

    load = WorkItemLoad.objects.filter(pk=load_id).defer("content").first()
    if load is None:
        logger.warning("work-ledger load %s is gone", load_id)
        return "missing"
    if load.status not in (WorkItemLoad.Status.PENDING, WorkItemLoad.Status.RUNNING):
        return load.status
    try:
        return run_load(load_id=load_id).status
    except LedgerInputError:
        return WorkItemLoad.Status.FAILED

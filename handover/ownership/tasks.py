"""Celery task of ownership: the aged-work sweep (the reminder ladder), run by the beat.

It follows the task rules of docs/architecture.md "Layout rules": the database says what is due, and
each ladder step is claimed by a unique row, so overlapping or repeated ticks send nothing twice.
"""

from __future__ import annotations

from celery import shared_task


@shared_task(name="handover.aged_work_escalate")
def aged_work_escalate() -> dict[str, int]:
    """Beat tick: send the due ladder steps of aged work (``handover.ownership.services.aged_work_escalate``).

    Returns ``{"aged", "sent", "taken"}`` counts.
    """
    from handover.ownership.services import aged_work_escalate as sweep

    result = sweep()
    return {"aged": result.aged, "sent": result.sent, "taken": result.taken}

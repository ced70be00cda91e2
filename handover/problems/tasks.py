"""Celery tasks of problems: the verify sweep (docs/problems.md "Clean runs").

They follow the task rules of docs/architecture.md "Layout rules": the database says what is due.
"""

from __future__ import annotations

from celery import shared_task


@shared_task(name="handover.problem_verify_sweep")
def problem_verify_sweep() -> dict[str, int]:
    """Beat tick: move every ``fix_deployed`` problem whose linked targets each ran clean often enough to
    ``verified``. Safe to overlap (guarded updates; verifying twice is idempotent). Returns the counts."""
    from handover.problems.services import problem_verify_sweep as sweep

    result = sweep()
    return {"checked": result.checked, "verified": result.verified}

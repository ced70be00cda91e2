"""What the parts of the work ledger share: table names and limits, who may change a run's ledger,
and a load's progress published through the cache (outside the load's transaction)."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser
from django.core.cache import cache

from handover.core.errors import Forbidden
from handover.core.people import Person
from runs.attempts.models import Run
from runs.ledger.models import WorkItem, WorkItemChange, WorkItemLoad
from runs.ledger.selectors import LOAD_PROGRESS_KEY
from runs.permissions import require_act_on_run

User = Person | AnonymousUser
STAGE = "runs_ledger_stage"
ITEM = WorkItem._meta.db_table
CHANGE = WorkItemChange._meta.db_table
PROGRESS_SECONDS = 3600
SQLITE_BATCH = 5000
FAILURE_CLASS_WORDS = dict(Run.FailureClass.choices)
KIND_WORDS = dict(WorkItemLoad.Kind.choices)


class LedgerPermissionDenied(Forbidden):
    """The person may see the run but not change its ledger (auditors, business owners)."""


def run_ledger_require_writer(*, actor: User, run: Run) -> None:
    """Check that ``actor`` may change ``run``'s work ledger; return None when they may.

    Raises NotFound (404) for a run the person may not see, LedgerPermissionDenied (403) for one they
    may only read. The API calls it before it reads a request body, so a reader learns nothing from
    a 400; every writing service calls it again. Queries: the guardian checks, plus one when refused.
    """
    require_act_on_run(user=actor, run=run, what="change a run's work ledger", error=LedgerPermissionDenied)


def load_progress_publish(load: WorkItemLoad, phase: str, percent: int, message: str = "") -> None:
    """Publish where a load is, for the polling progress bar (the cache is shared by web and worker)."""
    cache.set(
        LOAD_PROGRESS_KEY.format(load.public_id),
        {"phase": phase, "percent": max(0, min(100, percent)), "message": message},
        PROGRESS_SECONDS,
    )

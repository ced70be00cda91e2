"""What the parts of the work ledger share: table names and limits, who may change a run's ledger,
and a load's progress published through the cache (outside the load's transaction)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.cache import cache

from handover.core.errors import DomainError, NotFound
from runs.attempts.models import Run
from runs.ledger.models import WorkItem, WorkItemChange, WorkItemLoad
from runs.ledger.selectors import LOAD_PROGRESS_KEY, run_ledger_writable
from runs.permissions import run_visibility_filter

User = AbstractBaseUser | AnonymousUser
STAGE = "runs_ledger_stage"
ITEM = WorkItem._meta.db_table
CHANGE = WorkItemChange._meta.db_table
PROGRESS_SECONDS = 3600
SQLITE_BATCH = 5000
FAILURE_CLASS_WORDS = dict(Run.FailureClass.choices)
KIND_WORDS = dict(WorkItemLoad.Kind.choices)


class LedgerPermissionDenied(DomainError):
    """The person may see the run but not change its ledger (auditors, business owners)."""

    status = 403
    type = "forbidden"
    title = "Forbidden"


def run_ledger_require_writer(*, user: User, run: Run) -> None:
    """Check that ``user`` may change ``run``'s work ledger; return None when they may.

    Raises NotFound (404) for a run the person may not see, LedgerPermissionDenied (403) for one they
    may only read. The API calls it before it reads a request body, so a reader learns nothing from
    a 400; every writing service calls it again. Queries: the guardian checks, plus one when refused.
    """
    if run_ledger_writable(user=user, run=run):
        return
    if not Run.objects.filter(run_visibility_filter(user=user), pk=run.pk).exists():
        raise NotFound("No such run.")
    raise LedgerPermissionDenied(
        "Only support (on this tenant), the job's technical owners and admins change a run's work ledger."
    )


def load_progress_publish(load: WorkItemLoad, phase: str, percent: int, message: str = "") -> None:
    """Publish where a load is, for the polling progress bar (the cache is shared by web and worker)."""
    cache.set(
        LOAD_PROGRESS_KEY.format(load.public_id),
        {"phase": phase, "percent": max(0, min(100, percent)), "message": message},
        PROGRESS_SECONDS,
    )

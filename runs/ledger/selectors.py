"""The work ledger: who may change a run's ledger, work items (pages, search, changes) and loads."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from django.db.models import Case, Q, QuerySet, Value, When

from runs.attempts.business_state import business_state_annotations
from runs.attempts.models import Run
from runs.ledger.models import WorkItem, WorkItemChange, WorkItemLoad
from runs.permissions import User, run_visibility_filter

# Cache key of a load's progress (written by runs.ledger, polled by the run page).
LOAD_PROGRESS_KEY = "runs:ledger-load:{}"


def run_get_for_ledger(*, user: User, public_id: UUID | str) -> Run | None:
    """One run visible to ``user`` with its job and tenant, nothing prefetched (the ledger endpoints).

    Returns None when it does not exist or may not be seen. Queries: one.
    """
    return (
        Run.objects.filter(run_visibility_filter(user=user), public_id=public_id)
        .select_related("job", "tenant", "failure_class_confirmed_by")
        .first()
    )


def work_item_list(
    *,
    run: Run,
    outcome: str | None = None,
    possible_duplicate: bool | None = None,
    record_id: str | None = None,
) -> QuerySet[WorkItem]:
    """A run's work items by record id (the keyset order), with the evidence's person joined.

    Filters: outcome, possible-duplicate flag, exact record id. Served by the unique (run,
    record_id) index, or (run, outcome, record_id) when filtered by outcome.
    """
    items = WorkItem.objects.filter(run=run)
    if outcome:
        items = items.filter(outcome=outcome)
    if possible_duplicate is not None:
        items = items.filter(is_possible_duplicate=possible_duplicate)
    if record_id:
        items = items.filter(record_id=record_id)
    return (
        items.select_related("evidence_by", "duplicate_explained_by", "destination_load")
        .defer("destination_load__content", "destination_load__preview_list")
        .order_by("record_id")
    )


@dataclass
class WorkItemPage:
    """One page of a run's items, paged by key: ``after``/``before`` are record ids, never offsets."""

    items: list[WorkItem]
    has_next: bool
    has_previous: bool

    @property
    def first_key(self) -> str:
        return self.items[0].record_id if self.items else ""

    @property
    def last_key(self) -> str:
        return self.items[-1].record_id if self.items else ""


def work_item_page(
    *,
    run: Run,
    outcome: str | None = None,
    possible_duplicate: bool | None = None,
    after: str | None = None,
    before: str | None = None,
    limit: int = 50,
) -> WorkItemPage:
    """The page of ``limit`` items after (or before) a record id, in record-id order.

    Queries: one (``limit + 1`` rows read through the index, so the cost does not grow with the
    page's position; the extra row tells whether another page follows).
    """
    items = work_item_list(run=run, outcome=outcome, possible_duplicate=possible_duplicate)
    if before:
        rows = list(items.filter(record_id__lt=before).order_by("-record_id")[: limit + 1])
        has_more = len(rows) > limit
        return WorkItemPage(items=rows[:limit][::-1], has_next=True, has_previous=has_more)
    if after:
        items = items.filter(record_id__gt=after)
    rows = list(items[: limit + 1])
    return WorkItemPage(items=rows[:limit], has_next=len(rows) > limit, has_previous=bool(after))


def work_item_search(*, user: User, record_id: str, limit: int = 100) -> QuerySet[WorkItem]:
    """Every work item whose record id starts with ``record_id`` (any case) in the runs ``user`` may see.

    "What happened to INV-1003?" (``inv-100`` finds it too). Exact matches first, then newest window
    first. Served by the record id's prefix index (migration ``runs`` "prefix_search_indexes").
    Queries: one.
    """
    record_id = record_id.strip()
    if not record_id:
        return WorkItem.objects.none()
    return (
        WorkItem.objects.filter(run_visibility_filter(user=user, prefix="run__"), record_id__istartswith=record_id)
        # each run's business-state facts, read with the items (the view hands them to the runs)
        .annotate(**business_state_annotations("run_id"))
        .select_related("run__job", "run__tenant", "evidence_by", "duplicate_explained_by", "destination_load")
        .defer("destination_load__content", "destination_load__preview_list")
        .annotate(is_exact=Case(When(record_id=record_id, then=Value(0)), default=Value(1)))
        .order_by("is_exact", "-run__window_start", "-run_id", "record_id")[:limit]
    )


def work_item_change_list(*, run: Run, record_id: str | None = None) -> QuerySet[WorkItemChange]:
    """The change history of a run's items (people's changes and provider lookups), newest first."""
    changes = WorkItemChange.objects.filter(run=run)
    if record_id:
        changes = changes.filter(work_item__record_id=record_id)
    return changes.select_related("work_item", "changed_by", "load").order_by("-changed_at", "-id")


def run_ledger_disclosures(*, run: Run) -> list[dict[str, str]]:
    """What a replay request must show its approvers about the run's ledger (docs/work-ledger.md "Loads").

    Every item weakened from ``completed`` (by a confirmed load or a person's change) and every
    possible duplicate a person explained, oldest first: ``{"kind": "weakened" | "explained",
    "record_id", "from", "to", "by" (username), "at" (ISO 8601 UTC), "why", "reference"}``.
    Queries: one.
    """
    changes = (
        WorkItemChange.objects.filter(run=run)
        .filter(
            Q(kind=WorkItemChange.Kind.EXPLAIN)
            | (Q(from_outcome=WorkItem.Outcome.COMPLETED) & ~Q(to_outcome=WorkItem.Outcome.COMPLETED))
        )
        .select_related("work_item", "changed_by")
        .order_by("changed_at", "id")
    )
    return [
        {
            "kind": "explained" if change.kind == WorkItemChange.Kind.EXPLAIN else "weakened",
            "record_id": change.work_item.record_id,
            "from": change.from_outcome,
            "to": change.to_outcome,
            "by": change.changed_by.get_username(),
            "at": change.changed_at.isoformat(),
            "why": change.note,
            "reference": change.evidence_ref,
        }
        for change in changes
    ]


def run_possible_duplicates_unexplained(*, run: Run, limit: int = 50) -> list[str]:
    """Record ids of the run's possible duplicates nobody explained yet (at most ``limit``). Queries: one."""
    return list(
        WorkItem.objects.filter(run=run, is_possible_duplicate=True)
        .order_by("record_id")
        .values_list("record_id", flat=True)[:limit]
    )


def work_item_load_list(*, run: Run) -> QuerySet[WorkItemLoad]:
    """A run's loads, newest first, without the stored bytes."""
    return (
        WorkItemLoad.objects.filter(run=run)
        .defer("content", "preview_list")
        .select_related("created_by", "confirmed_by")
        .order_by("-created_at", "-id")
    )


def work_item_load_get(*, run: Run, public_id: UUID | str) -> WorkItemLoad | None:
    """One load of ``run`` (None when it is not this run's), without the stored bytes."""
    return work_item_load_list(run=run).filter(public_id=public_id).first()


def work_item_load_progress(*, load: WorkItemLoad) -> dict[str, object]:
    """Where a load is: ``{"phase", "percent", "message"}`` from the cache, else from the row's status."""
    from django.core.cache import cache

    found = cache.get(LOAD_PROGRESS_KEY.format(load.public_id))
    if isinstance(found, dict) and (load.status in ("pending", "running") or found.get("phase") == load.status):
        return found
    percent = 100 if load.status in ("committed", "failed") else 0
    return {"phase": load.status, "percent": percent, "message": load.error}

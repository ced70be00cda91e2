"""Retention: purge raw delivery bodies and work-ledger items past their age (rule 8 in docs/architecture.md).

What goes and what stays:

- A Delivery older than the cutoff keeps its row (alerts point at it; size and sha256 still say
  what was received) but its raw body is blanked and ``notes["body_purged_at"]`` set. Deliveries
  whose alerts still wait for a person or the sweep (``pending``, ``unmatched``) keep their body:
  reprocessing re-reads it. Dismiss them (``ignored``) and they are purged on a later tick.
- A work item of a run whose window ended before the cutoff is deleted, unless something points at
  it (its change history, a replay request, a residual exception) or the run has an open handover.
  The run keeps its stored totals, so its page still tells how the run ended.
- The stored bytes of failed work-ledger loads created before the cutoff are blanked (committed
  loads hold none).

Each tick works in small batches, each in its own short transaction, and writes one timeline event
per job touched (with the counts) and one audit event with the totals. Running it twice, or two at
once, purges nothing twice: every batch re-selects what still holds data.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from runs.alerts.models import Alert, Delivery
from runs.audit.services import audit_record
from runs.catalog.models import Job
from runs.ledger.models import WorkItem, WorkItemLoad
from runs.timeline.models import TimelineEvent
from runs.timeline.services import timeline_event_record

BATCH = 500


@dataclass
class RetentionResult:
    """What one purge did: counts, the cutoff (UTC), and per job id the counts written to its timeline."""

    cutoff: datetime | None
    delivery_bodies: int = 0
    work_items: int = 0
    load_files: int = 0
    per_job: dict[int, Counter[str]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.delivery_bodies + self.work_items + self.load_files


def _deliveries_due(cutoff: datetime) -> QuerySet[Delivery]:
    waiting = Alert.objects.filter(outcome__in=[Alert.Outcome.PENDING, Alert.Outcome.UNMATCHED]).values("delivery_id")
    return Delivery.objects.filter(received_at__lt=cutoff).exclude(body="").exclude(pk__in=waiting)


def _work_items_due(cutoff: datetime) -> QuerySet[WorkItem]:
    items = WorkItem.objects.filter(run__window_end__lt=cutoff).exclude(run__handover_links__is_open=True)
    # Whatever points at an item (now or in a later app: change history, replay items, residual
    # exceptions) keeps it: each reverse relation excludes the items it references.
    for relation in WorkItem._meta.related_objects:
        items = items.exclude(**{f"{relation.name}__isnull": False})
    return items


def _loads_due(cutoff: datetime) -> QuerySet[WorkItemLoad]:
    return WorkItemLoad.objects.filter(created_at__lt=cutoff, status=WorkItemLoad.Status.FAILED).exclude(content=b"")


def _days(older_than_days: int | None) -> int:
    return settings.HANDOVER_RETENTION_DAYS if older_than_days is None else older_than_days


def retention_preview(*, older_than_days: int | None = None, now: datetime | None = None) -> RetentionResult:
    """Count what ``retention_purge`` with the same arguments would purge now, purging nothing.

    Same rules and cutoff as the purge (``older_than_days`` defaults to ``HANDOVER_RETENTION_DAYS``;
    0 or less: nothing, cutoff None). Returns the counts per kind (``per_job`` is left empty).
    Queries: three counts; no writes, no events.
    """
    days = _days(older_than_days)
    if days <= 0:
        return RetentionResult(cutoff=None)
    cutoff = (now or timezone.now()) - timedelta(days=days)
    return RetentionResult(
        cutoff=cutoff,
        delivery_bodies=_deliveries_due(cutoff).count(),
        work_items=_work_items_due(cutoff).count(),
        load_files=_loads_due(cutoff).count(),
    )


def retention_purge(*, older_than_days: int | None = None, now: datetime | None = None) -> RetentionResult:
    """Purge delivery bodies and work-ledger items older than ``older_than_days`` (default the
    ``HANDOVER_RETENTION_DAYS`` setting; 0 or less does nothing).

    Returns the counts. Side effects: Delivery bodies blanked, WorkItem rows deleted, failed
    loads' bytes blanked (all in batches of 500, each its own transaction); one TimelineEvent
    (``retention_purged``) per job touched and one AuditEvent (``retention_purge``) when anything
    was purged. Safe to run concurrently and repeatedly.
    """
    days = _days(older_than_days)
    if days <= 0:
        return RetentionResult(cutoff=None)
    now = now or timezone.now()
    cutoff = now - timedelta(days=days)
    result = RetentionResult(cutoff=cutoff)
    stamp = now.isoformat()

    while True:
        with transaction.atomic():
            batch = list(_deliveries_due(cutoff).order_by("pk")[:BATCH])
            if not batch:
                break
            jobs = (
                Alert.objects.filter(delivery__in=batch, run__isnull=False)
                .values_list("delivery_id", "run__job_id")
                .distinct()
            )
            for _, job_id in jobs:
                result.per_job.setdefault(job_id, Counter())["delivery_bodies"] += 1
            for delivery in batch:
                delivery.body = ""
                delivery.notes = {**(delivery.notes or {}), "body_purged_at": stamp}
            result.delivery_bodies += Delivery.objects.bulk_update(batch, ["body", "notes"])

    while True:
        with transaction.atomic():
            rows = list(_work_items_due(cutoff).order_by("pk").values_list("pk", "run__job_id")[:BATCH])
            if not rows:
                break
            for _, job_id in rows:
                result.per_job.setdefault(job_id, Counter())["work_items"] += 1
            deleted, _ = WorkItem.objects.filter(pk__in=[pk for pk, _ in rows]).delete()
            result.work_items += deleted

    while True:
        with transaction.atomic():
            rows = list(_loads_due(cutoff).order_by("pk").values_list("pk", "run__job_id")[:BATCH])
            if not rows:
                break
            for _, job_id in rows:
                result.per_job.setdefault(job_id, Counter())["load_files"] += 1
            result.load_files += WorkItemLoad.objects.filter(pk__in=[pk for pk, _ in rows]).update(content=b"")

    if result.total:
        _record(result, days)
    return result


def _words(delivery_bodies: int, work_items: int, load_files: int) -> str:
    parts = [
        f"{delivery_bodies} delivery bodies blanked" if delivery_bodies else "",
        f"{work_items} work items removed" if work_items else "",
        f"{load_files} ledger files blanked" if load_files else "",
    ]
    return ", ".join(p for p in parts if p)


def _record(result: RetentionResult, days: int) -> None:
    jobs = Job.objects.in_bulk(list(result.per_job))
    with transaction.atomic():
        for job_id, counts in result.per_job.items():
            job = jobs.get(job_id)
            if job is None:
                continue
            timeline_event_record(
                job=job,
                kind=TimelineEvent.Kind.RETENTION_PURGED,
                summary=f"Retention ({days} days): "
                + _words(counts["delivery_bodies"], counts["work_items"], counts["load_files"]),
                data={**dict(counts), "older_than_days": days},
            )
        audit_record(
            actor=None,
            action="retention_purge",
            summary=f"Retention purge of data older than {days} days: "
            + _words(result.delivery_bodies, result.work_items, result.load_files),
            is_all_tenants=True,
            data={
                "older_than_days": days,
                "cutoff": result.cutoff.isoformat() if result.cutoff else None,
                "delivery_bodies": result.delivery_bodies,
                "work_items": result.work_items,
                "load_files": result.load_files,
                "jobs": len(result.per_job),
            },
        )

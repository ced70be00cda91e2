"""A person's answer to a load that waits ``awaiting_confirmation``: confirm it (with a reason, against the
ledger version its preview was computed on) or discard it (docs/work-ledger.md "Loads")."""

from __future__ import annotations

import zlib

from django.db import transaction
from django.utils import timezone

from handover.core.errors import DomainError, InvalidTransition
from runs.attempts.models import Run
from runs.ledger.common import User, load_progress_publish, run_ledger_require_writer
from runs.ledger.loads import work_item_batch_start
from runs.ledger.models import WorkItemLoad
from runs.timeline.models import TimelineEvent
from runs.timeline.services import timeline_event_record


class LedgerVersionConflict(DomainError):
    """The ledger changed since the preview the person confirmed; a new preview was computed (409)."""

    status = 409
    type = "ledger-version-conflict"
    title = "The ledger changed since this preview"

    def __init__(self, detail: str, *, load: WorkItemLoad) -> None:
        super().__init__(detail)
        self.load = load


def _batch_for_update(load: WorkItemLoad) -> list[WorkItemLoad]:
    return list(
        WorkItemLoad.objects.select_for_update()
        .filter(batch=load.batch)
        .defer("content", "preview_list")
        .select_related("created_by")
        .order_by("id")
    )


def work_item_load_confirm(*, actor: User, load: WorkItemLoad, reason: str, ledger_version: int) -> WorkItemLoad:
    """Apply a load that waits for confirmation, accepting its weakenings; returns the load as it is now.

    ``reason`` (required) says why the weakenings are right; it becomes the history note of every
    weakened item and the explanation of every possible duplicate the load clears.
    ``ledger_version`` is the version the person's preview was computed on (the load's
    ``preview_version``). When it is not the run's current version, the batch is previewed again
    (now, or in the worker for a large one) and LedgerVersionConflict (409) is raised with the
    load and its new preview; nothing is applied (unless the new preview has no weakening left,
    when the load simply applies). Otherwise the batch runs now (small) or is queued (large), and the
    weakened items get ``weaken``/``explain`` history rows (``runs.ledger.weakening``).
    Raises NotFound / LedgerPermissionDenied, DomainError (no reason) and InvalidTransition (the
    load does not wait for confirmation).
    """
    run_ledger_require_writer(actor=actor, run=load.run)
    reason = reason.strip()
    if not reason:
        raise DomainError("Say why these records may be weakened.", errors={"reason": ["required"]})
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=load.run_id)
        batch = _batch_for_update(load)
        if any(ld.status != WorkItemLoad.Status.AWAITING_CONFIRMATION for ld in batch):
            raise InvalidTransition(f"{load.label} does not wait for a confirmation (it is {load.status}).")
        stale = ledger_version != run.ledger_version or batch[0].preview_version != run.ledger_version
        now = timezone.now()
        fields: dict[str, object] = {"status": WorkItemLoad.Status.PENDING}
        if not stale:
            fields |= {
                "confirmed_by": actor,
                "confirmed_at": now,
                "confirmed_version": ledger_version,
                "confirm_reason": reason,
            }
        WorkItemLoad.objects.filter(batch=load.batch).update(**fields)
    # Outside the transaction: the batch runs in its own (or in the worker).
    work_item_batch_start(loads=batch)
    current = WorkItemLoad.objects.defer("content", "preview_list").select_related("run").get(pk=load.pk)
    if stale and current.status == WorkItemLoad.Status.AWAITING_CONFIRMATION:
        raise LedgerVersionConflict(
            f"The ledger changed (version {run.ledger_version}) since the preview you confirmed "
            f"(version {ledger_version}); nothing was applied. Review the new preview and confirm again.",
            load=current,
        )
    return current


def work_item_load_discard(*, actor: User, load: WorkItemLoad, reason: str) -> WorkItemLoad:
    """Decline a load that waits for confirmation: it is kept ``discarded`` with the reason, nothing applied.

    Writes one ``work_items_load_discarded`` timeline event. Raises DomainError (no reason) and
    InvalidTransition (the load does not wait for confirmation). Returns the load.
    """
    run_ledger_require_writer(actor=actor, run=load.run)
    reason = reason.strip()
    if not reason:
        raise DomainError("Say why the load is discarded.", errors={"reason": ["required"]})
    with transaction.atomic():
        run = Run.objects.select_for_update().select_related("job").get(pk=load.run_id)
        batch = _batch_for_update(load)
        if any(ld.status != WorkItemLoad.Status.AWAITING_CONFIRMATION for ld in batch):
            raise InvalidTransition(f"{load.label} does not wait for a confirmation (it is {load.status}).")
        now = timezone.now()
        WorkItemLoad.objects.filter(batch=load.batch).update(
            status=WorkItemLoad.Status.DISCARDED,
            confirm_reason=reason,
            finished_at=now,
            content=b"",
        )
        timeline_event_record(
            job=run.job,
            run=run,
            kind=TimelineEvent.Kind.WORK_ITEMS_LOAD_DISCARDED,
            summary=f"{', '.join(ld.label for ld in batch)} discarded, nothing applied: {reason}",
            actor=actor,  # type: ignore[arg-type]
            data={"batch": str(load.batch), "loads": [str(ld.public_id) for ld in batch]},
        )
    for ld in batch:
        load_progress_publish(ld, "discarded", 100, "discarded")
    return WorkItemLoad.objects.defer("content", "preview_list").select_related("run").get(pk=load.pk)


def work_item_load_preview_csv(*, load: WorkItemLoad) -> bytes:
    """Every item the waiting load would weaken, as CSV (record_id, outcome before/after, duplicate cleared)."""
    stored = WorkItemLoad.objects.filter(pk=load.pk).values_list("preview_list", flat=True).get()
    return zlib.decompress(bytes(stored)) if stored else b""

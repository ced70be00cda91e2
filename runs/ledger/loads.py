"""Storing uploaded files as a batch of loads (run now or queued for the worker), and queueing a
failed batch again."""

from __future__ import annotations

import hashlib
import uuid
import zlib
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from handover.core.errors import DomainError, InvalidTransition
from handover.core.people import signed_in
from runs.attempts.models import Run
from runs.ledger import files as ledger_files
from runs.ledger.batches import work_item_load_run
from runs.ledger.common import User, load_progress_publish, run_ledger_require_writer
from runs.ledger.files import LedgerInputError
from runs.ledger.models import WorkItemLoad
from runs.ledger.reconciliation import KIND_ORDER

OPTION_NAMES = ("ref_column", "status_column", "skip_column", "found_column")
# Files from different systems name their id column differently: ``<kind>_id_column`` overrides
# ``id_column`` for that kind's file.
ID_COLUMN_OPTIONS = tuple(f"{kind}_id_column" for kind in WorkItemLoad.Kind.values)


@dataclass
class LoadFile:
    """One uploaded file of a batch: its kind (``WorkItemLoad.Kind``), bytes and name."""

    kind: str
    content: bytes
    file_name: str = ""


def work_item_loads_create(
    *,
    actor: User,
    run: Run,
    files: list[LoadFile],
    file_format: str = WorkItemLoad.Format.AUTO,
    id_column: str = "record_id",
    options: dict[str, str] | None = None,
    is_destination_complete: bool = False,
) -> list[WorkItemLoad]:
    """Store uploaded files of record ids for a run and load them together, now or in a Celery task.

    ``files``: at most one per kind — ``population`` (the eligible ids; optional skip-reason and
    attribute columns), ``runner_report`` (ids with an optional status column: attempted /
    completed / failed), ``destination`` (the ids the destination holds, optional reference
    column; ``is_destination_complete`` declares the export complete for the window, so eligible
    ids it lacks are ``absent``), ``provider_lookup`` (bulk verification: ids with found yes/no and
    the provider's reference). Files of one batch load in one transaction, population first; a
    fresh run's items are then written once with every file's facts. ``id_column`` names the id
    column in every file, ``options["<kind>_id_column"]`` in one kind's file; ``options`` also
    names the optional columns (``OPTION_NAMES``). Batches up to
    ``HANDOVER_LEDGER_SYNC_MAX_BYTES`` in all load before this returns (status ``committed``, or
    ``awaiting_confirmation`` with a preview when they would weaken the ledger: nothing applied);
    larger ones are queued on commit (task ``runs.work_item_load_run``; status ``pending``). Each
    load gets the next ``number`` of its kind on the run ("destination export #2").

    Raises NotFound (run not visible), LedgerPermissionDenied (auditors and other readers),
    LedgerFileTooLarge (a file over ``HANDOVER_LEDGER_MAX_UPLOAD_BYTES``; nothing stored),
    DomainError for an unknown kind, format or option or two files of one kind, and
    LedgerInputError from a synchronous load (the loads are kept ``failed`` with the file, line
    and column; no item changed). Returns the loads in application order.
    """
    run_ledger_require_writer(actor=actor, run=run)
    if not files:
        raise DomainError("Upload at least one file.", errors={"file": ["required"]})
    kinds = [f.kind for f in files]
    for kind in kinds:
        if kind not in WorkItemLoad.Kind.values:
            raise DomainError(f"Unknown load kind {kind!r}.", errors={"kind": ["unknown kind"]})
    if len(set(kinds)) != len(kinds):
        raise DomainError("Upload at most one file of each kind at once.", errors={"kind": ["repeated kind"]})
    for upload in files:
        try:
            ledger_files.check_size(len(upload.content), settings.HANDOVER_LEDGER_MAX_UPLOAD_BYTES)
        except LedgerInputError as exc:
            exc.detail = f"{upload.file_name or upload.kind}: {exc.detail}"
            exc.errors = {"file": [exc.detail]}
            raise
    if file_format not in WorkItemLoad.Format.values:
        raise DomainError(f"Unknown format {file_format!r}.", errors={"format": ["unknown format"]})
    options = {k: str(v).strip() for k, v in (options or {}).items() if v not in (None, "")}
    unknown = sorted(set(options) - set(OPTION_NAMES) - set(ID_COLUMN_OPTIONS))
    if unknown:
        raise DomainError(f"Unknown options: {', '.join(unknown)}.", errors={"options": unknown})
    if is_destination_complete and WorkItemLoad.Kind.DESTINATION not in kinds:
        raise DomainError(
            "Only a destination export can be declared complete.",
            errors={"is_destination_complete": ["only with a destination export"]},
        )
    batch = uuid.uuid4()
    now = timezone.now()
    ordered = sorted(files, key=lambda f: KIND_ORDER.index(WorkItemLoad.Kind(f.kind)))
    with transaction.atomic():
        # Numbered per run and kind under the run's row lock, so two uploads never share a number.
        Run.objects.select_for_update().filter(pk=run.pk).values_list("pk", flat=True).get()
        numbers = dict(
            WorkItemLoad.objects.filter(run=run, kind__in=kinds)
            .values("kind")
            .annotate(last=Max("number"))
            .values_list("kind", "last")
        )
        loads = [
            WorkItemLoad.objects.create(
                run=run,
                number=(numbers.get(upload.kind) or 0) + 1,
                batch=batch,
                kind=upload.kind,
                format=file_format,
                id_column=options.get(f"{upload.kind}_id_column") or (id_column or "record_id").strip(),
                options={k: v for k, v in options.items() if k in OPTION_NAMES},
                is_destination_complete=is_destination_complete and upload.kind == WorkItemLoad.Kind.DESTINATION,
                file_name=upload.file_name[:255],
                # zlib at level 1: ids compress several-fold at a few hundred MB/s, so storing and
                # reading back a large upload costs little (the task gets only the row id)
                content=zlib.compress(upload.content, 1),
                size_bytes=len(upload.content),
                sha256=hashlib.sha256(upload.content).hexdigest(),
                created_by=signed_in(actor),
                created_at=now,
            )
            for upload in ordered
        ]
    for load in loads:
        load.content = b""  # stored; no need to hold it in memory too
    return work_item_batch_start(loads=loads)


def work_item_batch_start(*, loads: list[WorkItemLoad]) -> list[WorkItemLoad]:
    """Run a stored ``pending`` batch now when small, else queue it for the worker (on commit); return its loads.

    Batches up to ``HANDOVER_LEDGER_SYNC_MAX_BYTES`` in all run before this returns; the rest are
    queued (task ``runs.work_item_load_run``). Raises LedgerInputError from a synchronous run.
    """
    if sum(load.size_bytes for load in loads) <= settings.HANDOVER_LEDGER_SYNC_MAX_BYTES:
        work_item_load_run(load_id=loads[0].pk)
        return list(WorkItemLoad.objects.filter(batch=loads[0].batch).defer("content").order_by("id"))
    for load in loads:
        load_progress_publish(load, "queued", 0, "waiting for a worker")
    _enqueue(loads[0].pk)
    return loads


def _enqueue(load_id: int) -> None:
    """Queue the batch of ``load_id`` once the current transaction commits."""

    def enqueue() -> None:
        from runs.ledger import tasks as ledger_tasks

        ledger_tasks.work_item_load_run.delay(load_id)

    transaction.on_commit(enqueue)


def work_item_load_retry(*, actor: User, load: WorkItemLoad) -> WorkItemLoad:
    """Queue a batch that failed unexpectedly once more (its bytes were kept); enqueues the task on commit.

    Raises InvalidTransition (409) for a load that is not ``failed`` or whose bytes were dropped
    (bad input: fix the file and upload it again).
    """
    run_ledger_require_writer(actor=actor, run=load.run)
    with transaction.atomic():
        changed = (
            WorkItemLoad.objects.filter(batch=load.batch, status=WorkItemLoad.Status.FAILED)
            .exclude(content=b"")
            .update(status=WorkItemLoad.Status.PENDING, error="", error_line=None, error_column="", finished_at=None)
        )
        if not changed:
            raise InvalidTransition("Only a load that failed unexpectedly can be retried; fix the file and upload it.")
        _enqueue(load.pk)
    load_progress_publish(load, "queued", 0, "waiting for a worker")
    return WorkItemLoad.objects.defer("content").get(pk=load.pk)

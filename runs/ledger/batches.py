"""Running one batch of loads in one transaction: claim it, stage and apply its files, store the
totals, write one timeline event; or mark it failed."""

from __future__ import annotations

import logging
import zlib
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from handover.core.errors import DomainError
from runs.attempts.models import Attempt, Run
from runs.ledger.common import load_progress_publish
from runs.ledger.failure_class import run_failure_class_suggest
from runs.ledger.files import LedgerInputError
from runs.ledger.models import WorkItem, WorkItemLoad
from runs.ledger.reconciliation import APPLY, KIND_ORDER, reconcile
from runs.ledger.staging import is_postgres, stage_create, stage_load, stage_name, stage_refuse_duplicates
from runs.ledger.totals import RunTotals, destination_is_complete, run_totals_refresh
from runs.ledger.weakening import (
    SNAPSHOT,
    Confirmation,
    WeakeningFound,
    snapshot_take,
    weakened_rows,
    weakenings_record,
)
from runs.timeline.models import TimelineEvent
from runs.timeline.services import timeline_event_record

logger = logging.getLogger(__name__)


def _batch_summary(
    loads: list[WorkItemLoad],
    counts: dict[str, dict[str, int]],
    totals: RunTotals,
    confirmation: Confirmation | None = None,
) -> str:
    parts = []
    for load in loads:
        c = counts[load.kind]
        rows = c.get("rows", 0)
        if load.kind == WorkItemLoad.Kind.POPULATION:
            text = f"eligible population: {rows:,} records ({c['added']:,} new"
            text += f", {c['skipped_by_rule']:,} skipped by rule)" if c["skipped_by_rule"] else ")"
        elif load.kind == WorkItemLoad.Kind.RUNNER_REPORT:
            text = (
                f"runner report: {rows:,} records ({c['attempted']:,} attempted, "
                f"{c['claimed_done']:,} claimed done, {c['failed']:,} failed"
            )
            text += f"; {c['not_in_population']:,} not in the population)" if c["not_in_population"] else ")"
        elif load.kind == WorkItemLoad.Kind.DESTINATION:
            complete = "complete for the window" if load.is_destination_complete else "not declared complete"
            text = f"destination export #{load.number} ({complete}): {c['present']:,} records present"
            if c["not_eligible"] or c["present_more_than_once"]:
                text += (
                    f", possible duplicates: {c['not_eligible']:,} not eligible, "
                    f"{c['present_more_than_once']:,} present more than once"
                )
        else:
            text = (
                f"provider lookup: {c['verified']:,} records verified ({c['found']:,} found → completed, "
                f"{c['not_found']:,} not found → absent)"
            )
        parts.append(text)
    verb = "Verified from" if [ld.kind for ld in loads] == [WorkItemLoad.Kind.PROVIDER_LOOKUP] else "Loaded"
    confirmed = (
        f" Weakenings confirmed by {confirmation.user.get_username()}: {confirmation.reason}" if confirmation else ""
    )
    return (
        f"{verb} {'; '.join(parts)}. Totals: {totals.eligible:,} eligible, {totals.completed:,} completed, "
        f"{totals.unresolved:,} unresolved, {totals.possible_duplicates:,} possible duplicates.{confirmed}"
    )


def _timed_out(run: Run) -> bool:
    return run.attempts.filter(status=Attempt.Status.TIMED_OUT).exists()


def work_item_load_run(*, load_id: int) -> WorkItemLoad:
    """Run the batch of one load: parse, stage, reconcile, store totals, write one timeline event — atomically.

    Claims the batch's loads (``pending``/``running`` → ``running``); a batch already ``committed``
    or ``failed`` is left alone, so a repeated task is harmless, and two runners of one batch are
    serialised on its load rows (the second finds them committed). On bad input the transaction
    rolls back, every load of the batch is marked ``failed`` (the culprit with its error, line and
    column; the bytes dropped) and LedgerInputError is raised; on an unexpected error they are
    marked ``failed`` with their bytes kept for ``work_item_load_retry`` and the error re-raised.
    Progress goes to the cache (``LOAD_PROGRESS_KEY``), outside the transaction. Returns the load.
    """
    first = WorkItemLoad.objects.defer("content").get(pk=load_id)
    active = [WorkItemLoad.Status.PENDING, WorkItemLoad.Status.RUNNING]
    claimed = WorkItemLoad.objects.filter(batch=first.batch, status__in=active).update(
        status=WorkItemLoad.Status.RUNNING, started_at=timezone.now()
    )
    if not claimed:
        # Another runner has settled the batch since ``first`` was read (our UPDATE may even have
        # waited on its row locks until it committed): answer the load as it is now, not as read.
        return WorkItemLoad.objects.defer("content").get(pk=load_id)
    loads = list(
        WorkItemLoad.objects.filter(batch=first.batch)
        .defer("content")
        .select_related("created_by", "confirmed_by")
        .order_by("id")
    )
    for load in loads:
        load_progress_publish(load, "reading", 1, "reading the file")
    try:
        with transaction.atomic():
            locked = list(
                WorkItemLoad.objects.select_for_update()
                .filter(batch=first.batch, status=WorkItemLoad.Status.RUNNING)
                .order_by("id")
                .values_list("pk", flat=True)
            )
            if len(locked) != len(loads):  # another runner finished the batch while we waited
                return WorkItemLoad.objects.defer("content").get(pk=load_id)
            # One ledger writer per run at a time: totals are computed from a settled set of items.
            run = Run.objects.select_for_update().select_related("job", "tenant").get(pk=first.run_id)
            loads.sort(key=lambda ld: KIND_ORDER.index(WorkItemLoad.Kind(ld.kind)))
            confirmation = _confirmation(loads, run)
            try:
                with transaction.atomic():  # a savepoint: a weakening rolls the whole apply back
                    counts, totals = _batch_apply(loads, run, confirmation)
            except WeakeningFound as found:
                _batch_await(loads, run, found)
                for load in loads:
                    load_progress_publish(load, "awaiting_confirmation", 100, "waiting for a person's confirmation")
                return WorkItemLoad.objects.defer("content").get(pk=load_id)
            finished = timezone.now()
            for load in loads:
                WorkItemLoad.objects.filter(pk=load.pk).update(
                    status=WorkItemLoad.Status.COMMITTED,
                    finished_at=finished,
                    row_count=counts[load.kind]["rows"],
                    counts=counts[load.kind],
                    content=b"",
                    error="",
                    preview_list=b"",
                )
            only = [ld.kind for ld in loads] == [WorkItemLoad.Kind.PROVIDER_LOOKUP]
            timeline_event_record(
                job=run.job,
                run=run,
                kind=TimelineEvent.Kind.WORK_ITEMS_VERIFIED if only else TimelineEvent.Kind.WORK_ITEMS_LOADED,
                summary=_batch_summary(loads, counts, totals, confirmation),
                actor=first.created_by,
                data={
                    "batch": str(first.batch),
                    "loads": [
                        {
                            "load": str(ld.public_id),
                            "kind": ld.kind,
                            "file_name": ld.file_name,
                            "sha256": ld.sha256,
                            "number": ld.number,
                            "is_destination_complete": ld.is_destination_complete,
                            "counts": counts[ld.kind],
                        }
                        for ld in loads
                    ],
                    "totals": totals.as_dict(),
                    "ledger_version": run.ledger_version,
                    "confirmed": (
                        {"by": confirmation.user.get_username(), "reason": confirmation.reason}
                        if confirmation
                        else None
                    ),
                },
            )
            run_failure_class_suggest(run=run, totals=totals, actor=first.created_by)
    except LedgerInputError as exc:
        _batch_fail(loads, getattr(exc, "load", None), exc.detail, line=exc.line, column=exc.column, keep_content=False)
        raise
    except Exception:
        logger.exception("work-ledger batch %s failed", first.batch)
        message = "The load failed unexpectedly (logged); nothing was changed. Retry it."
        _batch_fail(loads, None, message, keep_content=True)
        raise
    for load in loads:
        load_progress_publish(load, "committed", 100, "loaded")
    return WorkItemLoad.objects.defer("content").get(pk=load_id)


def _batch_apply(
    loads: list[WorkItemLoad], run: Run, confirmation: Confirmation | None
) -> tuple[dict[str, dict[str, int]], RunTotals]:
    """The body of a batch, inside its transaction: stage every file, apply them in order, store totals.

    Before applying, the run's items are copied aside; afterwards they are compared with the copy.
    A weakening (``weakening_sql``) without a valid ``confirmation`` raises WeakeningFound with the
    preview (the caller's savepoint rolls everything back); with one, each weakened item gets its
    history row and each cleared possible duplicate the confirmer's explanation.
    Returns the counts per kind and the new totals. A LedgerInputError names the file it is about
    (``file.csv: Line 7: ...``) and carries the load in ``load``.
    """
    kinds = {load.kind for load in loads}
    if (
        WorkItemLoad.Kind.POPULATION not in kinds
        and not WorkItem.objects.filter(run=run, is_in_population=True).exists()
    ):
        raise LedgerInputError("this run has no eligible population yet: load the population first (or with it).")
    destination = next((ld for ld in loads if ld.kind == WorkItemLoad.Kind.DESTINATION), None)
    provider = next((ld for ld in loads if ld.kind == WorkItemLoad.Kind.PROVIDER_LOOKUP), None)
    params = {
        "run": run.pk,
        "provider_load": provider.pk if provider else None,
        "destination_load": destination.pk if destination else None,
        "destination_complete": bool(destination and destination.is_destination_complete),
        "actor": loads[0].created_by_id,
        "now": timezone.now(),
        "complete": bool(destination and destination.is_destination_complete) or destination_is_complete(run),
        "timed_out": _timed_out(run),
    }
    counts: dict[str, dict[str, int]] = {}
    stages: dict[str, str] = {}
    fresh = not WorkItem.objects.filter(run=run).exists()
    with connection.cursor() as cursor:
        if is_postgres():
            # Hash joins and aggregates over a million ids spill to disk at the default 4 MB.
            cursor.execute("SET LOCAL work_mem = '256MB'")
            # The staging tables are analysed for row counts and distinct ids, not fine histograms: a
            # 3,000-row sample (not 30,000) is enough, and sorts a tenth of the values per column.
            cursor.execute("SET LOCAL default_statistics_target = 10")
        if not fresh:
            snapshot_take(cursor, params)
        for index, load in enumerate(loads):
            table = stage_name(load.kind)
            stage_create(cursor, table)
            stages[load.kind] = table
            try:
                # One file in memory at a time: its bytes are fetched, staged and let go.
                content = WorkItemLoad.objects.filter(pk=load.pk).values_list("content", flat=True).get()
                raw = zlib.decompress(content)
                del content
                # A savepoint: a failed COPY leaves the transaction usable for ``_repeats_refuse``.
                with transaction.atomic():
                    rows = stage_load(cursor, table, load, raw, index, len(loads), fresh=fresh)
                counts[load.kind] = {"rows": rows}
                del raw
            except LedgerInputError as exc:
                _repeats_refuse(cursor, stages, loads, fresh, failed=load)
                raise _located(exc, load, len(loads)) from exc
        _progress_all(loads, "reconciling", 65, "reconciling")
        for load in loads:
            try:
                counts[load.kind].update(APPLY[WorkItemLoad.Kind(load.kind)](cursor, params, stages, fresh))
            except (LedgerInputError, IntegrityError) as exc:
                if load.kind == WorkItemLoad.Kind.POPULATION:
                    _repeats_refuse(cursor, stages, loads, fresh)
                if isinstance(exc, IntegrityError):
                    raise
                raise _located(exc, load, len(loads)) from exc
        # A fresh run's items were written with every fact joined in and their outcome derived
        # from it; otherwise bring every item whose derived columns changed up to date.
        reconciled = 0 if fresh and WorkItemLoad.Kind.POPULATION in stages else reconcile(cursor, params)
        counts[loads[-1].kind]["reconciled"] = reconciled
        if not fresh:
            weakened = weakened_rows(cursor, params)
            if weakened and confirmation is None:
                raise WeakeningFound(weakened, counts)
            if weakened and confirmation is not None:
                reference = (destination or loads[0]).label
                counts[loads[-1].kind]["weakened"] = weakenings_record(
                    cursor, {**params, "load": (destination or loads[0]).pk}, confirmation, reference
                )
            cursor.execute(f"DROP TABLE IF EXISTS {SNAPSHOT}")
        # The staging tables go with the transaction when it rolls back (a failed COPY leaves it
        # aborted, so no DROP could run then); on success they are dropped here.
        for table in stages.values():
            cursor.execute(f"DROP TABLE IF EXISTS {table}")
        if WorkItemLoad.Kind.DESTINATION in stages:
            cursor.execute(f"DROP TABLE IF EXISTS {stages[WorkItemLoad.Kind.DESTINATION]}_g")
    _progress_all(loads, "totals", 90, "storing the totals")
    return counts, run_totals_refresh(run=run)


def _repeats_refuse(
    cursor: Any,
    stages: dict[str, str],
    loads: list[WorkItemLoad],
    fresh: bool,
    *,
    failed: WorkItemLoad | None = None,
) -> None:
    """Raise the runner report's repeated-id error, if it has one, ahead of an error found after it was staged.

    A fresh run's runner report is not grouped when staged (``stage_load``); when a file staged
    after it (``failed``) or the population's insert (``failed`` None: every file was staged)
    fails, the report's repeat is still the error a person sees first, as when every file was
    checked as it was staged. Returns None when there is nothing to raise.
    """
    runner = next((ld for ld in loads if ld.kind == WorkItemLoad.Kind.RUNNER_REPORT), None)
    if not fresh or runner is None or runner is failed:
        return
    if failed is not None and loads.index(runner) > loads.index(failed):
        return
    try:
        stage_refuse_duplicates(cursor, stages[runner.kind])
    except LedgerInputError as exc:
        raise _located(exc, runner, len(loads)) from exc


def _located(exc: LedgerInputError, load: WorkItemLoad, of: int) -> LedgerInputError:
    """The error, naming its file when the batch has several, and remembering its load."""
    detail = f"{load.file_name or load.get_kind_display()}: {exc.detail}" if of > 1 else exc.detail
    located = LedgerInputError.__new__(type(exc))
    DomainError.__init__(located, detail, errors={"file": [detail]})
    located.line, located.column = exc.line, exc.column
    located.load = load  # type: ignore[attr-defined]
    return located


def _progress_all(loads: list[WorkItemLoad], phase: str, percent: int, message: str) -> None:
    for load in loads:
        load_progress_publish(load, phase, percent, message)


def _batch_fail(
    loads: list[WorkItemLoad],
    culprit: WorkItemLoad | None,
    error: str,
    *,
    line: int | None = None,
    column: str = "",
    keep_content: bool,
) -> None:
    """Mark a batch's loads failed, outside the rolled-back transaction, and publish it to the progress bar."""
    for load in loads:
        is_culprit = culprit is None or load.pk == culprit.pk
        message = (
            error
            if is_culprit or culprit is None
            else f"Not loaded: {culprit.file_name or culprit.kind} in the same upload failed."
        )
        fields: dict[str, Any] = {
            "status": WorkItemLoad.Status.FAILED,
            "finished_at": timezone.now(),
            "error": message,
            "error_line": line if is_culprit else None,
            "error_column": column[:200] if is_culprit else "",
        }
        if not keep_content:
            fields["content"] = b""
        WorkItemLoad.objects.filter(pk=load.pk).update(**fields)
        load_progress_publish(load, "failed", 100, message)


def _confirmation(loads: list[WorkItemLoad], run: Run) -> Confirmation | None:
    """The person's confirmation of the batch's weakenings, if every load carries one for the current version.

    A confirmation given on an older ledger version does not count: the batch is previewed again.
    """
    first = loads[0]
    if first.confirmed_at is None or first.confirmed_by is None:
        return None
    if first.confirmed_version != run.ledger_version:
        return None
    return Confirmation(user=first.confirmed_by, reason=first.confirm_reason, at=first.confirmed_at)


def _batch_await(loads: list[WorkItemLoad], run: Run, found: WeakeningFound) -> None:
    """Store the batch ``awaiting_confirmation`` with its preview (nothing applied) and write one timeline event."""
    version = Run.objects.filter(pk=run.pk).values_list("ledger_version", flat=True).get()
    preview = found.preview()
    listing = zlib.compress(found.csv_bytes(), 1)
    for load in loads:
        kind_counts = found.counts.get(load.kind, {})
        WorkItemLoad.objects.filter(pk=load.pk).update(
            status=WorkItemLoad.Status.AWAITING_CONFIRMATION,
            preview=preview,
            preview_version=version,
            preview_list=listing,
            row_count=kind_counts.get("rows", 0),
            counts=kind_counts,
            confirmed_by=None,
            confirmed_at=None,
            confirmed_version=None,
            confirm_reason="",
            finished_at=None,
        )
    names = ", ".join(ld.label for ld in loads)
    timeline_event_record(
        job=run.job,
        run=run,
        kind=TimelineEvent.Kind.WORK_ITEMS_LOAD_AWAITING_CONFIRMATION,
        summary=(
            f"{names} would weaken {preview['total']:,} records ({found.counts_text()}): nothing applied; "
            "it waits for a person's confirmation."
        ),
        actor=loads[0].created_by,
        data={
            "batch": str(loads[0].batch),
            "loads": [str(ld.public_id) for ld in loads],
            "ledger_version": version,
            "preview": {"total": preview["total"], "counts": preview["counts"]},
        },
    )

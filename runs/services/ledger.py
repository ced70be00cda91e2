"""The work ledger: loads of record ids, reconciliation, verification, changes, totals, failure class.

How a load works (``work_item_load_run``), in one transaction so a failed load changes nothing:

1. the file is checked and parsed (``runs.ledger_files``) and streamed into a temporary staging
   table: ``COPY`` on PostgreSQL (psycopg 3 ``cursor.copy``), batched inserts on SQLite;
2. the database does the set work: duplicate ids (``GROUP BY ... HAVING``), new items
   (``INSERT ... SELECT`` with an anti-join), changed facts (``UPDATE ... FROM`` the staging
   table), items that left the destination (``NOT EXISTS``);
3. every item's outcome is derived from its facts by one SQL ``CASE`` (``_derived``), fused into the
   facts update and then applied once more to the rows whose outcome still differs (e.g. the
   eligible ids a complete destination export lacks become ``absent``);
4. the run's totals are recomputed with one aggregate and stored on the run, the failure-class
   suggestion is refreshed, and ONE timeline event with the counts is written.

Outcome rules (first match wins; DESIGN.md Work item):

- a population row with a skip reason → ``skipped`` (a person's decision overrides the rule);
- present in the latest destination export → ``completed`` (destination query);
- a person's change or a provider lookup → kept;
- the runner reported it failed → ``rejected``;
- missing from a destination export declared complete for the window → ``absent``;
- the runner claims it done but the destination cannot confirm it → ``uncertain``;
- attempted, and an attempt of the run timed out after sending → ``uncertain``;
- otherwise → ``unverified``.

A record the destination holds but the population does not list (or lists as skipped), and a
record the destination holds more than once, is a **possible duplicate**.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Count, Q
from django.utils import timezone

from handover.errors import DomainError, InvalidTransition, NotFound
from runs import ledger_files
from runs.ledger_files import LedgerInputError, LedgerRow
from runs.models import Attempt, Run, WorkItem, WorkItemChange, WorkItemLoad
from runs.selectors import LOAD_PROGRESS_KEY, run_ledger_writable, run_visibility_filter
from runs.services.timeline import timeline_event_record

logger = logging.getLogger(__name__)

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


# --- permissions ----------------------------------------------------------------------------------


def _require_writer(*, user: User, run: Run) -> None:
    """Raise NotFound for a run the person may not see, LedgerPermissionDenied for one they may only read."""
    if run_ledger_writable(user=user, run=run):
        return
    if not Run.objects.filter(run_visibility_filter(user=user), pk=run.pk).exists():
        raise NotFound("No such run.")
    raise LedgerPermissionDenied(
        "Only support (on this tenant), the job's technical owners and admins change a run's work ledger."
    )


# --- progress (outside the load's transaction, through the cache) -----------------------------------


def _progress(load: WorkItemLoad, phase: str, percent: int, message: str = "") -> None:
    """Publish where a load is, for the polling progress bar (the cache is shared by web and worker)."""
    cache.set(
        LOAD_PROGRESS_KEY.format(load.public_id),
        {"phase": phase, "percent": max(0, min(100, percent)), "message": message},
        PROGRESS_SECONDS,
    )


# --- derived columns ------------------------------------------------------------------------------

# The facts of an item as plain column names; fused updates swap in the staging table's values.
FACTS = {
    "pop": "is_in_population",
    "skip": "skip_reason",
    "att": "is_attempted",
    "rs": "runner_status",
    "dc": "destination_count",
    "dref": "destination_ref",
    "outcome": "outcome",
    "ek": "evidence_kind",
    "eref": "evidence_ref",
    "enote": "evidence_note",
    "eby": "evidence_by_id",
    "eat": "evidence_at",
}
DERIVED_COLUMNS = ("outcome", "evidence_kind", "evidence_ref", "evidence_note", "evidence_by_id", "evidence_at")


def _derived(facts: dict[str, str] | None = None) -> dict[str, str]:
    """SQL for the derived columns of an item, given SQL for each of its facts (see the module docstring).

    Uses the named parameters ``complete`` and ``timed_out`` (booleans), ``actor`` (user id) and
    ``now``. Returns column -> SQL expression, plus ``is_possible_duplicate``.
    """
    f = {**FACTS, **(facts or {})}
    pinned = f"({f['ek']} IN ('provider_lookup', 'manual'))"
    by, at = "%(actor)s", "%(now)s"
    # condition, outcome, evidence kind, reference, note, by, at
    branches = [
        (f"({f['skip']} <> '' AND NOT {pinned})", "'skipped'", "''", "''", "''", "NULL", "NULL"),
        (
            f"{f['dc']} > 0",
            "'completed'",
            "'destination_query'",
            f["dref"],
            f"CASE WHEN {f['dc']} > 1 THEN 'in the destination export more than once' ELSE '' END",
            by,
            at,
        ),
        (f"({pinned} OR NOT {f['pop']})", f["outcome"], f["ek"], f["eref"], f["enote"], f["eby"], f["eat"]),
        (f"{f['rs']} = 'failed'", "'rejected'", "'runner_report'", "''", "'the runner reported it failed'", by, at),
        (
            "%(complete)s",
            "'absent'",
            "'destination_query'",
            "''",
            "'not in the destination export declared complete for the window'",
            by,
            at,
        ),
        (
            f"{f['rs']} = 'completed'",
            "'uncertain'",
            "'runner_report'",
            "''",
            "'the runner claims it done; the destination cannot confirm it'",
            by,
            at,
        ),
        (
            f"({f['att']} AND %(timed_out)s)",
            "'uncertain'",
            "'runner_report'",
            "''",
            "'attempted, and an attempt of the run timed out after sending'",
            by,
            at,
        ),
    ]
    otherwise = ("'unverified'", "''", "''", "''", "NULL", "NULL")

    def case(index: int) -> str:
        whens = " ".join(f"WHEN {branch[0]} THEN {branch[index + 1]}" for branch in branches)
        return f"CASE {whens} ELSE {otherwise[index]} END"

    derived = {column: case(i) for i, column in enumerate(DERIVED_COLUMNS)}
    derived["is_possible_duplicate"] = f"({f['dc']} > 1 OR ({f['dc']} > 0 AND (NOT {f['pop']} OR {f['skip']} <> '')))"
    return derived


def _differs(derived: dict[str, str], prefix: str = "") -> str:
    """SQL true when any compared derived column differs from the stored one."""
    columns = ("outcome", "evidence_kind", "evidence_ref", "evidence_note", "is_possible_duplicate")
    return "(" + " OR ".join(f"{prefix}{c} <> {derived[c]}" for c in columns) + ")"


def _set_derived(derived: dict[str, str]) -> str:
    return ", ".join(f"{column} = {expression}" for column, expression in derived.items())


# --- the staging table ----------------------------------------------------------------------------


def _is_postgres() -> bool:
    return connection.vendor == "postgresql"


def _stage_create(cursor: Any) -> None:
    cursor.execute(f"DROP TABLE IF EXISTS {STAGE}")
    cursor.execute(
        f"CREATE TEMP TABLE {STAGE} (stage_line integer NOT NULL, stage_id text NOT NULL, stage_ref text NOT NULL, "
        "stage_status text NOT NULL, stage_skip text NOT NULL, stage_attributes text)"
    )


def _stage_fill(cursor: Any, rows: Iterable[LedgerRow]) -> int:
    """Stream the rows into the staging table; return how many. COPY on PostgreSQL, batches on SQLite."""
    count = 0
    if _is_postgres():
        columns = "stage_line, stage_id, stage_ref, stage_status, stage_skip, stage_attributes"
        with cursor.cursor.copy(f"COPY {STAGE} ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row((row.line, row.record_id, row.ref, row.status, row.skip_reason, row.attributes))
                count += 1
        cursor.execute(f"ANALYZE {STAGE}")  # temporary tables are never auto-analysed
        return count
    sql = f"INSERT INTO {STAGE} VALUES (%s, %s, %s, %s, %s, %s)"
    batch: list[tuple[Any, ...]] = []
    for row in rows:
        batch.append((row.line, row.record_id, row.ref, row.status, row.skip_reason, row.attributes))
        if len(batch) >= SQLITE_BATCH:
            cursor.executemany(sql, batch)
            count += len(batch)
            batch = []
    if batch:
        cursor.executemany(sql, batch)
        count += len(batch)
    cursor.execute(f"CREATE INDEX {STAGE}_rid ON {STAGE} (stage_id)")
    return count


def _stage_refuse_duplicates(cursor: Any) -> None:
    """Raise LedgerInputError naming the first repeated id's lines, if any id is in the file twice."""
    cursor.execute(
        f"SELECT stage_id, MIN(stage_line) FROM {STAGE} GROUP BY stage_id HAVING COUNT(*) > 1 ORDER BY 2 LIMIT 1"
    )
    found = cursor.fetchone()
    if found is None:
        return
    record_id, first_line = found
    cursor.execute(f"SELECT MIN(stage_line) FROM {STAGE} WHERE stage_id = %s AND stage_line > %s", [record_id, first_line])
    (second_line,) = cursor.fetchone()
    cursor.execute(f"SELECT COUNT(*) FROM (SELECT 1 FROM {STAGE} GROUP BY stage_id HAVING COUNT(*) > 1) AS d")
    (repeated,) = cursor.fetchone()
    more = f" ({repeated:,} ids appear more than once)" if repeated > 1 else ""
    raise LedgerInputError(
        f"duplicate record id {record_id!r}, already on line {first_line}{more}. Each id may appear once.",
        line=second_line,
    )


# --- applying one kind of load --------------------------------------------------------------------


def _rowcount(cursor: Any) -> int:
    return max(cursor.rowcount, 0)


def _apply_population(cursor: Any, params: dict[str, Any]) -> dict[str, int]:
    attributes = f"{STAGE}.stage_attributes::jsonb" if _is_postgres() else f"{STAGE}.stage_attributes"
    distinct = "IS DISTINCT FROM" if _is_postgres() else "IS NOT"
    cursor.execute(
        f"""
        INSERT INTO {ITEM} (run_id, record_id, outcome, is_in_population, skip_reason, attributes, is_attempted,
            runner_status, destination_count, destination_ref, is_possible_duplicate, evidence_kind, evidence_ref,
            evidence_note)
        SELECT %(run)s, {STAGE}.stage_id, CASE WHEN {STAGE}.stage_skip <> '' THEN 'skipped' ELSE 'unverified' END,
            TRUE, {STAGE}.stage_skip, {attributes}, FALSE, '', 0, '', FALSE, '', '', ''
        FROM {STAGE}
        WHERE NOT EXISTS (SELECT 1 FROM {ITEM} w WHERE w.run_id = %(run)s AND w.record_id = {STAGE}.stage_id)
        """,
        params,
    )
    added = _rowcount(cursor)
    derived = _derived({"pop": "TRUE", "skip": f"{STAGE}.stage_skip"})
    cursor.execute(
        f"""
        UPDATE {ITEM} SET is_in_population = TRUE, skip_reason = {STAGE}.stage_skip,
            attributes = {attributes}, {_set_derived(derived)}
        FROM {STAGE}
        WHERE {ITEM}.run_id = %(run)s AND {ITEM}.record_id = {STAGE}.stage_id
          AND (NOT {ITEM}.is_in_population OR {ITEM}.skip_reason <> {STAGE}.stage_skip
               OR {ITEM}.attributes {distinct} {attributes})
        """,
        params,
    )
    updated = _rowcount(cursor)
    cursor.execute(f"SELECT COUNT(*) FROM {STAGE} WHERE stage_skip <> ''")
    (skipped,) = cursor.fetchone()
    return {"added": added, "updated": updated, "skipped_by_rule": skipped}


def _apply_runner_report(cursor: Any, params: dict[str, Any]) -> dict[str, int]:
    # A later "attempted" never downgrades an earlier "claimed done" or "failed" of the same record.
    new_status = (
        f"(CASE WHEN {STAGE}.stage_status = 'attempted' AND {ITEM}.runner_status IN ('completed', 'failed') "
        f"THEN {ITEM}.runner_status ELSE {STAGE}.stage_status END)"
    )
    derived = _derived({"att": "TRUE", "rs": new_status})
    cursor.execute(
        f"""
        UPDATE {ITEM} SET is_attempted = TRUE, runner_status = {new_status}, {_set_derived(derived)}
        FROM {STAGE}
        WHERE {ITEM}.run_id = %(run)s AND {ITEM}.record_id = {STAGE}.stage_id AND {ITEM}.is_in_population
          AND (NOT {ITEM}.is_attempted OR {ITEM}.runner_status <> {new_status} OR {_differs(derived, ITEM + ".")})
        """,
        params,
    )
    updated = _rowcount(cursor)
    cursor.execute(
        f"""
        SELECT {STAGE}.stage_status, COUNT(*) FROM {STAGE}
        WHERE EXISTS (SELECT 1 FROM {ITEM} w WHERE w.run_id = %(run)s AND w.record_id = {STAGE}.stage_id
                      AND w.is_in_population)
        GROUP BY {STAGE}.stage_status
        """,
        params,
    )
    by_status = dict(cursor.fetchall())
    cursor.execute(
        f"""
        SELECT COUNT(*) FROM {STAGE}
        WHERE NOT EXISTS (SELECT 1 FROM {ITEM} w WHERE w.run_id = %(run)s AND w.record_id = {STAGE}.stage_id
                          AND w.is_in_population)
        """,
        params,
    )
    (unknown,) = cursor.fetchone()
    return {
        "updated": updated,
        "attempted": by_status.get("attempted", 0),
        "claimed_done": by_status.get("completed", 0),
        "failed": by_status.get("failed", 0),
        "not_in_population": unknown,
    }


def _apply_destination(cursor: Any, params: dict[str, Any]) -> dict[str, int]:
    grouped = f"(SELECT stage_id, COUNT(*) AS n, MAX(stage_ref) AS ref FROM {STAGE} GROUP BY stage_id) AS s"
    derived = _derived({"dc": "s.n", "dref": "s.ref"})
    cursor.execute(
        f"""
        UPDATE {ITEM} SET destination_count = s.n, destination_ref = s.ref, {_set_derived(derived)}
        FROM {grouped}
        WHERE {ITEM}.run_id = %(run)s AND {ITEM}.record_id = s.stage_id
          AND ({ITEM}.destination_count <> s.n OR {ITEM}.destination_ref <> s.ref OR {_differs(derived, ITEM + ".")})
        """,
        params,
    )
    updated = _rowcount(cursor)
    # Present in the destination but not in the population: kept, flagged as possible duplicates.
    cursor.execute(
        f"""
        INSERT INTO {ITEM} (run_id, record_id, outcome, is_in_population, skip_reason, attributes, is_attempted,
            runner_status, destination_count, destination_ref, is_possible_duplicate, evidence_kind, evidence_ref,
            evidence_note, evidence_by_id, evidence_at)
        SELECT %(run)s, s.stage_id, 'completed', FALSE, '', NULL, FALSE, '', s.n, s.ref, TRUE, 'destination_query',
            s.ref, 'in the destination but not in the eligible population', %(actor)s, %(now)s
        FROM {grouped}
        WHERE NOT EXISTS (SELECT 1 FROM {ITEM} w WHERE w.run_id = %(run)s AND w.record_id = s.stage_id)
        """,
        params,
    )
    not_eligible = _rowcount(cursor)
    # The export replaces the previous one: records it no longer holds lose their destination facts.
    gone = _derived({"dc": "0", "dref": "''"})
    cursor.execute(
        f"""
        UPDATE {ITEM} SET destination_count = 0, destination_ref = '', {_set_derived(gone)}
        WHERE run_id = %(run)s AND destination_count > 0
          AND NOT EXISTS (SELECT 1 FROM {STAGE} WHERE {STAGE}.stage_id = {ITEM}.record_id)
        """,
        params,
    )
    left = _rowcount(cursor)
    cursor.execute(
        f"""
        DELETE FROM {ITEM}
        WHERE run_id = %(run)s AND NOT is_in_population AND destination_count = 0
          AND NOT EXISTS (SELECT 1 FROM {CHANGE} c WHERE c.work_item_id = {ITEM}.id)
        """,
        params,
    )
    cursor.execute(
        f"""
        SELECT COUNT(*), COALESCE(SUM(CASE WHEN n > 1 THEN 1 ELSE 0 END), 0)
        FROM (SELECT stage_id, COUNT(*) AS n FROM {STAGE} GROUP BY stage_id) AS g
        """
    )
    distinct_ids, repeated = cursor.fetchone()
    return {
        "present": distinct_ids,
        "updated": updated,
        "not_eligible": not_eligible,
        "present_more_than_once": repeated,
        "no_longer_present": left,
    }


def _apply_provider_lookup(cursor: Any, params: dict[str, Any]) -> dict[str, int]:
    # Only items still lacking confirmation are verified; the history row is written first, so it
    # records the outcome each item had before.
    target = f"(CASE WHEN {STAGE}.stage_status = 'found' THEN 'completed' ELSE 'absent' END)"
    eligible = "w.run_id = %(run)s AND w.is_in_population AND w.outcome IN ('uncertain', 'unverified')"
    cursor.execute(
        f"""
        INSERT INTO {CHANGE} (work_item_id, run_id, load_id, kind, from_outcome, to_outcome, evidence_kind,
            evidence_ref, note, changed_by_id, changed_at)
        SELECT w.id, w.run_id, %(load)s, 'verify', w.outcome, {target}, 'provider_lookup', {STAGE}.stage_ref, '',
            %(actor)s, %(now)s
        FROM {ITEM} w JOIN {STAGE} ON {STAGE}.stage_id = w.record_id
        WHERE {eligible}
        """,
        params,
    )
    cursor.execute(
        f"""
        SELECT {STAGE}.stage_status, COUNT(*) FROM {ITEM} w JOIN {STAGE} ON {STAGE}.stage_id = w.record_id
        WHERE {eligible} GROUP BY {STAGE}.stage_status
        """,
        params,
    )
    by_status = dict(cursor.fetchall())
    cursor.execute(
        f"""
        UPDATE {ITEM} SET outcome = {target}, evidence_kind = 'provider_lookup', evidence_ref = {STAGE}.stage_ref,
            evidence_note = '', evidence_by_id = %(actor)s, evidence_at = %(now)s
        FROM {STAGE}
        WHERE {ITEM}.run_id = %(run)s AND {ITEM}.record_id = {STAGE}.stage_id AND {ITEM}.is_in_population
          AND {ITEM}.outcome IN ('uncertain', 'unverified')
        """,
        params,
    )
    verified = _rowcount(cursor)
    return {
        "verified": verified,
        "found": by_status.get("found", 0),
        "not_found": by_status.get("not_found", 0),
    }


def _reconcile(cursor: Any, params: dict[str, Any]) -> int:
    """Apply the derived columns to every item of the run whose stored ones differ; return how many."""
    derived = _derived()
    cursor.execute(
        f"UPDATE {ITEM} SET {_set_derived(derived)} WHERE run_id = %(run)s AND {_differs(derived)}",
        params,
    )
    return _rowcount(cursor)


APPLY = {
    WorkItemLoad.Kind.POPULATION: _apply_population,
    WorkItemLoad.Kind.RUNNER_REPORT: _apply_runner_report,
    WorkItemLoad.Kind.DESTINATION: _apply_destination,
    WorkItemLoad.Kind.PROVIDER_LOOKUP: _apply_provider_lookup,
}


# --- totals and failure class ---------------------------------------------------------------------


@dataclass
class RunTotals:
    """A run's ledger totals (DESIGN.md Run totals), with the parts of ``unresolved``."""

    eligible: int = 0
    attempted: int = 0
    completed: int = 0
    skipped: int = 0
    rejected: int = 0
    unresolved: int = 0
    unverified: int = 0
    absent: int = 0
    uncertain: int = 0
    possible_duplicates: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def _destination_is_complete(run: Run) -> bool:
    """Whether the run's latest committed destination export was declared complete for the window."""
    latest = (
        WorkItemLoad.objects.filter(run=run, kind=WorkItemLoad.Kind.DESTINATION, status=WorkItemLoad.Status.COMMITTED)
        .order_by("-finished_at", "-id")
        .values_list("is_destination_complete", flat=True)
        .first()
    )
    return bool(latest)


def run_totals_refresh(*, run: Run) -> RunTotals:
    """Recompute the run's totals from its items (one aggregate) and store them on the run.

    Call inside the transaction of the load or change. Counts: eligible = in the population and
    not skipped; completed, rejected, unresolved (unverified + absent + uncertain) and attempted
    count eligible items only; possible duplicates count every flagged item. Sets
    ``run.ledger_updated_at``. Writes no timeline event (the caller's event carries the totals).
    """
    in_population = Q(is_in_population=True)
    counts = WorkItem.objects.filter(run=run).aggregate(
        eligible=Count("id", filter=in_population & ~Q(outcome=WorkItem.Outcome.SKIPPED)),
        attempted=Count("id", filter=in_population & Q(is_attempted=True) & ~Q(outcome=WorkItem.Outcome.SKIPPED)),
        completed=Count("id", filter=in_population & Q(outcome=WorkItem.Outcome.COMPLETED)),
        skipped=Count("id", filter=in_population & Q(outcome=WorkItem.Outcome.SKIPPED)),
        rejected=Count("id", filter=in_population & Q(outcome=WorkItem.Outcome.REJECTED)),
        unverified=Count("id", filter=in_population & Q(outcome=WorkItem.Outcome.UNVERIFIED)),
        absent=Count("id", filter=in_population & Q(outcome=WorkItem.Outcome.ABSENT)),
        uncertain=Count("id", filter=in_population & Q(outcome=WorkItem.Outcome.UNCERTAIN)),
        possible_duplicates=Count("id", filter=Q(is_possible_duplicate=True)),
    )
    totals = RunTotals(**counts, unresolved=counts["unverified"] + counts["absent"] + counts["uncertain"])
    now = timezone.now()
    fields = {
        "eligible_count": totals.eligible,
        "attempted_count": totals.attempted,
        "completed_count": totals.completed,
        "skipped_count": totals.skipped,
        "rejected_count": totals.rejected,
        "unresolved_count": totals.unresolved,
        "unverified_count": totals.unverified,
        "absent_count": totals.absent,
        "uncertain_count": totals.uncertain,
        "possible_duplicate_count": totals.possible_duplicates,
        "ledger_updated_at": now,
    }
    Run.objects.filter(pk=run.pk).update(**fields, updated_at=now)
    for name, value in fields.items():
        setattr(run, name, value)
    return totals


def failure_class_for(
    *,
    run_status: str,
    totals: RunTotals,
    attempts: list[tuple[str, bool]],
    has_runner_report: bool,
) -> tuple[str, str]:
    """Suggest a failure class from the evidence: ``(class, reason)``; ``("", reason)`` for a succeeded run.

    ``attempts``: ``(status, has_started)`` per attempt, oldest first. Rules, first match wins:
    every eligible record completed while the run failed → ``completed_ack_lost``; nothing completed
    and no attempt started → ``never_started``; an attempt started but the runner reported no record
    attempted and nothing completed → ``failed_in_preparation``; some but not all completed →
    ``partially_committed``; otherwise ``undetermined``.
    """
    if run_status == Run.Status.SUCCEEDED:
        return "", "the run succeeded"
    started = any(has_started for _, has_started in attempts)
    if totals.eligible and totals.completed == totals.eligible:
        return Run.FailureClass.COMPLETED_ACK_LOST, (
            f"all {totals.eligible:,} eligible records are in the destination, yet the run failed"
        )
    if totals.completed == 0 and not started:
        return Run.FailureClass.NEVER_STARTED, "no attempt started and no record is in the destination"
    if totals.completed == 0 and totals.attempted == 0 and has_runner_report and totals.uncertain == 0:
        return Run.FailureClass.FAILED_IN_PREPARATION, (
            "an attempt started, but the runner reported no record attempted and none is in the destination"
        )
    if totals.completed > 0:
        return Run.FailureClass.PARTIALLY_COMMITTED, (
            f"{totals.completed:,} of {totals.eligible:,} eligible records are in the destination"
        )
    return Run.FailureClass.UNDETERMINED, "the evidence does not decide it yet"


def _attempt_facts(run: Run) -> list[tuple[str, bool]]:
    started_statuses = {Attempt.Status.RUNNING, Attempt.Status.SUCCEEDED, Attempt.Status.TIMED_OUT}
    return [
        (status, started_at is not None or status in started_statuses)
        for status, started_at in run.attempts.order_by("number", "id").values_list("status", "started_at")
    ]


def run_failure_class_suggest(*, run: Run, totals: RunTotals | None = None, actor: User | None = None) -> Run:
    """Refresh the run's suggested failure class; when it changes, write a ``failure_class_suggested`` event.

    Call inside a transaction. ``totals`` defaults to the run's stored totals. The event's actor is
    the system (the suggestion is the app's); ``actor`` is recorded in its data when given.
    """
    if totals is None:
        totals = RunTotals(
            eligible=run.eligible_count,
            attempted=run.attempted_count,
            completed=run.completed_count,
            uncertain=run.uncertain_count,
        )
    has_report = WorkItemLoad.objects.filter(
        run=run, kind=WorkItemLoad.Kind.RUNNER_REPORT, status=WorkItemLoad.Status.COMMITTED
    ).exists()
    suggested, reason = failure_class_for(
        run_status=run.status, totals=totals, attempts=_attempt_facts(run), has_runner_report=has_report
    )
    if suggested == run.failure_class_suggested:
        return run
    previous = run.failure_class_suggested
    Run.objects.filter(pk=run.pk).update(failure_class_suggested=suggested)
    run.failure_class_suggested = suggested
    summary = (
        f"Suggested failure class: {FAILURE_CLASS_WORDS[suggested].lower()} ({reason}); a person confirms it"
        if suggested
        else f"Failure class suggestion withdrawn ({reason})"
    )
    timeline_event_record(
        job=run.job,
        run=run,
        kind="failure_class_suggested",
        summary=summary,
        data={
            "suggested": suggested,
            "previous": previous,
            "reason": reason,
            "requested_by": actor.get_username() if actor is not None and actor.is_authenticated else None,
        },
    )
    return run


def run_failure_class_confirm(*, user: User, run: Run, failure_class: str, note: str = "") -> Run:
    """Record a person's confirmation of the run's failure class, with a ``failure_class_confirmed`` event.

    ``failure_class``: one of ``Run.FailureClass``. A class other than the suggestion needs a
    ``note`` saying why. Raises NotFound / LedgerPermissionDenied (see ``work_item_load_create``),
    DomainError (400) for an unknown class or a missing note. Returns the run.
    """
    _require_writer(user=user, run=run)
    if failure_class not in Run.FailureClass.values:
        raise DomainError(
            f"{failure_class!r} is not a failure class ({', '.join(Run.FailureClass.values)}).",
            errors={"failure_class": ["unknown failure class"]},
        )
    note = note.strip()
    with transaction.atomic():
        locked = Run.objects.select_for_update().select_related("job", "tenant").get(pk=run.pk)
        if failure_class != locked.failure_class_suggested and not note:
            suggested = locked.failure_class_suggested or "none"
            raise DomainError(
                f"The app suggests {suggested}; say why you confirm {failure_class} instead.",
                errors={"note": ["required when the class differs from the suggestion"]},
            )
        now = timezone.now()
        Run.objects.filter(pk=run.pk).update(
            failure_class=failure_class, failure_class_confirmed_by=user, failure_class_confirmed_at=now, updated_at=now
        )
        summary = f"Failure class confirmed: {FAILURE_CLASS_WORDS[failure_class].lower()}"
        if locked.failure_class_suggested and locked.failure_class_suggested != failure_class:
            summary += f" (suggested: {FAILURE_CLASS_WORDS[locked.failure_class_suggested].lower()})"
        if note:
            summary += f" — {note}"
        timeline_event_record(
            job=locked.job,
            run=locked,
            kind="failure_class_confirmed",
            summary=summary,
            actor_user=user,  # type: ignore[arg-type]
            data={
                "failure_class": failure_class,
                "previous": locked.failure_class,
                "suggested": locked.failure_class_suggested,
                "note": note,
            },
        )
    run.failure_class, run.failure_class_confirmed_by, run.failure_class_confirmed_at = failure_class, user, now  # type: ignore[assignment]
    return run


# --- loads ----------------------------------------------------------------------------------------

OPTION_NAMES = ("ref_column", "status_column", "skip_column", "found_column")


def work_item_load_create(
    *,
    user: User,
    run: Run,
    kind: str,
    content: bytes,
    file_name: str = "",
    file_format: str = WorkItemLoad.Format.AUTO,
    id_column: str = "record_id",
    options: dict[str, str] | None = None,
    is_destination_complete: bool = False,
) -> WorkItemLoad:
    """Store an uploaded file of record ids for a run and load it, now or in a Celery task.

    ``kind``: ``population`` (the eligible ids, optional skip-reason and attribute columns),
    ``runner_report`` (ids with an optional status column: attempted / completed / failed),
    ``destination`` (the ids the destination holds, optional reference column;
    ``is_destination_complete`` declares the export complete for the window, so eligible ids it
    lacks are ``absent``) or ``provider_lookup`` (bulk verification: ids with found yes/no and the
    provider's reference). ``options`` names the optional columns (``OPTION_NAMES``). Files up to
    ``HANDOVER_LEDGER_SYNC_MAX_BYTES`` load before this returns (status ``committed``); larger ones
    are queued on commit (task ``runs.work_item_load_run``; status ``pending``).

    Raises NotFound (run not visible), LedgerPermissionDenied (auditors and other readers),
    LedgerFileTooLarge (over ``HANDOVER_LEDGER_MAX_UPLOAD_BYTES``; nothing stored), DomainError for
    an unknown kind, format or option, and LedgerInputError from a synchronous load (the load row
    is kept ``failed`` with the line and column; no item changed).
    """
    _require_writer(user=user, run=run)
    ledger_files.check_size(len(content), settings.HANDOVER_LEDGER_MAX_UPLOAD_BYTES)
    if kind not in WorkItemLoad.Kind.values:
        raise DomainError(f"Unknown load kind {kind!r}.", errors={"kind": ["unknown kind"]})
    if file_format not in WorkItemLoad.Format.values:
        raise DomainError(f"Unknown format {file_format!r}.", errors={"format": ["unknown format"]})
    options = {k: str(v).strip() for k, v in (options or {}).items() if v not in (None, "")}
    unknown = sorted(set(options) - set(OPTION_NAMES))
    if unknown:
        raise DomainError(f"Unknown options: {', '.join(unknown)}.", errors={"options": unknown})
    if is_destination_complete and kind != WorkItemLoad.Kind.DESTINATION:
        raise DomainError(
            "Only a destination export can be declared complete.",
            errors={"is_destination_complete": ["only for destination exports"]},
        )
    load = WorkItemLoad.objects.create(
        run=run,
        kind=kind,
        format=file_format,
        id_column=(id_column or "record_id").strip(),
        options=options,
        is_destination_complete=is_destination_complete,
        file_name=file_name[:255],
        content=content,
        size_bytes=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
        created_by=user,
        created_at=timezone.now(),
    )
    if len(content) <= settings.HANDOVER_LEDGER_SYNC_MAX_BYTES:
        return work_item_load_run(load_id=load.pk)
    _progress(load, "queued", 0, "waiting for a worker")

    def enqueue() -> None:
        from runs.tasks import work_item_load_run as task

        task.delay(load.pk)

    transaction.on_commit(enqueue)
    return load


def _load_summary(load: WorkItemLoad, counts: dict[str, int], totals: RunTotals) -> str:
    rows = counts.get("rows", 0)
    if load.kind == WorkItemLoad.Kind.POPULATION:
        text = f"Eligible population loaded: {rows:,} records ({counts['added']:,} new"
        text += f", {counts['skipped_by_rule']:,} skipped by rule)" if counts["skipped_by_rule"] else ")"
    elif load.kind == WorkItemLoad.Kind.RUNNER_REPORT:
        text = (
            f"Runner report loaded: {rows:,} records ({counts['attempted']:,} attempted, "
            f"{counts['claimed_done']:,} claimed done, {counts['failed']:,} failed"
        )
        text += f"; {counts['not_in_population']:,} not in the population)" if counts["not_in_population"] else ")"
    elif load.kind == WorkItemLoad.Kind.DESTINATION:
        complete = "complete for the window" if load.is_destination_complete else "not declared complete"
        text = f"Destination export loaded ({complete}): {counts['present']:,} records present"
        if counts["not_eligible"] or counts["present_more_than_once"]:
            text += (
                f"; possible duplicates: {counts['not_eligible']:,} not eligible, "
                f"{counts['present_more_than_once']:,} present more than once"
            )
    else:
        text = (
            f"Provider lookup loaded: {counts['verified']:,} uncertain or unverified records verified "
            f"({counts['found']:,} found → completed, {counts['not_found']:,} not found → absent)"
        )
    return (
        f"{text}. Totals: {totals.eligible:,} eligible, {totals.completed:,} completed, "
        f"{totals.unresolved:,} unresolved, {totals.possible_duplicates:,} possible duplicates"
    )


def _timed_out(run: Run) -> bool:
    return run.attempts.filter(status=Attempt.Status.TIMED_OUT).exists()


def work_item_load_run(*, load_id: int) -> WorkItemLoad:
    """Run one load: parse, stage, reconcile, store totals, write one timeline event — atomically.

    Claims the load (``pending``/``running`` → ``running``); a load already ``committed`` or
    ``failed`` is returned unchanged, so a repeated task is harmless, and two runners of one load
    are serialised on the load row (the second finds it committed). On bad input the transaction
    rolls back, the load is marked ``failed`` with the error, line and column (its bytes dropped),
    and LedgerInputError is raised; on an unexpected error it is marked ``failed`` with its bytes
    kept for ``work_item_load_retry`` and the error re-raised. Progress goes to the cache
    (``LOAD_PROGRESS_KEY``) outside the transaction. Returns the load.
    """
    now = timezone.now()
    WorkItemLoad.objects.filter(
        pk=load_id, status__in=[WorkItemLoad.Status.PENDING, WorkItemLoad.Status.RUNNING]
    ).update(status=WorkItemLoad.Status.RUNNING, started_at=now)
    load = WorkItemLoad.objects.select_related("run__job", "run__tenant", "created_by").get(pk=load_id)
    if load.status != WorkItemLoad.Status.RUNNING:
        return load
    _progress(load, "reading", 1, "reading the file")
    try:
        with transaction.atomic():
            claimed = (
                WorkItemLoad.objects.select_for_update()
                .filter(pk=load_id, status=WorkItemLoad.Status.RUNNING)
                .values_list("content", flat=True)
                .first()
            )
            if claimed is None:  # another runner finished it while we waited for the lock
                return WorkItemLoad.objects.get(pk=load_id)
            # One ledger writer per run at a time: totals are computed from a settled set of items.
            run = Run.objects.select_for_update().select_related("job", "tenant").get(pk=load.run_id)
            counts, totals = _load_apply(load, run, bytes(claimed))
            finished = timezone.now()
            WorkItemLoad.objects.filter(pk=load_id).update(
                status=WorkItemLoad.Status.COMMITTED,
                finished_at=finished,
                row_count=counts["rows"],
                counts=counts,
                content=b"",
                error="",
            )
            kind = "work_items_verified" if load.kind == WorkItemLoad.Kind.PROVIDER_LOOKUP else "work_items_loaded"
            timeline_event_record(
                job=run.job,
                run=run,
                kind=kind,
                summary=_load_summary(load, counts, totals),
                actor_user=load.created_by,
                data={
                    "load": str(load.public_id),
                    "load_kind": load.kind,
                    "file_name": load.file_name,
                    "sha256": load.sha256,
                    "is_destination_complete": load.is_destination_complete,
                    "counts": counts,
                    "totals": totals.as_dict(),
                },
            )
            run_failure_class_suggest(run=run, totals=totals, actor=load.created_by)
    except LedgerInputError as exc:
        _load_fail(load, exc.detail, line=exc.line, column=exc.column, keep_content=False)
        raise
    except Exception:
        logger.exception("work-ledger load %s failed", load.public_id)
        _load_fail(load, "The load failed unexpectedly (logged); nothing was changed. Retry it.", keep_content=True)
        raise
    _progress(load, "committed", 100, "loaded")
    return WorkItemLoad.objects.select_related("run", "created_by").get(pk=load_id)


def _load_apply(load: WorkItemLoad, run: Run, content: bytes) -> tuple[dict[str, int], RunTotals]:
    """The body of a load, inside its transaction: returns the counts and the new totals."""
    if (
        load.kind != WorkItemLoad.Kind.POPULATION
        and not WorkItem.objects.filter(run=run, is_in_population=True).exists()
    ):
        raise LedgerInputError("this run has no eligible population yet: load the population first.")
    text = ledger_files.decode(content)

    def report(lines: int, total: int) -> None:
        _progress(load, "reading", 1 + int(59 * lines / total), f"{lines:,} of about {total:,} lines read")

    rows = ledger_files.read_rows(
        text,
        kind=load.kind,
        file_format=load.format,
        id_column=load.id_column,
        options=load.options,
        file_name=load.file_name,
        progress=report,
    )
    complete = (
        load.is_destination_complete if load.kind == WorkItemLoad.Kind.DESTINATION else _destination_is_complete(run)
    )
    params = {
        "run": run.pk,
        "load": load.pk,
        "actor": load.created_by_id,
        "now": timezone.now(),
        "complete": complete,
        "timed_out": _timed_out(run),
    }
    with connection.cursor() as cursor:
        if _is_postgres():
            # Hash joins and aggregates over a million ids spill to disk at the default 4 MB.
            cursor.execute("SET LOCAL work_mem = '256MB'")
        _stage_create(cursor)
        try:
            row_count = _stage_fill(cursor, rows)
            if row_count == 0:
                raise LedgerInputError("the file has no records.")
            if load.kind != WorkItemLoad.Kind.DESTINATION:  # a destination may hold a record twice (flagged)
                _stage_refuse_duplicates(cursor)
            _progress(load, "reconciling", 65, f"{row_count:,} records read; reconciling")
            counts = APPLY[WorkItemLoad.Kind(load.kind)](cursor, params)
            counts["reconciled"] = _reconcile(cursor, params)
            counts["rows"] = row_count
        finally:
            cursor.execute(f"DROP TABLE IF EXISTS {STAGE}")
    _progress(load, "totals", 90, "storing the totals")
    totals = run_totals_refresh(run=run)
    return counts, totals


def _load_fail(
    load: WorkItemLoad, error: str, *, line: int | None = None, column: str = "", keep_content: bool
) -> None:
    """Mark a load failed, outside the rolled-back transaction, and publish it to the progress bar."""
    fields: dict[str, Any] = {
        "status": WorkItemLoad.Status.FAILED,
        "finished_at": timezone.now(),
        "error": error,
        "error_line": line,
        "error_column": column[:200],
    }
    if not keep_content:
        fields["content"] = b""
    WorkItemLoad.objects.filter(pk=load.pk).update(**fields)
    _progress(load, "failed", 100, error)


def work_item_load_retry(*, user: User, load: WorkItemLoad) -> WorkItemLoad:
    """Queue a load that failed unexpectedly once more (its bytes were kept); enqueues the task on commit.

    Raises InvalidTransition (409) for a load that is not ``failed`` or whose bytes were dropped
    (bad input: fix the file and upload it again).
    """
    _require_writer(user=user, run=load.run)
    with transaction.atomic():
        changed = (
            WorkItemLoad.objects.filter(pk=load.pk, status=WorkItemLoad.Status.FAILED)
            .exclude(content=b"")
            .update(status=WorkItemLoad.Status.PENDING, error="", error_line=None, error_column="", finished_at=None)
        )
        if not changed:
            raise InvalidTransition("Only a load that failed unexpectedly can be retried; fix the file and upload it.")

        def enqueue() -> None:
            from runs.tasks import work_item_load_run as task

            task.delay(load.pk)

        transaction.on_commit(enqueue)
    _progress(load, "queued", 0, "waiting for a worker")
    load.refresh_from_db()
    return load


# --- one item: a person's change, a provider lookup -----------------------------------------------


def _item_for_update(run: Run, record_id: str) -> WorkItem:
    item = WorkItem.objects.select_for_update().filter(run=run, record_id=record_id.strip()).first()
    if item is None:
        raise NotFound(f"No work item {record_id!r} in this run.")
    return item


def work_item_change(
    *, user: User, run: Run, record_id: str, outcome: str, note: str, evidence_ref: str = ""
) -> WorkItem:
    """Change one item's outcome by a person's decision (manual evidence), keeping its history.

    ``note`` (required) says why; ``evidence_ref`` may name a ticket or a provider operation.
    Writes a WorkItemChange and one ``work_item_changed`` timeline event, refreshes the run's
    totals and the failure-class suggestion. Raises NotFound (run not visible or no such item),
    LedgerPermissionDenied, DomainError (unknown outcome, missing note) and InvalidTransition (the
    item already has that outcome). Returns the item.
    """
    _require_writer(user=user, run=run)
    if outcome not in WorkItem.Outcome.values:
        raise DomainError(f"{outcome!r} is not an outcome.", errors={"outcome": ["unknown outcome"]})
    note = note.strip()
    if not note:
        raise DomainError("Say why the outcome changes.", errors={"note": ["required"]})
    with transaction.atomic():
        run = Run.objects.select_for_update().select_related("job", "tenant").get(pk=run.pk)
        item = _item_for_update(run, record_id)
        if item.outcome == outcome:
            raise InvalidTransition(f"{item.record_id} is already {outcome}.")
        previous = item.outcome
        now = timezone.now()
        item.outcome = outcome
        item.evidence_kind = WorkItem.EvidenceKind.MANUAL
        item.evidence_ref = evidence_ref.strip()[:300]
        item.evidence_note = note
        item.evidence_by = user  # type: ignore[assignment]
        item.evidence_at = now
        item.save(
            update_fields=["outcome", "evidence_kind", "evidence_ref", "evidence_note", "evidence_by", "evidence_at"]
        )
        WorkItemChange.objects.create(
            work_item=item,
            run=run,
            kind=WorkItemChange.Kind.CHANGE,
            from_outcome=previous,
            to_outcome=outcome,
            evidence_kind=WorkItem.EvidenceKind.MANUAL,
            evidence_ref=item.evidence_ref,
            note=note,
            changed_by=user,
            changed_at=now,
        )
        totals = run_totals_refresh(run=run)
        timeline_event_record(
            job=run.job,
            run=run,
            kind="work_item_changed",
            summary=f"{item.record_id}: {previous} → {outcome} (by a person: {note})",
            actor_user=user,  # type: ignore[arg-type]
            data={"record_id": item.record_id, "from": previous, "to": outcome, "totals": totals.as_dict()},
        )
        run_failure_class_suggest(run=run, totals=totals, actor=user)
    return item


def work_item_verify(
    *, user: User, run: Run, record_id: str, found: bool, reference: str = "", note: str = ""
) -> WorkItem:
    """Record a provider lookup for one uncertain (or unverified) item: found → completed, not found → absent.

    ``reference`` (the provider's operation or correlation id) is required when found. Writes a
    WorkItemChange (kind ``verify``) and one ``work_item_verified`` timeline event, refreshes the
    totals and the failure-class suggestion. Raises NotFound, LedgerPermissionDenied, DomainError
    (found without reference) and InvalidTransition (the item is not uncertain or unverified).
    """
    _require_writer(user=user, run=run)
    reference = reference.strip()[:300]
    if found and not reference:
        raise DomainError(
            "A record the provider found needs the provider's reference.", errors={"reference": ["required"]}
        )
    with transaction.atomic():
        run = Run.objects.select_for_update().select_related("job", "tenant").get(pk=run.pk)
        item = _item_for_update(run, record_id)
        if item.outcome not in (WorkItem.Outcome.UNCERTAIN, WorkItem.Outcome.UNVERIFIED) or not item.is_in_population:
            raise InvalidTransition(
                f"{item.record_id} is {item.outcome}; only uncertain or unverified records are verified."
            )
        previous = item.outcome
        outcome = WorkItem.Outcome.COMPLETED if found else WorkItem.Outcome.ABSENT
        now = timezone.now()
        item.outcome = outcome
        item.evidence_kind = WorkItem.EvidenceKind.PROVIDER_LOOKUP
        item.evidence_ref = reference
        item.evidence_note = note.strip()
        item.evidence_by = user  # type: ignore[assignment]
        item.evidence_at = now
        item.save(
            update_fields=["outcome", "evidence_kind", "evidence_ref", "evidence_note", "evidence_by", "evidence_at"]
        )
        WorkItemChange.objects.create(
            work_item=item,
            run=run,
            kind=WorkItemChange.Kind.VERIFY,
            from_outcome=previous,
            to_outcome=outcome,
            evidence_kind=WorkItem.EvidenceKind.PROVIDER_LOOKUP,
            evidence_ref=reference,
            note=item.evidence_note,
            changed_by=user,
            changed_at=now,
        )
        totals = run_totals_refresh(run=run)
        verdict = f"found ({reference})" if found else "confirmed not found"
        timeline_event_record(
            job=run.job,
            run=run,
            kind="work_item_verified",
            summary=f"{item.record_id}: provider lookup {verdict} → {outcome}",
            actor_user=user,  # type: ignore[arg-type]
            data={"record_id": item.record_id, "from": previous, "to": outcome, "reference": reference},
        )
        run_failure_class_suggest(run=run, totals=totals, actor=user)
    return item


__all__ = [
    "LedgerPermissionDenied",
    "RunTotals",
    "failure_class_for",
    "run_failure_class_confirm",
    "run_failure_class_suggest",
    "run_totals_refresh",
    "work_item_change",
    "work_item_load_create",
    "work_item_load_retry",
    "work_item_load_run",
    "work_item_verify",
]

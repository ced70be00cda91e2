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
import uuid
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.cache import cache
from django.db import IntegrityError, connection, transaction
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
    # condition, outcome, evidence kind, reference, note, by, at. Derived evidence stores no note:
    # WorkItem.evidence_summary words it from the facts (no per-row prose for a million rows).
    branches = [
        (f"({f['skip']} <> '' AND NOT {pinned})", "'skipped'", "''", "''", "''", "NULL", "NULL"),
        (f"{f['dc']} > 0", "'completed'", "'destination_query'", f["dref"], "''", by, at),
        (f"({pinned} OR NOT {f['pop']})", f["outcome"], f["ek"], f["eref"], f["enote"], f["eby"], f["eat"]),
        (f"{f['rs']} = 'failed'", "'rejected'", "'runner_report'", "''", "''", by, at),
        ("%(complete)s", "'absent'", "'destination_query'", "''", "''", by, at),
        (f"{f['rs']} = 'completed'", "'uncertain'", "'runner_report'", "''", "''", by, at),
        (f"({f['att']} AND %(timed_out)s)", "'uncertain'", "'runner_report'", "''", "''", by, at),
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


# --- the staging tables ---------------------------------------------------------------------------


def _is_postgres() -> bool:
    return connection.vendor == "postgresql"


def _stage_name(kind: str) -> str:
    return f"{STAGE}_{kind}"


def _stage_create(cursor: Any, table: str) -> None:
    # Column names start with stage_ so that they never shadow a work-item column in UPDATE ... FROM.
    cursor.execute(f"DROP TABLE IF EXISTS {table}")
    cursor.execute(
        f"CREATE TEMP TABLE {table} (stage_line integer NOT NULL, stage_id text NOT NULL, stage_ref text NOT NULL, "
        "stage_status text NOT NULL, stage_skip text NOT NULL, stage_attributes text)"
    )


def _stage_fill(cursor: Any, table: str, rows: Iterable[LedgerRow]) -> int:
    """Stream the rows into a staging table; return how many. COPY on PostgreSQL, batches on SQLite."""
    count = 0
    if _is_postgres():
        columns = "stage_line, stage_id, stage_ref, stage_status, stage_skip, stage_attributes"
        with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
                count += 1
        cursor.execute(f"ANALYZE {table}")  # temporary tables are never auto-analysed
        return count
    sql = f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s, %s)"
    batch: list[tuple[Any, ...]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= SQLITE_BATCH:
            cursor.executemany(sql, batch)
            count += len(batch)
            batch = []
    if batch:
        cursor.executemany(sql, batch)
        count += len(batch)
    cursor.execute(f"CREATE INDEX {table}_id ON {table} (stage_id)")
    return count


def _stage_refuse_duplicates(cursor: Any, table: str) -> None:
    """Raise LedgerInputError naming the first repeated id's lines, if any id is in the file twice."""
    cursor.execute(
        f"SELECT stage_id, MIN(stage_line) FROM {table} GROUP BY stage_id HAVING COUNT(*) > 1 ORDER BY 2 LIMIT 1"
    )
    found = cursor.fetchone()
    if found is None:
        return
    record_id, first_line = found
    cursor.execute(
        f"SELECT MIN(stage_line) FROM {table} WHERE stage_id = %s AND stage_line > %s", [record_id, first_line]
    )
    (second_line,) = cursor.fetchone()
    cursor.execute(f"SELECT COUNT(*) FROM (SELECT 1 FROM {table} GROUP BY stage_id HAVING COUNT(*) > 1) AS d")
    (repeated,) = cursor.fetchone()
    more = f" ({repeated:,} ids appear more than once)" if repeated > 1 else ""
    raise LedgerInputError(
        f"duplicate record id {record_id!r}, already on line {first_line}{more}. Each id may appear once.",
        line=second_line,
    )


def _destination_group(cursor: Any, table: str) -> None:
    """Materialise the destination export with one row per id: ``stage_id``, ``n`` (times present), ``ref``.

    Grouped once, used three times (the join into new items, the not-eligible ids, the counts).
    """
    cursor.execute(f"DROP TABLE IF EXISTS {table}_g")
    cursor.execute(
        f"CREATE TEMP TABLE {table}_g AS "
        f"SELECT stage_id, COUNT(*) AS n, MAX(stage_ref) AS ref FROM {table} GROUP BY stage_id"
    )
    if _is_postgres():
        cursor.execute(f"ANALYZE {table}_g")
    else:
        cursor.execute(f"CREATE INDEX {table}_g_id ON {table}_g (stage_id)")


def _destination_grouped(table: str, alias: str) -> str:
    """The materialised grouping of ``_destination_group``, under ``alias``."""
    return f"{table}_g AS {alias}"


# --- applying one kind of file ----------------------------------------------------------------------


def _rowcount(cursor: Any) -> int:
    return max(cursor.rowcount, 0)


def _apply_population(cursor: Any, params: dict[str, Any], stages: dict[str, str], fresh: bool) -> dict[str, int]:
    """New ids become items; known ids get their skip reason and attributes.

    When a runner report or destination export came in the same batch, new items are inserted
    with those facts (and the outcome they imply) already joined in, so a fresh run's million
    rows are written once, not once per file. Rows go in record-id order: index pages then fill
    in order instead of being hit at random.
    """
    pop = stages[WorkItemLoad.Kind.POPULATION]
    runner = stages.get(WorkItemLoad.Kind.RUNNER_REPORT)
    dest = stages.get(WorkItemLoad.Kind.DESTINATION)
    attributes = "p.stage_attributes::jsonb" if _is_postgres() else "p.stage_attributes"
    facts = {
        "pop": "TRUE",
        "skip": "p.stage_skip",
        "att": "(r.stage_id IS NOT NULL)" if runner else "FALSE",
        "rs": "COALESCE(r.stage_status, '')" if runner else "''",
        "dc": "COALESCE(d.n, 0)" if dest else "0",
        "dref": "COALESCE(d.ref, '')" if dest else "''",
        "outcome": "'unverified'",
        "ek": "''",
        "eref": "''",
        "enote": "''",
        "eby": "NULL",
        "eat": "NULL",
    }
    derived = _derived(facts)
    joins = ""
    if runner:
        joins += f" LEFT JOIN {runner} r ON r.stage_id = p.stage_id"
    if dest:
        joins += f" LEFT JOIN {_destination_grouped(dest, 'd')} ON d.stage_id = p.stage_id"
    insert = f"""
        INSERT INTO {ITEM} (run_id, record_id, is_in_population, skip_reason, attributes, is_attempted,
            runner_status, destination_count, destination_ref, is_possible_duplicate, {", ".join(DERIVED_COLUMNS)})
        SELECT %(run)s, p.stage_id, TRUE, p.stage_skip, {attributes}, {facts["att"]}, {facts["rs"]}, {facts["dc"]},
            {facts["dref"]}, {derived["is_possible_duplicate"]}, {", ".join(derived[c] for c in DERIVED_COLUMNS)}
        FROM {pop} p{joins}
        WHERE NOT EXISTS (SELECT 1 FROM {ITEM} w WHERE w.run_id = %(run)s AND w.record_id = p.stage_id)
        ORDER BY p.stage_id
        """
    if fresh:
        # Nothing to update, and a repeated id trips the unique (run, record_id) index: no need to
        # look for repeats first (a GROUP BY over the file) unless there is one.
        try:
            with transaction.atomic():
                cursor.execute(insert, params)
        except IntegrityError:
            _stage_refuse_duplicates(cursor, pop)
            raise
        added = _rowcount(cursor)
        cursor.execute(f"SELECT COUNT(*) FROM {pop} WHERE stage_skip <> ''")
        (skipped,) = cursor.fetchone()
        return {"added": added, "updated": 0, "skipped_by_rule": skipped}
    _stage_refuse_duplicates(cursor, pop)
    cursor.execute(insert, params)
    added = _rowcount(cursor)
    attributes_new = f"{pop}.stage_attributes::jsonb" if _is_postgres() else f"{pop}.stage_attributes"
    distinct = "IS DISTINCT FROM" if _is_postgres() else "IS NOT"
    derived = _derived({"pop": "TRUE", "skip": f"{pop}.stage_skip"})
    cursor.execute(
        f"""
        UPDATE {ITEM} SET is_in_population = TRUE, skip_reason = {pop}.stage_skip, attributes = {attributes_new},
            {_set_derived(derived)}
        FROM {pop}
        WHERE {ITEM}.run_id = %(run)s AND {ITEM}.record_id = {pop}.stage_id
          AND (NOT {ITEM}.is_in_population OR {ITEM}.skip_reason <> {pop}.stage_skip
               OR {ITEM}.attributes {distinct} {attributes_new})
        """,
        params,
    )
    updated = _rowcount(cursor)
    cursor.execute(f"SELECT COUNT(*) FROM {pop} WHERE stage_skip <> ''")
    (skipped,) = cursor.fetchone()
    return {"added": added, "updated": updated, "skipped_by_rule": skipped}


def _apply_runner_report(cursor: Any, params: dict[str, Any], stages: dict[str, str], fresh: bool) -> dict[str, int]:
    """Merge the runner's word into the items: attempted, and claimed done or failed (latest report wins)."""
    stage = stages[WorkItemLoad.Kind.RUNNER_REPORT]
    # A later "attempted" never downgrades an earlier "claimed done" or "failed" of the same record.
    new_status = (
        f"(CASE WHEN {stage}.stage_status = 'attempted' AND {ITEM}.runner_status IN ('completed', 'failed') "
        f"THEN {ITEM}.runner_status ELSE {stage}.stage_status END)"
    )
    derived = _derived({"att": "TRUE", "rs": new_status})
    population = stages.get(WorkItemLoad.Kind.POPULATION)
    if fresh and population:
        # The items were inserted with this report's facts joined in: nothing to update, and the
        # counts come from the report itself and the attempted items (no join of the two files).
        cursor.execute(f"SELECT stage_status, COUNT(*) FROM {stage} GROUP BY stage_status")
        by_status = dict(cursor.fetchall())
        cursor.execute(f"SELECT COUNT(*) FROM {ITEM} WHERE run_id = %(run)s AND is_attempted", params)
        (matched,) = cursor.fetchone()
        rows = sum(by_status.values())
        return {
            "updated": matched,
            "attempted": by_status.get("attempted", 0),
            "claimed_done": by_status.get("completed", 0),
            "failed": by_status.get("failed", 0),
            "not_in_population": rows - matched,
        }
    cursor.execute(
        f"""
        UPDATE {ITEM} SET is_attempted = TRUE, runner_status = {new_status}, {_set_derived(derived)}
        FROM {stage}
        WHERE {ITEM}.run_id = %(run)s AND {ITEM}.record_id = {stage}.stage_id AND {ITEM}.is_in_population
          AND (NOT {ITEM}.is_attempted OR {ITEM}.runner_status <> {new_status} OR {_differs(derived, ITEM + ".")})
        """,
        params,
    )
    updated = _rowcount(cursor)
    cursor.execute(
        f"""
        SELECT {stage}.stage_status, COUNT(*) FROM {stage}
        WHERE EXISTS (SELECT 1 FROM {ITEM} w WHERE w.run_id = %(run)s AND w.record_id = {stage}.stage_id
                      AND w.is_in_population)
        GROUP BY {stage}.stage_status
        """,
        params,
    )
    by_status = dict(cursor.fetchall())
    cursor.execute(f"SELECT COUNT(*) FROM {stage}")
    (rows,) = cursor.fetchone()
    return {
        "updated": updated,
        "attempted": by_status.get("attempted", 0),
        "claimed_done": by_status.get("completed", 0),
        "failed": by_status.get("failed", 0),
        "not_in_population": rows - sum(by_status.values()),
    }


def _apply_destination(cursor: Any, params: dict[str, Any], stages: dict[str, str], fresh: bool) -> dict[str, int]:
    """Replace the run's destination facts with this export's; keep and flag ids nobody listed as eligible."""
    stage = stages[WorkItemLoad.Kind.DESTINATION]
    grouped = _destination_grouped(stage, "s")
    derived = _derived({"dc": "s.n", "dref": "s.ref"})
    # A fresh run's items were inserted with this export's facts joined in: nothing to update.
    joined = fresh and WorkItemLoad.Kind.POPULATION in stages
    updated = 0
    if not joined:
        cursor.execute(
            f"""
            UPDATE {ITEM} SET destination_count = s.n, destination_ref = s.ref, {_set_derived(derived)}
            FROM {grouped}
            WHERE {ITEM}.run_id = %(run)s AND {ITEM}.record_id = s.stage_id
              AND ({ITEM}.destination_count <> s.n OR {ITEM}.destination_ref <> s.ref
                   OR {_differs(derived, ITEM + ".")})
            """,
            params,
        )
        updated = _rowcount(cursor)
    # Present in the destination but not in the population: kept, flagged as possible duplicates.
    # (For a fresh run the population's staging table is the smaller thing to anti-join against.)
    population = stages.get(WorkItemLoad.Kind.POPULATION)
    known = (
        f"SELECT 1 FROM {population} p WHERE p.stage_id = s.stage_id"
        if joined and population
        else f"SELECT 1 FROM {ITEM} w WHERE w.run_id = %(run)s AND w.record_id = s.stage_id"
    )
    cursor.execute(
        f"""
        INSERT INTO {ITEM} (run_id, record_id, outcome, is_in_population, skip_reason, attributes, is_attempted,
            runner_status, destination_count, destination_ref, is_possible_duplicate, evidence_kind, evidence_ref,
            evidence_note, evidence_by_id, evidence_at)
        SELECT %(run)s, s.stage_id, 'completed', FALSE, '', NULL, FALSE, '', s.n, s.ref, TRUE, 'destination_query',
            s.ref, '', %(actor)s, %(now)s
        FROM {grouped}
        WHERE NOT EXISTS ({known})
        ORDER BY s.stage_id
        """,
        params,
    )
    not_eligible = _rowcount(cursor)
    left = 0
    if fresh:  # no earlier export to replace
        return _destination_counts(cursor, stage, updated, not_eligible, left)
    # The export replaces the previous one: records it no longer holds lose their destination facts.
    gone = _derived({"dc": "0", "dref": "''"})
    cursor.execute(
        f"""
        UPDATE {ITEM} SET destination_count = 0, destination_ref = '', {_set_derived(gone)}
        WHERE run_id = %(run)s AND destination_count > 0
          AND NOT EXISTS (SELECT 1 FROM {stage} WHERE {stage}.stage_id = {ITEM}.record_id)
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
    return _destination_counts(cursor, stage, updated, not_eligible, left)


def _destination_counts(cursor: Any, stage: str, updated: int, not_eligible: int, left: int) -> dict[str, int]:
    cursor.execute(
        f"""
        SELECT COUNT(*), COALESCE(SUM(CASE WHEN n > 1 THEN 1 ELSE 0 END), 0)
        FROM {stage}_g AS g
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


def _apply_provider_lookup(cursor: Any, params: dict[str, Any], stages: dict[str, str], fresh: bool) -> dict[str, int]:
    """Bulk verification: uncertain or unverified items the provider found → completed, not found → absent."""
    stage = stages[WorkItemLoad.Kind.PROVIDER_LOOKUP]
    # The history rows are written first, so they record the outcome each item had before.
    target = f"(CASE WHEN {stage}.stage_status = 'found' THEN 'completed' ELSE 'absent' END)"
    eligible = "w.run_id = %(run)s AND w.is_in_population AND w.outcome IN ('uncertain', 'unverified')"
    cursor.execute(
        f"""
        INSERT INTO {CHANGE} (work_item_id, run_id, load_id, kind, from_outcome, to_outcome, evidence_kind,
            evidence_ref, note, changed_by_id, changed_at)
        SELECT w.id, w.run_id, %(provider_load)s, 'verify', w.outcome, {target}, 'provider_lookup',
            {stage}.stage_ref, '', %(actor)s, %(now)s
        FROM {ITEM} w JOIN {stage} ON {stage}.stage_id = w.record_id
        WHERE {eligible}
        """,
        params,
    )
    cursor.execute(
        f"""
        SELECT {stage}.stage_status, COUNT(*) FROM {ITEM} w JOIN {stage} ON {stage}.stage_id = w.record_id
        WHERE {eligible} GROUP BY {stage}.stage_status
        """,
        params,
    )
    by_status = dict(cursor.fetchall())
    cursor.execute(
        f"""
        UPDATE {ITEM} SET outcome = {target}, evidence_kind = 'provider_lookup', evidence_ref = {stage}.stage_ref,
            evidence_note = '', evidence_by_id = %(actor)s, evidence_at = %(now)s
        FROM {stage}
        WHERE {ITEM}.run_id = %(run)s AND {ITEM}.record_id = {stage}.stage_id AND {ITEM}.is_in_population
          AND {ITEM}.outcome IN ('uncertain', 'unverified')
        """,
        params,
    )
    verified = _rowcount(cursor)
    cursor.execute(f"SELECT COUNT(*) FROM {stage}")
    (rows,) = cursor.fetchone()
    return {
        "verified": verified,
        "found": by_status.get("found", 0),
        "not_found": by_status.get("not_found", 0),
        "not_verified": rows - verified,
    }


def _reconcile(cursor: Any, params: dict[str, Any]) -> int:
    """Apply the derived columns to every item of the run whose stored ones differ; return how many."""
    derived = _derived()
    cursor.execute(
        f"UPDATE {ITEM} SET {_set_derived(derived)} WHERE run_id = %(run)s AND {_differs(derived)}",
        params,
    )
    return _rowcount(cursor)


# The order files of one batch are applied in: the population first, verification last.
APPLY = {
    WorkItemLoad.Kind.POPULATION: _apply_population,
    WorkItemLoad.Kind.RUNNER_REPORT: _apply_runner_report,
    WorkItemLoad.Kind.DESTINATION: _apply_destination,
    WorkItemLoad.Kind.PROVIDER_LOOKUP: _apply_provider_lookup,
}
KIND_ORDER = list(APPLY)


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
    user: User,
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
    ``HANDOVER_LEDGER_SYNC_MAX_BYTES`` in all load before this returns (status ``committed``);
    larger ones are queued on commit (task ``runs.work_item_load_run``; status ``pending``).

    Raises NotFound (run not visible), LedgerPermissionDenied (auditors and other readers),
    LedgerFileTooLarge (a file over ``HANDOVER_LEDGER_MAX_UPLOAD_BYTES``; nothing stored),
    DomainError for an unknown kind, format or option or two files of one kind, and
    LedgerInputError from a synchronous load (the loads are kept ``failed`` with the file, line
    and column; no item changed). Returns the loads in application order.
    """
    _require_writer(user=user, run=run)
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
    loads = [
        WorkItemLoad.objects.create(
            run=run,
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
            created_by=user,
            created_at=now,
        )
        for upload in sorted(files, key=lambda f: KIND_ORDER.index(WorkItemLoad.Kind(f.kind)))
    ]
    for load in loads:
        load.content = b""  # stored; no need to hold it in memory too
    if sum(load.size_bytes for load in loads) <= settings.HANDOVER_LEDGER_SYNC_MAX_BYTES:
        work_item_load_run(load_id=loads[0].pk)
        return list(WorkItemLoad.objects.filter(batch=batch).defer("content").order_by("id"))
    for load in loads:
        _progress(load, "queued", 0, "waiting for a worker")
    _enqueue(loads[0].pk)
    return loads


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
    """Store and load one file (``work_item_loads_create`` with a batch of one); returns its load."""
    (load,) = work_item_loads_create(
        user=user,
        run=run,
        files=[LoadFile(kind=kind, content=content, file_name=file_name)],
        file_format=file_format,
        id_column=id_column,
        options=options,
        is_destination_complete=is_destination_complete,
    )
    return load


def _enqueue(load_id: int) -> None:
    """Queue the batch of ``load_id`` once the current transaction commits."""

    def enqueue() -> None:
        from runs.tasks import work_item_load_run as task

        task.delay(load_id)

    transaction.on_commit(enqueue)


def _batch_summary(loads: list[WorkItemLoad], counts: dict[str, dict[str, int]], totals: RunTotals) -> str:
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
            text = f"destination export ({complete}): {c['present']:,} records present"
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
    return (
        f"{verb} {'; '.join(parts)}. Totals: {totals.eligible:,} eligible, {totals.completed:,} completed, "
        f"{totals.unresolved:,} unresolved, {totals.possible_duplicates:,} possible duplicates"
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
        return first
    loads = list(
        WorkItemLoad.objects.filter(batch=first.batch).defer("content").select_related("created_by").order_by("id")
    )
    for load in loads:
        _progress(load, "reading", 1, "reading the file")
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
            counts, totals = _batch_apply(loads, run)
            finished = timezone.now()
            for load in loads:
                WorkItemLoad.objects.filter(pk=load.pk).update(
                    status=WorkItemLoad.Status.COMMITTED,
                    finished_at=finished,
                    row_count=counts[load.kind]["rows"],
                    counts=counts[load.kind],
                    content=b"",
                    error="",
                )
            only = [ld.kind for ld in loads] == [WorkItemLoad.Kind.PROVIDER_LOOKUP]
            timeline_event_record(
                job=run.job,
                run=run,
                kind="work_items_verified" if only else "work_items_loaded",
                summary=_batch_summary(loads, counts, totals),
                actor_user=first.created_by,
                data={
                    "batch": str(first.batch),
                    "loads": [
                        {
                            "load": str(ld.public_id),
                            "kind": ld.kind,
                            "file_name": ld.file_name,
                            "sha256": ld.sha256,
                            "is_destination_complete": ld.is_destination_complete,
                            "counts": counts[ld.kind],
                        }
                        for ld in loads
                    ],
                    "totals": totals.as_dict(),
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
        _progress(load, "committed", 100, "loaded")
    return WorkItemLoad.objects.defer("content").get(pk=load_id)


def _batch_apply(loads: list[WorkItemLoad], run: Run) -> tuple[dict[str, dict[str, int]], RunTotals]:
    """The body of a batch, inside its transaction: stage every file, apply them in order, store totals.

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
        "actor": loads[0].created_by_id,
        "now": timezone.now(),
        "complete": destination.is_destination_complete if destination else _destination_is_complete(run),
        "timed_out": _timed_out(run),
    }
    counts: dict[str, dict[str, int]] = {}
    stages: dict[str, str] = {}
    fresh = not WorkItem.objects.filter(run=run).exists()
    with connection.cursor() as cursor:
        if _is_postgres():
            # Hash joins and aggregates over a million ids spill to disk at the default 4 MB.
            cursor.execute("SET LOCAL work_mem = '256MB'")
        for index, load in enumerate(loads):
            table = _stage_name(load.kind)
            _stage_create(cursor, table)
            stages[load.kind] = table
            try:
                # One file in memory at a time: its bytes are fetched, staged and let go.
                content = WorkItemLoad.objects.filter(pk=load.pk).values_list("content", flat=True).get()
                raw = zlib.decompress(content)
                del content
                counts[load.kind] = {"rows": _stage_load(cursor, table, load, raw, index, len(loads))}
                del raw
            except LedgerInputError as exc:
                raise _located(exc, load, len(loads)) from exc
        _progress_all(loads, "reconciling", 65, "reconciling")
        for load in loads:
            try:
                counts[load.kind].update(APPLY[WorkItemLoad.Kind(load.kind)](cursor, params, stages, fresh))
            except LedgerInputError as exc:
                raise _located(exc, load, len(loads)) from exc
        # A fresh run's items were written with every fact joined in and their outcome derived
        # from it; otherwise bring every item whose derived columns changed up to date.
        reconciled = 0 if fresh and WorkItemLoad.Kind.POPULATION in stages else _reconcile(cursor, params)
        counts[loads[-1].kind]["reconciled"] = reconciled
        # The staging tables go with the transaction when it rolls back (a failed COPY leaves it
        # aborted, so no DROP could run then); on success they are dropped here.
        for table in stages.values():
            cursor.execute(f"DROP TABLE IF EXISTS {table}")
        if WorkItemLoad.Kind.DESTINATION in stages:
            cursor.execute(f"DROP TABLE IF EXISTS {stages[WorkItemLoad.Kind.DESTINATION]}_g")
    _progress_all(loads, "totals", 90, "storing the totals")
    return counts, run_totals_refresh(run=run)


def _stage_load(cursor: Any, table: str, load: WorkItemLoad, content: bytes, index: int, of: int) -> int:
    """Decode, parse and stage one file; refuse an empty file and (but for a destination) repeated ids."""
    text = ledger_files.decode(content)
    del content  # the text is all we need from here on
    share = 60 / of

    def report(lines: int, total: int) -> None:
        percent = 1 + int(share * index + share * lines / total)
        _progress(load, "reading", percent, f"{lines:,} of about {total:,} lines read")

    rows = ledger_files.read_rows(
        text,
        kind=load.kind,
        file_format=load.format,
        id_column=load.id_column,
        options=load.options,
        file_name=load.file_name,
        progress=report,
    )
    count = _stage_fill(cursor, table, rows)
    if count == 0:
        raise LedgerInputError("the file has no records.")
    if load.kind == WorkItemLoad.Kind.DESTINATION:
        _destination_group(cursor, table)
    # A destination may hold a record twice (flagged); the population is checked as it is applied.
    if load.kind not in (WorkItemLoad.Kind.DESTINATION, WorkItemLoad.Kind.POPULATION):
        _stage_refuse_duplicates(cursor, table)
    return count


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
        _progress(load, phase, percent, message)


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
        message = error if is_culprit else f"Not loaded: {culprit.file_name or culprit.kind} in the same upload failed."
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
        _progress(load, "failed", 100, message)


def work_item_load_retry(*, user: User, load: WorkItemLoad) -> WorkItemLoad:
    """Queue a batch that failed unexpectedly once more (its bytes were kept); enqueues the task on commit.

    Raises InvalidTransition (409) for a load that is not ``failed`` or whose bytes were dropped
    (bad input: fix the file and upload it again).
    """
    _require_writer(user=user, run=load.run)
    with transaction.atomic():
        changed = (
            WorkItemLoad.objects.filter(batch=load.batch, status=WorkItemLoad.Status.FAILED)
            .exclude(content=b"")
            .update(status=WorkItemLoad.Status.PENDING, error="", error_line=None, error_column="", finished_at=None)
        )
        if not changed:
            raise InvalidTransition("Only a load that failed unexpectedly can be retried; fix the file and upload it.")
        _enqueue(load.pk)
    _progress(load, "queued", 0, "waiting for a worker")
    return WorkItemLoad.objects.defer("content").get(pk=load.pk)


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

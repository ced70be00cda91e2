"""Reconciliation: each kind of staged file applied to the run's items with set-based SQL (anti-joins
for new items, ``UPDATE ... FROM`` for changed facts, ``NOT EXISTS`` for items that left), and the
derived columns brought up to date."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from runs.ledger.common import CHANGE, ITEM
from runs.ledger.models import WorkItemLoad
from runs.ledger.outcomes import DERIVED_COLUMNS, derived_sql, differs_sql, set_derived_sql
from runs.ledger.staging import (
    destination_grouped_sql,
    destination_grouping_sql,
    is_postgres,
    stage_refuse_duplicates,
)


def _order() -> str:
    """The collation new items are sorted in before they are inserted (for index locality only).

    On PostgreSQL the byte order (``C``): it sorts with abbreviated keys, several times faster than
    a locale's order over a million ids, and for UTF-8 text it is code-point order, the order of
    the ``C.UTF-8`` indexes too. Any order gives the same rows.
    """
    return ' COLLATE "C"' if is_postgres() else ""


def _rowcount(cursor: Any) -> int:
    return max(int(cursor.rowcount), 0)


def _apply_population(cursor: Any, params: dict[str, Any], stages: dict[str, str], fresh: bool) -> dict[str, int]:
    """New ids become items; known ids get their skip reason and attributes.

    When a runner report or destination export came in the same batch, new items are inserted
    with those facts (and the outcome they imply) already joined in, so a fresh run's million
    rows are written once, not once per file; a fresh run's not-eligible ids (a destination's ids
    outside the population) come in the same statement, with the outcome and flag the same rules
    give them. Rows go in record-id order: index pages then fill in order instead of being hit at
    random.
    """
    pop = stages[WorkItemLoad.Kind.POPULATION]
    runner = stages.get(WorkItemLoad.Kind.RUNNER_REPORT)
    dest = stages.get(WorkItemLoad.Kind.DESTINATION)
    # A fresh run's not-eligible ids (listed by the destination, not by the population) come in
    # the same statement: a full join, their rows derived by the same rules (no population, no
    # runner facts: flagged possible duplicates, completed by the destination query).
    merged = fresh and dest is not None
    key = "COALESCE(p.stage_id, d.stage_id)" if merged else "p.stage_id"
    joins = ""
    if dest:
        grouped = f"({destination_grouping_sql(dest)})" if fresh else destination_grouped_sql(dest)
        joins += f" {'FULL' if merged else 'LEFT'} JOIN {grouped} AS d ON d.stage_id = p.stage_id"
    if runner:
        joins += f" LEFT JOIN {runner} r ON r.stage_id = p.stage_id"
    known = f"WHERE NOT EXISTS (SELECT 1 FROM {ITEM} w WHERE w.run_id = %(run)s AND w.record_id = p.stage_id)"
    # The facts are joined and sorted in a subquery, the derived columns computed on its sorted
    # rows: the sort then holds a few narrow columns per item, not every column of the item.
    source = f"""
        SELECT {key} AS stage_id, {"p.stage_id IS NOT NULL" if merged else "TRUE"} AS pop,
            COALESCE(p.stage_skip, '') AS skip, p.stage_attributes AS attributes,
            {"r.stage_id IS NOT NULL" if runner else "FALSE"} AS att,
            {"COALESCE(r.stage_status, '')" if runner else "''"} AS rs,
            {"COALESCE(d.n, 0)" if dest else "0"} AS dc, {"COALESCE(d.ref, '')" if dest else "''"} AS dref
        FROM {pop} p{joins}
        {"" if fresh else known}
        ORDER BY {key}{_order()}
        """
    facts = {
        "pop": "s.pop",
        "skip": "s.skip",
        "att": "s.att",
        "rs": "s.rs",
        "dc": "s.dc",
        "dref": "s.dref",
        "outcome": "'unverified'",
        "ek": "''",
        "eref": "''",
        "enote": "''",
        "eby": "NULL",
        "eat": "NULL",
        "dexp": "NULL",
    }
    derived = derived_sql(facts)
    attributes = "s.attributes::jsonb" if is_postgres() else "s.attributes"
    dload = "(CASE WHEN s.dc = 0 THEN NULL ELSE %(destination_load)s END)" if dest else "NULL"
    insert = f"""
        INSERT INTO {ITEM} (run_id, record_id, is_in_population, skip_reason, attributes, is_attempted,
            runner_status, destination_count, destination_ref, destination_load_id, is_possible_duplicate,
            duplicate_explanation, duplicate_evidence_ref, {", ".join(DERIVED_COLUMNS)})
        SELECT %(run)s, s.stage_id, s.pop, s.skip, {attributes}, s.att, s.rs, s.dc, s.dref, {dload},
            {derived["is_possible_duplicate"]}, '', '', {", ".join(derived[c] for c in DERIVED_COLUMNS)}
        FROM ({source}) AS s
        """
    if fresh:
        # Nothing to update, and a repeated id trips the unique (run, record_id) index: no need to
        # look for repeats first (a GROUP BY over the file) unless there is one.
        try:
            with transaction.atomic():
                cursor.execute(insert, params)
        except IntegrityError:
            stage_refuse_duplicates(cursor, pop)
            raise
        # No id repeated (the index would have refused it): each staged row became one item (the
        # not-eligible ids the statement added are the destination's to count).
        cursor.execute(f"SELECT COUNT(*), COALESCE(SUM(CASE WHEN stage_skip <> '' THEN 1 ELSE 0 END), 0) FROM {pop}")
        added, skipped = cursor.fetchone()
        return {"added": added, "updated": 0, "skipped_by_rule": skipped}
    stage_refuse_duplicates(cursor, pop)
    cursor.execute(insert, params)
    added = _rowcount(cursor)
    attributes_new = f"{pop}.stage_attributes::jsonb" if is_postgres() else f"{pop}.stage_attributes"
    distinct = "IS DISTINCT FROM" if is_postgres() else "IS NOT"
    derived = derived_sql({"pop": "TRUE", "skip": f"{pop}.stage_skip"})
    cursor.execute(
        f"""
        UPDATE {ITEM} SET is_in_population = TRUE, skip_reason = {pop}.stage_skip, attributes = {attributes_new},
            {set_derived_sql(derived)}
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
    derived = derived_sql({"att": "TRUE", "rs": new_status})
    population = stages.get(WorkItemLoad.Kind.POPULATION)
    if fresh and population:
        # The items were inserted with this report's facts joined in: nothing to update, and the
        # counts come from the report itself and the attempted items (no join of the two files).
        cursor.execute(f"SELECT stage_status, COUNT(*) FROM {stage} GROUP BY stage_status")
        by_status = dict(cursor.fetchall())
        cursor.execute(f"SELECT COUNT(*) FROM {ITEM} WHERE run_id = %(run)s AND is_attempted", params)
        (matched,) = cursor.fetchone()
        rows = sum(by_status.values())
        if rows != matched:
            # Some ids are not in the population: one of them may be repeated (a repeat of an id
            # in the population would have tripped the insert's unique index; ``stage_load``).
            stage_refuse_duplicates(cursor, stage)
        return {
            "updated": matched,
            "attempted": by_status.get("attempted", 0),
            "claimed_done": by_status.get("completed", 0),
            "failed": by_status.get("failed", 0),
            "not_in_population": rows - matched,
        }
    cursor.execute(
        f"""
        UPDATE {ITEM} SET is_attempted = TRUE, runner_status = {new_status}, {set_derived_sql(derived)}
        FROM {stage}
        WHERE {ITEM}.run_id = %(run)s AND {ITEM}.record_id = {stage}.stage_id AND {ITEM}.is_in_population
          AND (NOT {ITEM}.is_attempted OR {ITEM}.runner_status <> {new_status} OR {differs_sql(derived, ITEM + ".")})
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
    """Add this export's facts to the run's items (the union of the loads); keep and flag ids nobody listed as eligible.

    An export says nothing about ids it does not list, unless it is declared complete for the
    window: then the items it lacks lose their destination facts (and become ``absent``). A record
    listed more often than before keeps the larger count; no item is ever deleted.
    """
    stage = stages[WorkItemLoad.Kind.DESTINATION]
    if fresh:
        # A fresh run's items, the not-eligible ids among them, were inserted with this export's
        # facts joined in (``_apply_population``): nothing to update, and the run's items are the
        # export's ids, counted with one scan (the export itself was never grouped into a table).
        cursor.execute(
            f"""
            SELECT COALESCE(SUM(CASE WHEN destination_count > 0 THEN 1 ELSE 0 END), 0),
                COALESCE(SUM(CASE WHEN destination_count > 1 THEN 1 ELSE 0 END), 0),
                COALESCE(SUM(CASE WHEN is_in_population THEN 0 ELSE 1 END), 0)
            FROM {ITEM} WHERE run_id = %(run)s
            """,
            params,
        )
        present, repeated, not_eligible = cursor.fetchone()
        return {
            "present": present,
            "updated": 0,
            "not_eligible": not_eligible,
            "present_more_than_once": repeated,
            "no_longer_present": 0,
        }
    grouped = f"{destination_grouped_sql(stage)} AS s"
    count = f"(CASE WHEN {ITEM}.destination_count > s.n THEN {ITEM}.destination_count ELSE s.n END)"
    ref = f"(CASE WHEN s.ref <> '' THEN s.ref ELSE {ITEM}.destination_ref END)"
    derived = derived_sql({"dc": count, "dref": ref})
    cursor.execute(
        f"""
        UPDATE {ITEM} SET destination_count = {count}, destination_ref = {ref},
            destination_load_id = %(destination_load)s, {set_derived_sql(derived)}
        FROM {grouped}
        WHERE {ITEM}.run_id = %(run)s AND {ITEM}.record_id = s.stage_id
          AND ({ITEM}.destination_count <> {count} OR {ITEM}.destination_ref <> {ref}
               OR {ITEM}.destination_load_id IS NULL OR {differs_sql(derived, ITEM + ".")})
        """,
        params,
    )
    updated = _rowcount(cursor)
    # Present in the destination but not in the population: kept, flagged as possible duplicates.
    cursor.execute(
        f"""
        INSERT INTO {ITEM} (run_id, record_id, outcome, is_in_population, skip_reason, attributes, is_attempted,
            runner_status, destination_count, destination_ref, destination_load_id, is_possible_duplicate,
            evidence_kind, evidence_ref, evidence_note, evidence_by_id, evidence_at, duplicate_explanation,
            duplicate_evidence_ref)
        SELECT %(run)s, s.stage_id, 'completed', FALSE, '', NULL, FALSE, '', s.n, s.ref, %(destination_load)s, TRUE,
            'destination_query', s.ref, '', %(actor)s, %(now)s, '', ''
        FROM {grouped}
        WHERE NOT EXISTS (SELECT 1 FROM {ITEM} w WHERE w.run_id = %(run)s AND w.record_id = s.stage_id)
        ORDER BY s.stage_id{_order()}
        """,
        params,
    )
    not_eligible = _rowcount(cursor)
    left = 0
    if not params["destination_complete"]:
        # an export that says nothing about the ids it lacks
        return _destination_counts(cursor, stage, updated, not_eligible, left)
    # Declared complete for the window: the records it lacks are not in the destination (as of
    # this load). Their earlier facts go; the items stay (a weakening waits for a person).
    gone = derived_sql({"dc": "0", "dref": "''"})
    cursor.execute(
        f"""
        UPDATE {ITEM} SET destination_count = 0, destination_ref = '', destination_load_id = %(destination_load)s,
            {set_derived_sql(gone)}
        WHERE run_id = %(run)s AND destination_count > 0
          AND NOT EXISTS (SELECT 1 FROM {stage} WHERE {stage}.stage_id = {ITEM}.record_id)
        """,
        params,
    )
    left = _rowcount(cursor)
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


def reconcile(cursor: Any, params: dict[str, Any]) -> int:
    """Apply the derived columns to every item of the run whose stored ones differ; return how many."""
    derived = derived_sql()
    cursor.execute(
        f"UPDATE {ITEM} SET {set_derived_sql(derived)} WHERE run_id = %(run)s AND {differs_sql(derived)}",
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

"""The outcome rules as SQL: one ``CASE`` per derived column of an item, given SQL for its facts
(the rules are listed in docs/architecture.md, "Package notes")."""

from __future__ import annotations

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
    "dexp": "duplicate_explained_at",
}
DERIVED_COLUMNS = ("outcome", "evidence_kind", "evidence_ref", "evidence_note", "evidence_by_id", "evidence_at")


def derived_sql(facts: dict[str, str] | None = None) -> dict[str, str]:
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
    # A person's explanation clears the flag for good: no later load raises it again.
    derived["is_possible_duplicate"] = (
        f"(({f['dc']} > 1 OR ({f['dc']} > 0 AND (NOT {f['pop']} OR {f['skip']} <> ''))) AND {f['dexp']} IS NULL)"
    )
    return derived


def differs_sql(derived: dict[str, str], prefix: str = "") -> str:
    """SQL true when any compared derived column differs from the stored one."""
    columns = ("outcome", "evidence_kind", "evidence_ref", "evidence_note", "is_possible_duplicate")
    return "(" + " OR ".join(f"{prefix}{c} <> {derived[c]}" for c in columns) + ")"


def set_derived_sql(derived: dict[str, str]) -> str:
    return ", ".join(f"{column} = {expression}" for column, expression in derived.items())

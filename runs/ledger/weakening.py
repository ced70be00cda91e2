"""Weakenings: what a load would take away from the ledger, found by comparing the items before and
after it is applied (docs/work-ledger.md "Loads").

A weakening is an item that was ``completed`` and is no longer, one that was ``absent`` or
``rejected`` and becomes ``uncertain`` or ``unverified``, or a possible-duplicate flag that a load
would clear. A load with any weakening is not applied until a person confirms it with a reason.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from handover.core.people import Person
from runs.ledger.common import CHANGE, ITEM, STAGE
from runs.ledger.staging import is_postgres

SNAPSHOT = f"{STAGE}_before"
PREVIEW_ITEMS = 50

# One weakened item: (record_id, outcome before, outcome after, possible-duplicate flag cleared).
WeakenedRow = tuple[str, str, str, bool]

_WEAKENED = (
    "(b.b_outcome = 'completed' AND w.outcome <> 'completed')"
    " OR (b.b_outcome IN ('absent', 'rejected') AND w.outcome IN ('uncertain', 'unverified'))"
)
_CLEARED = "(b.b_dup AND NOT w.is_possible_duplicate)"


@dataclass
class Confirmation:
    """A person's confirmation of a load's weakenings: who, why, when."""

    user: Person
    reason: str
    at: datetime


class WeakeningFound(Exception):
    """Raised inside a load's savepoint when it would weaken the ledger and nobody confirmed it.

    ``rows``: every weakened item in record-id order; ``counts``: the load's counts per kind.
    """

    def __init__(self, rows: list[WeakenedRow], counts: dict[str, dict[str, int]]) -> None:
        super().__init__(f"{len(rows)} weakened items")
        self.rows = rows
        self.counts = counts

    def by_change(self) -> dict[str, int]:
        """How many items each change weakens: ``{"completed → uncertain": 3, "possible duplicate cleared": 2}``."""
        found: Counter[str] = Counter()
        for _record_id, before, after, cleared in self.rows:
            if before != after:
                found[f"{before} → {after}"] += 1
            if cleared:
                found["possible duplicate cleared"] += 1
        return dict(sorted(found.items()))

    def counts_text(self) -> str:
        return ", ".join(f"{n:,} {change}" for change, n in self.by_change().items())

    def preview(self) -> dict[str, Any]:
        """The stored preview: ``total``, ``counts`` (by change) and the first 50 ``items``."""
        return {
            "total": len(self.rows),
            "counts": self.by_change(),
            "items": [
                {"record_id": r, "from": before, "to": after, "possible_duplicate_cleared": cleared}
                for r, before, after, cleared in self.rows[:PREVIEW_ITEMS]
            ],
        }

    def csv_bytes(self) -> bytes:
        """Every weakened item as CSV (the downloadable list)."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["record_id", "outcome_before", "outcome_after", "possible_duplicate_cleared"])
        for record_id, before, after, cleared in self.rows:
            writer.writerow([record_id, before, after, "yes" if cleared else "no"])
        return out.getvalue().encode()


def snapshot_take(cursor: Any, params: dict[str, Any]) -> None:
    """Copy every item's id, outcome and possible-duplicate flag aside, before a load changes them."""
    cursor.execute(f"DROP TABLE IF EXISTS {SNAPSHOT}")
    cursor.execute(
        f"CREATE TEMP TABLE {SNAPSHOT} AS SELECT id AS b_id, outcome AS b_outcome, is_possible_duplicate AS b_dup "
        f"FROM {ITEM} WHERE run_id = %(run)s",
        params,
    )
    if is_postgres():
        cursor.execute(f"ANALYZE {SNAPSHOT}")
    else:
        cursor.execute(f"CREATE INDEX {SNAPSHOT}_id ON {SNAPSHOT} (b_id)")


def weakened_rows(cursor: Any, params: dict[str, Any]) -> list[WeakenedRow]:
    """Every item the applied load weakened, compared with the snapshot, in record-id order."""
    cursor.execute(
        f"""
        SELECT w.record_id, b.b_outcome, w.outcome, {_CLEARED}
        FROM {SNAPSHOT} b JOIN {ITEM} w ON w.id = b.b_id
        WHERE {_WEAKENED} OR {_CLEARED}
        ORDER BY w.record_id
        """,
        params,
    )
    return [(r, before, after, bool(cleared)) for r, before, after, cleared in cursor.fetchall()]


def weakenings_record(cursor: Any, params: dict[str, Any], confirmation: Confirmation, reference: str) -> int:
    """Keep a confirmed load's weakenings: a ``weaken`` history row per item whose outcome it weakened, and
    for each possible duplicate it cleared the confirmer's explanation (an ``explain`` row). Returns how many items.

    ``params`` needs ``run``, ``load`` (the load the rows point at) and ``now``; ``reference`` names the load.
    """
    values = {
        **params,
        "by": confirmation.user.pk,
        "reason": confirmation.reason,
        "ref": reference[:300],
    }
    cursor.execute(
        f"""
        INSERT INTO {CHANGE} (work_item_id, run_id, load_id, kind, from_outcome, to_outcome, evidence_kind,
            evidence_ref, note, changed_by_id, changed_at)
        SELECT w.id, w.run_id, %(load)s, 'weaken', b.b_outcome, w.outcome, 'manual', %(ref)s, %(reason)s, %(by)s,
            %(now)s
        FROM {SNAPSHOT} b JOIN {ITEM} w ON w.id = b.b_id
        WHERE {_WEAKENED}
        """,
        values,
    )
    weakened = max(int(cursor.rowcount), 0)
    cursor.execute(
        f"""
        INSERT INTO {CHANGE} (work_item_id, run_id, load_id, kind, from_outcome, to_outcome, evidence_kind,
            evidence_ref, note, changed_by_id, changed_at)
        SELECT w.id, w.run_id, %(load)s, 'explain', w.outcome, w.outcome, 'manual', %(ref)s, %(reason)s, %(by)s,
            %(now)s
        FROM {SNAPSHOT} b JOIN {ITEM} w ON w.id = b.b_id
        WHERE {_CLEARED}
        """,
        values,
    )
    cleared = max(int(cursor.rowcount), 0)
    cursor.execute(
        f"""
        UPDATE {ITEM} SET duplicate_explained_at = %(now)s, duplicate_explained_by_id = %(by)s,
            duplicate_explanation = %(reason)s, duplicate_evidence_ref = %(ref)s
        WHERE run_id = %(run)s AND id IN (SELECT b.b_id FROM {SNAPSHOT} b WHERE b.b_dup)
          AND NOT is_possible_duplicate AND duplicate_explained_at IS NULL
        """,
        values,
    )
    return weakened + cleared

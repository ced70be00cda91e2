"""Which evidence a handover's generated text came from, and whether that evidence has changed since.

When the text is generated (on creation and on every regeneration) the handover keeps a snapshot of
its runs' evidence: the ledger version (raised by every load and ledger change), the run's status,
its attempts (how many, the latest number) and its ledger totals. The page compares it with the
runs as they are now: any difference marks the generated text *stale*, names what changed, and
offers the diff with a regeneration (docs/architecture.md "Vocabulary": Handover).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, IntegerField, Max, OuterRef, Subquery

from runs.attempts.models import Attempt, Run

COUNT_FIELDS = {
    "eligible": "eligible_count",
    "completed": "completed_count",
    "absent": "absent_count",
    "uncertain": "uncertain_count",
    "unverified": "unverified_count",
    "rejected": "rejected_count",
    "possible_duplicates": "possible_duplicate_count",
}


def run_evidence_snapshot(run: Run, *, attempt_count: int, latest_attempt: int | None) -> dict[str, Any]:
    """One run's evidence as the generated text saw it: ``ledger_version``, ``status``, ``attempt_count``,
    ``latest_attempt`` (its number) and ``counts`` (the ledger totals by name)."""
    return {
        "ledger_version": run.ledger_version,
        "status": run.status,
        "attempt_count": attempt_count,
        "latest_attempt": latest_attempt,
        "counts": {name: getattr(run, column) for name, column in COUNT_FIELDS.items()},
    }


def evidence_annotations(run_ref: str = "run_id") -> dict[str, Any]:
    """Annotations giving a row that points at a run its attempt count and latest attempt number (no extra query)."""
    per_run = Attempt.objects.filter(run=OuterRef(run_ref)).order_by().values("run")
    return {
        "ev_attempt_count": Subquery(per_run.annotate(n=Count("pk")).values("n"), output_field=IntegerField()),
        "ev_latest_attempt": Subquery(per_run.annotate(n=Max("number")).values("n"), output_field=IntegerField()),
    }


@dataclass(frozen=True)
class Staleness:
    """Whether generated text is stale, and what changed (one line per change, in words)."""

    changes: tuple[str, ...]

    @property
    def is_stale(self) -> bool:
        return bool(self.changes)


def evidence_changes(
    *, recorded: dict[str, Any], current: dict[str, dict[str, Any]], labels: dict[str, str]
) -> Staleness:
    """Compare the recorded snapshot with the current one, per run (``labels``: run key → words)."""
    changes: list[str] = []
    for key, now in current.items():
        then = recorded.get(key)
        label = labels.get(key, key)
        if then is None:
            changes.append(f"{label}: no evidence was recorded when the text was generated")
            continue
        if then.get("latest_attempt") != now["latest_attempt"]:
            changes.append(f"{label}: latest attempt #{then.get('latest_attempt')} → #{now['latest_attempt']}")
        elif then.get("attempt_count") != now["attempt_count"]:
            changes.append(f"{label}: attempts {then.get('attempt_count')} → {now['attempt_count']}")
        if then.get("status") != now["status"]:
            changes.append(f"{label}: status {then.get('status')} → {now['status']}")
        if then.get("ledger_version") != now["ledger_version"]:
            counts = [
                f"{name} {then.get('counts', {}).get(name, 0)} → {value}"
                for name, value in now["counts"].items()
                if then.get("counts", {}).get(name, 0) != value
            ]
            changes.append(
                f"{label}: ledger version {then.get('ledger_version')} → {now['ledger_version']}"
                + (f" ({', '.join(counts)})" if counts else "")
            )
    return Staleness(changes=tuple(changes))


def text_diff(old: str, new: str) -> list[tuple[str, str]]:
    """A line diff of two texts: ``(kind, line)`` with kind ``same``, ``removed`` or ``added``."""
    lines: list[tuple[str, str]] = []
    for line in difflib.ndiff(old.splitlines(), new.splitlines()):
        code, text = line[:2], line[2:]
        if code == "  ":
            lines.append(("same", text))
        elif code == "- ":
            lines.append(("removed", text))
        elif code == "+ ":
            lines.append(("added", text))
    return lines

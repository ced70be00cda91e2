"""A run's business state: what people see first, the technical status beside it (docs/architecture.md
"Vocabulary": Run business state).

``ok`` only when the status is ``succeeded``, no ledger item is unresolved, no possible duplicate,
duplicate trigger, re-fire or conflicting report is unexplained, and no handover of the run is open
before ``resolved``; otherwise ``attention`` when the status is ``succeeded``, else the technical
status. The reasons are codes: ``unresolved:N``, ``possible_duplicates:N``, ``duplicate_trigger``,
``refire``, ``conflicting_report``, ``handover:<status>``. One selector computes it everywhere a run's status
shows (the runs list, the run header, the handover, the API).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet, Subquery

from runs.attempts.models import Attempt, Run
from runs.checks.slot_review import unexplained_events
from runs.timeline.models import TimelineEvent

# Handover statuses before ``resolved`` (the handover app's names; runs never imports it).
HANDOVER_OPEN_BEFORE_RESOLVED = ("draft", "handed_over", "recovering", "verifying")


@dataclass(frozen=True)
class BusinessState:
    """``state`` (``ok``, ``attention`` or the technical status) and its ``reasons`` (codes, in a fixed order)."""

    state: str
    reasons: tuple[str, ...]


def business_state_annotations(run_ref: str = "pk") -> dict[str, Any]:
    """The annotations ``run_business_state_annotate`` adds, for a queryset whose run is ``run_ref``.

    ``run_ref`` is the outer query's path to the run's id: ``"pk"`` on runs, ``"run_id"`` on rows
    that point at a run (a handover's links), so a page that lists such rows needs no extra query.
    """
    run = OuterRef(run_ref)
    return {
        "bs_duplicate_trigger": Exists(
            Attempt.objects.filter(run=run, is_duplicate_trigger=True, duplicate_explained_at__isnull=True)
        ),
        "bs_refire": Exists(
            unexplained_events(
                run=run,
                kind=TimelineEvent.Kind.REFIRE,
                explained_kind=TimelineEvent.Kind.REFIRE_EXPLAINED,
                data__same_attempt=True,
            )
        ),
        "bs_conflicting_report": Exists(
            unexplained_events(
                run=run,
                kind=TimelineEvent.Kind.CONFLICTING_REPORT,
                explained_kind=TimelineEvent.Kind.CONFLICTING_REPORT_EXPLAINED,
            )
        ),
        "bs_handover_status": Subquery(
            Run.objects.filter(pk=run, handover_links__is_open=True).values("handover_links__handover__status")[:1]
        ),
    }


BUSINESS_STATE_FACTS = ("bs_duplicate_trigger", "bs_refire", "bs_conflicting_report", "bs_handover_status")


def run_business_state_annotate(runs: QuerySet[Run]) -> QuerySet[Run]:
    """``runs`` with the facts the business state needs beyond the run's own columns, as annotations.

    ``bs_duplicate_trigger`` (an unexplained duplicate-trigger attempt), ``bs_refire`` and
    ``bs_conflicting_report`` (a re-fire or a conflicting report no person explained yet) and
    ``bs_handover_status`` (the status of the run's open handover, if any). Correlated subqueries:
    evaluated for the rows fetched only, no extra query.
    """
    return runs.annotate(**business_state_annotations())


def run_business_state(run: Run) -> BusinessState:
    """The business state of ``run``; reads the annotations of ``run_business_state_annotate`` (one query if absent)."""
    if not hasattr(run, "bs_duplicate_trigger"):
        annotated = run_business_state_annotate(Run.objects.filter(pk=run.pk)).values(*BUSINESS_STATE_FACTS)
        for name, value in (annotated.first() or {}).items():
            setattr(run, name, value)
    reasons: list[str] = []
    if run.unresolved_count:
        reasons.append(f"unresolved:{run.unresolved_count}")
    if run.possible_duplicate_count:
        reasons.append(f"possible_duplicates:{run.possible_duplicate_count}")
    if getattr(run, "bs_duplicate_trigger", False):
        reasons.append("duplicate_trigger")
    if getattr(run, "bs_refire", False):
        reasons.append("refire")
    if getattr(run, "bs_conflicting_report", False):
        reasons.append("conflicting_report")
    handover_status = getattr(run, "bs_handover_status", None)
    if handover_status in HANDOVER_OPEN_BEFORE_RESOLVED:
        reasons.append(f"handover:{handover_status}")
    if run.status != Run.Status.SUCCEEDED:
        return BusinessState(state=run.status, reasons=tuple(reasons))
    return BusinessState(state="attention" if reasons else "ok", reasons=tuple(reasons))


REASON_WORDS = {
    "unresolved": "{n} ledger items unresolved",
    "possible_duplicates": "{n} possible duplicates not explained",
    "duplicate_trigger": "a duplicate trigger not explained",
    "refire": "a re-fire not explained",
    "conflicting_report": "a conflicting report not explained",
    "handover": "handover {n}",
}


def business_reason_words(reason: str) -> str:
    """A reason code in words: ``unresolved:6`` → "6 ledger items unresolved"."""
    code, _, value = reason.partition(":")
    return REASON_WORDS.get(code, code).format(n=value.replace("_", " "))

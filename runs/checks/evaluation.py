"""Evaluation: the facts about one check and the verdict, a pure function of the facts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from runs.checks.events import utc_text
from runs.checks.models import NextRunCheck


@dataclass(frozen=True)
class CheckFacts:
    """What is known about one check at ``now`` (all datetimes aware, UTC).

    ``success_*``: the earliest *qualifying* success of the run for the expected fire time (an
    attempt triggered by the schedule, reported through a key bound to the target's tenant).
    ``has_ledger``: the next run has work items, so duplicates can be checked; then
    ``possible_duplicate_count`` is its total. ``stale_retry_queued``: an attempt of the recovered
    run is still queued. ``is_confirmed``: a person confirmed duplicates outside a ledger.
    ``next_run_duplicate_trigger`` / ``recovered_run_duplicate_trigger``: the number of that run's
    first duplicate trigger no person has explained yet (None: none).
    """

    now: datetime
    expected_at: datetime
    deadline_at: datetime
    next_run_id: int | None = None
    success_attempt_id: int | None = None
    success_at: datetime | None = None
    has_ledger: bool = False
    possible_duplicate_count: int = 0
    stale_retry_queued: bool = False
    is_confirmed: bool = False
    next_run_duplicate_trigger: int | None = None
    recovered_run_duplicate_trigger: int | None = None


@dataclass(frozen=True)
class CheckVerdict:
    """What to do with a check: ``wait``, ``pass``, ``fail`` or ``await_confirmation``.

    ``reasons`` lists every failure found, the first being ``failure_reason``. Evidence is either
    in time (``evidence_*``) or late (``late_success_*``), never both.
    """

    action: Literal["wait", "pass", "fail", "await_confirmation"]
    summary: str
    failure_reason: str = ""
    reasons: tuple[str, ...] = ()
    duplicate_check: str = NextRunCheck.DuplicateCheck.NOT_YET
    evidence_attempt_id: int | None = None
    evidence_at: datetime | None = None
    late_success_attempt_id: int | None = None
    late_success_at: datetime | None = None

    def values(self, facts: CheckFacts) -> dict[str, Any]:
        """The evidence columns this verdict writes."""
        values: dict[str, Any] = {
            "next_run_id": facts.next_run_id,
            "duplicate_check": self.duplicate_check,
            "possible_duplicate_count": facts.possible_duplicate_count if facts.has_ledger else 0,
            "result_summary": self.summary,
        }
        if self.evidence_attempt_id is not None:
            values.update(evidence_attempt_id=self.evidence_attempt_id, evidence_at=self.evidence_at)
        if self.late_success_attempt_id is not None:
            values.update(late_success_attempt_id=self.late_success_attempt_id, late_success_at=self.late_success_at)
        if self.action == "fail":
            values["failure_reason"] = self.failure_reason
        return values


_FAIL = NextRunCheck.FailureReason


def next_run_check_evaluate(facts: CheckFacts) -> CheckVerdict:
    """Decide a check from its facts (pure; no clock, no database).

    - A qualifying success *before* the deadline is in time; one at or after it is late (at the
      deadline itself the run is overdue, as ``schedule.is_overdue`` says).
    - Before the deadline and without an in-time success: ``wait``.
    - Failures, in this order: the next run's ledger shows possible duplicates
      (``duplicate_reemitted``); an old retry of the recovered run is still queued
      (``stale_retry_queued``); the deadline passed without an in-time success
      (``deadline_passed``; a late success is kept as evidence, the check stays failed).
    - An in-time success with an unexplained duplicate trigger on the next run or the recovered
      run does not pass: ``wait``, the summary naming the attempt, until a person explains it
      (docs/slots.md, "Duplicate triggers").
    - Otherwise an in-time success passes when the next run has a ledger (duplicates checked) or a
      person confirmed; without both it is ``await_confirmation``.
    """
    in_time = facts.success_at is not None and facts.success_at < facts.deadline_at
    deadline_passed = facts.now >= facts.deadline_at
    if not in_time and not deadline_passed:
        return CheckVerdict(action="wait", summary="Waiting for the next run.")
    duplicate_check = NextRunCheck.DuplicateCheck.CHECKED if facts.has_ledger else NextRunCheck.DuplicateCheck.NO_LEDGER
    if facts.next_run_id is None:
        duplicate_check = NextRunCheck.DuplicateCheck.NOT_YET
    reasons: list[str] = []
    texts: list[str] = []
    if facts.has_ledger and facts.possible_duplicate_count > 0:
        reasons.append(_FAIL.DUPLICATE_REEMITTED)
        texts.append(
            f"the next run's ledger shows {facts.possible_duplicate_count} possible duplicate(s): "
            "it may have re-emitted recovered records"
        )
    if facts.stale_retry_queued:
        reasons.append(_FAIL.STALE_RETRY_QUEUED)
        texts.append("an old retry of the failed run is still queued and may run again")
    evidence: dict[str, Any] = {}
    if in_time:
        evidence = {"evidence_attempt_id": facts.success_attempt_id, "evidence_at": facts.success_at}
    else:
        reasons.append(_FAIL.DEADLINE_PASSED)
        if facts.success_attempt_id is not None:
            evidence = {"late_success_attempt_id": facts.success_attempt_id, "late_success_at": facts.success_at}
            texts.append(
                f"the next run succeeded only at {utc_text(facts.success_at)}, after the deadline "
                f"{utc_text(facts.deadline_at)} (kept as evidence)"
            )
        elif facts.next_run_id is None:
            texts.append(
                f"no run was reported for the expected fire time by the deadline {utc_text(facts.deadline_at)}"
            )
        else:
            texts.append(
                f"the next run has no qualifying success by the deadline {utc_text(facts.deadline_at)} "
                "(a scheduled attempt reported through a key bound to the tenant)"
            )
    if reasons:
        summary = "Failed: " + "; ".join(texts) + "."
        return CheckVerdict(
            action="fail",
            summary=summary,
            failure_reason=reasons[0],
            reasons=tuple(reasons),
            duplicate_check=duplicate_check,
            **evidence,
        )
    success = (
        f"the next run succeeded at {utc_text(facts.success_at)}, before the deadline {utc_text(facts.deadline_at)}"
    )
    held = [
        f"attempt {number} of the {which} run is a duplicate trigger no person has explained"
        for which, number in (
            ("next", facts.next_run_duplicate_trigger),
            ("recovered", facts.recovered_run_duplicate_trigger),
        )
        if number is not None
    ]
    if held:
        return CheckVerdict(
            action="wait",
            summary=f"Not passing yet: {success}, but " + " and ".join(held) + " (explain it on the run page).",
            duplicate_check=duplicate_check,
        )
    if facts.has_ledger:
        return CheckVerdict(
            action="pass",
            summary=f"Passed: {success}; its ledger shows no possible duplicates.",
            duplicate_check=duplicate_check,
            **evidence,
        )
    if facts.is_confirmed:
        return CheckVerdict(
            action="pass",
            summary=f"Passed: {success}; no ledger, duplicates confirmed checked by a person.",
            duplicate_check=duplicate_check,
            **evidence,
        )
    return CheckVerdict(
        action="await_confirmation",
        summary=f"Awaiting confirmation: {success}, but it has no ledger, so duplicates could not be checked.",
        duplicate_check=duplicate_check,
        **evidence,
    )

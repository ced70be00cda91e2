"""The replay rules: preconditions checked when a request is made, at approval and at dispatch.

Each check has a stable ``code``, names the rule it enforces (numbered as in
docs/architecture.md), and says in words what
passed or failed. A refusal (``ReplayRefused``, HTTP 409) carries every failed check in ``errors``
(code -> message), so the API, the pages and the timeline all show why.

| code | rule |
|---|---|
| ``scope_not_empty`` | rule 2: a replay covers confirmed work, so at least one item |
| ``scope_outcome`` | rule 2: only ``absent`` items (``rejected`` with the fix recorded; a batch never committed) |
| ``scope_verified`` | rule 2: no item in scope ``uncertain`` or ``unverified`` (verify first) |
| ``no_active_attempt`` | rule 3: no attempt of the run ``queued`` or ``running`` |
| ``no_unexplained_duplicate_trigger`` | rule 3: no unexplained duplicate trigger (blocks approval, dispatch) |
| ``job_not_paused`` | rule 3: the job is not paused |
| ``target_not_paused`` | rule 3: the run's target (its tenant's part of the job) is not paused |
| ``repeat_safety`` | rule 3: repeat safety not ``unknown`` without the technical approval's reasoned acceptance |
| ``no_overlapping_replay`` | no open replay already covers any of the same items |
| ``eligible_approvers`` | rule 4: someone other than the requester can give each approval |
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from django.db.models import QuerySet

from approvals.replays.models import Approval, ReplayRequest
from approvals.replays.selectors import (
    ScopeFacts,
    run_active_attempts,
    run_completed_count,
    scope_facts,
)
from handover.core.errors import DomainError
from handover.core.people import Person
from runs.attempts.models import Run
from runs.attempts.selectors import run_duplicate_triggers_unexplained
from runs.catalog.models import JobTarget, SideEffect
from runs.catalog.selectors import job_repeat_safety
from runs.ledger.models import WorkItem
from runs.ledger.selectors import run_ledger_disclosures, run_possible_duplicates_unexplained
from runs.permissions import approvers_eligible

RULE_NAMES = {
    "scope_not_empty": "rule 2 (scope)",
    "scope_outcome": "rule 2 (scope)",
    "scope_verified": "rule 2 (verify first)",
    "no_active_attempt": "rule 3 (no attempt queued or running)",
    "no_unexplained_duplicate_trigger": "rule 3 (no unexplained duplicate trigger)",
    "no_unexplained_possible_duplicate": "rule 6 (no possible duplicate unexplained)",
    "ledger_disclosures_current": "the approvers see the ledger's weakenings",
    "job_not_paused": "rule 3 (job not paused)",
    "target_not_paused": "rule 3 (target not paused)",
    "repeat_safety": "rule 3 (repeat safety)",
    "no_overlapping_replay": "one open replay per item",
    "eligible_approvers": "rule 4 (two eligible approvers)",
}
WHOLE_BATCH_CLASSES = (Run.FailureClass.NEVER_STARTED, Run.FailureClass.FAILED_IN_PREPARATION)
STAGES = ("create", "approve", "dispatch")


class ReplayRefused(DomainError):
    """A replay rule refuses the request, the approval or the dispatch; ``errors`` maps check code -> reason."""

    status = 409
    type = "replay-refused"
    title = "Refused by the replay rules"


class ApprovalNotAllowed(DomainError):
    """The person may see the request but may not give (or refuse) this approval (rule 4)."""

    status = 403
    type = "approval-not-allowed"
    title = "Not allowed to decide on this replay"


class ReauthenticationRequired(DomainError):
    """The approver has not re-entered their password within the last five minutes."""

    status = 403
    type = "reauthentication-required"
    title = "Re-enter your password"


@dataclass(frozen=True)
class CheckResult:
    """One precondition: ``ok`` or not, and whether a failure blocks at this stage (``blocking``)."""

    code: str
    ok: bool
    detail: str
    blocking: bool = True

    @property
    def rule(self) -> str:
        return RULE_NAMES[self.code]

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "rule": self.rule}


def refusal(checks: Iterable[CheckResult]) -> ReplayRefused | None:
    """The error naming every failed blocking check, or None when all pass."""
    failed = [c for c in checks if not c.ok and c.blocking]
    if not failed:
        return None
    return ReplayRefused(
        " ".join(f"Refused by {c.rule}: {c.detail}" for c in failed),
        errors={c.code: [f"{c.rule}: {c.detail}"] for c in failed},
    )


def scope_fingerprint(
    *,
    run: Run,
    kind: str,
    fix_reference: str,
    record_ids: Iterable[str],
    disclosures: Iterable[dict[str, str]] = (),
) -> str:
    """Hex SHA-256 of the exact scope: run, kind, fix reference and the sorted record ids (one per line).

    ``disclosures`` (``run_ledger_disclosures``: items weakened from completed, duplicates
    explained) are bound too, after the ids, so an approval covers what the approver was shown;
    without any the fingerprint is the scope's alone.
    """
    digest = hashlib.sha256()
    digest.update(f"{run.public_id}\n{kind}\n{fix_reference.strip()}\n".encode())
    for record_id in sorted(record_ids):
        digest.update(record_id.encode("utf-8", "surrogatepass") + b"\n")
    for entry in disclosures:
        line = "\x1f".join(
            entry.get(k, "") for k in ("kind", "record_id", "from", "to", "by", "at", "why", "reference")
        )
        digest.update(b"disclosed\x1e" + line.encode("utf-8", "surrogatepass") + b"\n")
    return digest.hexdigest()


def _ids(samples: list[str], total: int) -> str:
    shown = ", ".join(samples)
    return shown + (f" and {total - len(samples):,} more" if total > len(samples) else "")


def side_effects(*, run: Run) -> tuple[list[SideEffect], str]:
    """The job's side effects (what a replay repeats) and its repeat safety (the least safe one's)."""
    effects = list(SideEffect.objects.filter(job_id=run.job_id).order_by("id"))
    return effects, job_repeat_safety(effects)


def _target_not_paused(run: Run) -> CheckResult:
    """Rule 3 for the run's target (its tenant's part of the job; runs/catalog/pause.py): not paused."""
    target = (
        run.target
        if run.target_id is not None
        else JobTarget.objects.filter(job_id=run.job_id, tenant_id=run.tenant_id, environment=run.environment).first()
    )
    where = f"{run.job.key} for {run.tenant.slug} ({run.environment})"
    if target is not None and target.paused_at is not None:
        return CheckResult("target_not_paused", False, f"the target {where} is paused: {target.pause_reason}")
    return CheckResult("target_not_paused", True, f"the target {where} is not paused")


def evaluate(
    *,
    run: Run,
    kind: str,
    fix_reference: str,
    items: QuerySet[WorkItem],
    stage: str,
    request: ReplayRequest | None = None,
    requester: Person | None = None,
    technical_approval: Approval | None = None,
    repeat_safety: str | None = None,
) -> list[CheckResult]:
    """Check every precondition of a replay of ``items`` (the scope) of ``run`` at ``stage``.

    ``stage``: ``create`` (repeat safety ``unknown`` and an unexplained duplicate trigger are shown
    but do not block yet: the technical approval may accept the one, a person may explain the
    other; approvers are listed), ``approve`` (everything but repeat safety, which
    the technical approval itself must accept) or ``dispatch`` (everything, repeat safety included).
    ``request``: the request being checked (its own items do not count as overlapping).
    ``technical_approval``: the live technical approval, if any (its acceptance counts for
    ``repeat_safety``). Reads the ledger and attempts; writes nothing. Returns the checks in order
    (the table at the top of this module).
    """
    assert stage in STAGES
    run_facts: Mapping[str, Any] = Run.objects.filter(pk=run.pk).values("failure_class").first() or {}
    facts = scope_facts(items=items, exclude_request=request)
    checks = [
        CheckResult(
            "scope_not_empty",
            facts.item_count > 0,
            f"{facts.item_count:,} item(s) in scope" if facts.item_count else "the scope has no item",
        ),
        _scope_outcome(
            run=run,
            kind=kind,
            fix_reference=fix_reference,
            facts=facts,
            failure_class=run_facts.get("failure_class") or "",
        ),
        _scope_verified(facts),
        _no_active_attempt(run),
        _no_unexplained_possible_duplicate(run),
    ]
    if request is not None and stage != "create":
        checks.append(_ledger_disclosures_current(run=run, request=request))
    checks.append(_no_unexplained_duplicate_trigger(run=run, stage=stage))
    checks.append(_job_not_paused(run))
    checks.append(_target_not_paused(run))
    checks.append(
        _repeat_safety(run=run, stage=stage, technical_approval=technical_approval, repeat_safety=repeat_safety)
    )
    checks.append(
        CheckResult(
            "no_overlapping_replay",
            not facts.overlapping,
            "; ".join(f"open replay {rid} already covers {', '.join(ids)}" for rid, ids in facts.overlapping)
            if facts.overlapping
            else "no open replay covers these items",
        )
    )
    if stage == "create":
        checks.append(_eligible_approvers(run=run, requester=requester))
    return checks


_UNVERIFIED = {WorkItem.Outcome.UNCERTAIN, WorkItem.Outcome.UNVERIFIED}


def _scope_outcome(*, run: Run, kind: str, fix_reference: str, facts: ScopeFacts, failure_class: str) -> CheckResult:
    """Rule 2: only the outcome the kind replays (absent; rejected with the fix recorded; a whole
    batch only when a person confirmed it never committed and nothing of it is in the destination)."""
    wanted = {
        ReplayRequest.Kind.ABSENT_ITEMS: WorkItem.Outcome.ABSENT,
        ReplayRequest.Kind.REJECTED_FIXED: WorkItem.Outcome.REJECTED,
        ReplayRequest.Kind.WHOLE_BATCH: WorkItem.Outcome.ABSENT,
    }[ReplayRequest.Kind(kind)]
    wrong = {o: n for o, n in facts.outcome_counts.items() if o != wanted and o not in _UNVERIFIED}
    problems: list[str] = []
    if wrong:
        problems.append(
            "; ".join(
                f"{n:,} item(s) are {o}, not {wanted} ({_ids(facts.outcome_samples[o], n)})"
                for o, n in sorted(wrong.items())
            )
        )
    if kind == ReplayRequest.Kind.REJECTED_FIXED and not fix_reference.strip():
        problems.append("a replay of rejected items needs the reference where the fix is recorded")
    if kind == ReplayRequest.Kind.WHOLE_BATCH:
        if failure_class not in WHOLE_BATCH_CLASSES:
            problems.append(
                "a whole batch is replayed only when a person confirmed the run never committed "
                f"(failure class never started or failed in preparation; confirmed: {failure_class or 'none'})"
            )
        completed = run_completed_count(run=run)
        if completed:
            problems.append(f"{completed:,} item(s) of the run are in the destination: the batch did commit")
    return CheckResult(
        "scope_outcome",
        not problems,
        "; ".join(problems)
        if problems
        else f"every item in scope is {wanted}"
        + (f" (fix: {fix_reference.strip()})" if kind == ReplayRequest.Kind.REJECTED_FIXED else ""),
    )


def _scope_verified(facts: ScopeFacts) -> CheckResult:
    """Rule 2: no item in scope uncertain or unverified (verify first)."""
    pending = {o: n for o, n in facts.outcome_counts.items() if o in _UNVERIFIED}
    return CheckResult(
        "scope_verified",
        not pending,
        "; ".join(
            f"{n:,} item(s) are {o} ({_ids(facts.outcome_samples[o], n)}): verify them first"
            for o, n in sorted(pending.items())
        )
        if pending
        else "no item in scope is uncertain or unverified",
    )


def _no_active_attempt(run: Run) -> CheckResult:
    """Rule 3: no attempt of the run queued or running (an automatic retry may be on its way)."""
    active = run_active_attempts(run=run)
    return CheckResult(
        "no_active_attempt",
        not active,
        "; ".join(
            f"attempt {a.number} ({a.execution_id}, {a.get_trigger_display().lower()}) is {a.status}" for a in active
        )
        + " — an automatic retry may be on its way"
        if active
        else "no attempt of the run is queued or running",
    )


def _no_unexplained_possible_duplicate(run: Run) -> CheckResult:
    """Every possible duplicate of the run explained on its ledger first."""
    unexplained = run_possible_duplicates_unexplained(run=run, limit=6)
    unexplained_count = max(run.possible_duplicate_count, len(unexplained))
    return CheckResult(
        "no_unexplained_possible_duplicate",
        not unexplained,
        f"possible duplicates not explained yet ({_ids(unexplained[:5], unexplained_count)})"
        " — explain each on the run's ledger (reason and evidence reference) first"
        if unexplained
        else "no possible duplicate of the run is unexplained",
    )


def _ledger_disclosures_current(*, run: Run, request: ReplayRequest) -> CheckResult:
    """The approvers see every weakened item and explained duplicate: unchanged since the request."""
    changed = run_ledger_disclosures(run=run) != list(request.ledger_disclosures or [])
    return CheckResult(
        "ledger_disclosures_current",
        not changed,
        "the ledger changed since the request (items weakened from completed or duplicates explained "
        "since): change the scope so the approvers see it"
        if changed
        else "the approvers see every weakened item and explained duplicate of the run",
    )


def _no_unexplained_duplicate_trigger(*, run: Run, stage: str) -> CheckResult:
    """Rule 3: no unexplained duplicate trigger (shown at ``create``, blocking afterwards)."""
    duplicates = run_duplicate_triggers_unexplained(run=run)
    return CheckResult(
        "no_unexplained_duplicate_trigger",
        not duplicates,
        "; ".join(f"attempt {a.number} ({a.execution_id}) is a duplicate trigger" for a in duplicates)
        + " not explained yet — a person explains it on the run page first"
        if duplicates
        else "no attempt of the run is an unexplained duplicate trigger",
        blocking=stage != "create",
    )


def _job_not_paused(run: Run) -> CheckResult:
    """Rule 3: the job is not paused (runs/catalog/pause.py)."""
    job = run.job
    paused = job.paused_at is not None
    return CheckResult(
        "job_not_paused",
        not paused,
        f"the job {job.key} is paused: {job.pause_reason}" if paused else f"the job {job.key} is not paused",
    )


def _repeat_safety(
    *, run: Run, stage: str, technical_approval: Approval | None, repeat_safety: str | None
) -> CheckResult:
    """Rule 3: repeat safety not ``unknown`` without the technical approval's reasoned acceptance
    (blocking only at ``dispatch``: the technical approval itself accepts it)."""
    if repeat_safety is None:
        repeat_safety = side_effects(run=run)[1]
    if repeat_safety != "unknown":
        return CheckResult("repeat_safety", True, f"the job's repeat safety is {repeat_safety}")
    if technical_approval is not None and technical_approval.accepts_unknown_repeat_safety:
        return CheckResult(
            "repeat_safety",
            True,
            f"repeat safety is unknown; accepted by {technical_approval.actor.get_username()}: "
            f"{technical_approval.acceptance_reason}",
        )
    return CheckResult(
        "repeat_safety",
        False,
        "the job's repeat safety is unknown: the technical approval must accept it explicitly, with a reason",
        blocking=stage == "dispatch",
    )


def _eligible_approvers(*, run: Run, requester: Person | None) -> CheckResult:
    """Rule 4: someone other than the requester can give each approval."""
    missing = [
        approval_kind.value
        for approval_kind in Approval.Kind
        if not approvers_eligible(run=run, kind=approval_kind, exclude=requester).exists()
    ]
    return CheckResult(
        "eligible_approvers",
        not missing,
        "nobody other than the requester can give the "
        + " or the ".join(missing)
        + " approval (grant the role on this "
        + " and ".join("tenant" if m == "business" else "job" for m in missing)
        + ")"
        if missing
        else "both approvals can be given by someone other than the requester",
    )


__all__ = [
    "ApprovalNotAllowed",
    "CheckResult",
    "ReauthenticationRequired",
    "ReplayRefused",
    "evaluate",
    "refusal",
    "scope_fingerprint",
    "side_effects",
]

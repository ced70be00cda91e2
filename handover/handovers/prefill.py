"""Pre-filling a handover from evidence: pure functions of ``JobEvidence`` and ``RunEvidence``.

Rules (each one a short, plain line support can read at 3 a.m.):

- **What definitely happened**: the attempts as reported (start, end, status, error), notable
  timeline events, ledger facts confirmed in the destination (completed, absent, rejected, skipped)
  and a confirmed failure class.
- **What may have happened**: uncertain and unverified items, possible duplicates, timed-out or
  still active attempts, what the job runner *claimed* (a report is not evidence), a suggested but
  unconfirmed failure class, and "no ledger loaded" when nothing was reconciled.
- **What is safe to do next**: one proposal from the job's repeat safety and the runs' state, first
  rule that applies: an attempt queued or running → wait; repeat safety unknown → escalate, do not
  rerun; possible duplicates → explain them first; uncertain or unverified items → verify first; no
  ledger → reconcile first; absent items → a scoped replay (worded by repeat safety); nothing
  missing → verify the next run. A paused job is said first.

Every text produced here is stored as *generated* until a person confirms or edits it.
"""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime
from typing import Any

from handover.handovers.evidence import JobEvidence, RunEvidence
from handover.handovers.models import Handover
from runs.attempts.models import Attempt, Run
from runs.catalog.models import SideEffect

S = Handover.Section
STATUS_WORDS = {
    "queued": "is queued",
    "running": "is running",
    "succeeded": "succeeded",
    "failed": "failed",
    "timed_out": "timed out",
    "cancelled": "was cancelled",
    "abandoned": "was abandoned",
}
SAFETY_WORDS = dict(SideEffect.RepeatSafety.choices)
FAILURE_CLASS_WORDS = dict(Run.FailureClass.choices)
GENERATED_SECTIONS = (
    S.EXPECTED_OUTPUT,
    S.DEFINITELY_HAPPENED,
    S.MAY_HAVE_HAPPENED,
    S.NEXT_ACTION,
    S.AFFECTED,
    S.RECENT_CHANGES,
)


def _at(value: datetime | None) -> str:
    return f"{value.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z" if value else "—"


def _local(value: datetime, zone: str) -> str:
    local = value.astimezone(zoneinfo.ZoneInfo(zone))
    return f"{local:%Y-%m-%d %H:%M} {local.tzname()}"


def _ids(sample: list[str], total: int) -> str:
    """``INV-1, INV-2 and 3 more`` from a sample of record ids and the total."""
    if not sample:
        return ""
    more = total - len(sample)
    return " (" + ", ".join(sample) + (f" and {more:,} more" if more > 0 else "") + ")"


def _run_label(run: Run) -> str:
    return f"{run.tenant.slug} / {run.environment}"


def _blocks(runs: list[RunEvidence], lines_for: object) -> str:
    """One block per run, headed by tenant / environment when there are several runs."""
    blocks = []
    for evidence in runs:
        lines = lines_for(evidence)  # type: ignore[operator]
        if len(runs) > 1:
            blocks.append(f"{_run_label(evidence.run)}:\n" + "\n".join(f"  {line}" for line in lines))
        else:
            blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def handover_title(*, job: JobEvidence, runs: list[RunEvidence]) -> str:
    """``nightly-invoice-export · acme-foods · prod · window 2026-11-27`` (the window's date in the job's zone)."""
    first = runs[0].run
    tenants = ", ".join(dict.fromkeys(r.run.tenant.slug for r in runs))
    environments = ", ".join(dict.fromkeys(r.run.environment for r in runs))
    start = first.window_start.astimezone(zoneinfo.ZoneInfo(job.job.timezone))
    return f"{job.job.key} · {tenants} · {environments} · window {start:%Y-%m-%d}"[:300]


def prefill_expected_output(*, job: JobEvidence, runs: list[RunEvidence]) -> str:
    """What a successful run produces, how to verify it, and the job's side effects."""
    lines = [job.job.expected_output.strip() or "Not described for this job: ask the technical owner."]
    if job.job.verification.strip():
        lines.append(f"How to verify: {job.job.verification.strip()}")
    else:
        lines.append("How to verify: not described for this job.")
    for evidence in runs:
        run = evidence.run
        lines.append(
            f"Window{' for ' + _run_label(run) if len(runs) > 1 else ''}: "
            f"{_local(run.window_start, job.job.timezone)} → {_local(run.window_end, job.job.timezone)} (half-open)."
        )
    if job.side_effects:
        lines.append("Side effects:")
        lines.extend(
            f"- {effect.description} ({SAFETY_WORDS.get(effect.repeat_safety, effect.repeat_safety).lower()})"
            for effect in job.side_effects
        )
    else:
        lines.append("Side effects: none recorded, so the job's repeat safety is unknown.")
    return "\n".join(lines)


def _attempt_line(attempt: Attempt) -> str:
    words = STATUS_WORDS.get(attempt.status, attempt.status)
    text = f"Attempt {attempt.number} ({attempt.get_trigger_display().lower()}, execution {attempt.execution_id})"
    if attempt.status in ("queued", "running"):
        since = attempt.started_at or attempt.scheduled_at
        return f"{text} {words}" + (f" since {_at(since)}." if since else ".")
    started = f"started {_at(attempt.started_at)}" if attempt.started_at else "start not reported"
    ended = f" at {_at(attempt.ended_at)}" if attempt.ended_at else ""
    error = f": {attempt.error_summary[:200]}" if attempt.error_summary else ""
    if attempt.status == "abandoned" and attempt.abandon_reason:
        error = f": {attempt.abandon_reason[:200]}"
    return f"{text} {started} and {words}{ended}{error}."


def _definitely_lines(evidence: RunEvidence) -> list[str]:
    run, samples = evidence.run, evidence.samples
    lines = [f"Scheduled for {_at(run.scheduled_for)}; run status {run.status}."]
    lines.extend(_attempt_line(a) for a in evidence.attempts)
    if not evidence.attempts:
        lines.append("No attempt was reported.")
    lines.extend(f"{_at(e.occurred_at)}: {e.summary}" for e in evidence.notable_events)
    if evidence.has_ledger:
        lines.append(
            f"Confirmed in the destination: {run.completed_count:,} of {run.eligible_count:,} eligible records"
            + _ids(samples.get("completed", []), run.completed_count)
            + "."
        )
        if run.absent_count:
            lines.append(
                f"Confirmed absent from the destination: {run.absent_count:,}"
                + _ids(samples.get("absent", []), run.absent_count)
                + "."
            )
        if run.rejected_count:
            lines.append(
                f"Rejected by the destination: {run.rejected_count:,}"
                + _ids(samples.get("rejected", []), run.rejected_count)
                + "."
            )
        if run.skipped_count:
            lines.append(f"Skipped by rule (not eligible): {run.skipped_count:,}.")
    if run.failure_class:
        who = run.failure_class_confirmed_by.get_username() if run.failure_class_confirmed_by else "a person"
        lines.append(
            f"Failure class: {FAILURE_CLASS_WORDS.get(run.failure_class, run.failure_class)} (confirmed by {who})."
        )
    return lines


def prefill_definitely_happened(*, job: JobEvidence, runs: list[RunEvidence]) -> str:
    """Facts: attempts as reported, notable events, confirmed ledger outcomes, a confirmed failure class."""
    text = _blocks(runs, _definitely_lines)
    if job.job.paused_at:
        who = job.job.paused_by.get_username() if job.job.paused_by else "someone"
        text += f"\n\nThe job is paused since {_at(job.job.paused_at)} by {who}: {job.job.pause_reason}"
    return text


def _may_have_lines(evidence: RunEvidence) -> list[str]:
    run, samples = evidence.run, evidence.samples
    lines = []
    if evidence.has_ledger:
        if run.uncertain_count:
            lines.append(
                f"Uncertain — may have reached the destination (a timeout is not a 'no'): {run.uncertain_count:,}"
                + _ids(samples.get("uncertain", []), run.uncertain_count)
                + "."
            )
        if run.unverified_count:
            lines.append(
                f"Not verified yet: {run.unverified_count:,}"
                + _ids(samples.get("unverified", []), run.unverified_count)
                + "."
            )
    else:
        lines.append("No work ledger loaded: which records reached the destination is not known.")
    if run.possible_duplicate_count:
        lines.append(
            f"Possible duplicates in the destination: {run.possible_duplicate_count:,}"
            + _ids(samples.get("possible_duplicate", []), run.possible_duplicate_count)
            + "."
        )
    attempted, claimed, failed = evidence.runner_claims()
    if attempted:
        lines.append(
            f"The job runner reported {attempted:,} attempted, {claimed:,} claimed completed, {failed:,} failed"
            " — a report, not evidence of the destination."
        )
    for attempt in evidence.attempts:
        if attempt.status == Attempt.Status.TIMED_OUT:
            lines.append(f"Attempt {attempt.number} timed out: it may have done part or all of its work.")
    for attempt in evidence.active_attempts:
        lines.append(f"Attempt {attempt.number} {STATUS_WORDS[attempt.status]}: it may still change the destination.")
    if run.failure_class_suggested and not run.failure_class:
        word = FAILURE_CLASS_WORDS.get(run.failure_class_suggested, run.failure_class_suggested)
        lines.append(f"Suggested failure class (not confirmed): {word}.")
    return lines or ["Nothing uncertain is known."]


def prefill_may_have_happened(*, job: JobEvidence, runs: list[RunEvidence]) -> str:
    """Unknowns: uncertain and unverified items, duplicates, runner claims, active or timed-out attempts."""
    return _blocks(runs, _may_have_lines)


def _scope(runs: list[RunEvidence], count: int, predicate: object) -> str:
    if len(runs) == 1:
        return ""
    names = [_run_label(r.run) for r in runs if predicate(r)]  # type: ignore[operator]
    return f" ({', '.join(names)})" if names else ""


def prefill_next_action(*, job: JobEvidence, runs: list[RunEvidence]) -> str:
    """Propose the permitted next action: the first rule that applies (see the module docstring)."""
    lines = []
    the_job = job.job
    if the_job.paused_at:
        lines.append(f"The job is paused ({the_job.pause_reason}): nothing is replayed or rerun until it is resumed.")
    active = [(r, a) for r in runs for a in r.active_attempts]
    duplicates = sum(r.run.possible_duplicate_count for r in runs)
    unsettled = sum(r.run.uncertain_count + r.run.unverified_count for r in runs if r.has_ledger)
    absent = sum(r.run.absent_count for r in runs if r.has_ledger)
    unreconciled = [r for r in runs if not r.has_ledger and r.run.status != Run.Status.SUCCEEDED]
    safety = job.repeat_safety
    if active:
        evidence, attempt = active[0]
        lines.append(
            f"Wait: an automatic retry is on its way (attempt {attempt.number} {STATUS_WORDS[attempt.status]}"
            + (f" for {_run_label(evidence.run)}" if len(runs) > 1 else "")
            + "). Do not start another run; look again when it reports."
        )
    elif safety == SideEffect.RepeatSafety.UNKNOWN:
        why = "no side effect is recorded for the job" if not job.side_effects else "a side effect is unclassified"
        lines.append(f"Escalate to the technical owner; do not rerun. The job's repeat safety is unknown ({why}).")
    elif duplicates:
        lines.append(
            f"Explain the {duplicates:,} possible duplicate(s) first"
            + _scope(runs, duplicates, lambda r: r.run.possible_duplicate_count)
            + ": check them in the destination and record each as a residual exception with its owner. Do not rerun."
        )
    elif unsettled:
        lines.append(
            f"Verify first: {unsettled:,} record(s) are uncertain or unverified"
            + _scope(runs, unsettled, lambda r: r.run.uncertain_count + r.run.unverified_count)
            + ". Look each up in the destination before any replay: a replay cannot be approved while any is"
            " uncertain or unverified."
        )
    elif unreconciled:
        lines.append(
            "Reconcile first: load the eligible population and the destination export"
            + _scope(runs, len(unreconciled), lambda r: r in unreconciled)
            + " to see what is missing. Do not rerun the whole batch"
            + (": the job is not idempotent." if safety == SideEffect.RepeatSafety.NOT_IDEMPOTENT else ".")
        )
    elif absent:
        scope = _scope(runs, absent, lambda r: r.run.absent_count)
        if safety == SideEffect.RepeatSafety.NOT_IDEMPOTENT:
            lines.append(
                f"Request a replay of the {absent:,} absent record(s) only{scope} (business and technical approval)."
                " Never rerun the whole batch: the job is not idempotent."
            )
        elif safety == SideEffect.RepeatSafety.IDEMPOTENT_WITH_KEY:
            lines.append(
                f"Request a replay of the {absent:,} absent record(s){scope}; the side effects are idempotent with a"
                " key, so the replay must carry the original keys."
            )
        else:
            lines.append(
                f"Request a replay of the {absent:,} absent record(s){scope}; the side effects are idempotent,"
                " but the replay still needs both approvals."
            )
    else:
        lines.append(
            "Nothing to replay: every eligible record is confirmed in the destination."
            " Move to verifying and wait for the next run."
        )
    return "\n".join(lines)


def prefill_affected(*, job: JobEvidence, runs: list[RunEvidence]) -> str:
    """Affected tenants (from the runs) and records; users are for a person to name."""
    tenants: dict[str, Any] = {}
    for evidence in runs:
        tenant = evidence.run.tenant
        tenants.setdefault(tenant.slug, (tenant.name, []))[1].append(evidence.run.environment)
    lines = [
        "Tenants: " + "; ".join(f"{name} ({slug}) in {', '.join(envs)}" for slug, (name, envs) in tenants.items()) + "."
    ]
    for evidence in runs:
        run = evidence.run
        if evidence.has_ledger:
            lines.append(
                f"Records{' of ' + _run_label(run) if len(runs) > 1 else ''}: {run.unresolved_count:,} unresolved"
                f" of {run.eligible_count:,} eligible."
            )
    lines.append("Users: not known yet — name who waits for these records.")
    return "\n".join(lines)


def _changes_lines(evidence: RunEvidence) -> list[str]:
    versions = evidence.config_versions
    if len(versions) > 1:
        changed_at = next(a for a in evidence.attempts if a.config_version == versions[-1])
        return [
            f"Configuration changed between attempts: {' → '.join(versions)}"
            f" (attempt {changed_at.number} ran {versions[-1]})."
        ]
    if versions:
        return [f"All attempts ran configuration {versions[0]}; no change between attempts."]
    return ["No configuration version was reported."]


def prefill_recent_changes(*, job: JobEvidence, runs: list[RunEvidence]) -> str:
    """Configuration versions across attempts; deployments are not recorded here, so say where to look."""
    text = _blocks(runs, _changes_lines)
    first = min((a.started_at for r in runs for a in r.attempts if a.started_at), default=None)
    if first:
        text += f"\nDeployments are not recorded here: check the deploy log for the hours before {_at(first)}."
    return text


PREFILL_RULES = {
    S.EXPECTED_OUTPUT: prefill_expected_output,
    S.DEFINITELY_HAPPENED: prefill_definitely_happened,
    S.MAY_HAVE_HAPPENED: prefill_may_have_happened,
    S.NEXT_ACTION: prefill_next_action,
    S.AFFECTED: prefill_affected,
    S.RECENT_CHANGES: prefill_recent_changes,
}


def handover_prefill(*, job: JobEvidence, runs: list[RunEvidence]) -> dict[str, str]:
    """Generate the text of every generated section (keys: ``GENERATED_SECTIONS``) from the evidence."""
    return {section: rule(job=job, runs=runs) for section, rule in PREFILL_RULES.items()}

"""A person's corrections to attempts: explaining a duplicate trigger, re-placing a flagged attempt
on another slot (docs/slots.md).

Who may correct: support on the run's tenant, the job's technical owners and admins — the same
people who change the run's work ledger (``runs.permissions.may_act_on_run``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from django.db import transaction
from django.db.models import Max, QuerySet
from django.utils import timezone

from handover.core.errors import Conflict, DomainError, Forbidden, InvalidTransition
from handover.core.people import Person
from runs.alerts.identity import run_get_or_create
from runs.alerts.models import Alert
from runs.alerts.redaction import redact_text
from runs.attempts.models import Attempt, Run
from runs.attempts.services import attempt_label, run_status_refresh
from runs.checks.schedule.cron import ScheduleError
from runs.checks.schedule.fire_times import previous_fire_time
from runs.checks.slot_placement import slot_schedule, slot_window
from runs.checks.slot_review import unexplained_conflicting_reports, unexplained_refires
from runs.permissions import require_act_on_run
from runs.timeline.models import TimelineEvent, TimelineEventKind
from runs.timeline.services import timeline_event_record

EVIDENCE_REF_MAX = Attempt._meta.get_field("duplicate_evidence_ref").max_length or 300


class AttemptCorrectionDenied(Forbidden):
    """The person may see the run but not correct its attempts (auditors, business owners)."""


def attempt_correction_require(*, actor: Person, run: Run) -> None:
    """Check that ``actor`` may correct ``run``'s attempts; return None when they may.

    Raises NotFound (404) for a run the person may not see, AttemptCorrectionDenied (403) for one
    they may only read. Queries: the guardian checks, plus one when refused.
    """
    require_act_on_run(user=actor, run=run, what="correct a run's attempts", error=AttemptCorrectionDenied)


def attempt_duplicate_trigger_explain(*, attempt: Attempt, actor: Person, reason: str, evidence_ref: str) -> Attempt:
    """A person explains a duplicate trigger: the reason and a reference to the evidence.

    ``reason`` and ``evidence_ref`` (at most 300 characters: a ticket, a log link, a scheduler's
    audit entry) are required; both are redacted on save. One transaction: the attempt row is
    locked, ``duplicate_explained_at``/``_by``/``duplicate_explanation``/``duplicate_evidence_ref``
    are set and a ``duplicate_trigger_explained`` timeline event is written. Afterwards the run's
    replays and next-run check no longer wait on it (docs/slots.md, "Duplicate triggers").
    Raises NotFound / AttemptCorrectionDenied (see ``attempt_correction_require``), DomainError
    (400) for a missing reason or evidence reference, InvalidTransition (409) when the attempt is
    not a duplicate trigger or is already explained. Returns the attempt, reloaded.
    """
    attempt_correction_require(actor=actor, run=attempt.run)
    reason, evidence_ref = redact_text(reason.strip()), redact_text(evidence_ref.strip())
    errors: dict[str, list[str]] = {}
    if not reason:
        errors["reason"] = ["say why the second trigger happened"]
    if not evidence_ref:
        errors["evidence_ref"] = ["name the evidence (a ticket, a log link, the scheduler's audit entry)"]
    elif len(evidence_ref) > EVIDENCE_REF_MAX:
        errors["evidence_ref"] = [f"at most {EVIDENCE_REF_MAX} characters"]
    if errors:
        raise DomainError("An explanation needs a reason and an evidence reference.", errors=errors)
    with transaction.atomic():
        locked = Attempt.objects.select_for_update().select_related("run__job", "run__tenant").get(pk=attempt.pk)
        if not locked.is_duplicate_trigger:
            raise InvalidTransition(f"Attempt {locked.number} is not a duplicate trigger: there is nothing to explain.")
        if locked.duplicate_explained_at is not None:
            raise InvalidTransition(
                f"The duplicate trigger of attempt {locked.number} was already explained "
                f"on {locked.duplicate_explained_at:%Y-%m-%d %H:%M}Z."
            )
        now = timezone.now()
        Attempt.objects.filter(pk=locked.pk).update(
            duplicate_explained_at=now,
            duplicate_explained_by=actor,
            duplicate_explanation=reason,
            duplicate_evidence_ref=evidence_ref,
            updated_at=now,
        )
        timeline_event_record(
            job=locked.run.job,
            run=locked.run,
            attempt=locked,
            kind=TimelineEvent.Kind.DUPLICATE_TRIGGER_EXPLAINED,
            summary=f"Duplicate trigger of attempt {locked.number} ({locked.execution_id}) explained by "
            f"{actor.get_username()}: {reason} (evidence: {evidence_ref})",
            occurred_at=now,
            actor=actor,
            data={"evidence_ref": evidence_ref},
        )
    attempt.refresh_from_db()
    return attempt


def _utc_text(at: datetime) -> str:
    return f"{at.astimezone(UTC):%Y-%m-%d %H:%M}Z"


def attempt_replace_slot(*, attempt: Attempt, slot: datetime, actor: Person, reason: str) -> Attempt:
    """Move an attempt flagged late, slot inferred or with a hint onto another slot of its target.

        ``slot``: an aware datetime, a fire time of the schedule in force for the run's target (the
        job's, with the target's overrides), other than the run's own. Allowed only while no ledger load
        and no replay request refers to the attempt's run. The attempt moves to the run of ``slot``
        (created by ``runs.alerts.identity.run_get_or_create`` with the window the slot derives, as
        ingestion does), gets the next ``number`` there (numbers are ordinals per run: the old one could
    collide with an attempt of the other run, so it is kept in the events, never reused), and the
        alerts that reported it follow it. Both runs' statuses are refreshed; a run left without
        attempts is ``expected`` again (the schedule sweep decides ``missed``). An ``attempt_replaced``
        timeline event is written on both runs. One transaction, both runs locked (lower id first).
        Raises NotFound / AttemptCorrectionDenied (see ``attempt_correction_require``), DomainError
        (400) for a missing reason, a naive time or a time that is not a fire time, InvalidTransition
        (409) when the attempt is not flagged, is already on that slot, or a load or replay refers to
        the run, Conflict (409) when the other run already has the same execution id. Returns the
        attempt, reloaded.
    """
    run = attempt.run
    attempt_correction_require(actor=actor, run=run)
    reason = redact_text(reason.strip())
    if not reason:
        raise DomainError("Say why the attempt belongs to another slot.", errors={"reason": ["required"]})
    if slot.tzinfo is None:
        raise DomainError("The slot needs a time zone.", errors={"slot": ["an aware time (UTC)"]})
    slot = slot.astimezone(UTC)
    job, target = run.job, run.target
    schedule = slot_schedule(job=job, target=target)
    try:
        fire = previous_fire_time(
            schedule.cron, schedule.timezone, slot, dst_gap=schedule.dst_gap, dst_overlap=schedule.dst_overlap
        ).astimezone(UTC)
    except ScheduleError as exc:
        raise DomainError(f"{exc}", errors={"slot": [str(exc)]}) from exc
    if fire != slot:
        raise DomainError(
            f"{_utc_text(slot)} is not a fire time of {schedule.cron!r} ({schedule.timezone}); "
            f"the fire time before it is {_utc_text(fire)}.",
            errors={"slot": ["not a fire time of the target's schedule"]},
        )
    try:
        window_start, window_end = slot_window(job=job, target=target, slot=slot)
    except ScheduleError as exc:
        raise DomainError(f"{exc}", errors={"slot": [str(exc)]}) from exc
    with transaction.atomic():
        locked = Attempt.objects.select_for_update().get(pk=attempt.pk)
        if not (locked.is_slot_late or locked.is_slot_inferred or locked.slot_hint):
            raise InvalidTransition(
                f"Attempt {locked.number} is not flagged late, slot inferred or with a hint: its slot stands."
            )
        source = Run.objects.select_related("job", "tenant").get(pk=locked.run_id)
        if source.scheduled_for == slot:
            raise InvalidTransition(f"Attempt {locked.number} is already on the slot {_utc_text(slot)}.")
        refs = []
        if source.work_item_loads.exists():
            refs.append("a ledger load")
        if source.replay_requests.exists():
            refs.append("a replay request")
        if refs:
            raise InvalidTransition(
                f"{' and '.join(refs).capitalize()} refer(s) to this run: its attempts are no longer moved."
            )
        destination, created = run_get_or_create(
            job=source.job,
            tenant=source.tenant,
            environment=source.environment,
            window_start=window_start,
            window_end=window_end,
            target=source.target,
            scheduled_for=slot,
        )
        first, second = sorted([source.pk, destination.pk])
        list(Run.objects.select_for_update().filter(pk__in=[first, second]).order_by("pk"))
        if destination.attempts.filter(execution_id=locked.execution_id).exists():
            raise Conflict(
                f"The run of {_utc_text(slot)} already has an attempt {locked.execution_id!r}.",
                errors={"slot": ["that run already has this execution"]},
            )
        old_number = locked.number
        number = (destination.attempts.aggregate(top=Max("number"))["top"] or 0) + 1
        now = timezone.now()
        Attempt.objects.filter(pk=locked.pk).update(
            run=destination,
            number=number,
            slot_offset_seconds=int(((locked.scheduled_at or locked.started_at or slot) - slot).total_seconds()),
            is_slot_late=False,
            is_slot_inferred=False,
            slot_hint="",
            updated_at=now,
        )
        Alert.objects.filter(attempt_id=locked.pk).update(run=destination)
        locked.refresh_from_db()
        data = {
            "from_run": str(source.public_id),
            "to_run": str(destination.public_id),
            "from_slot": source.scheduled_for.isoformat() if source.scheduled_for else None,
            "to_slot": slot.isoformat(),
            "old_number": old_number,
            "new_number": number,
            "run_created": created,
        }
        words = (
            f"{attempt_label(locked)} ({locked.execution_id}) re-placed by {actor.get_username()} from the slot "
            f"{_utc_text(source.scheduled_for) if source.scheduled_for else 'unknown'} (attempt {old_number} there) "
            f"to {_utc_text(slot)}: {reason}"
        )
        for run_ in (source, destination):
            timeline_event_record(
                job=source.job,
                run=run_,
                attempt=locked,
                kind=TimelineEvent.Kind.ATTEMPT_REPLACED,
                summary=words,
                occurred_at=now,
                actor=actor,
                data=data,
            )
        run_status_refresh(run=destination)
        run_status_refresh(run=source)  # a run left with no attempt is ``expected`` again
    attempt.refresh_from_db()
    return attempt


def run_refire_explain(*, run: Run, actor: Person, reason: str, evidence_ref: str) -> Run:
    """A person explains the re-fires of a run: an alert that fired again, after its resolve, on an
    execution the payload named before (docs/slots.md, "Alert instances").

    ``reason`` and ``evidence_ref`` (at most 300 characters) are required and redacted on save. One
    transaction holding the run's row lock writes a ``refire_explained`` timeline event; every
    ``refire`` event before it counts as explained. Raises NotFound / AttemptCorrectionDenied (see
    ``attempt_correction_require``), DomainError (400) for a missing reason or evidence reference,
    InvalidTransition (409) when the run has no unexplained re-fire. Returns the run.
    """
    return _run_flag_explain(
        run=run,
        actor=actor,
        reason=reason,
        evidence_ref=evidence_ref,
        pending=unexplained_refires,
        explained_kind=TimelineEvent.Kind.REFIRE_EXPLAINED,
        noun="Re-fire",
        why_missing="say why the alert fired again",
    )


def run_conflicting_report_explain(*, run: Run, actor: Person, reason: str, evidence_ref: str) -> Run:
    """A person explains the conflicting reports of a run: alerts that named no execution of their own
    and said something else about a run that had succeeded (docs/slots.md). Until then the run's business
    state is ``attention``.

    Same shape and errors as ``run_refire_explain``; writes a ``conflicting_report_explained`` event and
    every ``conflicting_report`` event before it counts as explained. InvalidTransition (409) when the
    run has no unexplained conflicting report.
    """
    return _run_flag_explain(
        run=run,
        actor=actor,
        reason=reason,
        evidence_ref=evidence_ref,
        pending=unexplained_conflicting_reports,
        explained_kind=TimelineEvent.Kind.CONFLICTING_REPORT_EXPLAINED,
        noun="Conflicting report",
        why_missing="say why the report contradicts the run's success",
    )


def _run_flag_explain(
    *,
    run: Run,
    actor: Person,
    reason: str,
    evidence_ref: str,
    pending: Callable[[QuerySet[Run]], QuerySet[Run]],
    explained_kind: TimelineEventKind,
    noun: str,
    why_missing: str,
) -> Run:
    """Check and record an explanation of a run flag (see ``run_refire_explain``): ``pending`` finds the
    runs still flagged, ``explained_kind`` is the event written, ``noun`` and ``why_missing`` word it."""
    attempt_correction_require(actor=actor, run=run)
    reason, evidence_ref = redact_text(reason.strip()), redact_text(evidence_ref.strip())
    errors: dict[str, list[str]] = {}
    if not reason:
        errors["reason"] = [why_missing]
    if not evidence_ref:
        errors["evidence_ref"] = ["name the evidence (a ticket, a log link, the monitor's history)"]
    elif len(evidence_ref) > EVIDENCE_REF_MAX:
        errors["evidence_ref"] = [f"at most {EVIDENCE_REF_MAX} characters"]
    if errors:
        raise DomainError("An explanation needs a reason and an evidence reference.", errors=errors)
    with transaction.atomic():
        locked = Run.objects.select_for_update(of=("self",)).select_related("job", "tenant").get(pk=run.pk)
        if not pending(Run.objects.filter(pk=locked.pk)).exists():
            raise InvalidTransition(f"This run has no {noun.lower()} waiting for an explanation.")
        timeline_event_record(
            job=locked.job,
            run=locked,
            kind=explained_kind,
            summary=f"{noun} explained by {actor.get_username()}: {reason} (evidence: {evidence_ref})",
            occurred_at=timezone.now(),
            actor=actor,
            data={"evidence_ref": evidence_ref},
        )
    return locked

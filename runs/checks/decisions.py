"""A person's decisions on a check: waive it (a next run far away), or confirm that a next run
without a ledger re-emitted nothing."""

from __future__ import annotations

from datetime import UTC, date

from django.db import transaction
from django.utils import timezone

from handover.core.errors import DomainError, InvalidTransition
from handover.core.people import Person
from runs.catalog.models import JobTarget
from runs.checks.evaluation import next_run_check_evaluate
from runs.checks.events import check_event_record
from runs.checks.facts import check_change, next_run_check_facts
from runs.checks.models import NextRunCheck
from runs.checks.transitions import check_transition_one, next_run_check_transition
from runs.permissions import may_read_target, require_act_on_target
from runs.timeline.models import TimelineEvent


def next_run_check_require_actor(*, actor: Person, target: JobTarget) -> None:
    """Refuse unless ``actor`` may create, waive or confirm ``target``'s next-run checks; None when they may.

    The rule is ``runs.permissions.may_act_on_target`` (support on the tenant, the job's technical
    owners, admins). Raises NotFound (404) for a target the person may not see, Forbidden (403) for
    one they may only read. Every check service calls it; the API and pages call it too before they
    read a request body, so a reader learns nothing from a 400.
    """
    require_act_on_target(user=actor, target=target, what="create, waive or confirm next-run checks")


def next_run_check_waive(
    *,
    check: NextRunCheck,
    actor: Person,
    owner: Person | None,
    checkpoint: date | None,
    reason: str,
) -> NextRunCheck:
    """Waive a scheduled check (a next run far away): a checkpoint date, a reason and a named owner.

    Rules: the reason is not blank; the checkpoint is today or later (UTC date); the owner is an
    active person who can see the target. A waiver is never a pass, and only a ``scheduled`` check
    can be waived (``InvalidTransition``, 409, otherwise; waiving a waived check returns it).
    Raises ``DomainError`` (400) with field errors for a broken rule. Side effects: the transition
    and a ``next_run_check_waived`` timeline event.
    """
    next_run_check_require_actor(actor=actor, target=check.target)
    errors: dict[str, list[str]] = {}
    reason = (reason or "").strip()
    if not reason:
        errors["reason"] = ["Say why the next run cannot be waited for."]
    if checkpoint is None:
        errors["checkpoint"] = ["Give the date the owner looks again."]
    elif checkpoint < timezone.now().astimezone(UTC).date():
        errors["checkpoint"] = ["The checkpoint date must not be in the past."]
    if owner is None or not owner.is_active:
        errors["owner"] = ["Name an active person as the owner of the waiver."]
    elif not may_read_target(user=owner, target=check.target):
        errors["owner"] = [f"{owner.get_username()} has no role on this tenant or job."]
    if errors:
        detail = " ".join(message for messages in errors.values() for message in messages)
        raise DomainError(f"The waiver is incomplete: {detail}", errors=errors)
    assert owner is not None and checkpoint is not None
    return check_transition_one(
        check,
        action="waive",
        summary=f"Next-run check waived until {checkpoint:%Y-%m-%d}, owner {owner.get_username()}: {reason}",
        values={
            "waived_by": actor,
            "waiver_owner": owner,
            "waiver_checkpoint": checkpoint,
            "waiver_reason": reason,
        },
        actor=actor,
        data={"checkpoint": checkpoint.isoformat(), "owner": owner.get_username()},
    )


def next_run_check_confirm(*, check: NextRunCheck, actor: Person, note: str) -> NextRunCheck:
    """Confirm that a next run without a ledger re-emitted nothing, then settle the check.

    Only a check awaiting confirmation (scheduled, an in-time success found, no ledger) can be
    confirmed; ``InvalidTransition`` (409) otherwise. ``note`` (required; ``DomainError`` 400)
    says how duplicates were checked. The facts are read again: the check passes, or fails if a
    stale retry is queued or the ledger that has since appeared shows duplicates. Side effects: the
    confirmation, a ``next_run_check_confirmed`` event, then the transition and its event.
    """
    next_run_check_require_actor(actor=actor, target=check.target)
    note = (note or "").strip()
    if not note:
        raise DomainError("Say how duplicates were checked.", errors={"note": ["This field is required."]})
    now = timezone.now()
    with transaction.atomic():
        updated = NextRunCheck.objects.filter(
            pk=check.pk,
            status=NextRunCheck.Status.SCHEDULED,
            evidence_attempt__isnull=False,
            duplicate_check=NextRunCheck.DuplicateCheck.NO_LEDGER,
            confirmed_at__isnull=True,
        ).update(confirmed_at=now, confirmed_by=actor, confirmation_note=note, updated_at=now)
        if not updated:
            current = NextRunCheck.objects.get(pk=check.pk)
            if current.confirmed_by_id == actor.pk and current.status != NextRunCheck.Status.SCHEDULED:
                return current  # the same person's repeated click
            raise InvalidTransition(
                f"Nothing awaits confirmation on this check (it is {current.status}"
                + (", already confirmed" if current.confirmed_at else "")
                + (", no success of the next run found yet" if current.evidence_attempt_id is None else "")
                + ")."
            )
        check = NextRunCheck.objects.select_related("target__job", "target__tenant", "recovered_run").get(pk=check.pk)
        check_event_record(
            check,
            kind=TimelineEvent.Kind.NEXT_RUN_CHECK_CONFIRMED,
            summary=f"{actor.get_username()} confirmed the next run re-emitted no records: {note}",
            occurred_at=now,
            actor=actor,
        )
        facts = next_run_check_facts(check=check, now=now)
        verdict = next_run_check_evaluate(facts)
        if verdict.action in ("pass", "fail"):
            next_run_check_transition(
                action=verdict.action, changes=[check_change(check, verdict, facts)], at=now, actor=actor
            )
    check.refresh_from_db()
    return check

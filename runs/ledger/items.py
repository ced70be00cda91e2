"""One item at a time: a person's change of its outcome, or a provider lookup that verifies it."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from handover.core.errors import DomainError, InvalidTransition, NotFound
from handover.core.people import signed_in
from runs.attempts.models import Run
from runs.ledger.common import User, run_ledger_require_writer
from runs.ledger.failure_class import run_failure_class_suggest
from runs.ledger.models import WorkItem, WorkItemChange
from runs.ledger.totals import run_totals_refresh
from runs.timeline.models import TimelineEvent
from runs.timeline.services import timeline_event_record


def _item_for_update(run: Run, record_id: str) -> WorkItem:
    item = WorkItem.objects.select_for_update().filter(run=run, record_id=record_id.strip()).first()
    if item is None:
        raise NotFound(f"No work item {record_id!r} in this run.")
    return item


def _item_outcome_set(
    *, item: WorkItem, run: Run, actor: User, kind: str, outcome: str, evidence_kind: str, evidence_ref: str, note: str
) -> str:
    """Give the locked item its new outcome and evidence and keep the change in its history; returns the old outcome."""
    previous = item.outcome
    now = timezone.now()
    item.outcome = outcome
    item.evidence_kind = evidence_kind
    item.evidence_ref = evidence_ref
    item.evidence_note = note
    item.evidence_by = signed_in(actor)
    item.evidence_at = now
    item.save(update_fields=["outcome", "evidence_kind", "evidence_ref", "evidence_note", "evidence_by", "evidence_at"])
    WorkItemChange.objects.create(
        work_item=item,
        run=run,
        kind=kind,
        from_outcome=previous,
        to_outcome=outcome,
        evidence_kind=evidence_kind,
        evidence_ref=evidence_ref,
        note=note,
        changed_by=signed_in(actor),
        changed_at=now,
    )
    return previous


def work_item_change(
    *, actor: User, run: Run, record_id: str, outcome: str, note: str, evidence_ref: str = ""
) -> WorkItem:
    """Change one item's outcome by a person's decision (manual evidence), keeping its history.

    ``note`` (required) says why; ``evidence_ref`` may name a ticket or a provider operation.
    Writes a WorkItemChange and one ``work_item_changed`` timeline event, refreshes the run's
    totals and the failure-class suggestion. Raises NotFound (run not visible or no such item),
    LedgerPermissionDenied, DomainError (unknown outcome, missing note) and InvalidTransition (the
    item already has that outcome). Returns the item.
    """
    run_ledger_require_writer(actor=actor, run=run)
    if outcome not in WorkItem.Outcome.values:
        raise DomainError(f"{outcome!r} is not an outcome.", errors={"outcome": ["unknown outcome"]})
    note = note.strip()
    if not note:
        raise DomainError("Say why the outcome changes.", errors={"note": ["required"]})
    with transaction.atomic():
        run = Run.objects.select_for_update().select_related("job", "tenant").get(pk=run.pk)
        item = _item_for_update(run, record_id)
        if item.outcome == outcome:
            raise InvalidTransition(f"{item.record_id} is already {outcome}.")
        previous = _item_outcome_set(
            item=item,
            run=run,
            actor=actor,
            kind=WorkItemChange.Kind.CHANGE,
            outcome=outcome,
            evidence_kind=WorkItem.EvidenceKind.MANUAL,
            evidence_ref=evidence_ref.strip()[:300],
            note=note,
        )
        totals = run_totals_refresh(run=run)
        timeline_event_record(
            job=run.job,
            run=run,
            kind=TimelineEvent.Kind.WORK_ITEM_CHANGED,
            summary=f"{item.record_id}: {previous} → {outcome} (by a person: {note})",
            actor=actor,  # type: ignore[arg-type]
            data={"record_id": item.record_id, "from": previous, "to": outcome, "totals": totals.as_dict()},
        )
        run_failure_class_suggest(run=run, totals=totals, actor=actor)
    return item


def work_item_verify(
    *, actor: User, run: Run, record_id: str, found: bool, reference: str = "", note: str = ""
) -> WorkItem:
    """Record a provider lookup for one uncertain (or unverified) item: found → completed, not found → absent.

    ``reference`` (the provider's operation or correlation id) is required when found. Writes a
    WorkItemChange (kind ``verify``) and one ``work_item_verified`` timeline event, refreshes the
    totals and the failure-class suggestion. Raises NotFound, LedgerPermissionDenied, DomainError
    (found without reference) and InvalidTransition (the item is not uncertain or unverified).
    """
    run_ledger_require_writer(actor=actor, run=run)
    reference = reference.strip()[:300]
    if found and not reference:
        raise DomainError(
            "A record the provider found needs the provider's reference.", errors={"reference": ["required"]}
        )
    with transaction.atomic():
        run = Run.objects.select_for_update().select_related("job", "tenant").get(pk=run.pk)
        item = _item_for_update(run, record_id)
        if item.outcome not in (WorkItem.Outcome.UNCERTAIN, WorkItem.Outcome.UNVERIFIED) or not item.is_in_population:
            raise InvalidTransition(
                f"{item.record_id} is {item.outcome}; only uncertain or unverified records are verified."
            )
        outcome = WorkItem.Outcome.COMPLETED if found else WorkItem.Outcome.ABSENT
        previous = _item_outcome_set(
            item=item,
            run=run,
            actor=actor,
            kind=WorkItemChange.Kind.VERIFY,
            outcome=outcome,
            evidence_kind=WorkItem.EvidenceKind.PROVIDER_LOOKUP,
            evidence_ref=reference,
            note=note.strip(),
        )
        totals = run_totals_refresh(run=run)
        verdict = f"found ({reference})" if found else "confirmed not found"
        timeline_event_record(
            job=run.job,
            run=run,
            kind=TimelineEvent.Kind.WORK_ITEM_VERIFIED,
            summary=f"{item.record_id}: provider lookup {verdict} → {outcome}",
            actor=actor,  # type: ignore[arg-type]
            data={"record_id": item.record_id, "from": previous, "to": outcome, "reference": reference},
        )
        run_failure_class_suggest(run=run, totals=totals, actor=actor)
    return item


def work_item_duplicate_explain(
    *, actor: User, run: Run, record_id: str, reason: str, evidence_ref: str = ""
) -> WorkItem:
    """Explain one possible duplicate: the only way its flag is cleared (docs/work-ledger.md "Loads").

    ``reason`` (required) says why it is not a duplicate (or why the duplicate is acceptable);
    ``evidence_ref`` (required, at most 300 characters) names the ticket, provider operation or
    query that shows it. Stores who and when on the item, clears the flag for good (later loads
    do not raise it again), writes an ``explain`` WorkItemChange and one
    ``work_item_duplicate_explained`` timeline event and refreshes the totals (raising the
    ledger version). Raises NotFound, LedgerPermissionDenied, DomainError (no reason or
    reference, reference too long) and InvalidTransition (the item is not a possible duplicate).
    """
    run_ledger_require_writer(actor=actor, run=run)
    reason, evidence_ref = reason.strip(), evidence_ref.strip()
    errors: dict[str, list[str]] = {}
    if not reason:
        errors["reason"] = ["required"]
    if not evidence_ref:
        errors["evidence_ref"] = ["required"]
    elif len(evidence_ref) > 300:
        errors["evidence_ref"] = [f"at most 300 characters (it has {len(evidence_ref)})"]
    if errors:
        raise DomainError("Say why it is not a duplicate and name the evidence.", errors=errors)
    with transaction.atomic():
        run = Run.objects.select_for_update().select_related("job", "tenant").get(pk=run.pk)
        item = _item_for_update(run, record_id)
        if not item.is_possible_duplicate:
            raise InvalidTransition(f"{item.record_id} is not an unexplained possible duplicate.")
        now = timezone.now()
        WorkItem.objects.filter(pk=item.pk).update(
            is_possible_duplicate=False,
            duplicate_explained_at=now,
            duplicate_explained_by=actor,
            duplicate_explanation=reason,
            duplicate_evidence_ref=evidence_ref,
        )
        WorkItemChange.objects.create(
            work_item=item,
            run=run,
            kind=WorkItemChange.Kind.EXPLAIN,
            from_outcome=item.outcome,
            to_outcome=item.outcome,
            evidence_kind=WorkItem.EvidenceKind.MANUAL,
            evidence_ref=evidence_ref,
            note=reason,
            changed_by=actor,  # type: ignore[misc]  # a signed-in person (run_ledger_require_writer refused anyone else)
            changed_at=now,
        )
        totals = run_totals_refresh(run=run)
        timeline_event_record(
            job=run.job,
            run=run,
            kind=TimelineEvent.Kind.WORK_ITEM_DUPLICATE_EXPLAINED,
            summary=f"{item.record_id}: possible duplicate explained ({evidence_ref}): {reason}",
            actor=actor,  # type: ignore[arg-type]
            data={"record_id": item.record_id, "evidence_ref": evidence_ref, "totals": totals.as_dict()},
        )
    item.refresh_from_db()
    return item

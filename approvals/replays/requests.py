"""Replay requests: the one transition function, and making, re-scoping, cancelling, expiring,
completing and settling a request. Every change writes its event on the run's timeline.

Transition table: ``ReplayRequest.TRANSITIONS`` (pending → approved → dispatched → completed |
failed, or rejected, cancelled, expired; re-scoping returns a pending or approved request to
pending and voids its approvals).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from approvals.replays.models import Approval, Dispatch, ReplayRequest, ReplayRequestItem
from approvals.replays.rules import (
    CheckResult,
    ReplayRefused,
    evaluate,
    refusal,
    scope_fingerprint,
)
from approvals.replays.selectors import (
    scope_candidates,
    scope_is_completed,
    work_items_by_record_id,
)
from handover.core.errors import DomainError, Forbidden, InvalidTransition
from handover.core.people import Person
from handover.core.transitions import Transitioned, transition
from runs.alerts.redaction import redact_text
from runs.attempts.models import Run
from runs.audit.models import AuditEvent
from runs.audit.services import audit_record
from runs.ledger.models import WorkItem
from runs.ledger.selectors import run_ledger_disclosures
from runs.permissions import approvers_eligible, may_act_on_run, may_manage_replay, may_request_replay
from runs.timeline.models import TimelineEvent, TimelineEventKind
from runs.timeline.services import timeline_event_record

logger = logging.getLogger(__name__)

MAX_EXPLICIT_ITEMS = 5000  # larger scopes are asked for as "all absent" (one query, no id list)
INSERT_BATCH = 2000
EVENT_KINDS = {
    "approve": TimelineEvent.Kind.REPLAY_APPROVED,
    "rescope": TimelineEvent.Kind.REPLAY_RESCOPED,
    "dispatch": TimelineEvent.Kind.REPLAY_DISPATCHED,
    "complete": TimelineEvent.Kind.REPLAY_COMPLETED,
    "fail": TimelineEvent.Kind.REPLAY_FAILED,
    "reject": TimelineEvent.Kind.REPLAY_REJECTED,
    "cancel": TimelineEvent.Kind.REPLAY_CANCELLED,
    "expire": TimelineEvent.Kind.REPLAY_EXPIRED,
}
RECOVERY_DECISIONS = {
    "wait_for_retry": "Wait for the automatic retry",
    "dependency_corrected": "Dependency corrected, no replay needed",
}


class ReplayForbidden(Forbidden):
    """The person may see the run or request but may not take this action on it."""


def _name(user: Person | None) -> str:
    return user.get_username() if user is not None else "the system"


def replay_event_record(
    *,
    request: ReplayRequest,
    kind: TimelineEventKind,
    summary: str,
    actor: Person | None = None,
    data: dict[str, Any] | None = None,
    attempt: Any = None,
) -> TimelineEvent:
    """Append one event about ``request`` to its run's timeline and tell the people it concerns
    (``approvals.replays.notices``); call inside the change's transaction."""
    from approvals.replays.notices import replay_notices_send

    run = request.run
    event = timeline_event_record(
        job=run.job,
        run=run,
        attempt=attempt,
        kind=kind,
        summary=summary,
        actor=actor,
        data={"replay_request": str(request.public_id), **(data or {})},
    )
    replay_notices_send(request=request, kind=kind, summary=event.summary)
    return event


def checks_store(*, request: ReplayRequest, checks: list[CheckResult]) -> None:
    """Keep the latest evaluation of the preconditions on the request (for its page and the API)."""
    now = timezone.now()
    stored = [c.as_dict() for c in checks]
    ReplayRequest.objects.filter(pk=request.pk).update(checks=stored, checked_at=now)
    request.checks, request.checked_at = stored, now


def approvals_void(*, request: ReplayRequest, reason: str) -> int:
    """Void the request's live approvals (kept, with the reason). Returns how many were voided."""
    return Approval.objects.filter(request=request, voided_at__isnull=True).update(
        voided_at=timezone.now(), void_reason=reason[:300]
    )


def replay_request_transition(
    *,
    request: ReplayRequest,
    action: str,
    actor: Person | None = None,
    reason: str = "",
    summary: str = "",
    data: dict[str, Any] | None = None,
) -> Transitioned[ReplayRequest]:
    """Move ``request`` by ``action`` (a key of ``ReplayRequest.TRANSITIONS``) with the guarded UPDATE of
    ``handover.core.transitions.transition``.

    Sets the status with its stamps (``approved_at``, ``dispatched_at``; ``closed_at`` /
    ``closed_by`` / ``close_reason`` for a terminal status). If the request already has the target
    status it is returned with ``moved`` False (idempotent); otherwise InvalidTransition (409) names
    the current status. In the same transaction: a terminal status closes the scope's items
    (``is_open`` False) and one timeline event (``EVENT_KINDS``) records actor, from, to and
    reason. Follow-up work is the verbs'. Returns ``Transitioned(request, moved)``.
    """
    target = ReplayRequest.TRANSITIONS[action][1]
    now = timezone.now()
    values: dict[str, Any] = {"status_changed_at": now, "updated_at": now}
    if action == "approve":
        values["approved_at"] = now
    elif action == "rescope":
        values["approved_at"] = None
    elif action == "dispatch":
        values["dispatched_at"] = now
    if target in ReplayRequest.TERMINAL_STATUSES:
        values.update(closed_at=now, closed_by=actor, close_reason=reason[:2000])

    def record(moved: ReplayRequest, before: str) -> None:
        if target in ReplayRequest.TERMINAL_STATUSES:
            ReplayRequestItem.objects.filter(request_id=moved.pk, is_open=True).update(is_open=False)
        text = summary or f"Replay request {target} by {_name(actor)}"
        if reason and not summary:
            text += f": {reason}"
        replay_event_record(
            request=moved,
            kind=EVENT_KINDS[action],
            summary=text,
            actor=actor,
            data={"from": before, "to": target, "reason": reason, **(data or {})},
        )

    return transition(
        queryset=ReplayRequest.objects.select_related("run__job", "run__tenant", "requested_by"),
        pk=request.pk,
        table=ReplayRequest.TRANSITIONS,
        action=action,
        values=values,
        noun="the replay request",
        on_moved=record,
    )


# --- making a request -----------------------------------------------------------------------------


def _scope_items(*, run: Run, kind: str, record_ids: list[str] | None, all_items: bool) -> QuerySet[WorkItem]:
    """The scope as a WorkItem queryset; DomainError (400) for a malformed ask or ids not in the run."""
    if kind not in ReplayRequest.Kind.values:
        raise DomainError(f"{kind!r} is not a replay kind.", errors={"kind": ["unknown kind"]})
    ids = list(dict.fromkeys(r.strip() for r in (record_ids or []) if r and r.strip()))
    if kind == ReplayRequest.Kind.WHOLE_BATCH:
        if ids:
            raise DomainError(
                "A whole batch covers every eligible item of the run; do not list record ids.",
                errors={"record_ids": ["not allowed for a whole batch"]},
            )
        return scope_candidates(run=run, kind=kind)
    if all_items and ids:
        raise DomainError("Either list record ids or ask for all, not both.", errors={"record_ids": ["ambiguous"]})
    if all_items:
        return scope_candidates(run=run, kind=kind)
    if not ids:
        raise DomainError("List the record ids to replay, or ask for all.", errors={"record_ids": ["required"]})
    if len(ids) > MAX_EXPLICIT_ITEMS:
        raise DomainError(
            f"At most {MAX_EXPLICIT_ITEMS:,} record ids can be listed; ask for all instead.",
            errors={"record_ids": ["too many"]},
        )
    found = set(work_items_by_record_id(run=run, record_ids=ids).values_list("record_id", flat=True))
    unknown = [r for r in ids if r not in found]
    if unknown:
        shown = ", ".join(unknown[:10]) + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else "")
        raise DomainError(
            f"Not in this run's eligible population: {shown}.", errors={"record_ids": [f"not in this run: {shown}"]}
        )
    return work_items_by_record_id(run=run, record_ids=ids)


def _scope_rows(items: QuerySet[WorkItem]) -> list[tuple[int, str, str]]:
    return list(items.order_by().values_list("pk", "record_id", "outcome"))


def _items_insert(request: ReplayRequest, rows: Iterable[tuple[int, str, str]]) -> None:
    """Insert the scope's items; IntegrityError when an open replay took one of them meanwhile."""
    batch: list[ReplayRequestItem] = []
    for pk, record_id, outcome in rows:
        batch.append(
            ReplayRequestItem(request=request, work_item_id=pk, record_id=record_id, outcome_at_request=outcome)
        )
        if len(batch) >= INSERT_BATCH:
            ReplayRequestItem.objects.bulk_create(batch)
            batch = []
    if batch:
        ReplayRequestItem.objects.bulk_create(batch)


def _overlap_refusal() -> ReplayRefused:
    detail = "another open replay took some of these items at the same moment"
    return ReplayRefused(
        f"Refused by one open replay per item: {detail}.",
        errors={"no_overlapping_replay": [f"one open replay per item: {detail}"]},
    )


def replay_refusal_record(
    *, run: Run, actor: Person | None, stage: str, error: ReplayRefused, request: ReplayRequest | None = None
) -> TimelineEvent | AuditEvent:
    """Record a refusal in its own transaction (the refused change was rolled back), naming the failed checks.

    ``stage``: what was refused. A refused ``request`` or ``approval`` did not happen, so it is not on
    the run's timeline (the timeline is what happened to the run): it goes to the audit trail
    (``replay_refused``, concerning the run's tenant and job, ``data`` the failed checks code ->
    reason). A held ``dispatch`` is a state of an approved request: a ``replay_dispatch_blocked``
    event on the run's timeline.
    """
    words = {"request": "Replay request refused", "approval": "Replay approval refused", "dispatch": "Dispatch held"}
    data = {
        "stage": stage,
        "run": str(run.public_id),
        "replay_request": str(request.public_id) if request is not None else None,
        "errors": error.errors,
    }
    with transaction.atomic():
        if stage != "dispatch":
            return audit_record(
                actor=actor,
                action=AuditEvent.Action.REPLAY_REFUSED,
                summary=f"{words[stage]} ({run.job.key} · {run.tenant.slug}): {error.detail}",
                tenants=[run.tenant],
                job=run.job,
                obj=request if request is not None else run,
                data=data,
            )
        return timeline_event_record(
            job=run.job,
            run=run,
            kind=TimelineEvent.Kind.REPLAY_DISPATCH_BLOCKED,
            summary=f"{words[stage]}: {error.detail}",
            actor=actor,
            data={k: v for k, v in data.items() if k != "run"},
        )


def replay_request_create(
    *,
    actor: Person,
    run: Run,
    kind: str,
    reason: str,
    record_ids: list[str] | None = None,
    all_items: bool = False,
    fix_reference: str = "",
) -> ReplayRequest:
    """Request a replay of part of ``run``: ``record_ids`` (at most 5,000) or ``all_items`` of ``kind``.

    ``kind``: ``absent_items`` (confirmed absent), ``rejected_fixed`` (rejected, with
    ``fix_reference`` naming where the fix is recorded) or ``whole_batch`` (every eligible item of a
    run the evidence shows never committed; no ids). Checks every precondition (``rules.evaluate``,
    stage ``create``) and lists the eligible approvers of each kind, requester excluded.

    Raises ReplayForbidden (403) unless ``actor`` is support on the run's tenant; DomainError (400)
    for a missing reason or fix reference, a malformed scope or ids not in the run; ReplayRefused
    (409) naming each failed rule -- also recorded in the audit trail (``replay_refusal_record``).
    Side effects: the request and its items, a ``replay_requested`` event, the run's open handover
    linked (and moved to recovering when handed over); after commit, e-mail to the eligible approvers.
    The run's ledger disclosures (items weakened from completed, duplicates explained: who, why) are
    stored on the request and bound into its scope fingerprint.
    """
    if not may_request_replay(user=actor, run=run):
        raise ReplayForbidden("Only support on this run's tenant may request a replay.")
    reason = redact_text(reason or "").strip()
    fix_reference = redact_text(fix_reference or "").strip()[:500]
    if not reason:
        raise DomainError("Say why the replay is needed.", errors={"reason": ["This field is required."]})
    if kind == ReplayRequest.Kind.REJECTED_FIXED and not fix_reference:
        raise DomainError(
            "A replay of rejected items names where the fix is recorded.",
            errors={"fix_reference": ["required for a replay of rejected items"]},
        )
    items = _scope_items(run=run, kind=kind, record_ids=record_ids, all_items=all_items)
    try:
        with transaction.atomic():
            # One request at a time per run: the ledger services lock the run too, so the scope's
            # outcomes cannot change between the checks and the insert.
            run = Run.objects.select_for_update(of=("self",)).select_related("job", "tenant", "target").get(pk=run.pk)
            checks = evaluate(
                run=run, kind=kind, fix_reference=fix_reference, items=items, stage="create", requester=actor
            )
            error = refusal(checks)
            if error is not None:
                raise error
            rows = _scope_rows(items)
            disclosures = run_ledger_disclosures(run=run)
            now = timezone.now()
            eligible = {
                k.value: list(approvers_eligible(run=run, kind=k, exclude=actor).values_list("username", flat=True))
                for k in Approval.Kind
            }
            request = ReplayRequest.objects.create(
                run=run,
                kind=kind,
                fix_reference=fix_reference,
                reason=reason,
                requested_by=actor,
                status_changed_at=now,
                scope_fingerprint=scope_fingerprint(
                    run=run,
                    kind=kind,
                    fix_reference=fix_reference,
                    record_ids=(r[1] for r in rows),
                    disclosures=disclosures,
                ),
                ledger_disclosures=disclosures,
                item_count=len(rows),
                eligible_approvers=eligible,
                checks=[c.as_dict() for c in checks],
                checked_at=now,
                expires_at=now + timedelta(seconds=settings.HANDOVER_REPLAY_PENDING_EXPIRY_SECONDS),
            )
            try:
                with transaction.atomic():
                    _items_insert(request, rows)
            except IntegrityError as exc:
                raise _overlap_refusal() from exc
            request.run = run
            sample = ", ".join(sorted(r[1] for r in rows)[:5]) + (" …" if len(rows) > 5 else "")
            replay_event_record(
                request=request,
                kind=TimelineEvent.Kind.REPLAY_REQUESTED,
                summary=f"Replay requested by {_name(actor)}: {len(rows):,} item(s), "
                f"{ReplayRequest.Kind(kind).label.lower()} ({sample}) — {reason}",
                actor=actor,
                data={
                    "kind": kind,
                    "item_count": len(rows),
                    "scope_fingerprint": request.scope_fingerprint,
                    "eligible_approvers": eligible,
                    "fix_reference": fix_reference,
                    "ledger_disclosures": len(disclosures),
                },
            )
            _handover_link(request=request, actor=actor)
    except ReplayRefused as exc:
        replay_refusal_record(run=run, actor=actor, stage="request", error=exc)
        raise
    return request


def _handover_link(*, request: ReplayRequest, actor: Person) -> None:
    """Link the run's open handover; a handed-over one moves to ``recovering`` through its own service."""
    from handover.handovers.models import Handover
    from handover.handovers.selectors import handover_for_run
    from handover.handovers.services import handover_start_recovery

    handover = next((h for h in handover_for_run(run=request.run) if h.is_open), None)
    if handover is None:
        return
    ReplayRequest.objects.filter(pk=request.pk).update(handover=handover)
    request.handover = handover
    if handover.status == Handover.Status.HANDED_OVER:
        try:
            handover_start_recovery(handover=handover, actor=actor)
        except InvalidTransition:  # someone moved it meanwhile; the link stands
            logger.info("handover %s was not moved to recovering", handover.public_id)


# --- changing the scope, cancelling, expiring -----------------------------------------------------


def replay_request_rescope(
    *,
    request: ReplayRequest,
    actor: Person,
    record_ids: list[str] | None = None,
    all_items: bool = False,
    fix_reference: str | None = None,
    note: str = "",
) -> ReplayRequest:
    """Replace the scope of a pending or approved request; every live approval is voided.

    The new scope is checked like a new request (stage ``create``, this request's own items not
    counting as overlapping). The fingerprint changes, the revision goes up, and an approved
    request returns to ``pending``. Raises ReplayForbidden (403) unless the actor may manage the
    request; DomainError (400) for a malformed scope; InvalidTransition (409) once dispatched or
    closed; ReplayRefused (409) naming each failed rule. Side effects: items replaced, approvals
    voided, one ``replay_rescoped`` event.
    """
    if not may_manage_replay(user=actor, request=request):
        raise ReplayForbidden("Only the requester, support on this tenant or the job's technical owner.")
    run = request.run
    fix = request.fix_reference if fix_reference is None else redact_text(fix_reference).strip()[:500]
    note = redact_text(note or "").strip()
    if request.kind == ReplayRequest.Kind.REJECTED_FIXED and not fix:
        raise DomainError("Name where the fix is recorded.", errors={"fix_reference": ["required"]})
    items = _scope_items(run=run, kind=request.kind, record_ids=record_ids, all_items=all_items)
    try:
        with transaction.atomic():
            locked = (
                ReplayRequest.objects.select_for_update(of=("self",))
                .select_related("run__job", "run__tenant")
                .get(pk=request.pk)
            )
            allowed_from, _ = ReplayRequest.TRANSITIONS["rescope"]
            if locked.status not in allowed_from:
                raise InvalidTransition(
                    f"The replay request is {locked.status}; its scope can change only while pending or approved.",
                    errors={"status": [locked.status]},
                )
            Run.objects.select_for_update().filter(pk=run.pk).first()
            checks = evaluate(
                run=run,
                kind=locked.kind,
                fix_reference=fix,
                items=items,
                stage="create",
                request=locked,
                requester=locked.requested_by,
            )
            error = refusal(checks)
            if error is not None:
                raise error
            rows = _scope_rows(items)
            before = (locked.scope_fingerprint, locked.item_count)
            disclosures = run_ledger_disclosures(run=run)
            fingerprint = scope_fingerprint(
                run=run, kind=locked.kind, fix_reference=fix, record_ids=(r[1] for r in rows), disclosures=disclosures
            )
            voided = approvals_void(request=locked, reason="the scope changed")
            ReplayRequestItem.objects.filter(request=locked).delete()
            try:
                with transaction.atomic():
                    _items_insert(locked, rows)
            except IntegrityError as exc:
                raise _overlap_refusal() from exc
            ReplayRequest.objects.filter(pk=locked.pk).update(
                scope_fingerprint=fingerprint,
                ledger_disclosures=disclosures,
                scope_revision=locked.scope_revision + 1,
                item_count=len(rows),
                fix_reference=fix,
                checks=[c.as_dict() for c in checks],
                checked_at=timezone.now(),
            )
            moved, _ = replay_request_transition(
                request=locked,
                action="rescope",
                actor=actor,
                reason=note,
                summary=f"Replay scope changed by {_name(actor)}: {before[1]:,} → {len(rows):,} item(s); "
                f"{voided} approval(s) voided" + (f" — {note}" if note else ""),
                data={
                    "previous_fingerprint": before[0],
                    "scope_fingerprint": fingerprint,
                    "item_count": len(rows),
                    "voided_approvals": voided,
                },
            )
    except ReplayRefused as exc:
        replay_refusal_record(run=run, actor=actor, stage="request", error=exc, request=request)
        raise
    return moved


def replay_request_cancel(*, request: ReplayRequest, actor: Person, reason: str) -> ReplayRequest:
    """Cancel a pending or approved request (before it leaves): a person's act, with a reason.

    Raises ReplayForbidden (403) unless the actor may manage it; DomainError (400) without a reason;
    InvalidTransition (409) once dispatched or closed (a cancelled one is returned as it is).
    Side effects: the items are released and one ``replay_cancelled`` event.
    """
    if not may_manage_replay(user=actor, request=request):
        raise ReplayForbidden("Only the requester, support on this tenant or the job's technical owner.")
    reason = redact_text(reason or "").strip()
    if not reason:
        raise DomainError("Say why the replay is cancelled.", errors={"reason": ["This field is required."]})
    return replay_request_transition(request=request, action="cancel", actor=actor, reason=reason)[0]


def replay_request_expire(*, request: ReplayRequest) -> tuple[ReplayRequest, bool]:
    """Expire a pending request past its ``expires_at``: its approvals are void and its items released.

    Guarded on the status *and* the expiry time, so a request approved meanwhile is left alone.
    Returns ``(request, moved)``; idempotent (an expired request is returned with ``moved`` False).
    """
    now = timezone.now()
    with transaction.atomic():
        locked = ReplayRequest.objects.select_for_update().filter(pk=request.pk).first()
        if locked is None or locked.status != ReplayRequest.Status.PENDING or locked.expires_at > now:
            current = ReplayRequest.objects.select_related("run__job", "run__tenant").get(pk=request.pk)
            return current, False
        voided = approvals_void(request=locked, reason="the request expired")
        return replay_request_transition(
            request=locked,
            action="expire",
            reason="pending past its time",
            summary=f"Replay request expired: still pending at {locked.expires_at:%Y-%m-%d %H:%M}Z; "
            f"{voided} approval(s) void",
            data={"voided_approvals": voided},
        )


# --- completing, failing, settling ----------------------------------------------------------------


def replay_request_complete_if_confirmed(
    *, request: ReplayRequest, actor: Person | None = None, note: str = ""
) -> tuple[ReplayRequest, bool]:
    """Complete a dispatched request once its attempt succeeded and the ledger confirms the whole scope.

    Also the settling path for a dispatch a person found ``unknown`` but the ledger now confirms.
    Nothing happens (``False``) while the ledger still lacks an item. On completion, in the same
    transaction: the ``replay_completed`` event and the next-run check of the run's target
    (``runs.checks.scheduling.next_run_check_schedule``; skipped, with the reason in the event, when the
    run has no active target). Returns ``(request, completed now)``.
    """
    from runs.checks.scheduling import CheckRequester, next_run_check_schedule

    with transaction.atomic():
        locked = (
            ReplayRequest.objects.select_for_update(of=("self",))
            .select_related("run__job", "run__tenant", "run__target")
            .get(pk=request.pk)
        )
        if locked.status != ReplayRequest.Status.DISPATCHED:
            return locked, False
        dispatch = Dispatch.objects.filter(request=locked).select_related("attempt").first()
        ran = dispatch is not None and (dispatch.status == Dispatch.Status.SUCCEEDED or actor is not None)
        if not ran or not scope_is_completed(request=locked):
            return locked, False
        run = locked.run
        check_note = ""
        check_id = None
        if run.target is not None and run.target.is_active:
            try:
                check, _ = next_run_check_schedule(
                    target=run.target,
                    after=timezone.now(),
                    requested_by=CheckRequester.replay_request(locked.public_id),
                    recovered_run=run,
                    actor=actor,
                )
                check_id = str(check.public_id)
                check_note = f"; next-run check expects the run at {check.expected_at:%Y-%m-%d %H:%M}Z"
            except DomainError as exc:
                check_note = f"; no next-run check: {exc.detail}"
        else:
            check_note = "; no next-run check: no active job target expects this run"
        attempt = dispatch.attempt if dispatch is not None else None
        what = (
            f"attempt {attempt.number} succeeded and "
            if attempt is not None and dispatch is not None and dispatch.status == "succeeded"
            else ""
        )
        moved, changed = replay_request_transition(
            request=locked,
            action="complete",
            actor=actor,
            reason=note or "the ledger confirms every item in scope",
            summary=f"Replay completed: {what}the ledger confirms all {locked.item_count:,} item(s) in scope"
            + (f" (settled by {_name(actor)}: {note})" if actor is not None else "")
            + check_note,
            data={"next_run_check": check_id},
        )
    return moved, changed


def replay_request_settle(*, request: ReplayRequest, actor: Person, outcome: str, reason: str) -> ReplayRequest:
    """A person's decision on a dispatch that is ``unknown`` (or succeeded without the ledger's confirmation).

    ``outcome``: ``failed`` (it did not run, or not fully: the items are released; a re-send is a
    new request with new approvals) or ``completed`` (only when the ledger confirms every item in
    scope). Raises ReplayForbidden (403) unless the actor may manage the request; DomainError (400)
    for another outcome or a missing reason; InvalidTransition (409) unless the request is
    dispatched with a dispatch in ``unknown`` or ``succeeded``; ReplayRefused (409) for
    ``completed`` while the ledger does not confirm the scope.
    """
    if not may_manage_replay(user=actor, request=request):
        raise ReplayForbidden("Only the requester, support on this tenant or the job's technical owner.")
    reason = redact_text(reason or "").strip()
    if outcome not in ("failed", "completed"):
        raise DomainError("Settle as failed or completed.", errors={"outcome": ["failed or completed"]})
    if not reason:
        raise DomainError("Say what you found.", errors={"reason": ["This field is required."]})
    dispatch = Dispatch.objects.filter(request=request).first()
    if (
        request.status != ReplayRequest.Status.DISPATCHED
        or dispatch is None
        or dispatch.status not in (Dispatch.Status.UNKNOWN, Dispatch.Status.SUCCEEDED)
    ):
        raise InvalidTransition(
            "Only a dispatched replay whose dispatch is unknown, or succeeded without the ledger's "
            "confirmation, is settled by a person.",
            errors={"status": [request.status]},
        )
    if outcome == "failed":
        return replay_request_transition(
            request=request,
            action="fail",
            actor=actor,
            reason=reason,
            summary=f"Replay settled as failed by {_name(actor)}: {reason} (a re-send is a new request)",
        )[0]
    moved, changed = replay_request_complete_if_confirmed(request=request, actor=actor, note=reason)
    if not changed:
        detail = "the ledger does not confirm every item in scope as completed yet"
        raise ReplayRefused(f"Refused by rule 2 (scope): {detail}.", errors={"scope_outcome": [detail]})
    return moved


def run_recovery_decision_record(
    *, run: Run, actor: Person, decision: str, reference: str = "", note: str = ""
) -> TimelineEvent:
    """Record a recovery route other than a replay, as a decision on the run's timeline (no dispatch).

    ``decision``: ``wait_for_retry`` (``reference`` names the retry: execution id, scheduler
    reference) or ``dependency_corrected`` (no replay needed; ``note`` says what was corrected).
    Raises ReplayForbidden (403) unless the actor is support on the tenant or technical owner of the
    job; DomainError (400) for an unknown decision or a missing reference / note. Returns the event.
    """
    if not may_act_on_run(user=actor, run=run):
        raise ReplayForbidden("Only support on this tenant or the job's technical owner records recovery decisions.")
    if decision not in RECOVERY_DECISIONS:
        raise DomainError(
            f"{decision!r} is not a recovery decision ({', '.join(RECOVERY_DECISIONS)}).",
            errors={"decision": ["unknown decision"]},
        )
    reference, note = redact_text(reference or "").strip()[:300], redact_text(note or "").strip()[:2000]
    if decision == "wait_for_retry" and not reference:
        raise DomainError("Name the automatic retry you wait for.", errors={"reference": ["required"]})
    if decision == "dependency_corrected" and not note:
        raise DomainError("Say which dependency was corrected.", errors={"note": ["required"]})
    summary = f"Recovery decision by {_name(actor)}: {RECOVERY_DECISIONS[decision].lower()}"
    if reference:
        summary += f" ({reference})"
    if note:
        summary += f" — {note}"
    with transaction.atomic():
        return timeline_event_record(
            job=run.job,
            run=run,
            kind=TimelineEvent.Kind.RECOVERY_DECISION,
            summary=summary,
            actor=actor,
            data={"decision": decision, "reference": reference, "note": note},
        )

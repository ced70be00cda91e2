"""Business and technical decisions on a replay request, and the approver's password re-entry.

An approval is refused (each refusal names the rule) when: the approver has not re-entered their
password in the last five minutes; they are the requester, lack the explicit permission for that
kind on this tenant or job, or already decided the other kind (rule 4); the scope changed since
they looked (its fingerprint differs); the request is no longer pending or has expired; or a
precondition fails (rules 2 and 3; the technical approval must accept an ``unknown`` repeat
safety explicitly, with a reason). The second approval moves the request to ``approved`` and
enqueues its dispatch after commit.
"""

from __future__ import annotations

import hmac
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.utils import timezone

from approvals.replays.models import Approval, ReplayRequest
from approvals.replays.requests import (
    checks_store,
    replay_event_record,
    replay_refusal_record,
    replay_request_expire,
    replay_request_transition,
)
from approvals.replays.rules import (
    ApprovalNotAllowed,
    ReauthenticationRequired,
    ReplayRefused,
    evaluate,
    refusal,
    side_effects,
)
from handover.core.errors import Conflict, DomainError, InvalidTransition
from handover.core.people import Person
from runs.alerts.redaction import redact_text
from runs.ledger.models import WorkItem
from runs.permissions import may_decide
from runs.timeline.models import TimelineEvent

REAUTH_KEY = "approvals:reauth:{user}:{ref}"
REAUTH_FAILURES_KEY = "approvals:reauth-failures:{user}"
REAUTH_FAILURE_WINDOW_SECONDS = 15 * 60
KIND_WORDS = {"business": "Business", "technical": "Technical"}


class TooManyAttempts(DomainError):
    """Too many wrong passwords in a short time."""

    status = 429
    type = "too-many-requests"
    title = "Too many requests"


# --- password re-entry ------------------------------------------------------------------------------


def approver_reauthenticate(*, user: Person, password: str, credential_ref: str) -> datetime:
    """Check ``user``'s password again and remember the time for this session or token.

    ``credential_ref`` names what the person is signed in with (a session key, an API token's
    key): the re-entry counts only there. Valid for ``HANDOVER_REPLAY_REAUTH_SECONDS`` (300).
    Raises ReauthenticationRequired (403) for a wrong password and TooManyAttempts (429) after
    ``HANDOVER_REPLAY_REAUTH_MAX_FAILURES`` wrong ones in 15 minutes. Returns the time recorded.
    """
    failures_key = REAUTH_FAILURES_KEY.format(user=user.pk)
    if int(cache.get(failures_key, 0)) >= settings.HANDOVER_REPLAY_REAUTH_MAX_FAILURES:
        raise TooManyAttempts("Too many wrong passwords: wait a quarter of an hour, then try again.")
    if not password or not user.check_password(password):
        try:
            cache.incr(failures_key)
        except ValueError:
            cache.set(failures_key, 1, REAUTH_FAILURE_WINDOW_SECONDS)
        raise ReauthenticationRequired("The password is not correct.", errors={"password": ["not correct"]})
    now = timezone.now()
    cache.set(
        REAUTH_KEY.format(user=user.pk, ref=credential_ref),
        now.isoformat(),
        settings.HANDOVER_REPLAY_REAUTH_SECONDS,
    )
    cache.delete(failures_key)
    return now


def approver_reauthenticated_at(*, user: Person, credential_ref: str) -> datetime | None:
    """When ``user`` last re-entered their password in this session or token (None if not recently)."""
    stored = cache.get(REAUTH_KEY.format(user=user.pk, ref=credential_ref))
    if not stored:
        return None
    try:
        return datetime.fromisoformat(stored)
    except (TypeError, ValueError):
        return None


def _require_fresh(reauthenticated_at: datetime | None) -> None:
    window = timedelta(seconds=settings.HANDOVER_REPLAY_REAUTH_SECONDS)
    if reauthenticated_at is None or timezone.now() - reauthenticated_at > window:
        raise ReauthenticationRequired(
            "Re-enter your password before approving or rejecting (it counts for five minutes).",
            errors={"password": ["re-enter your password"]},
        )


# --- decisions ------------------------------------------------------------------------------------


def _live(request: ReplayRequest) -> list[Approval]:
    return list(Approval.objects.filter(request=request, voided_at__isnull=True).select_related("actor"))


def _check_person(*, request: ReplayRequest, actor: Person, kind: str) -> None:
    if kind not in Approval.Kind.values:
        raise DomainError(f"{kind!r} is not an approval kind.", errors={"kind": ["business or technical"]})
    if request.requested_by_id == actor.pk:
        raise ApprovalNotAllowed(
            "Refused by rule 4 (two eligible approvers): the requester cannot approve or reject their own request.",
            errors={"not_requester": ["rule 4: the requester cannot decide on their own request"]},
        )
    if not may_decide(user=actor, run=request.run, kind=kind):
        where = f"tenant {request.run.tenant.slug}" if kind == "business" else f"job {request.run.job.key}"
        role = "business owner" if kind == "business" else "technical owner"
        raise ApprovalNotAllowed(
            f"Refused by rule 4 (two eligible approvers): a {kind} decision needs the {role} role on the {where}.",
            errors={"approver_permission": [f"rule 4: needs the {role} role on the {where}"]},
        )


def replay_request_decide(
    *,
    request: ReplayRequest,
    actor: Person,
    kind: str,
    decision: str,
    scope_fingerprint: str,
    reauthenticated_at: datetime | None,
    comment: str = "",
    accepts_unknown_repeat_safety: bool = False,
    acceptance_reason: str = "",
) -> ReplayRequest:
    """Record ``actor``'s ``kind`` decision (``approve`` or ``reject``) on the exact scope ``scope_fingerprint``.

    ``reauthenticated_at``: when the approver last re-entered their password (must be within five
    minutes). A rejection needs a ``comment`` and rejects the request. An approval is checked
    against every precondition again; the technical approval of a job whose repeat safety is
    ``unknown`` must set ``accepts_unknown_repeat_safety`` with an ``acceptance_reason``. The
    second live approval moves the request to ``approved`` and, after commit, enqueues
    ``approvals.replay_request_dispatch``.

    Raises ReauthenticationRequired (403); ApprovalNotAllowed (403, rule 4: requester, missing
    permission, the same person for both kinds); DomainError (400: unknown kind or decision,
    missing comment or reason); InvalidTransition (409: not pending, expired -- an overdue request
    is expired first); Conflict (409: that kind was already decided); ReplayRefused (409: the scope
    changed since the approver looked, or a precondition fails -- recorded in the audit trail, not
    on the run's timeline).
    Side effects: the Approval, a ``replay_approval`` event, the transition and its event.
    """
    action = "approve" if decision == Approval.Decision.APPROVE else "reject"
    comment, acceptance_reason = _decision_inputs(
        request=request,
        actor=actor,
        kind=kind,
        decision=decision,
        reauthenticated_at=reauthenticated_at,
        comment=comment,
        accepts_unknown_repeat_safety=accepts_unknown_repeat_safety,
        acceptance_reason=acceptance_reason,
    )
    try:
        with transaction.atomic():
            locked = _lock_for_decision(request=request, action=action, scope_fingerprint=scope_fingerprint)
            live = _live(locked)
            _check_not_decided(live=live, actor=actor, kind=kind)
            effects, repeat_safety = side_effects(run=locked.run)
            if kind != Approval.Kind.TECHNICAL or repeat_safety != "unknown":
                accepts_unknown_repeat_safety, acceptance_reason = False, ""
            if decision == Approval.Decision.APPROVE:
                _check_approval_rules(
                    request=locked,
                    kind=kind,
                    repeat_safety=repeat_safety,
                    accepts_unknown_repeat_safety=accepts_unknown_repeat_safety,
                )
            _approval_record(
                request=locked,
                actor=actor,
                kind=kind,
                decision=decision,
                comment=comment,
                accepts_unknown_repeat_safety=accepts_unknown_repeat_safety,
                acceptance_reason=acceptance_reason,
                effects=effects,
            )
            return _decision_settle(
                request=locked, actor=actor, kind=kind, decision=decision, comment=comment, live=live
            )
    except ReplayRefused as exc:
        replay_refusal_record(run=request.run, actor=actor, stage="approval", error=exc, request=request)
        raise


def _decision_inputs(
    *,
    request: ReplayRequest,
    actor: Person,
    kind: str,
    decision: str,
    reauthenticated_at: datetime | None,
    comment: str,
    accepts_unknown_repeat_safety: bool,
    acceptance_reason: str,
) -> tuple[str, str]:
    """Check who decides and what they sent (before any lock); expire an overdue request.

    Returns the redacted ``(comment, acceptance_reason)``. Raises as ``replay_request_decide`` says.
    """
    _require_fresh(reauthenticated_at)
    _check_person(request=request, actor=actor, kind=kind)
    if decision not in Approval.Decision.values:
        raise DomainError(f"{decision!r} is not a decision.", errors={"decision": ["approve or reject"]})
    comment = redact_text(comment or "").strip()
    acceptance_reason = redact_text(acceptance_reason or "").strip()
    if decision == Approval.Decision.REJECT and not comment:
        raise DomainError("Say why you reject the replay.", errors={"comment": ["required to reject"]})
    if accepts_unknown_repeat_safety and not acceptance_reason:
        raise DomainError(
            "Accepting an unknown repeat safety needs a reason.", errors={"acceptance_reason": ["required"]}
        )
    if request.status == ReplayRequest.Status.PENDING and request.expires_at <= timezone.now():
        replay_request_expire(request=request)
        raise InvalidTransition(
            "The replay request expired before this decision: its approvals are void; request it again.",
            errors={"status": ["expired"]},
        )
    return comment, acceptance_reason


def _lock_for_decision(*, request: ReplayRequest, action: str, scope_fingerprint: str) -> ReplayRequest:
    """Lock the request and check it may take the decision: a source status of ``action`` in
    ``ReplayRequest.TRANSITIONS`` (pending), not expired, the approver's scope fingerprint current."""
    locked = (
        ReplayRequest.objects.select_for_update(of=("self",))
        .select_related("run__job", "run__tenant", "requested_by")
        .get(pk=request.pk)
    )
    allowed_from = ReplayRequest.TRANSITIONS[action][0]
    if locked.status not in allowed_from:
        raise InvalidTransition(
            f"The replay request is {locked.status}: decisions are taken only while it is "
            f"{' or '.join(sorted(allowed_from))}.",
            errors={"status": [locked.status]},
        )
    if locked.expires_at <= timezone.now():
        raise InvalidTransition("The replay request has expired.", errors={"status": ["expired"]})
    if not hmac.compare_digest(str(scope_fingerprint or ""), locked.scope_fingerprint):
        detail = (
            "the scope changed since you looked (its fingerprint differs): review the current scope "
            f"(revision {locked.scope_revision}, {locked.item_count:,} item(s)) and decide again"
        )
        raise ReplayRefused(
            f"Refused: approvals are bound to the exact scope; {detail}.", errors={"scope_fingerprint": [detail]}
        )
    return locked


def _check_not_decided(*, live: list[Approval], actor: Person, kind: str) -> None:
    """Rule 4: one decision per kind, and one person never gives both."""
    same_kind = next((a for a in live if a.kind == kind), None)
    if same_kind is not None:
        raise Conflict(
            f"The {kind} decision was already given by {same_kind.actor.get_username()}.",
            errors={"kind": [f"already decided by {same_kind.actor.get_username()}"]},
        )
    if any(a.actor_id == actor.pk for a in live):
        raise ApprovalNotAllowed(
            "Refused by rule 4 (two eligible approvers): one person cannot give both approvals.",
            errors={"different_approvers": ["rule 4: one person cannot give both approvals"]},
        )


def _check_approval_rules(
    *, request: ReplayRequest, kind: str, repeat_safety: str, accepts_unknown_repeat_safety: bool
) -> None:
    """Every precondition again at approval (``rules.evaluate``), and rule 3's explicit acceptance of
    an unknown repeat safety by the technical approval; stores the checks. Raises ReplayRefused."""
    items = WorkItem.objects.filter(replay_items__request=request)
    checks = evaluate(
        run=request.run,
        kind=request.kind,
        fix_reference=request.fix_reference,
        items=items,
        stage="approve",
        request=request,
        repeat_safety=repeat_safety,
    )
    error = refusal(checks)
    if error is None and kind == Approval.Kind.TECHNICAL and repeat_safety == "unknown":
        if not accepts_unknown_repeat_safety:
            detail = (
                "the job's repeat safety is unknown: the technical approval must accept it explicitly, with a reason"
            )
            error = ReplayRefused(
                f"Refused by rule 3 (repeat safety): {detail}.",
                errors={"repeat_safety": [f"rule 3 (repeat safety): {detail}"]},
            )
    if error is not None:
        raise error
    checks_store(request=request, checks=checks)


def _approval_record(
    *,
    request: ReplayRequest,
    actor: Person,
    kind: str,
    decision: str,
    comment: str,
    accepts_unknown_repeat_safety: bool,
    acceptance_reason: str,
    effects: list[Any],
) -> Approval:
    """Write the Approval (bound to the scope's fingerprint) and its ``replay_approval`` event."""
    try:
        with transaction.atomic():
            approval = Approval.objects.create(
                request=request,
                kind=kind,
                decision=decision,
                comment=comment,
                actor=actor,
                requester=request.requested_by,
                decided_at=timezone.now(),
                scope_fingerprint=request.scope_fingerprint,
                accepts_unknown_repeat_safety=accepts_unknown_repeat_safety,
                acceptance_reason=acceptance_reason,
            )
    except IntegrityError as exc:  # a concurrent decision of the same kind or by the same person
        raise Conflict(
            f"The {kind} decision was given by someone else at the same moment.", errors={"kind": ["already decided"]}
        ) from exc
    verb = "given" if decision == Approval.Decision.APPROVE else "refused (rejected)"
    summary = f"{KIND_WORDS[kind]} approval {verb} by {actor.get_username()}"
    if accepts_unknown_repeat_safety:
        summary += f", accepting the unknown repeat safety: {acceptance_reason}"
    if comment:
        summary += f" — {comment}"
    replay_event_record(
        request=request,
        kind=TimelineEvent.Kind.REPLAY_APPROVAL,
        summary=summary,
        actor=actor,
        data={
            "approval": str(approval.public_id),
            "kind": kind,
            "decision": decision,
            "scope_fingerprint": request.scope_fingerprint,
            "accepts_unknown_repeat_safety": accepts_unknown_repeat_safety,
            "side_effects": [f"{e.description} ({e.repeat_safety})" for e in effects],
        },
    )
    return approval


def _decision_settle(
    *, request: ReplayRequest, actor: Person, kind: str, decision: str, comment: str, live: list[Approval]
) -> ReplayRequest:
    """Move the request after a decision: a rejection rejects it; the second live approval approves it
    and enqueues its dispatch on commit; a first approval leaves it pending."""
    if decision == Approval.Decision.REJECT:
        return replay_request_transition(
            request=request, action="reject", actor=actor, reason=f"{kind} approval refused: {comment}"
        ).obj
    kinds = {a.kind for a in live if a.decision == Approval.Decision.APPROVE} | {kind}
    if kinds != set(Approval.Kind.values):
        return request
    moved, changed = replay_request_transition(
        request=request,
        action="approve",
        actor=actor,
        summary="Replay approved: business and technical approvals given by two different people",
    )
    if changed:
        pk = moved.pk
        transaction.on_commit(lambda: _enqueue_dispatch(pk))
    return moved


def _enqueue_dispatch(request_pk: int) -> None:
    from approvals.replays import tasks as replay_tasks

    replay_tasks.replay_request_dispatch.delay(request_pk)


def replay_request_approve(
    *,
    request: ReplayRequest,
    actor: Person,
    kind: str,
    scope_fingerprint: str,
    reauthenticated_at: datetime | None,
    comment: str = "",
    accepts_unknown_repeat_safety: bool = False,
    acceptance_reason: str = "",
) -> ReplayRequest:
    """Give the ``kind`` approval (see ``replay_request_decide``)."""
    return replay_request_decide(
        request=request,
        actor=actor,
        kind=kind,
        decision=Approval.Decision.APPROVE,
        scope_fingerprint=scope_fingerprint,
        reauthenticated_at=reauthenticated_at,
        comment=comment,
        accepts_unknown_repeat_safety=accepts_unknown_repeat_safety,
        acceptance_reason=acceptance_reason,
    )


def replay_request_reject(
    *,
    request: ReplayRequest,
    actor: Person,
    kind: str,
    scope_fingerprint: str,
    reauthenticated_at: datetime | None,
    comment: str,
) -> ReplayRequest:
    """Refuse the ``kind`` approval, which rejects the request (see ``replay_request_decide``)."""
    return replay_request_decide(
        request=request,
        actor=actor,
        kind=kind,
        decision=Approval.Decision.REJECT,
        scope_fingerprint=scope_fingerprint,
        reauthenticated_at=reauthenticated_at,
        comment=comment,
    )


def approver_reauthentication(*, user: Person, credential_ref: str, password: str = "") -> datetime | None:
    """When the approver last re-entered their password here: checked now when ``password`` is given.

    With a password: ``approver_reauthenticate`` (raises for a wrong one). Without: the time kept
    for this session or token, or None.
    """
    if password:
        return approver_reauthenticate(user=user, password=password, credential_ref=credential_ref)
    return approver_reauthenticated_at(user=user, credential_ref=credential_ref)


def reauth_credential_ref(request: Any) -> str:
    """What a person is signed in with, for the password re-entry: their API token, else their session.

    ``request``: a Django or DRF request. A session without a key is saved first so it has one.
    """
    token_key = getattr(getattr(request, "auth", None), "token_key", None)
    if token_key:
        return f"token:{token_key}"
    session = getattr(request, "session", None)
    if session is None:
        return "none"
    if not session.session_key:
        session.save()
    return f"session:{session.session_key}"

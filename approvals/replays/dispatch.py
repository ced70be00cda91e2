"""Dispatch, once: releasing an approved request to the job's runner, the runner's claim and reports.

Exactly one Dispatch per request (a unique constraint) with one idempotency key, whatever races:
every trigger locks the request row, and whoever finds it already ``dispatched`` returns the
existing dispatch (``created`` False) -- concurrent approvals, repeated triggers, two claims and a
retried delivery task all end with one dispatch, one key and one ``replay_dispatched`` event
(rule 5 in docs/architecture.md).

A claim (or a delivered webhook) is a lease: the runner must report the replay's attempt as
started before ``lease_expires_at``, or the sweep makes the dispatch ``unknown`` for a person to
decide -- it is never re-dispatched automatically. The replay's attempt is linked only when
reported through ``dispatch_runner_report`` with the job's runner credential *and* the request's
key (rule 7), and is created as ``manual_replay`` through ``runs.attempts.services.attempt_report_apply``.
"""

from __future__ import annotations

import hmac
import json
import secrets
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone

from approvals.replays.models import Approval, Dispatch, ReplayRequest, ReplayRequestItem, ReplayWebhook
from approvals.replays.requests import (
    ReplayForbidden,
    checks_store,
    replay_event_record,
    replay_refusal_record,
    replay_request_complete_if_confirmed,
    replay_request_transition,
)
from approvals.replays.rules import ReplayRefused, evaluate, refusal
from handover.core.errors import Conflict, DomainError, InvalidTransition, NotFound
from handover.core.links import absolute_url
from handover.core.people import Person
from handover.core.transitions import Transitioned, transition
from runs.alerts.redaction import redact_text
from runs.attempts.details import AttemptDetails
from runs.attempts.models import Attempt, Run
from runs.attempts.services import AttemptReportResult, attempt_report_apply, run_status_refresh
from runs.catalog.models import RunnerCredential
from runs.ledger.models import WorkItem
from runs.permissions import may_manage_replay
from runs.timeline.models import TimelineEvent, TimelineEventKind

REPORTABLE_STATUSES = (
    Attempt.Status.RUNNING,
    Attempt.Status.SUCCEEDED,
    Attempt.Status.FAILED,
    Attempt.Status.TIMED_OUT,
)
# The timeline event of each attempt status a dispatch follows.
REPLAY_ATTEMPT_KINDS = {
    Attempt.Status.RUNNING: TimelineEvent.Kind.REPLAY_ATTEMPT_STARTED,
    Attempt.Status.SUCCEEDED: TimelineEvent.Kind.REPLAY_ATTEMPT_SUCCEEDED,
    Attempt.Status.FAILED: TimelineEvent.Kind.REPLAY_ATTEMPT_FAILED,
    Attempt.Status.TIMED_OUT: TimelineEvent.Kind.REPLAY_ATTEMPT_TIMED_OUT,
}
DISPATCH_ACTION_FOR_ATTEMPT = {
    Attempt.Status.RUNNING: "start",
    Attempt.Status.SUCCEEDED: "succeed",
    Attempt.Status.FAILED: "fail",
    Attempt.Status.TIMED_OUT: "fail",
}


class ReplayKeyMismatch(DomainError):
    """Rule 7: a report without the replay's key (or with another job's credential) is not this replay's."""

    status = 403
    type = "replay-key-mismatch"
    title = "Not this replay's runner or key"


def runner_urls(*, request: ReplayRequest, http_request: HttpRequest | None = None) -> dict[str, str]:
    """The replay's ``claim_url`` and ``report_url``: from ``http_request`` when answering one (the claim),
    else from ``HANDOVER_BASE_URL`` (the webhook body, built outside a request)."""
    return {
        "claim_url": absolute_url(
            reverse("approvals-api:replay-claim", kwargs={"id": request.public_id}), http_request
        ),
        "report_url": absolute_url(
            reverse("approvals-api:replay-runner-report", kwargs={"id": request.public_id}), http_request
        ),
    }


def dispatch_payload(*, request: ReplayRequest, dispatch_id: str, key: str, channel: str) -> str:
    """The webhook body (and the claim's answer): request, run, scope and where to claim and report.

    JSON with keys ``type``, ``replay_request``, ``dispatch``, ``idempotency_key``, ``channel``,
    ``kind``, ``fix_reference``, ``run`` (id, job, tenant, environment, window), ``record_ids``
    (sorted), ``claim_url`` and ``report_url``. Built once per dispatch.
    """
    run = request.run
    record_ids = list(
        ReplayRequestItem.objects.filter(request=request).order_by("record_id").values_list("record_id", flat=True)
    )
    body = {
        "type": "replay.dispatched",
        "replay_request": str(request.public_id),
        "dispatch": dispatch_id,
        "idempotency_key": key,
        "channel": channel,
        "kind": request.kind,
        "fix_reference": request.fix_reference,
        "run": {
            "id": str(run.public_id),
            "job": run.job.key,
            "tenant": run.tenant.slug,
            "environment": run.environment,
            "window_start": run.window_start.isoformat(),
            "window_end": run.window_end.isoformat(),
        },
        "record_ids": record_ids,
        **runner_urls(request=request),
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def dispatch_transition(
    *,
    dispatch: Dispatch,
    action: str,
    values: dict[str, Any] | None = None,
    summary: str = "",
    event_kind: TimelineEventKind | None = None,
    actor: Person | None = None,
    attempt: Attempt | None = None,
    data: dict[str, Any] | None = None,
    guard: dict[str, Any] | None = None,
) -> Transitioned[Dispatch]:
    """Move ``dispatch`` by ``action`` (``Dispatch.TRANSITIONS``) with the guarded UPDATE of
    ``handover.core.transitions.transition``; one event when it moves.

    ``guard``: extra filters (e.g. the lease time). Returns ``Transitioned(dispatch, moved)``:
    already in the target status → ``moved`` False; otherwise InvalidTransition (409).
    ``event_kind`` None writes no event.
    """
    now = timezone.now()
    target = Dispatch.TRANSITIONS[action][1]

    def record(current: Dispatch, before: str) -> None:
        if event_kind:
            replay_event_record(
                request=current.request,
                kind=event_kind,
                summary=summary,
                actor=actor,
                attempt=attempt,
                data={"dispatch": str(current.public_id), "from": before, "to": target, **(data or {})},
            )

    return transition(
        queryset=Dispatch.objects.select_related("request__run__job", "request__run__tenant"),
        pk=dispatch.pk,
        table=Dispatch.TRANSITIONS,
        action=action,
        values={"status_changed_at": now, "updated_at": now, **(values or {})},
        noun="the dispatch",
        guard=guard,
        on_moved=record,
    )


def _live_approvals(request: ReplayRequest) -> dict[str, Approval]:
    return {
        a.kind: a
        for a in Approval.objects.filter(
            request=request, voided_at__isnull=True, decision=Approval.Decision.APPROVE
        ).select_related("actor")
    }


def replay_request_dispatch(
    *, request: ReplayRequest, actor: Person | None = None, via: RunnerCredential | None = None
) -> tuple[Dispatch, bool]:
    """Release an approved request, once: create its one Dispatch and move it to ``dispatched``.

    Every precondition is checked again (stage ``dispatch``: no attempt queued or running, job not
    paused, repeat safety accepted, scope still absent and verified, no overlap) with both live
    approvals bound to the current fingerprint. A held dispatch keeps the request ``approved``,
    stores the checks and writes a ``replay_dispatch_blocked`` event when the reasons change, then
    raises ReplayRefused (409); the sweep tries again. The channel is ``webhook`` when the job has an
    active ReplayWebhook (delivery enqueued on commit), else ``claim``; ``via``: the runner
    credential whose claim triggered it.

    Idempotent: a request already dispatched (or completed, failed) returns its dispatch with
    ``created`` False -- the losing path of every race. Raises InvalidTransition (409) from other
    statuses. A person (``actor``) must be allowed to manage the request (``runs.permissions.may_manage_replay``),
    else ReplayForbidden (403); the sweep and a runner's claim pass no actor. Returns
    ``(dispatch, created)``.
    """
    if actor is not None and not may_manage_replay(user=actor, request=request):
        raise ReplayForbidden("Only the requester, support on this tenant or the job's technical owner.")
    blocked: ReplayRefused | None = None
    with transaction.atomic():
        locked = (
            ReplayRequest.objects.select_for_update(of=("self",))
            .select_related("run__job", "run__tenant", "requested_by")
            .get(pk=request.pk)
        )
        if locked.status in (
            ReplayRequest.Status.DISPATCHED,
            ReplayRequest.Status.COMPLETED,
            ReplayRequest.Status.FAILED,
        ):
            return Dispatch.objects.select_related("request").get(request=locked), False
        if locked.status != ReplayRequest.Status.APPROVED:
            raise InvalidTransition(
                f"The replay request is {locked.status}: only an approved request is dispatched.",
                errors={"status": [locked.status]},
            )
        approvals = _live_approvals(locked)
        if set(approvals) != set(Approval.Kind.values) or any(
            a.scope_fingerprint != locked.scope_fingerprint for a in approvals.values()
        ):
            raise InvalidTransition("The approvals are missing or were given for another scope.")
        checks = evaluate(
            run=locked.run,
            kind=locked.kind,
            fix_reference=locked.fix_reference,
            items=WorkItem.objects.filter(replay_items__request=locked),
            stage="dispatch",
            request=locked,
            technical_approval=approvals[Approval.Kind.TECHNICAL],
        )
        blocked = refusal(checks)
        previous = {c["code"] for c in (locked.checks or []) if not c.get("ok") and c.get("blocking", True)}
        checks_store(request=locked, checks=checks)
        if blocked is None:
            dispatch, created = _dispatch_create(request=locked, actor=actor, via=via)
            return dispatch, created
        if set(blocked.errors) != previous:
            replay_refusal_record(run=locked.run, actor=actor, stage="dispatch", error=blocked, request=locked)
    assert blocked is not None
    raise blocked


def _dispatch_create(
    *, request: ReplayRequest, actor: Person | None, via: RunnerCredential | None
) -> tuple[Dispatch, bool]:
    """Inside the request's lock: the Dispatch row (unique per request), the transition, the webhook enqueue."""
    now = timezone.now()
    webhook = ReplayWebhook.objects.filter(job_id=request.run.job_id, is_active=True).first()
    channel = Dispatch.Channel.WEBHOOK if webhook is not None else Dispatch.Channel.CLAIM
    key = f"rk_{secrets.token_urlsafe(24)}"
    dispatch = Dispatch(
        request=request,
        idempotency_key=key,
        channel=channel,
        status_changed_at=now,
        dispatched_by=actor,
        lease_expires_at=now + timedelta(seconds=settings.HANDOVER_REPLAY_CLAIM_WINDOW_SECONDS),
        next_delivery_at=now if webhook is not None else None,
    )
    dispatch.payload = dispatch_payload(request=request, dispatch_id=str(dispatch.public_id), key=key, channel=channel)
    try:
        with transaction.atomic():
            dispatch.save(force_insert=True)
    except IntegrityError:  # the database's own "once": another trigger won
        return Dispatch.objects.get(request=request), False
    how = "to the runner's webhook" if webhook is not None else "for the runner to claim"
    who = f" (claimed by runner {via.prefix}…)" if via is not None else ""
    replay_request_transition(
        request=request,
        action="dispatch",
        actor=actor,
        summary=f"Replay dispatched once {how}{who}; idempotency key {key[:10]}…",
        data={"dispatch": str(dispatch.public_id), "idempotency_key": key, "channel": channel},
    )
    if webhook is not None:
        pk = dispatch.pk
        transaction.on_commit(lambda: _enqueue_delivery(pk))
    return dispatch, True


def _enqueue_delivery(dispatch_pk: int) -> None:
    from approvals.replays import tasks as replay_tasks

    replay_tasks.dispatch_webhook_deliver.delay(dispatch_pk)


def _require_runner(*, request: ReplayRequest, credential: RunnerCredential) -> None:
    """A credential of another job may not even learn that the request exists (404)."""
    if credential.revoked_at is not None or credential.job_id != request.run.job_id:
        raise NotFound("No such replay request for this runner.")


def dispatch_claim(*, request: ReplayRequest, credential: RunnerCredential) -> tuple[Dispatch, bool]:
    """The runner claims ``request``: dispatch it if it is only approved, then lease it to ``credential``.

    Idempotent: a second claim with the same credential returns the same dispatch (``claimed`` False)
    and writes nothing. Raises NotFound (404) for a credential of another job; ReplayRefused (409)
    while the dispatch is held by a rule; Conflict (409) when another credential holds the lease;
    InvalidTransition (409) when the request is not approved or dispatched, or its dispatch already
    started, finished or is ``unknown``. Side effects: the lease (``lease_expires_at`` = now +
    ``HANDOVER_REPLAY_LEASE_SECONDS``) and one ``replay_claimed`` event. Returns ``(dispatch, claimed now)``.
    """
    _require_runner(request=request, credential=credential)
    if request.status == ReplayRequest.Status.APPROVED:
        replay_request_dispatch(request=request, via=credential)
    with transaction.atomic():
        dispatch = Dispatch.objects.select_for_update().filter(request=request).first()
        if dispatch is None:
            current = ReplayRequest.objects.get(pk=request.pk).status
            raise InvalidTransition(
                f"The replay request is {current}: only an approved request is claimed.", errors={"status": [current]}
            )
        if dispatch.claimed_by_id == credential.pk:
            return dispatch, False
        if dispatch.claimed_by_id is not None:
            raise Conflict("Another runner credential holds this replay's lease.")
        if dispatch.status not in (Dispatch.Status.PENDING, Dispatch.Status.LEASED):
            raise InvalidTransition(
                f"The dispatch is {dispatch.status}: it cannot be claimed"
                + (" (a person decides; a re-send is a new request)" if dispatch.status == "unknown" else "."),
                errors={"status": [dispatch.status]},
            )
        now = timezone.now()
        lease_until = now + timedelta(seconds=settings.HANDOVER_REPLAY_LEASE_SECONDS)
        values = {"claimed_at": now, "claimed_by": credential, "lease_expires_at": lease_until}
        summary = (
            f"Replay claimed by runner {credential.prefix}…; it must report the attempt as started by "
            f"{lease_until:%Y-%m-%d %H:%M:%S}Z"
        )
        if dispatch.status == Dispatch.Status.PENDING:
            claimed, _ = dispatch_transition(
                dispatch=dispatch,
                action="lease",
                values=values,
                summary=summary,
                event_kind=TimelineEvent.Kind.REPLAY_CLAIMED,
            )
        else:  # leased by a delivered webhook: the runner confirms with its credential
            Dispatch.objects.filter(pk=dispatch.pk, claimed_by__isnull=True).update(**values, updated_at=now)
            claimed = Dispatch.objects.select_related("request__run__job", "request__run__tenant").get(pk=dispatch.pk)
            replay_event_record(
                request=claimed.request,
                kind=TimelineEvent.Kind.REPLAY_CLAIMED,
                summary=summary,
                data={"dispatch": str(claimed.public_id)},
            )
    return claimed, True


def dispatch_runner_report(
    *, request: ReplayRequest, credential: RunnerCredential, idempotency_key: str, report: AttemptDetails
) -> Dispatch:
    """Record the runner's report on the replay's attempt and settle what it decides.

    The attempt is created (or moved on) by ``attempt_report_apply`` as ``manual_replay`` with the
    key, numbered after the run's attempts, and linked to the dispatch -- only with this job's
    credential and the request's key (rule 7). ``running`` starts the dispatch (even a late start
    of an ``unknown`` one: the facts win); ``succeeded`` completes the request when the ledger
    confirms every item in scope (else it waits, and the sweep or a person completes it);
    ``failed`` / ``timed_out`` fail the request and release its items. A repeated or stale report
    changes nothing.

    Raises NotFound (404) for a credential of another job; ReplayKeyMismatch (403) for a wrong key;
    DomainError (400) for a status other than running, succeeded, failed, timed_out; InvalidTransition
    (409) when the request was never dispatched; Conflict (409) when the execution id belongs to
    another attempt (a scheduled one, or another replay's) or the dispatch already has another
    attempt. Returns the dispatch.
    """
    dispatch, execution_id = _runner_report_check(
        request=request, credential=credential, idempotency_key=idempotency_key, report=report
    )
    now = timezone.now()
    with transaction.atomic():
        dispatch = Dispatch.objects.select_for_update(of=("self",)).select_related("attempt").get(pk=dispatch.pk)
        _refuse_foreign_attempt(run=request.run, dispatch=dispatch, execution_id=execution_id)
        result = _runner_attempt_record(
            request=request, credential=credential, dispatch=dispatch, report=report, execution_id=execution_id, now=now
        )
        if result.stale:
            return Dispatch.objects.get(pk=dispatch.pk)
        attempt = result.attempt
        attempt.refresh_from_db()
        action = (
            DISPATCH_ACTION_FOR_ATTEMPT[Attempt.Status(attempt.status)]
            if attempt.status in (DISPATCH_ACTION_FOR_ATTEMPT)
            else None
        )
        if action is None:
            return Dispatch.objects.get(pk=dispatch.pk)
        moved, changed = _dispatch_follow_attempt(
            request=request, dispatch=dispatch, attempt=attempt, action=action, now=now
        )
        if not changed:
            return moved
    if moved.status == Dispatch.Status.SUCCEEDED:
        replay_request_complete_if_confirmed(request=request)
    return Dispatch.objects.select_related("attempt", "request").get(pk=moved.pk)


def _runner_report_check(
    *, request: ReplayRequest, credential: RunnerCredential, idempotency_key: str, report: AttemptDetails
) -> tuple[Dispatch, str]:
    """The report's refusals before any lock (see ``dispatch_runner_report``); returns the request's
    dispatch and the report's execution id."""
    _require_runner(request=request, credential=credential)
    if report.status not in REPORTABLE_STATUSES:
        raise DomainError(
            f"Report running, succeeded, failed or timed_out, not {report.status!r}.", errors={"status": ["invalid"]}
        )
    execution_id = (report.execution_id or "").strip()[:300]
    if not execution_id:
        raise DomainError("Name the attempt's execution id.", errors={"execution_id": ["required"]})
    dispatch = Dispatch.objects.filter(request=request).first()
    if dispatch is None:
        raise InvalidTransition("This replay request has not been dispatched.", errors={"status": [request.status]})
    if not hmac.compare_digest(str(idempotency_key or ""), dispatch.idempotency_key):
        raise ReplayKeyMismatch(
            "Refused by rule 7: the report does not carry this replay's idempotency key.",
            errors={"idempotency_key": ["rule 7: not this replay's key"]},
        )
    return dispatch, execution_id


def _refuse_foreign_attempt(*, run: Run, dispatch: Dispatch, execution_id: str) -> None:
    """Conflict (409) when the dispatch has another attempt, or the execution id is another attempt's
    (a scheduled one, another replay's, or one already linked elsewhere). Call with the dispatch locked."""
    if dispatch.attempt is not None and dispatch.attempt.execution_id != execution_id:
        raise Conflict(
            f"This replay's attempt is {dispatch.attempt.execution_id}; it cannot also be {execution_id}.",
            errors={"execution_id": ["another attempt is this replay's"]},
        )
    existing = Attempt.objects.filter(run=run, execution_id=execution_id).first()
    if existing is not None and dispatch.attempt_id != existing.pk:
        foreign = existing.trigger != Attempt.Trigger.MANUAL_REPLAY or (
            existing.replay_key and existing.replay_key != dispatch.idempotency_key
        )
        if foreign or _is_linked(existing):
            raise Conflict(
                f"Execution {execution_id} is attempt {existing.number} "
                f"({existing.get_trigger_display().lower()}), not this replay's.",
                errors={"execution_id": ["belongs to another attempt"]},
            )


def _runner_attempt_record(
    *,
    request: ReplayRequest,
    credential: RunnerCredential,
    dispatch: Dispatch,
    report: AttemptDetails,
    execution_id: str,
    now: datetime,
) -> AttemptReportResult:
    """Apply the report to the run's ``manual_replay`` attempt (``attempt_report_apply``), refresh the
    run's status, and link the attempt to the dispatch the first time (a ``replay_attempt_linked`` event).

    Of ``report`` the runner's facts are taken: status, start and end (UTC), error and log link (both
    redacted); the trigger and replay key are the replay's, the execution id the checked one."""
    run = request.run
    result = attempt_report_apply(
        run=run,
        report=AttemptDetails(
            execution_id=execution_id,
            status=report.status,
            trigger=Attempt.Trigger.MANUAL_REPLAY,
            started_at=report.started_at,
            ended_at=report.ended_at,
            error_summary=redact_text(report.error_summary or "")[:2000],
            log_url=redact_text(report.log_url or ""),  # user info, e-mails, credential parameters
            replay_key=dispatch.idempotency_key,
        ),
        received_at=now,
        data={"replay_request": str(request.public_id), "runner_credential": credential.prefix},
    )
    run_status_refresh(run=run)
    attempt = result.attempt
    if dispatch.attempt_id is None:
        Dispatch.objects.filter(pk=dispatch.pk, attempt__isnull=True).update(attempt=attempt, updated_at=now)
        replay_event_record(
            request=request,
            kind=TimelineEvent.Kind.REPLAY_ATTEMPT_LINKED,
            summary=f"Attempt {attempt.number} ({execution_id}) linked to the replay: reported with the job's "
            f"runner credential {credential.prefix}… and the replay's key",
            attempt=attempt,
            data={"dispatch": str(dispatch.public_id)},
        )
    return result


def _dispatch_follow_attempt(
    *, request: ReplayRequest, dispatch: Dispatch, attempt: Attempt, action: str, now: datetime
) -> Transitioned[Dispatch]:
    """Move the dispatch as its attempt moved (``action``: start, succeed, fail), with the times the
    attempt reported; a failure also fails the request and releases its items."""
    values: dict[str, Any] = {}
    if action == "start":
        values["started_at"] = attempt.started_at or now
    else:
        values["finished_at"] = attempt.ended_at or now
        if dispatch.started_at is None:
            values["started_at"] = attempt.started_at or now
    late = " (after its lease had lapsed)" if dispatch.status == Dispatch.Status.UNKNOWN else ""
    words = {"start": "started", "succeed": "succeeded", "fail": attempt.status.replace("_", " ")}
    followed = dispatch_transition(
        dispatch=dispatch,
        action=action,
        values=values,
        summary=f"Replay attempt {attempt.number} {words[action]}{late}",
        event_kind=REPLAY_ATTEMPT_KINDS[Attempt.Status(attempt.status)],
        attempt=attempt,
    )
    if followed.moved and action == "fail":
        replay_request_transition(
            request=request,
            action="fail",
            reason=f"attempt {attempt.number} {attempt.status}: {attempt.error_summary[:200]}".rstrip(": "),
            summary=f"Replay failed: attempt {attempt.number} {attempt.status.replace('_', ' ')}; "
            "its items are released (a re-send is a new request with new approvals)",
        )
    return followed


def _is_linked(attempt: Attempt) -> bool:
    """Whether ``attempt`` is already some replay's attempt (linked to a dispatch)."""
    return Dispatch.objects.filter(attempt=attempt).exists()


def dispatch_lapse(*, dispatch: Dispatch, reason: str, now: datetime | None = None) -> tuple[Dispatch, bool]:
    """Make a dispatch ``unknown``: its lease lapsed, or its webhook failed for good. A person decides.

    Guarded on the status (pending or leased) and, for a lapsed lease, on ``lease_expires_at`` <=
    ``now`` (``now`` None skips the time guard: a failed webhook). Never re-dispatches. Returns
    ``(dispatch, moved)``; one ``replay_dispatch_unknown`` event when it moves.
    """
    stamp = timezone.now()
    try:
        return dispatch_transition(
            dispatch=dispatch,
            action="lapse",
            values={"unknown_at": stamp, "unknown_reason": reason[:500], "next_delivery_at": None},
            summary=f"Replay dispatch unknown: {reason}. A person decides (settle as failed or completed); "
            "it is never re-dispatched automatically",
            event_kind=TimelineEvent.Kind.REPLAY_DISPATCH_UNKNOWN,
            guard={"lease_expires_at__lte": now} if now is not None else None,
        )
    except InvalidTransition:  # started, finished, or the lease was renewed meanwhile: nothing to do
        return Dispatch.objects.get(pk=dispatch.pk), False

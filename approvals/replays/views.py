"""HTML pages of the approvals app: request a replay from a run, the request page, the replays queue.

Thin: selectors and the same services as the API; POST → redirect → GET with the messages
framework; a refusal is shown with every rule it names. The run page loads this run's replays as
an HTMX fragment (``run_replays_view``), so the runs app needs no change to show them.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from approvals.replays.decisions import approver_reauthentication, reauth_credential_ref, replay_request_decide
from approvals.replays.dispatch import replay_request_dispatch as dispatch_service
from approvals.replays.forms import DecisionForm, ReasonForm, RecoveryDecisionForm, ReplayRequestCreateForm, SettleForm
from approvals.replays.models import Approval, ReplayRequest
from approvals.replays.requests import (
    replay_request_cancel,
    replay_request_create,
    replay_request_settle,
    run_recovery_decision_record,
)
from approvals.replays.rules import side_effects
from approvals.replays.selectors import (
    approval_kinds_open_to,
    dispatch_get_for_request,
    replay_request_get,
    replay_request_items,
    replay_request_list_for_run,
    replay_request_needs_decision,
    replay_request_queue_rows,
    replay_request_recent,
    replay_request_timeline,
    run_active_attempts,
    scope_candidates,
)
from handover.core.errors import DomainError
from handover.core.views import is_htmx
from handover.notifications.selectors import notification_rows_about
from handover.notifications.told import told_for, told_sentence
from runs.attempts.models import Run
from runs.ledger.selectors import run_get_for_ledger, run_possible_duplicates_unexplained
from runs.permissions import approvers_eligible, may_manage_replay, may_request_replay, run_controls

CANDIDATES_SHOWN = 500
SCOPE_SHOWN = 100


def _refused(request: HttpRequest, exc: DomainError) -> None:
    """Show a refusal with every rule it names."""
    messages.error(request, exc.detail)
    for field, reasons in (exc.errors or {}).items():
        for reason in reasons:
            if reason not in exc.detail:
                messages.error(request, f"{field}: {reason}")


def _run_or_404(request: HttpRequest, run_id: str) -> Run:
    run = run_get_for_ledger(user=request.user, public_id=run_id)
    if run is None:
        raise Http404("No such run")
    return run


def _replay_or_404(request: HttpRequest, id: str) -> ReplayRequest:
    replay = replay_request_get(user=request.user, public_id=id)
    if replay is None:
        raise Http404("No such replay request")
    return replay


@login_required
def replay_list_view(request: HttpRequest) -> HttpResponse:
    """The replays page: "waiting for me", dispatches that need a person, and recent requests."""
    return render(
        request,
        "approvals/replays/replay_list.html",
        {
            "queue": replay_request_queue_rows(user=request.user),
            "needs_decision": list(replay_request_needs_decision(user=request.user)[:100]),
            "recent": replay_request_recent(user=request.user),
        },
    )


@login_required
def run_replays_view(request: HttpRequest, run_id: str) -> HttpResponse:
    """This run's replay requests and the other recovery decisions (a fragment for the run page over HTMX)."""
    run = _run_or_404(request, run_id)
    context = {
        "run": run,
        "replays": list(replay_request_list_for_run(run=run)),
        "controls": run_controls(user=request.user, run=run),
        "decision_form": RecoveryDecisionForm(),
    }
    template = "approvals/replays/_run_replays.html" if is_htmx(request) else "approvals/replays/run_replays.html"
    return render(request, template, context)


@login_required
@require_POST
def recovery_decision_view(request: HttpRequest, run_id: str) -> HttpResponse:
    """Record "wait for the automatic retry" or "dependency corrected" on the run's timeline."""
    run = _run_or_404(request, run_id)
    form = RecoveryDecisionForm(request.POST)
    if form.is_valid():
        try:
            run_recovery_decision_record(run=run, actor=request.user, **form.cleaned_data)  # type: ignore[arg-type]
            messages.success(request, "Recovery decision recorded on the run's timeline.")
        except DomainError as exc:
            _refused(request, exc)
    else:
        messages.error(request, "Choose a decision.")
    return redirect("runs:run-detail", id=run.public_id)


@login_required
def replay_create_view(request: HttpRequest, run_id: str) -> HttpResponse:
    """Request a replay from the run's ledger: select absent items (or all), say why; see the checks first."""
    run = _run_or_404(request, run_id)
    kind = request.POST.get("kind") or request.GET.get("kind") or ReplayRequest.Kind.ABSENT_ITEMS
    if kind not in ReplayRequest.Kind.values:
        kind = ReplayRequest.Kind.ABSENT_ITEMS
    candidates = list(scope_candidates(run=run, kind=kind).values_list("record_id", "outcome")[: CANDIDATES_SHOWN + 1])
    form = ReplayRequestCreateForm(
        request.POST or None, initial={"kind": kind}, candidates=[r for r, _ in candidates[:CANDIDATES_SHOWN]]
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            replay = replay_request_create(
                actor=request.user,  # type: ignore[arg-type]
                run=run,
                kind=data["kind"],
                reason=data["reason"],
                record_ids=data["record_ids"],
                all_items=data["all_items"],
                fix_reference=data["fix_reference"],
            )
        except DomainError as exc:
            _refused(request, exc)
        else:
            told = told_for(event="approval_needed", dedup_key=f"replay:{replay.public_id}")
            messages.success(
                request,
                "Replay requested. "
                + told_sentence(told, nobody="Nobody could be told: no eligible approver has a channel to be told on."),
            )
            return redirect("approvals:replay-detail", id=replay.public_id)
    effects, repeat_safety = side_effects(run=run)
    return render(
        request,
        "approvals/replays/replay_create.html",
        {
            "run": run,
            "form": form,
            "kind": kind,
            "kinds": ReplayRequest.Kind.choices,
            "candidates": candidates[:CANDIDATES_SHOWN],
            "more_candidates": len(candidates) > CANDIDATES_SHOWN,
            "may_request": may_request_replay(user=request.user, run=run),
            "active_attempts": run_active_attempts(run=run),
            "unexplained_duplicates": run_possible_duplicates_unexplained(run=run, limit=50),
            "side_effects": effects,
            "repeat_safety": repeat_safety,
            "business_approvers": list(approvers_eligible(run=run, kind="business", exclude=request.user)),  # type: ignore[arg-type]
            "technical_approvers": list(approvers_eligible(run=run, kind="technical", exclude=request.user)),  # type: ignore[arg-type]
        },
    )


def _detail_context(request: HttpRequest, replay: ReplayRequest) -> dict[str, Any]:
    run = replay.run
    approvals = list(replay.approvals.all())
    my_kinds = approval_kinds_open_to(user=request.user, request=replay)
    effects, repeat_safety = side_effects(run=run)
    dispatch = dispatch_get_for_request(request=replay)
    return {
        "replay": replay,
        "run": run,
        "approvals": approvals,
        "scope": list(replay_request_items(request=replay, limit=SCOPE_SHOWN)),
        "side_effects": effects,
        "repeat_safety": repeat_safety,
        "dispatch": dispatch,
        "deliveries": list(dispatch.webhook_deliveries.all()) if dispatch is not None else [],
        "timeline": list(replay_request_timeline(request=replay)),
        "my_kinds": my_kinds,
        "may_manage": may_manage_replay(user=request.user, request=replay),
        "decision_form": DecisionForm(initial={"scope_fingerprint": replay.scope_fingerprint}, kinds=my_kinds),
        "reason_form": ReasonForm(),
        "settle_form": SettleForm(),
        "told": notification_rows_about(dedup_prefix=f"replay:{replay.public_id}"),
    }


@login_required
def replay_detail_view(request: HttpRequest, id: str) -> HttpResponse:
    """The request page: scope, checks passed and failed, approvals, side effects, dispatch and delivery log."""
    replay = _replay_or_404(request, id)
    return render(request, "approvals/replays/replay_detail.html", _detail_context(request, replay))


@login_required
@require_POST
def replay_decide_view(request: HttpRequest, id: str, decision: str) -> HttpResponse:
    """Approve or reject (``decision``), with the password re-entered or re-entered lately.

    From the queue over HTMX, answers the queue row re-rendered (or an error line).
    """
    replay = _replay_or_404(request, id)
    form = DecisionForm(request.POST)
    from_queue = is_htmx(request) and request.POST.get("from") == "queue"
    error = ""
    if not form.is_valid():
        error = "Check the form: " + ", ".join(form.errors)
    else:
        data = form.cleaned_data
        try:
            reauthenticated_at = approver_reauthentication(
                user=request.user,  # type: ignore[arg-type]
                credential_ref=reauth_credential_ref(request),
                password=data["password"],
            )
            replay = replay_request_decide(
                request=replay,
                actor=request.user,  # type: ignore[arg-type]
                kind=data["kind"],
                decision=decision,
                scope_fingerprint=data["scope_fingerprint"],
                reauthenticated_at=reauthenticated_at,
                comment=data["comment"],
                accepts_unknown_repeat_safety=data["accepts_unknown_repeat_safety"],
                acceptance_reason=data["acceptance_reason"],
            )
            if not from_queue:
                verb = "given" if decision == Approval.Decision.APPROVE else "refused; the request is rejected"
                messages.success(request, f"{data['kind'].title()} approval {verb}.")
        except DomainError as exc:
            error = exc.detail
            if not from_queue:
                _refused(request, exc)
    if from_queue:
        # the row again: still waiting (with the reason it was refused), or decided
        row = next((r for r in replay_request_queue_rows(user=request.user) if r.pk == replay.pk), None)
        context = {"r": row, "error": error} if row is not None else {"r": replay, "done": not error}
        return render(request, "approvals/replays/_queue_row.html", context)
    if error and not form.is_valid():
        messages.error(request, error)
    return redirect("approvals:replay-detail", id=replay.public_id)


@login_required
@require_POST
def replay_cancel_view(request: HttpRequest, id: str) -> HttpResponse:
    """Cancel a pending or approved request, with a reason."""
    replay = _replay_or_404(request, id)
    form = ReasonForm(request.POST)
    if form.is_valid():
        try:
            replay_request_cancel(request=replay, actor=request.user, reason=form.cleaned_data["reason"])  # type: ignore[arg-type]
            messages.success(request, "Replay request cancelled.")
        except DomainError as exc:
            _refused(request, exc)
    else:
        messages.error(request, "Say why the replay is cancelled.")
    return redirect("approvals:replay-detail", id=replay.public_id)


@login_required
@require_POST
def replay_dispatch_view(request: HttpRequest, id: str) -> HttpResponse:
    """Dispatch an approved request now (once); a held dispatch shows the rule that holds it."""
    replay = _replay_or_404(request, id)
    try:
        _, created = dispatch_service(request=replay, actor=request.user)  # type: ignore[arg-type]
        messages.success(request, "Replay dispatched." if created else "The replay was already dispatched.")
    except DomainError as exc:
        _refused(request, exc)
    return redirect("approvals:replay-detail", id=replay.public_id)


@login_required
@require_POST
def replay_settle_view(request: HttpRequest, id: str) -> HttpResponse:
    """A person's decision on an unknown dispatch: failed, or completed when the ledger confirms it."""
    replay = _replay_or_404(request, id)
    form = SettleForm(request.POST)
    if form.is_valid():
        try:
            data = {k: v for k, v in form.cleaned_data.items() if k != "confirm"}
            replay_request_settle(request=replay, actor=request.user, **data)  # type: ignore[arg-type]
            messages.success(request, f"Replay settled as {form.cleaned_data['outcome']}.")
        except DomainError as exc:
            _refused(request, exc)
    else:
        messages.error(request, "Choose the outcome, say what you found and confirm it: nothing was settled.")
    return redirect("approvals:replay-detail", id=replay.public_id)

"""The run's work ledger (docs/work-ledger.md): its section on the run page, loads and their progress, a person's
changes, verifications and failure class, and "what happened to this record?"."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from handover.core.errors import DomainError
from handover.core.views import form_post, is_htmx, refusals
from runs.attempts.business_state import BUSINESS_STATE_FACTS
from runs.attempts.models import Run
from runs.ledger.common import run_ledger_require_writer
from runs.ledger.confirmations import (
    LedgerVersionConflict,
    work_item_load_confirm,
    work_item_load_discard,
    work_item_load_preview_csv,
)
from runs.ledger.failure_class import run_failure_class_confirm
from runs.ledger.files import LedgerInputError
from runs.ledger.forms import (
    RunFailureClassForm,
    WorkItemChangeForm,
    WorkItemDuplicateExplainForm,
    WorkItemLoadConfirmForm,
    WorkItemLoadDiscardForm,
    WorkItemLoadForm,
    WorkItemSearchForm,
    WorkItemVerifyForm,
)
from runs.ledger.items import work_item_change, work_item_duplicate_explain, work_item_verify
from runs.ledger.loads import OPTION_NAMES, LoadFile, work_item_loads_create
from runs.ledger.models import WorkItem, WorkItemLoad
from runs.ledger.selectors import (
    run_get_for_ledger,
    work_item_list,
    work_item_load_get,
    work_item_load_list,
    work_item_load_progress,
    work_item_page,
    work_item_search,
)
from runs.permissions import may_act_on_run, run_needs_recovery

T = TypeVar("T")

LEDGER_PAGE_SIZE = 50
# Feedback of the ledger's forms is shown inside the ledger section, next to the forms (the page
# scrolls to #ledger after each of them), not at the top of the page where nobody would see it.
LEDGER_MESSAGE_TAG = "ledger"


def _say(send: Callable[..., None], request: HttpRequest, text: str) -> None:
    send(request, text, extra_tags=LEDGER_MESSAGE_TAG)


# the stacked bar's segments, in order: settled work first, then what still needs a person
LEDGER_SEGMENTS = [
    ("completed", "completed_count"),
    ("rejected", "rejected_count"),
    ("uncertain", "uncertain_count"),
    ("absent", "absent_count"),
    ("unverified", "unverified_count"),
    ("skipped", "skipped_count"),
]


def _ledger_headline(run: Run) -> tuple[str, str]:
    """``(css class, sentence)`` saying where the ledger stands; never "fine" while anything is unresolved."""
    if run.ledger_updated_at is None:
        return "muted", "No work ledger yet: load the eligible population to see which records reached the destination."
    if run.unresolved_count:
        parts = [
            f"{n:,} {word}"
            for n, word in (
                (run.uncertain_count, "uncertain"),
                (run.absent_count, "absent"),
                (run.unverified_count, "unverified"),
            )
            if n
        ]
        total = f"{run.unresolved_count:,} of {run.eligible_count:,}"
        return (
            "bad",
            f"Not reconciled: {total} eligible records unresolved ({', '.join(parts)}).",
        )
    if run.possible_duplicate_count:
        return "warn", (
            f"Nothing unresolved, but {run.possible_duplicate_count:,} possible duplicates need explaining."
        )
    if run.rejected_count:
        return "warn", f"Nothing unresolved; {run.rejected_count:,} rejected records need their cause fixed."
    return "ok", "Reconciled: every eligible record is confirmed in the destination or skipped."


def run_ledger_context(request: HttpRequest, run: Run) -> dict[str, object]:
    """The run page's ledger section: totals and bar, possible duplicates, loads, one page of items.

    Queries: the item page (none when the filtered outcome's stored count is zero), the possible
    duplicates (none when there are none), the recent loads, and the permission check.
    """
    outcome = request.GET.get("outcome") or ""
    if outcome not in WorkItem.Outcome.values:
        outcome = ""
    only_duplicates = request.GET.get("duplicates") == "1"
    stored = {name: getattr(run, field) for name, field in LEDGER_SEGMENTS}
    # The stored counts answer an empty filter without a query (items not in the population are
    # completed but counted only as possible duplicates).
    known = stored.get(outcome, 0) + (run.possible_duplicate_count if outcome == "completed" else 0)
    empty = (
        run.ledger_updated_at is None
        or (bool(outcome) and not known)
        or (only_duplicates and not run.possible_duplicate_count)
    )
    page = (
        None
        if empty
        else work_item_page(
            run=run,
            outcome=outcome or None,
            possible_duplicate=True if only_duplicates else None,
            after=request.GET.get("after") or None,
            before=request.GET.get("before") or None,
            limit=LEDGER_PAGE_SIZE,
        )
    )
    population = sum(stored.values())
    segments = [
        {"outcome": name, "count": count, "percent": round(100 * count / population, 2)}
        for name, count in stored.items()
        if count and population
    ]
    css, headline = _ledger_headline(run)
    writable = may_act_on_run(user=request.user, run=run)
    # loading evidence and classifying the failure are failure actions: not offered on a run that is ok
    recover = writable and run_needs_recovery(run=run)
    # one query: the five newest loads and every load that waits for a person, however old
    newest = WorkItemLoad.objects.filter(run=run).order_by("-created_at", "-id").values("pk")[:5]
    shown = list(
        work_item_load_list(run=run).filter(Q(pk__in=newest) | Q(status=WorkItemLoad.Status.AWAITING_CONFIRMATION))
    )
    loads = shown[:5]  # newest first: the five newest lead, older waiting loads follow
    awaiting = [load for load in shown if load.status == WorkItemLoad.Status.AWAITING_CONFIRMATION]
    return {
        "ledger": {
            "headline": headline,
            "headline_class": css,
            "segments": segments,
            "duplicates": list(work_item_list(run=run, possible_duplicate=True)[:20])
            if run.possible_duplicate_count
            else [],
            "page": page,
            "outcome": outcome,
            "only_duplicates": only_duplicates,
            "outcomes": WorkItem.Outcome.choices,
            "loads": [(load, work_item_load_progress(load=load)) for load in loads],
            "awaiting": awaiting,
            "writable": writable,
            "load_form": WorkItemLoadForm() if recover else None,
            "change_form": WorkItemChangeForm() if writable else None,
            "failure_form": RunFailureClassForm(initial={"failure_class": run.failure_class_suggested})
            if recover
            else None,
            "failure_classes": dict(Run.FailureClass.choices),
        }
    }


def _readable_run(request: HttpRequest, id: str) -> Run:
    """The run ``id`` if the viewer may see its ledger, else 404."""
    run = run_get_for_ledger(user=request.user, public_id=id)
    if run is None:
        raise Http404("No such run")
    return run


def _ledger_run(request: HttpRequest, id: str) -> Run:
    """The run whose ledger the viewer changes: 404 when they may not see it, 403 when they may only read."""
    run = _readable_run(request, id)
    with refusals():  # the ledger services' refusal, before a form or file is read
        run_ledger_require_writer(actor=request.user, run=run)
    return run


def _to_ledger(run: Run) -> HttpResponse:
    return redirect(f"{reverse('runs:run-detail', kwargs={'id': run.public_id})}#ledger")


def _run_form_post(
    request: HttpRequest,
    id: str,
    form_class: type[forms.Form],
    *,
    invalid: str,
    write: Callable[..., T],
    success: Callable[[T], str],
) -> HttpResponse:
    """A form that changes run ``id``'s ledger through one service: the run (``_ledger_run``: 404, then 403
    before the form is read), ``form_class`` on the POST (``invalid``: the message when it does not pass),
    ``write(actor=, run=, **cleaned_data)`` and its ``success`` message (``form_post``); back to the ledger
    either way."""
    run = _ledger_run(request, id)
    return form_post(
        request,
        form_class(request.POST),
        invalid=invalid,
        act=lambda data: write(actor=request.user, run=run, **data),
        success=success,
        done=_to_ledger(run),
        extra_tags=LEDGER_MESSAGE_TAG,
    )


@login_required
@require_POST
def work_item_load_create_view(request: HttpRequest, id: str) -> HttpResponse:
    """Upload record-id files for a run (support, technical owners, admins); 403 for readers."""
    run = _ledger_run(request, id)
    form = WorkItemLoadForm(request.POST, request.FILES)
    if not form.is_valid():
        _say(messages.error, request, " ".join(str(e) for errors in form.errors.values() for e in errors))
        return _to_ledger(run)
    data = form.cleaned_data
    try:
        loads = work_item_loads_create(
            actor=request.user,
            run=run,
            files=[
                LoadFile(kind=kind, content=data[kind].read(), file_name=data[kind].name or kind)
                for kind in WorkItemLoad.Kind.values
                if data.get(kind)
            ],
            file_format=data["file_format"] or WorkItemLoad.Format.AUTO,
            id_column=data["id_column"],
            options={name: data.get(name) or "" for name in (*OPTION_NAMES, "destination_id_column")},
            is_destination_complete=data["is_destination_complete"],
        )
    except LedgerInputError as exc:
        _say(messages.error, request, f"Nothing was loaded. {exc.detail}")
        return _to_ledger(run)
    except DomainError as exc:
        _say(messages.error, request, exc.detail)
        return _to_ledger(run)
    if all(load.status == WorkItemLoad.Status.COMMITTED for load in loads):
        _say(messages.success, request, "Loaded: " + ", ".join(f"{ld.label} ({ld.row_count:,})" for ld in loads))
    elif any(load.status == WorkItemLoad.Status.AWAITING_CONFIRMATION for load in loads):
        total = loads[0].preview.get("total", 0)
        _say(
            messages.warning,
            request,
            f"Not applied: {', '.join(ld.label for ld in loads)} would weaken {total:,} records. "
            "Review them below, then confirm with a reason or discard the load.",
        )
    else:
        _say(messages.info, request, "The files are large: they load in the background (progress below).")
    return _to_ledger(run)


@login_required
def work_item_load_progress_view(request: HttpRequest, id: str, load_id: str) -> HttpResponse:
    """The progress bar of one load (htmx polls it every second while the load is pending or running)."""
    run = _readable_run(request, id)
    load = _ledger_load(run, load_id)
    response = render(
        request,
        "runs/ledger/_ledger_load_progress.html",
        {"run": run, "load": load, "progress": work_item_load_progress(load=load)},
    )
    if is_htmx(request) and load.status == WorkItemLoad.Status.COMMITTED and request.GET.get("polling") == "1":
        response["HX-Refresh"] = "true"  # the totals, bar and table changed: show the new page
    return response


@login_required
@require_POST
def work_item_change_view(request: HttpRequest, id: str) -> HttpResponse:
    """A person changes one item's outcome, saying why."""
    return _run_form_post(
        request,
        id,
        WorkItemChangeForm,
        invalid="Give the record id, the new outcome and why.",
        write=work_item_change,
        success=lambda item: f"{item.record_id} is now {item.outcome}.",
    )


@login_required
@require_POST
def work_item_verify_view(request: HttpRequest, id: str) -> HttpResponse:
    """Record a provider lookup for one uncertain item."""
    return _run_form_post(
        request,
        id,
        WorkItemVerifyForm,
        invalid="Give the record id and whether the provider found it.",
        write=work_item_verify,
        success=lambda item: f"{item.record_id} verified: {item.outcome}.",
    )


@login_required
@require_POST
def run_failure_class_confirm_view(request: HttpRequest, id: str) -> HttpResponse:
    """A person confirms the run's failure class."""
    return _run_form_post(
        request,
        id,
        RunFailureClassForm,
        invalid="Choose a failure class.",
        write=run_failure_class_confirm,
        success=lambda _: "Failure class confirmed.",
    )


@login_required
def work_item_search_view(request: HttpRequest) -> HttpResponse:
    """What happened to a record? Every item with that id in the runs the viewer may see."""
    form = WorkItemSearchForm(request.GET or None)
    items = None
    if form.is_valid():
        items = list(work_item_search(user=request.user, record_id=form.cleaned_data["record_id"])[:100])
        for item in items:  # the business state's facts came with the items: no query per run
            for name in BUSINESS_STATE_FACTS:
                setattr(item.run, name, getattr(item, name))
    return render(request, "runs/ledger/work_item_search.html", {"form": form, "items": items})


def _ledger_load(run: Run, load_id: str) -> WorkItemLoad:
    load = work_item_load_get(run=run, public_id=load_id)
    if load is None:
        raise Http404("No such load")
    load.run = run
    return load


@login_required
@require_POST
def work_item_load_confirm_view(request: HttpRequest, id: str, load_id: str) -> HttpResponse:
    """Apply a load that waits for confirmation, against the ledger version its preview showed."""
    run = _ledger_run(request, id)
    load = _ledger_load(run, load_id)
    form = WorkItemLoadConfirmForm(request.POST)
    if not form.is_valid():
        _say(messages.error, request, "Say why these records may be weakened.")
        return _to_ledger(run)
    try:
        load = work_item_load_confirm(actor=request.user, load=load, **form.cleaned_data)
    except LedgerVersionConflict as exc:
        _say(messages.error, request, exc.detail)
        return _to_ledger(run)
    except DomainError as exc:
        _say(messages.error, request, exc.detail)
        return _to_ledger(run)
    if load.status == WorkItemLoad.Status.COMMITTED:
        _say(messages.success, request, f"{load.label} applied; the weakenings are kept in each item's history.")
    else:
        _say(messages.info, request, f"{load.label} is confirmed and loads in the background (progress below).")
    return _to_ledger(run)


@login_required
@require_POST
def work_item_load_discard_view(request: HttpRequest, id: str, load_id: str) -> HttpResponse:
    """Decline a load that waits for confirmation (kept, nothing applied)."""
    run = _ledger_run(request, id)
    load = _ledger_load(run, load_id)
    return form_post(
        request,
        WorkItemLoadDiscardForm(request.POST),
        invalid="Say why the load is discarded.",
        act=lambda data: work_item_load_discard(actor=request.user, load=load, **data),
        success=lambda ld: f"{ld.label} discarded; nothing was applied.",
        done=_to_ledger(run),
        extra_tags=LEDGER_MESSAGE_TAG,
    )


@login_required
def work_item_load_preview_view(request: HttpRequest, id: str, load_id: str) -> HttpResponse:
    """Download every item a waiting load would weaken, as CSV."""
    load = _ledger_load(_readable_run(request, id), load_id)
    response = HttpResponse(work_item_load_preview_csv(load=load), content_type="text/csv; charset=utf-8")
    name = f"{load.kind}-{load.number}-weakened.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@login_required
@require_POST
def work_item_duplicate_explain_view(request: HttpRequest, id: str) -> HttpResponse:
    """A person explains one possible duplicate (reason and evidence reference).

    Back to the page the form was on (``next``: a local path, e.g. the replay request form), else to the ledger.
    """
    run = _ledger_run(request, id)
    back = request.POST.get("next") or ""
    safe = url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}) and back.startswith("/")
    return form_post(
        request,
        WorkItemDuplicateExplainForm(request.POST),
        invalid="Give the record id, why it is not a duplicate and the evidence reference (at most 300 characters).",
        act=lambda data: work_item_duplicate_explain(actor=request.user, run=run, **data),
        success=lambda item: f"{item.record_id}: possible duplicate explained.",
        done=redirect(back) if safe else _to_ledger(run),
        extra_tags="" if safe else LEDGER_MESSAGE_TAG,
    )

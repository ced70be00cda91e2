"""HTML pages of handovers: list, "my handovers", new, page, edit, print, Markdown, history, actions.

Thin: a selector loads, the view authorises (404 when not visible, 403 when read-only), a service
writes, POST → redirect → GET with a message.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any
from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Page
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from handover.core.errors import DomainError
from handover.core.once import submission_once
from handover.core.pagination import CappedPaginator
from handover.core.people import signed_in
from handover.core.polling import list_page
from handover.core.replica import replica_reads
from handover.core.views import refusals
from handover.handovers.closing import handover_closing_conditions
from handover.handovers.export import handover_markdown, handover_sections
from handover.handovers.forms import (
    EDIT_FIELD_NAMES,
    HandoverCreateForm,
    HandoverEditForm,
    ReasonForm,
    ResidualExceptionForm,
    ResidualExceptionOwnerForm,
    base_text,
)
from handover.handovers.models import Handover
from handover.handovers.selectors import (
    handover_for_run,
    handover_generated_staleness,
    handover_get,
    handover_links_business_state,
    handover_list,
    handover_list_state,
    handover_revision_list,
    handover_runs,
    run_get_brief,
)
from handover.handovers.services import (
    EDITABLE_FIELDS,
    handover_close,
    handover_create,
    handover_generated_preview,
    handover_hand_over,
    handover_refresh_generated,
    handover_reopen,
    handover_require_writer,
    handover_start_recovery,
    handover_texts,
    handover_update,
    handover_verify,
    redacted_notice,
    residual_exception_create,
    residual_exception_update,
)
from handover.handovers.staleness import text_diff
from handover.handovers.versions import EditConflict
from handover.notifications.selectors import notification_rows_about
from handover.notifications.told import told_for, told_sentence
from handover.problems.selectors import problem_list, problems_for_handover
from runs.attempts.models import Run
from runs.permissions import may_act_on_runs, run_controls, run_visibility_filter

PAGE_SIZE = 50


def _visible(request: HttpRequest, id: UUID | str) -> Handover:
    handover = handover_get(user=request.user, public_id=id)
    if handover is None:
        raise Http404("No such handover")
    return handover


def _writable(request: HttpRequest, id: UUID | str) -> Handover:
    handover = _visible(request, id)
    with refusals():  # the handover services' refusal, before a form is read
        handover_require_writer(signed_in(request.user), handover=handover)
    return handover


def _tell_redacted(request: HttpRequest, saved: object) -> None:
    """Tell the person when what they saved lost something that looked like a secret (rule 8)."""
    notice = redacted_notice(getattr(saved, "redacted_sections", []))
    if notice:
        messages.warning(request, notice)


@login_required
@replica_reads
def handover_list_view(request: HttpRequest) -> HttpResponse:
    """Every handover the viewer may see, newest first; ``?status=``, ``?open=1`` and ``?q=`` (title prefix) filter.

    Polled by htmx every 30 seconds: the list's fragment, or 304 while unchanged (``handover.core.polling``).
    """
    status = request.GET.get("status") or None
    search = (request.GET.get("q") or "").strip()
    handovers = handover_list(
        user=request.user,
        status=status if status in Handover.Status.values else None,
        is_open=True if request.GET.get("open") == "1" else None,
        search=search or None,
    )
    return list_page(
        request,
        template="handover/handovers/handover_list.html",
        fragment="handover/handovers/_handover_list_rows.html",
        context=lambda: {
            "page": _with_business_state(CappedPaginator(handovers, PAGE_SIZE).get_page(request.GET.get("page"))),
            "heading": "Handovers",
            "statuses": Handover.Status.choices,
            "status": status,
            "q": search,
            "mine": False,
        },
        state=lambda: handover_list_state(handovers=handovers),
    )


@login_required
@replica_reads
def handover_mine_view(request: HttpRequest) -> HttpResponse:
    """The handovers whose escalation owner is the viewer, open ones and newest first (polled like the list)."""
    handovers = handover_list(user=request.user, escalation_owner=signed_in(request.user), is_open=True)
    closed = handover_list(user=request.user, escalation_owner=signed_in(request.user), is_open=False)
    return list_page(
        request,
        template="handover/handovers/handover_list.html",
        fragment="handover/handovers/_handover_list_rows.html",
        context=lambda: {
            "page": _with_business_state(CappedPaginator(handovers, PAGE_SIZE).get_page(request.GET.get("page"))),
            "closed": list(closed[:20]),
            "heading": "My handovers",
            "mine": True,
        },
        state=lambda: handover_list_state(handovers=handovers) + handover_list_state(handovers=closed),
    )


def _with_business_state(page: Page) -> Page:  # type: ignore[type-arg]
    """``page`` with its handovers' runs carrying their business-state facts (no query per run)."""
    page.object_list = handover_links_business_state(page.object_list)
    return page


def _candidate_runs(request: HttpRequest, run: Run) -> list[Run]:
    """Failed runs of the same job and window the viewer may see and that have no open handover."""
    return list(
        Run.objects.filter(
            run_visibility_filter(user=request.user),
            job_id=run.job_id,
            window_start=run.window_start,
            window_end=run.window_end,
        )
        .exclude(handover_links__is_open=True)
        .select_related("tenant")
        .order_by("tenant__slug_key", "environment")
    )


@login_required
def handover_new_view(request: HttpRequest) -> HttpResponse:
    """Draft a handover from a run (``?run=<id>``), optionally with the other runs of its job and window."""
    try:
        run_id = uuid.UUID(request.GET.get("run") or request.POST.get("run") or "")
    except ValueError as exc:
        raise Http404("No such run") from exc
    run = run_get_brief(user=request.user, public_id=run_id)
    if run is None:
        raise Http404("No such run")
    candidates = _candidate_runs(request, run)
    if run.pk not in {c.pk for c in candidates}:
        candidates.insert(0, run)
    choices = [(str(c.public_id), f"{c.tenant.slug} / {c.environment} ({c.status})") for c in candidates]
    form = HandoverCreateForm(request.POST or None, choices=choices, initial={"runs": [str(run.public_id)]})
    if request.method == "POST" and form.is_valid():
        chosen = [c for c in candidates if str(c.public_id) in form.cleaned_data["runs"]]
        with refusals():
            handover_require_writer(signed_in(request.user), runs=chosen)
        try:
            handover = handover_create(actor=signed_in(request.user), runs=chosen)
        except DomainError as exc:
            messages.error(request, exc.detail)
        else:
            messages.success(request, "Handover drafted from the evidence: check the generated text.")
            _tell_redacted(request, handover)
            return redirect("handover:handover-detail", id=handover.public_id)
    may_write = may_act_on_runs(user=request.user, runs=[run])
    return render(request, "handover/handovers/handover_new.html", {"run": run, "form": form, "may_write": may_write})


def _page_context(request: HttpRequest, handover: Handover) -> dict[str, Any]:
    return {
        "handover": handover,
        "sections": handover_sections(handover),
        "links": list(handover.links.all()),
        "exceptions": list(handover.residual_exceptions.all()),
        "notifications": list(handover.notifications.all()),
        "told": notification_rows_about(dedup_prefix=f"handover:{handover.public_id}:"),
        "conditions": handover_closing_conditions(handover=handover),
        "may_write": may_act_on_runs(user=request.user, runs=handover_runs(handover)),
        "staleness": handover_generated_staleness(handover=handover),
    }


@login_required
def handover_detail_view(request: HttpRequest, id: str) -> HttpResponse:
    """The handover page: next action first, facts, unknowns, owners, runs, residue, closing conditions."""
    handover = _visible(request, id)
    context = _page_context(request, handover)
    linked = problems_for_handover(user=request.user, handover=handover)
    context.update(
        problems=linked,
        problem_choices=[p for p in problem_list(user=request.user)[:50] if p.status != "closed" and p not in linked],
        reopen_form=ReasonForm(),
        exception_form=ResidualExceptionForm(),
        owner_form=ResidualExceptionOwnerForm(),
        allowed=_allowed_actions(handover),
    )
    return render(request, "handover/handovers/handover_detail.html", context)


@login_required
def handover_generated_diff_view(request: HttpRequest, id: str) -> HttpResponse:
    """What regenerating would change: each generated section's text now beside the text the current evidence gives.

    Reads the evidence and writes nothing; the page offers the regeneration (one click).
    """
    handover = _visible(request, id)
    fresh = handover_generated_preview(handover=handover)
    words = dict(Handover.Section.choices)
    diffs = [
        {"section": section, "label": words[section], "lines": text_diff(getattr(handover, section), text)}
        for section, text in fresh.items()
        if text != getattr(handover, section)
    ]
    context = {
        "handover": handover,
        "diffs": diffs,
        "staleness": handover_generated_staleness(handover=handover),
        "may_write": may_act_on_runs(user=request.user, runs=handover_runs(handover)),
    }
    return render(request, "handover/handovers/handover_generated_diff.html", context)


def _allowed_actions(handover: Handover) -> set[str]:
    return {action for action, (sources, _) in Handover.TRANSITIONS.items() if handover.status in sources} - {"resolve"}


@login_required
def handover_print_view(request: HttpRequest, id: str) -> HttpResponse:
    """A print view of the handover (no navigation; every section on paper)."""
    handover = _visible(request, id)
    return render(request, "handover/handovers/handover_print.html", _page_context(request, handover))


@login_required
def handover_markdown_view(request: HttpRequest, id: str) -> HttpResponse:
    """The Markdown export (``?download=1`` for a file)."""
    handover = _visible(request, id)
    text = handover_markdown(handover=handover, conditions=handover_closing_conditions(handover=handover))
    response = HttpResponse(text, content_type="text/markdown; charset=utf-8")
    disposition = "attachment" if request.GET.get("download") else "inline"
    response["Content-Disposition"] = f'{disposition}; filename="handover-{handover.public_id}.md"'
    return response


@login_required
def handover_history_view(request: HttpRequest, id: str) -> HttpResponse:
    """Every text each section had, oldest first, with who wrote it and whether it was generated."""
    handover = _visible(request, id)
    section = request.GET.get("section") or None
    revisions = list(
        handover_revision_list(handover=handover, section=section if section in Handover.Section.values else None)
    )
    titles = dict(Handover.Section.choices)
    grouped: dict[str, list[Any]] = {}
    for revision in revisions:
        grouped.setdefault(revision.section, []).append(revision)
    return render(
        request,
        "handover/handovers/handover_history.html",
        {"handover": handover, "groups": [(titles[k], v) for k, v in grouped.items()], "sections": titles},
    )


def _resolved_post(request: HttpRequest) -> tuple[Any, list[str]]:
    """The POST with each conflict resolved as the person chose (keep mine / keep theirs / edit).

    Returns the data and the names of conflicts left without a choice.
    """
    data = request.POST.copy()
    unresolved = []
    for name in request.POST.getlist("conflict"):
        choice = request.POST.get(f"resolve_{name}")
        if choice == "mine":
            data[name] = request.POST.get(f"mine_{name}", "")
        elif choice == "theirs":
            data[name] = request.POST.get(f"theirs_{name}", "")
        elif choice != "edit":
            unresolved.append(name)
    return data, unresolved


def _edit_conflicts(
    handover: Handover, mine: dict[str, Any], base: dict[str, str], form: HandoverEditForm
) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """Compare the person's changes with the current handover: what both changed differently, and the form's values.

    ``mine``: what the person changed (name → value), ``base``: the texts they started from. Returns
    the conflicts (name, label, mine, theirs) and the initial values of a form on the current version
    with the person's non-conflicting changes carried over.
    """
    current = handover_texts(handover)
    conflicts = []
    overrides: dict[str, Any] = {}
    for name, value in mine.items():
        theirs = base_text(current.get(name))
        if theirs != base.get(name, "") and theirs != base_text(value):
            field = form.fields[name]
            conflicts.append(
                {"name": name, "label": str(field.label or name), "mine": base_text(value), "theirs": theirs}
            )
        overrides[name] = base_text(value)
    return conflicts, overrides


@login_required
def handover_edit_view(request: HttpRequest, id: str) -> HttpResponse:
    """Edit every section and field; confirm generated text as it is.

    Only what this person changed (against the texts and version the page showed) is sent. When
    someone saved meanwhile, nothing is lost: changes that do not overlap are saved on top of the
    current version (with a note); sections both changed are shown side by side (keep mine, keep
    theirs, edit) and nothing is saved until the person chooses.
    """
    handover = _writable(request, id)
    conflicts: list[dict[str, str]] = []
    if request.method != "POST":
        form = HandoverEditForm(handover=handover)
        return render(request, "handover/handovers/handover_edit.html", {"handover": handover, "form": form})
    post, unresolved = _resolved_post(request)
    form = HandoverEditForm(post, handover=handover)
    if unresolved or not form.is_valid():
        if unresolved:
            messages.error(request, "Choose for each section shown twice: keep mine, keep theirs or edit.")
            conflicts = [
                {
                    "name": n,
                    "label": str(form.fields[n].label or n),
                    "mine": request.POST.get(f"mine_{n}", ""),
                    "theirs": request.POST.get(f"theirs_{n}", ""),
                }
                for n in unresolved
                if n in form.fields
            ]
        context = {"handover": handover, "form": form, "conflicts": conflicts}
        return render(request, "handover/handovers/handover_edit.html", context)
    data = form.cleaned_data
    names = (*Handover.Section.values, *EDIT_FIELD_NAMES)
    base = {name: data.get(f"base_{name}", "").replace("\r\n", "\n") for name in names}
    mine = {name: data[name] for name in names if base_text(data[name]) != base[name]}
    confirm = data.get("confirm") or []
    try:
        try:
            saved = _edit_save(request, handover, mine, confirm, data["version"])
        except EditConflict as exc:
            fresh = handover_get(user=request.user, public_id=handover.public_id) or handover
            conflicts, overrides = _edit_conflicts(fresh, mine, base, form)
            if conflicts:
                messages.error(request, exc.detail)
                form = HandoverEditForm(handover=fresh, overrides=overrides)
                context = {"handover": fresh, "form": form, "conflicts": conflicts}
                return render(request, "handover/handovers/handover_edit.html", context)
            saved = _edit_save(request, handover, mine, confirm, exc.current_version)
            messages.info(
                request,
                f"Someone saved this handover meanwhile (version {exc.current_version}); your changes did not "
                "overlap theirs, so both are kept.",
            )
    except DomainError as exc:
        messages.error(request, exc.detail)
        return render(request, "handover/handovers/handover_edit.html", {"handover": handover, "form": form})
    messages.success(request, "Saved. Earlier text stays in the history.")
    _tell_redacted(request, saved)
    return redirect("handover:handover-detail", id=handover.public_id)


def _edit_save(
    request: HttpRequest, handover: Handover, mine: dict[str, Any], confirm: list[str], version: int
) -> Handover:
    return handover_update(
        handover=handover,
        actor=signed_in(request.user),
        sections={s: v for s, v in mine.items() if s in Handover.Section.values},
        confirm=confirm,
        fields={name: v for name, v in mine.items() if name in EDITABLE_FIELDS},
        base_version=version,
    )


ACTIONS: dict[str, tuple[Callable[..., Handover], str]] = {
    "hand-over": (handover_hand_over, "Handed over."),
    "start-recovery": (handover_start_recovery, "Recovery started."),
    "verify": (handover_verify, "Verifying: the next-run check is scheduled."),
    "close": (handover_close, "Closed."),
    "refresh": (handover_refresh_generated, "Generated text refreshed from the evidence."),
}


@login_required
@require_POST
def handover_action_view(request: HttpRequest, id: str, action: str) -> HttpResponse:
    """Run one verb on the handover (hand over, start recovery, verify, close, reopen, refresh, confirm all)."""
    handover = _writable(request, id)
    try:
        if action == "reopen":
            form = ReasonForm(request.POST)
            if not form.is_valid():  # blank or too long: the form says which
                messages.error(request, " ".join(str(e) for e in form.errors["reason"]))
                return redirect("handover:handover-detail", id=handover.public_id)
            handover_reopen(handover=handover, actor=signed_in(request.user), reason=form.cleaned_data["reason"])
            messages.success(request, "Reopened: back to recovering.")
        elif action == "confirm-all":
            # confirming is an edit: it names the version whose text the person read (DESIGN "Handover")
            version = request.POST.get("version", "")
            if not handover.generated_sections:  # a second click, or confirmed meanwhile
                messages.info(request, "No generated text is left to confirm.")
                return redirect("handover:handover-detail", id=handover.public_id)
            if not version.isascii() or not version.isdigit():
                messages.error(request, "Read the generated text again before confirming it: nothing was confirmed.")
                return redirect("handover:handover-detail", id=handover.public_id)
            try:
                handover_update(
                    handover=handover,
                    actor=signed_in(request.user),
                    confirm=handover.generated_sections or [],
                    base_version=int(version),
                )
            except EditConflict:
                messages.error(
                    request, "The generated text changed since you read it: nothing was confirmed. Read it again."
                )
                return redirect("handover:handover-detail", id=handover.public_id)
            messages.success(request, "Generated text confirmed as it is.")
        elif action in ACTIONS:
            verb, done = ACTIONS[action]
            verb(handover=handover, actor=signed_in(request.user))
            if action == "hand-over":
                told = told_for(event="handed_over", dedup_key=f"handover:{handover.public_id}:handed_over")
                done += " " + told_sentence(
                    told, nobody="Nobody could be told: the escalation owner has no channel selected for it."
                )
            messages.success(request, done)
        else:
            raise Http404("No such action")
    except DomainError as exc:
        messages.error(request, exc.detail)
    return redirect("handover:handover-detail", id=handover.public_id)


@login_required
@require_POST
def residual_exception_add_view(request: HttpRequest, id: str) -> HttpResponse:
    """Record a residual exception (what is knowingly left over) with its owner and due date."""
    handover = _writable(request, id)
    form = ResidualExceptionForm(request.POST)
    place = reverse("handover:handover-detail", kwargs={"id": handover.public_id})
    if not form.is_valid():
        messages.error(request, "; ".join(f"{k}: {' '.join(str(e) for e in v)}" for k, v in form.errors.items()))
        return redirect(place)
    data = form.cleaned_data
    try:
        with submission_once(request) as sent:  # sent twice: recorded once
            if sent.earlier is not None:
                messages.info(request, sent.notice)
                return redirect(place)
            exception = residual_exception_create(
                handover=handover,
                actor=signed_in(request.user),
                description=data["description"],
                record_ids=data["record_ids"],
                owner=data["owner"],
                due_date=data["due_date"],
            )
            messages.success(request, "Residual exception recorded.")
            _tell_redacted(request, exception)
            sent.record(place)
    except DomainError as exc:
        messages.error(request, exc.detail)
    return redirect(place)


@login_required
@require_POST
def residual_exception_edit_view(request: HttpRequest, id: str, exception_id: str) -> HttpResponse:
    """Name the owner and due date of a residual exception."""
    handover = _writable(request, id)
    exception = next((e for e in handover.residual_exceptions.all() if str(e.public_id) == str(exception_id)), None)
    if exception is None:
        raise Http404("No such residual exception")
    form = ResidualExceptionOwnerForm(request.POST)
    if form.is_valid():
        try:
            residual_exception_update(
                exception=exception,
                actor=signed_in(request.user),
                owner=form.cleaned_data["owner"],
                due_date=form.cleaned_data["due_date"],
                base_version=form.cleaned_data["version"],
            )
            messages.success(request, "Residual exception updated.")
        except DomainError as exc:
            messages.error(request, exc.detail)
    else:
        messages.error(request, "; ".join(f"{k}: {' '.join(str(e) for e in v)}" for k, v in form.errors.items()))
    return redirect("handover:handover-detail", id=handover.public_id)


@login_required
def run_handover_box_view(request: HttpRequest, id: str) -> HttpResponse:
    """The run page's "handover" box (an htmx fragment): its handovers, or a button to draft one."""
    run = run_get_brief(user=request.user, public_id=id)
    if run is None:
        raise Http404("No such run")
    handovers = handover_for_run(run=run)
    open_handover = next((h for h in handovers if h.is_open), None)
    return render(
        request,
        "handover/handovers/_run_box.html",
        {
            "run": run,
            "open_handover": open_handover,
            "closed": [h for h in handovers if not h.is_open],
            "may_write": may_act_on_runs(user=request.user, runs=[run]),
            "controls": run_controls(user=request.user, run=run),
        },
    )

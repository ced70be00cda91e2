"""HTML pages of problems: list (filters, CSV), new (from a handover), page, edit, transitions, unlink, Markdown;
and linking a handover to a problem from the handover's page.

Thin: a selector loads (404 when not visible), the service's guard refuses read-only viewers before a
form is read (its Forbidden relayed as 403 by ``refusals``), a service writes, POST → redirect → GET
with a message.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from handover.core.errors import DomainError
from handover.core.once import submission_once
from handover.core.pagination import CappedPaginator
from handover.core.people import signed_in
from handover.core.replica import replica_reads
from handover.core.views import form_post, refusals
from handover.handovers.models import Handover
from handover.handovers.selectors import handover_get
from handover.ownership.selectors import team_list_assignable
from handover.problems.export import problem_list_csv, problem_markdown
from handover.problems.forms import (
    EDIT_FIELDS,
    ProblemChoiceForm,
    ProblemEditForm,
    ProblemForm,
    ProblemLinkForm,
    ProblemTransitionForm,
)
from handover.problems.models import Problem
from handover.problems.selectors import problem_get, problem_list, problem_summaries, problem_view
from handover.problems.services import (
    may_write_problem,
    problem_create,
    problem_link_handover,
    problem_require_creator,
    problem_require_handover_writer,
    problem_require_writer,
    problem_transition,
    problem_unlink_handover,
    problem_update,
)
from runs.permissions import may_act_anywhere

PAGE_SIZE = 50
CSV_LIMIT = 5000
ACTION_WORDS = {
    "start_fix": "Start the fix",
    "deploy_fix": "Fix deployed",
    "verify": "Verify now",
    "close": "Close",
    "reopen": "Reopen",
}
DONE_WORDS = {
    "start_fix": "Fix in progress.",
    "deploy_fix": "Fix deployed: clean runs count from now.",
    "verify": "Verified: every linked target ran clean often enough.",
    "close": "Closed.",
    "reopen": "Reopened.",
}


def _visible(request: HttpRequest, id: uuid.UUID | str) -> Problem:
    problem = problem_get(user=request.user, public_id=id)
    if problem is None:
        raise Http404("No such problem")
    return problem


def _writable(request: HttpRequest, id: uuid.UUID | str) -> Problem:
    problem = _visible(request, id)
    with refusals():  # the problem services' refusal, before a form is read
        problem_require_writer(signed_in(request.user), problem=problem)
    return problem


def _filters(request: HttpRequest) -> dict[str, Any]:
    status = request.GET.get("status") or None
    return {
        "status": status if status in Problem.Status.values else None,
        "team": (request.GET.get("team") or "")[:100] or None,
        "job": (request.GET.get("job") or "")[:200] or None,
        "tenant": (request.GET.get("tenant") or "")[:200] or None,
        "title": (request.GET.get("q") or "")[:300] or None,
    }


@login_required
@replica_reads
def problem_list_view(request: HttpRequest) -> HttpResponse:
    """Problems the viewer may see, newest first.

    Filters: ``status``, ``team``, ``job``, ``tenant``, ``q`` (title prefix, case-insensitive)."""
    filters = _filters(request)
    page = CappedPaginator(problem_list(user=request.user, **filters), PAGE_SIZE).get_page(request.GET.get("page"))
    summaries = problem_summaries(user=request.user, problems=list(page))
    rows = [(p, summaries[p.pk]) for p in page]
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "handover/problems/problem_list.html",
        {
            "page": page,
            "rows": rows,
            "filters": filters,
            "statuses": Problem.Status.choices,
            "teams": team_list_assignable(user=request.user).order_by("name"),
            "query": query.urlencode(),
            "may_create": may_act_anywhere(user=request.user),
        },
    )


@login_required
def problem_export_view(request: HttpRequest) -> HttpResponse:
    """The list as CSV (the same filters; at most 5000 rows; counts are what the viewer may see)."""
    problems = list(problem_list(user=request.user, **_filters(request))[:CSV_LIMIT])
    text = problem_list_csv(problems=problems, summaries=problem_summaries(user=request.user, problems=problems))
    response = HttpResponse(text, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="problems.csv"'
    return response


def _handover_from(request: HttpRequest) -> Handover | None:
    raw = request.GET.get("handover") or request.POST.get("handover") or ""
    if not raw:
        return None
    try:
        handover = handover_get(user=request.user, public_id=uuid.UUID(raw))
    except ValueError as exc:
        raise Http404("No such handover") from exc
    if handover is None:
        raise Http404("No such handover")
    return handover


@login_required
def problem_new_view(request: HttpRequest) -> HttpResponse:
    """Open a problem, from a handover's page (``?handover=<id>``: linked at once, its title and defect suggested)."""
    handover = _handover_from(request)
    with refusals():  # the problem services' refusal, before the form is shown or read
        problem_require_creator(signed_in(request.user), handovers=[handover] if handover is not None else [])
    initial = {"title": handover.title, "defect_ref": handover.defect_ref} if handover is not None else {}
    form = ProblemForm(request.POST or None, initial=initial, user=request.user)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            with submission_once(request) as sent:  # the same form sent twice (a double click) opens one problem
                if sent.earlier is not None:
                    messages.info(request, sent.notice)
                    return redirect(sent.earlier or request.get_full_path())
                problem = problem_create(
                    actor=signed_in(request.user),
                    title=data["title"],
                    defect_ref=data["defect_ref"],
                    description=data["description"],
                    owning_team=data["owning_team"],
                    clean_runs_required=data["clean_runs_required"],
                    handovers=[handover] if handover is not None else [],
                )
                sent.record(reverse("handover:problem-detail", kwargs={"id": problem.public_id}))
        except DomainError as exc:
            messages.error(request, exc.detail)
        else:
            messages.success(request, "Problem opened.")
            return redirect(sent.place)
    return render(request, "handover/problems/problem_new.html", {"form": form, "handover": handover})


@login_required
def problem_detail_view(request: HttpRequest, id: str) -> HttpResponse:
    """The problem page: status and its moves, clean runs per target, linked handovers and runs, history."""
    problem = _visible(request, id)
    view = problem_view(user=request.user, problem=problem)
    may_write = may_write_problem(user=signed_in(request.user), problem=problem)
    allowed = [a for a, (sources, _) in Problem.TRANSITIONS.items() if problem.status in sources]
    edit_form = ProblemEditForm(problem=problem, user=request.user)
    return render(
        request,
        "handover/problems/problem_detail.html",
        {
            "problem": problem,
            "view": view,
            "may_write": may_write,
            "actions": [(a, ACTION_WORDS[a]) for a in allowed] if may_write else [],
            "edit_form": edit_form,
        },
    )


@login_required
@require_POST
def problem_edit_view(request: HttpRequest, id: str) -> HttpResponse:
    """Save the problem's own fields (title, defect, description, team, clean runs required)."""
    problem = _writable(request, id)

    def save(data: dict[str, Any]) -> Problem:
        # the values the page showed (``base_<name>``; a post without them changes every field it names):
        # the service writes only what the person changed and refuses a field someone else changed meanwhile
        based_on = {name: data[f"base_{name}"] for name in EDIT_FIELDS if f"base_{name}" in request.POST}
        return problem_update(
            problem=problem,
            actor=signed_in(request.user),
            based_on=based_on,
            **{name: data[name] for name in EDIT_FIELDS},
        )

    return form_post(
        request,
        ProblemEditForm(request.POST, problem=problem, user=request.user),
        invalid="Not saved.",
        act=save,
        success=lambda _: "Saved.",
        done=redirect("handover:problem-detail", id=problem.public_id),
    )


@login_required
@require_POST
def problem_transition_view(request: HttpRequest, id: str) -> HttpResponse:
    """One move of the problem (start fix, fix deployed, verify, close, reopen); refusals come back as messages."""
    problem = _writable(request, id)
    form = ProblemTransitionForm(request.POST)
    return form_post(
        request,
        form,
        invalid="Not moved.",
        act=lambda data: problem_transition(
            problem=problem,
            action=data["action"],
            actor=signed_in(request.user),
            reason=data["reason"],
        ),
        success=lambda _: DONE_WORDS.get(form.cleaned_data["action"], "Done."),
        done=redirect("handover:problem-detail", id=problem.public_id),
    )


@login_required
@require_POST
def problem_unlink_view(request: HttpRequest, id: str) -> HttpResponse:
    """Unlink one handover (``handover``: its id) from the problem."""
    problem = _writable(request, id)
    form = ProblemLinkForm(request.POST)
    done = redirect("handover:problem-detail", id=problem.public_id)
    if not form.is_valid():
        messages.error(request, "Choose a handover to unlink.")
        return done
    handover = handover_get(user=request.user, public_id=form.cleaned_data["handover"])
    if handover is None:
        raise Http404("No such handover")
    return form_post(
        request,
        form,
        invalid="Not unlinked.",
        act=lambda _: problem_unlink_handover(problem=problem, handover=handover, actor=signed_in(request.user)),
        success=lambda _: "Handover unlinked.",
        done=done,
    )


@login_required
def problem_markdown_view(request: HttpRequest, id: str) -> HttpResponse:
    """The Markdown export (``?download=1`` for a file): what the viewer may see of the problem."""
    problem = _visible(request, id)
    text = problem_markdown(view=problem_view(user=request.user, problem=problem))
    response = HttpResponse(text, content_type="text/markdown; charset=utf-8")
    disposition = "attachment" if request.GET.get("download") else "inline"
    response["Content-Disposition"] = f'{disposition}; filename="problem-{problem.public_id}.md"'
    return response


@login_required
@require_POST
def handover_problem_link_view(request: HttpRequest, id: str) -> HttpResponse:
    """From a handover's page: link it to a problem the viewer may see (``problem``: its id)."""
    handover = handover_get(user=request.user, public_id=id)
    if handover is None:
        raise Http404("No such handover")
    with refusals():  # the problem services' refusal, before the form is read
        problem_require_handover_writer(signed_in(request.user), handover=handover)
    form = ProblemChoiceForm(request.POST)
    done = redirect("handover:handover-detail", id=handover.public_id)
    if not form.is_valid():
        messages.error(request, "Choose a problem to link this handover to.")
        return done
    problem = problem_get(user=request.user, public_id=form.cleaned_data["problem"])
    if problem is None:
        messages.error(request, "No such problem.")
        return done
    return form_post(
        request,
        form,
        invalid="Not linked.",
        act=lambda _: problem_link_handover(problem=problem, handover=handover, actor=signed_in(request.user)),
        success=lambda _: f"Linked to the problem “{problem.title}”.",
        done=done,
    )

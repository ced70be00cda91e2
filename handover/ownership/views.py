"""Pages of ownership: a job's owners (and its targets'), a team's page, and the viewer's aged work.

docs/ownership.md. A job or team the viewer may not see answers 404; changing ownership without being
an admin or the job's technical owner is refused by the service (a message on the page).
"""

from __future__ import annotations

from typing import Any, cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone

from handover.core.edits import BASE_FIELD, edit_base_field, edit_base_read
from handover.core.errors import DomainError
from handover.core.people import Person
from handover.notifications.models import Team
from handover.ownership.forms import OwnershipForm
from handover.ownership.models import AgedWorkEscalation, JobOwnership, TargetOwnership
from handover.ownership.selectors import (
    aged_age_seconds,
    aged_work_for_person,
    aged_work_for_team,
    aged_work_list,
    job_ownership_get,
    owners_resolve,
    target_ownership_map,
    team_get,
    team_list_visible,
)
from handover.ownership.services import job_ownership_set, ladder_steps, ownership_values, target_ownership_set
from runs.catalog.models import Job, JobTarget
from runs.catalog.selectors import job_get, target_list_visible
from runs.permissions import may_manage_job_ownership


def _person(request: HttpRequest) -> Person:
    """The signed-in person (the views are ``login_required``)."""
    return cast(Person, request.user)


def _initial(row: JobOwnership | TargetOwnership | None) -> dict[str, object]:
    base: dict[str, object] = {BASE_FIELD: edit_base_field(ownership_values(row))}
    if row is None:
        return base
    return {"team": row.team, "escalation_owner": row.escalation_owner, **base}


def _own_team(data: Any, job: Job, targets: list[JobTarget]) -> Team | None:
    """The team the posted row (the job's, or a target's named by ``target``) holds now, or None."""
    target = next((t for t in targets if str(t.public_id) == str(data.get("target", ""))), None)
    row = target_ownership_map(job=job).get(target.pk) if target is not None else job_ownership_get(job=job)
    return getattr(row, "team", None)


@login_required
def job_ownership_view(request: HttpRequest, id: str) -> HttpResponse:
    """Show a job's owning team and escalation owner and each target's; POST sets one (job or target)."""
    job = job_get(user=request.user, public_id=id)
    if job is None:
        raise Http404("No such job")
    targets = list(target_list_visible(user=request.user, job=job))  # another client's target is not shown
    if request.method == "POST":
        form = OwnershipForm(request.POST, user=request.user, own_team=_own_team(request.POST, job, targets))
        if form.is_valid():
            data = form.cleaned_data
            base = edit_base_read(request.POST, ["team", "escalation_owner"])
            try:
                if data["target"]:
                    target = next((t for t in targets if t.public_id == data["target"]), None)
                    if target is None:
                        raise Http404("No such target")
                    target_ownership_set(
                        actor=_person(request),
                        target=target,
                        team=data["team"],
                        escalation_owner=data["escalation_owner"],
                        based_on=base,
                    )
                    messages.success(request, f"Ownership of {target.tenant.slug} · {target.environment} saved.")
                else:
                    job_ownership_set(
                        actor=_person(request),
                        job=job,
                        team=data["team"],
                        escalation_owner=data["escalation_owner"],
                        based_on=base,
                    )
                    messages.success(request, f"Ownership of {job.key} saved.")
            except DomainError as exc:
                messages.error(request, exc.detail)
        else:
            messages.error(request, "Choose a team and a person from the lists.")
        return redirect("handover:job-ownership", id=job.public_id)
    job_row = job_ownership_get(job=job)
    overrides = target_ownership_map(job=job)
    effective = owners_resolve({(job.pk, t.pk) for t in targets})
    rows = [
        {
            "target": t,
            "own": overrides.get(t.pk),
            "owner": effective[(job.pk, t.pk)],
            "form": OwnershipForm(
                initial={"target": t.public_id, **_initial(overrides.get(t.pk))},
                prefix_for=str(t.public_id),
                user=request.user,
                own_team=getattr(overrides.get(t.pk), "team", None),
            ),
        }
        for t in targets
    ]
    return render(
        request,
        "handover/ownership/job_ownership.html",
        {
            "job": job,
            "job_row": job_row,
            "form": OwnershipForm(
                initial=_initial(job_row), prefix_for="job", user=request.user, own_team=getattr(job_row, "team", None)
            ),
            "rows": rows,
            "may_manage": may_manage_job_ownership(user=request.user, job=job),
        },
    )


def _ages() -> list[tuple[str, int]]:
    return [(str(label), aged_age_seconds(value)) for value, label in AgedWorkEscalation.Kind.choices]


@login_required
def team_detail_view(request: HttpRequest, id: str) -> HttpResponse:
    """A team's page: its members and the aged work it owns that the viewer may see (404 for a team the
    viewer may not see: ``team_list_visible``)."""
    team = team_get(user=request.user, public_id=id)
    if team is None:
        raise Http404("No such team")
    items = aged_work_for_team(team=team, items=aged_work_list(now=timezone.now(), user=request.user))
    return render(
        request,
        "handover/ownership/team_detail.html",
        {
            "team": team,
            "members": team.members.order_by("username"),
            "items": items,
            "ages": _ages(),
            "steps": ladder_steps(),
        },
    )


@login_required
def aged_work_mine_view(request: HttpRequest) -> HttpResponse:
    """The viewer's aged work: items whose escalation owner they are or whose owning team they are in,
    and the teams whose pages they may open."""
    items = aged_work_for_person(user=request.user, items=aged_work_list(now=timezone.now(), user=request.user))
    return render(
        request,
        "handover/ownership/aged_work_mine.html",
        {
            "items": items,
            "teams": team_list_visible(user=request.user).order_by("name"),
            "ages": _ages(),
            "steps": ladder_steps(),
        },
    )

"""Problems a person may see, and what of each they may see (docs/problems.md "Visibility").

A person sees a problem when they are an admin, when they may see at least one run of one of its
linked handovers (``runs.permissions.run_visibility_filter``: a tenant role on its tenant or technical
owner of its job), or when they opened it and it has no linked handover yet. Inside a visible problem
they see only the linked handovers they may see whole (``handover_visibility_filter``), the runs they
may see, and clean-run counts over those runs only; the problem's own fields and status are the same
for everyone who sees it. A team grants no permission: being in the owning team shows nothing.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.db.models import Exists, OuterRef, Q, QuerySet

from handover.core.people import Person
from handover.handovers.models import Handover
from handover.handovers.selectors import handover_visibility_filter
from handover.problems.clean_runs import CleanRuns, problem_clean_runs, problem_target_runs
from handover.problems.models import Problem, ProblemEvent, ProblemHandover
from runs.attempts.business_state import run_business_state, run_business_state_annotate
from runs.attempts.models import Run
from runs.permissions import is_admin, run_visibility_filter

User = Person | AnonymousUser


def problem_visibility_filter(*, user: User) -> Q:
    """A Q object limiting problems to those ``user`` may see (module docstring)."""
    if not user.is_authenticated:
        return Q(pk__in=[])
    if is_admin(user):
        return Q()
    seen = Run.objects.filter(
        run_visibility_filter(user=user), handover_links__handover__problem_links__problem=OuterRef("pk")
    )
    linked = ProblemHandover.objects.filter(problem=OuterRef("pk"))
    return Q(Exists(seen)) | (Q(created_by=user) & ~Q(Exists(linked)))


def problem_list(
    *,
    user: User,
    status: str | None = None,
    team: str | None = None,
    job: str | None = None,
    tenant: str | None = None,
    title: str | None = None,
    handover: Handover | None = None,
) -> QuerySet[Problem]:
    """Problems ``user`` may see, newest first, with the owning team and creator loaded.

    Filters: ``status``; ``team`` (the owning team's name); ``job`` (a job key) and ``tenant`` (a tenant slug,
    case-insensitive): problems with a linked run of that job or tenant *the viewer may see*; ``title``:
    title starts with it, case-insensitively; ``handover``: problems linked to it. Queries: one.
    """
    problems = Problem.objects.filter(problem_visibility_filter(user=user))
    if status:
        problems = problems.filter(status=status)
    if team:
        problems = problems.filter(owning_team__name=team)
    if job or tenant:
        runs = Run.objects.filter(
            run_visibility_filter(user=user), handover_links__handover__problem_links__problem=OuterRef("pk")
        )
        if job:
            runs = runs.filter(job__key=job)
        if tenant:
            runs = runs.filter(tenant__slug_key=tenant.casefold())
        problems = problems.filter(Exists(runs))
    if title:
        problems = problems.filter(title__istartswith=title)
    if handover is not None:
        problems = problems.filter(links__handover=handover)
    return problems.select_related("owning_team", "created_by").order_by("-created_at", "-id")


def problem_get(*, user: User, public_id: uuid.UUID | str) -> Problem | None:
    """One problem ``user`` may see (with team, creator and closer), or None when missing or hidden. Queries: one."""
    return (
        Problem.objects.filter(problem_visibility_filter(user=user), public_id=public_id)
        .select_related("owning_team", "created_by", "closed_by")
        .first()
    )


@dataclass
class ProblemView:
    """What ``user`` sees of one problem: linked handovers and runs they may see (each run carries
    ``business_state``, a ``BusinessState``), clean-run figures over those, and the history (link
    events about hidden handovers left out)."""

    problem: Problem
    handovers: list[Handover]
    runs: list[Run]
    clean_runs: CleanRuns
    events: list[ProblemEvent]


def problem_view(*, user: User, problem: Problem) -> ProblemView:
    """Everything the problem page, the API detail and the exports show ``user`` (module docstring).

    Handovers come newest first with their job and runs (tenant); runs oldest window first with their
    business-state facts. Queries: about five, plus one per visible target after the fix was deployed.
    """
    visible_handovers = Handover.objects.filter(handover_visibility_filter(user=user))
    handovers = list(
        visible_handovers.filter(problem_links__problem=problem)
        .select_related("job")
        .prefetch_related("links__run__tenant")
        .order_by("-created_at", "-id")
    )
    runs = run_business_state_annotate(
        Run.objects.filter(pk__in=[r.pk for r in problem_target_runs(problem=problem, user=user)])
    )
    events = list(
        ProblemEvent.objects.filter(problem=problem)
        .filter(Q(handover__isnull=True) | Q(handover__in=visible_handovers))
        .select_related("actor", "handover")
        .order_by("occurred_at", "id")
    )
    shown_runs = list(runs.select_related("job", "tenant").order_by("window_start", "id"))
    for run in shown_runs:  # annotated: no query; the page, the API and the export read it
        run.business_state = run_business_state(run)  # type: ignore[attr-defined]
    return ProblemView(
        problem=problem,
        handovers=handovers,
        runs=shown_runs,
        clean_runs=problem_clean_runs(problem=problem, user=user),
        events=events,
    )


def problem_summaries(*, user: User, problems: list[Problem]) -> dict[int, dict[str, Any]]:
    """Per problem id, what a list shows ``user``: how many linked handovers and runs they may see.

    Queries: two, whatever the number of problems.
    """
    ids = [p.pk for p in problems]
    counts: dict[int, dict[str, Any]] = {pk: {"handovers": 0, "runs": 0} for pk in ids}
    for problem_id in (
        ProblemHandover.objects.filter(problem_id__in=ids)
        .filter(handover__in=Handover.objects.filter(handover_visibility_filter(user=user)))
        .values_list("problem_id", flat=True)
    ):
        counts[problem_id]["handovers"] += 1
    for problem_id, _run_id in (
        Run.objects.filter(
            run_visibility_filter(user=user), handover_links__handover__problem_links__problem_id__in=ids
        )
        .values_list("handover_links__handover__problem_links__problem_id", "pk")
        .distinct()
    ):
        counts[problem_id]["runs"] += 1
    return counts


def problems_for_handover(*, user: User, handover: Handover) -> list[Problem]:
    """The problems ``handover`` is linked to that ``user`` may see, newest first (the handover page). Queries: one."""
    return list(problem_list(user=user, handover=handover))

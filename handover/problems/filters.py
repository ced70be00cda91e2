"""Query parameters of ``GET /api/v1/problems/`` (``handover.core.filters``)."""

from __future__ import annotations

from django_filters import CharFilter, ChoiceFilter

from handover.core.filters import StrictFilterSet
from handover.problems.models import Problem


class ProblemFilterSet(StrictFilterSet):
    """Problems by status, owning team, job, tenant and title prefix."""

    refuse_empty = True

    status = ChoiceFilter(choices=Problem.Status.choices, help_text="the problem's status")
    team = CharFilter(max_length=100, help_text="the owning team's name")
    job = CharFilter(max_length=200, help_text="a job key: problems with a linked run of it that the caller sees")
    tenant = CharFilter(
        max_length=200, help_text="a tenant slug (any case): problems with a linked run of it that the caller sees"
    )
    q = CharFilter(max_length=300, help_text="title starts with this, case-insensitively")

"""Query parameters of ``GET /api/v1/replays/`` (validated by ``handover.core.filters``)."""

from __future__ import annotations

from django_filters import ChoiceFilter, UUIDFilter

from approvals.replays.models import ReplayRequest
from handover.core.filters import StrictBooleanFilter, StrictFilterSet


class ReplayRequestFilterSet(StrictFilterSet):
    """Replay requests by status, run and openness."""

    status = ChoiceFilter(choices=ReplayRequest.Status.choices, help_text="the request's status")
    run = UUIDFilter(help_text="a run's id")
    open = StrictBooleanFilter(help_text="true: pending, approved or dispatched only")

"""Query parameters of ``GET /api/v1/handovers/`` and of a handover's revisions (``handover.core.filters``)."""

from __future__ import annotations

from django_filters import ChoiceFilter

from handover.core.filters import StrictBooleanFilter, StrictFilterSet
from handover.handovers.models import Handover


class HandoverFilterSet(StrictFilterSet):
    """Handovers by status, the caller's own (escalation owner), open or closed."""

    status = ChoiceFilter(choices=Handover.Status.choices, help_text="the handover's status")
    mine = StrictBooleanFilter(help_text="true: only handovers whose escalation owner is the caller")
    open = StrictBooleanFilter(help_text="true: not closed; false: closed")


class HandoverRevisionFilterSet(StrictFilterSet):
    """A handover's revisions by section."""

    section = ChoiceFilter(choices=Handover.Section.choices, help_text="one section's history")

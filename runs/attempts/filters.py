"""Query parameters of ``GET /api/v1/runs/`` (validated by ``handover.core.filters``; ``run_list`` filters)."""

from __future__ import annotations

from django_filters import CharFilter, ChoiceFilter

from handover.core.filters import BoundedDateTimeFilter, StrictFilterSet
from runs.attempts.models import Run


class RunFilterSet(StrictFilterSet):
    """Runs by job key, tenant slug, environment, status, window start range and a prefix search."""

    job = CharFilter(help_text="job key")
    tenant = CharFilter(help_text="tenant slug (case-insensitive)")
    environment = CharFilter(help_text="environment, e.g. prod")
    status = ChoiceFilter(choices=Run.Status.choices, help_text="technical status")
    window_from = BoundedDateTimeFilter(help_text="window starts at or after this instant (ISO 8601)")
    window_to = BoundedDateTimeFilter(help_text="window starts before this instant (ISO 8601)")
    search = CharFilter(
        help_text="the start of a job key or name, a tenant slug or name, an execution id or a correlation "
        "reference, in any case"
    )

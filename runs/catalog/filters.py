"""Query parameters of ``GET /api/v1/jobs/`` (validated by ``handover.core.filters``; ``job_list`` filters)."""

from __future__ import annotations

from django_filters import CharFilter

from handover.core.filters import StrictBooleanFilter, StrictFilterSet


class JobFilterSet(StrictFilterSet):
    """Jobs by the start of their key or name (ignoring case) and by whether they are paused."""

    search = CharFilter(help_text="the job key or name starts with this (case-insensitive)")
    paused = StrictBooleanFilter(help_text="true: paused jobs only; false: jobs not paused")

"""Query parameters of ``GET /api/v1/checks/`` (validated by ``handover.core.filters``; ``check_list`` filters)."""

from __future__ import annotations

from django_filters import CharFilter, ChoiceFilter, UUIDFilter

from handover.core.filters import StrictFilterSet
from runs.checks.models import NextRunCheck


class NextRunCheckFilterSet(StrictFilterSet):
    """Checks by status, job key, tenant slug and target."""

    status = ChoiceFilter(choices=NextRunCheck.Status.choices, help_text="the check's status")
    job = CharFilter(help_text="job key")
    tenant = CharFilter(help_text="tenant slug (case-insensitive)")
    target = UUIDFilter(help_text="job target public id")

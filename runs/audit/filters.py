"""Query parameters of ``GET /api/v1/audit-events/`` (validated by ``handover.core.filters``)."""

from __future__ import annotations

from django_filters import ChoiceFilter

from handover.core.filters import StrictFilterSet
from runs.audit.models import AuditEvent


class AuditEventFilterSet(StrictFilterSet):
    """Audit events by action."""

    action = ChoiceFilter(choices=AuditEvent.Action.choices, help_text="what was done")

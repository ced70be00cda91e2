"""Query parameters of ``GET /api/v1/alerts/`` (validated by ``handover.core.filters``;
``alert_list_counted`` filters)."""

from __future__ import annotations

from django_filters import CharFilter, ChoiceFilter

from handover.core.filters import StrictFilterSet
from runs.alerts.models import Alert


class AlertFilterSet(StrictFilterSet):
    """Alerts by outcome and source."""

    outcome = ChoiceFilter(choices=Alert.Outcome.choices, help_text="the alert's outcome")
    source = CharFilter(help_text="source slug, e.g. generic")


class RefusedRequestFilterSet(StrictFilterSet):
    """Refused requests by source (``GET /api/v1/integrations/refused-requests/``)."""

    source = CharFilter(help_text="source slug, e.g. alertmanager")

"""Query parameters of the work ledger's lists (validated by ``handover.core.filters``; selectors filter)."""

from __future__ import annotations

from django_filters import CharFilter, ChoiceFilter
from drf_spectacular.utils import extend_schema_field

from handover.core.filters import StrictBooleanFilter, StrictFilterSet
from runs.ledger.models import WorkItem

RECORD_ID_MAX = 300


class WorkItemFilterSet(StrictFilterSet):
    """A run's items by outcome, possible-duplicate flag and exact record id."""

    outcome = ChoiceFilter(choices=WorkItem.Outcome.choices, help_text="the item's outcome")
    possible_duplicate = StrictBooleanFilter(help_text="only (true) or no (false) possible duplicates")
    record_id = CharFilter(strip=False, help_text="exact record id")


class WorkItemChangeFilterSet(StrictFilterSet):
    """A run's item history, optionally one item's."""

    record_id = CharFilter(strip=False, help_text="one item's history")


class WorkItemSearchFilterSet(StrictFilterSet):
    """The record id looked up across the visible runs (required)."""

    record_id = extend_schema_field({"type": "string", "minLength": 1, "maxLength": RECORD_ID_MAX})(
        CharFilter(
            required=True,
            min_length=1,
            max_length=RECORD_ID_MAX,
            strip=False,
            help_text="exact record id, e.g. INV-1003",
        )
    )

"""Query parameters of the recurrence and supportability reads (API and pages): period, last day, tenant, job."""

from __future__ import annotations

from datetime import date
from typing import Any

from django import forms
from django_filters import CharFilter, ChoiceFilter, DateFilter, UUIDFilter

from handover.core.filters import StrictFilterSet
from runs.attempts.failures import PERIOD_DAYS
from runs.catalog.models import Tenant, normalise_slug

DAYS_CHOICES = [(str(d), f"{d} days") for d in PERIOD_DAYS]
FIRST_DAY = date(2000, 1, 1)
LAST_DAY = date(2199, 12, 31)
DAY_RANGE_MESSAGE = "Give a day from 2000-01-01 to 2199-12-31."


class _BoundedDateField(forms.DateField):
    """An ISO 8601 day (``YYYY-MM-DD``) within 2000–2199, so period arithmetic never overflows."""

    def to_python(self, value: Any) -> date | None:
        parsed = super().to_python(value)
        if parsed is not None and not FIRST_DAY <= parsed <= LAST_DAY:
            raise forms.ValidationError(DAY_RANGE_MESSAGE, code="out_of_range")
        return parsed


class BoundedDateFilter(DateFilter):  # type: ignore[misc]  # django-filter ships no type hints
    """A day within 2000–2199 (``_BoundedDateField``)."""

    field_class = _BoundedDateField


class _PeriodField(forms.ChoiceField):
    """``days``: absent means the default; given, it must be one of the choices (an empty value is refused)."""

    def to_python(self, value: Any) -> str | None:
        return None if value is None else str(value)

    def validate(self, value: Any) -> None:
        if value is None:
            return
        if value == "":
            raise forms.ValidationError("Give 7, 30 or 90.", code="invalid_choice")
        super().validate(value)


class PeriodFilter(ChoiceFilter):  # type: ignore[misc]  # django-filter ships no type hints
    """The period's length: 7, 30 or 90 days when given (``_PeriodField``)."""

    field_class = _PeriodField


class SupportabilityFilterSet(StrictFilterSet):
    """The period (7, 30 or 90 days, ending with ``until``, today by default) and an optional tenant."""

    refuse_empty = True

    days = PeriodFilter(choices=DAYS_CHOICES, help_text="the period's length in days (default 30)")
    until = BoundedDateFilter(help_text="the period's last day, YYYY-MM-DD in the caller's zone (default today)")
    tenant = CharFilter(help_text="only this tenant (slug, case-insensitive); one you may not see counts nothing")


class RecurrenceFilterSet(SupportabilityFilterSet):
    """The supportability parameters, and an optional job (public id)."""

    job = UUIDFilter(help_text="only this job (its id)")


class RecurrenceForm(forms.Form):
    """The recurrence and supportability pages' filters: shape and per-field rules only."""

    days = forms.TypedChoiceField(choices=DAYS_CHOICES, coerce=int, required=False, label="Period")
    until = _BoundedDateField(required=False, label="Last day", widget=forms.DateInput(attrs={"type": "date"}))
    tenant = forms.CharField(required=False, max_length=100, label="Tenant (slug)")
    job = forms.UUIDField(required=False, widget=forms.HiddenInput)


def tenants_named(slug: str | None) -> list[Tenant] | None:
    """The tenant a ``tenant`` parameter names, as a list (empty when there is none); None when not given.

    An unknown slug and a tenant the caller may not see both narrow to nothing visible (the report's
    selectors filter by visibility), so the answer never tells them apart.
    """
    if not slug:
        return None
    return list(Tenant.objects.filter(slug_key=normalise_slug(slug).casefold()))

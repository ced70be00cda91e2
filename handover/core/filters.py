"""Query parameters of the API: every list filter is a django-filter FilterSet, validated before the view runs.

A slice's ``filters.py`` declares its FilterSets (subclasses of ``StrictFilterSet``); the view names
one as ``filterset_class`` (drf-spectacular documents it from there), and ``StrictQueryMixin``,
which every people-facing API view carries, checks the query string before the handler runs:

- a parameter the operation does not declare answers 400 naming it (the pagination parameters of a
  paged answer and ``format`` are declared by the framework);
- a parameter given twice, a NUL character anywhere, or a value its filter refuses (not one of the
  enum, not a UUID, not ``true``/``false``, not an instant, an instant outside the range the app
  computes with) answers 400 with ``errors`` naming each parameter;
- the cleaned values are left on ``view.query_filters`` for the view to hand to its selector: the
  FilterSet validates and documents, the slice's selector filters (one place for each rule, shared
  with the HTML pages). ``SelectorFilterBackend`` is therefore a documentation-only backend.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

import django_filters
from django import forms
from django.db.models import Model, QuerySet
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

from handover.core.fields import NUL, NUL_MESSAGE, TIME_RANGE_MESSAGE, time_in_range
from handover.core.pagination import page_number_read

NUMBERED_PAGE_PARAMS = frozenset({"page", "page_size"})  # whole numbers; a cursor is opaque

ALWAYS_ALLOWED = frozenset({"format"})  # DRF's URL_FORMAT_OVERRIDE: harmless, JSON is the only renderer


class _StrictBooleanField(forms.NullBooleanField):
    """``true``/``false`` (or ``1``/``0``); anything else is an error, never silently "no filter"."""

    widget = forms.TextInput  # the select widget would read an unknown value as "no choice"

    def to_python(self, value: Any) -> bool | None:  # type: ignore[override]  # None: not given
        if value in (None, ""):
            return None
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
        raise forms.ValidationError("Give true or false.", code="invalid")

    def validate(self, value: Any) -> None:
        return None


class _BoundedDateTimeField(forms.DateTimeField):
    """An ISO 8601 instant (UTC when it names no offset) inside the range the app computes with."""

    def to_python(self, value: Any) -> datetime | None:
        parsed = super().to_python(value)
        if parsed is not None and not time_in_range(parsed):
            raise forms.ValidationError(TIME_RANGE_MESSAGE, code="out_of_range")
        return parsed


class StrictBooleanFilter(django_filters.BooleanFilter):  # type: ignore[misc]  # django-filter ships no types
    """A boolean query parameter: ``true``/``false``; any other value answers 400."""

    field_class = _StrictBooleanField


class BoundedDateTimeFilter(django_filters.IsoDateTimeFilter):  # type: ignore[misc]  # django-filter: no types
    """An ISO 8601 instant; one before 1970 or from 2200 on answers 400 (never an overflow)."""

    field_class = _BoundedDateTimeField


class StrictFilterSet(django_filters.FilterSet):  # type: ignore[misc]  # django-filter ships no type hints
    """Base of the API's FilterSets: declared filters only, no model; ``values()`` is what selectors take.

    ``refuse_empty``: a declared parameter other than free text given with an empty value is a 400 (a
    choice, a day or an id has no empty value in the schema), instead of being read as absent.
    """

    refuse_empty: ClassVar[bool] = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, filter_ in self.filters.items():
            if getattr(filter_, "_label", None) is None:
                filter_.label = name  # no model to take a verbose name from: the parameter's own name

    def values(self) -> dict[str, Any]:
        """The cleaned values given, by filter name (absent and empty parameters left out)."""
        return {name: value for name, value in self.form.cleaned_data.items() if value is not None and value != ""}


class _NothingToFilter:
    """Stands in for a queryset when a FilterSet only validates (it reads ``.model`` and nothing else)."""

    model = None


_NOTHING_TO_FILTER = _NothingToFilter()


class StrictQueryMixin:
    """Refuse, with a 400, any query parameter the operation does not declare, and validate those it does.

    Views carry it first in their bases. A ViewSet's ``filterset_class`` applies to ``list``; an
    ``@action(filterset_class=...)`` to that action; ``paginated_actions`` names the other actions
    that answer a page (they accept the pagination parameters too).
    """

    filterset_class: ClassVar[type[StrictFilterSet] | None] = None
    paginated_actions: ClassVar[frozenset[str]] = frozenset()
    query_filters: dict[str, Any]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]  # authentication and permissions first
        method = (request.method or "").lower()
        if method not in getattr(self, "http_method_names", ()) or not hasattr(self, method):
            self.query_filters = {}  # not an operation of this view: dispatch answers 405, not a 400
            return
        self.query_filters = query_validate(
            request, self._query_filterset_class(request), self._query_pagination_params(request)
        )

    def _is_action(self, name: str) -> bool:
        return getattr(self, "action", None) == name

    def _query_filterset_class(self, request: Request) -> type[StrictFilterSet] | None:
        if request.method not in ("GET", "HEAD"):
            return None
        if not hasattr(self, "action"):  # a plain APIView: its filterset is its GET's
            return self.filterset_class
        own = self.__dict__.get("filterset_class")  # set by @action(filterset_class=...)
        return own or (self.filterset_class if self._is_action("list") else None)

    def _query_pagination_params(self, request: Request) -> set[str]:
        paginator = getattr(self, "paginator", None)
        if request.method not in ("GET", "HEAD") or paginator is None:
            return set()
        if hasattr(self, "action") and not (self._is_action("list") or self.action in self.paginated_actions):
            return set()
        names = (
            getattr(paginator, attr, None)
            for attr in ("page_query_param", "page_size_query_param", "cursor_query_param")
        )
        return {name for name in names if name}


def query_validate(
    request: Request, filterset_class: type[StrictFilterSet] | None, pagination_params: set[str]
) -> dict[str, Any]:
    """Validate ``request``'s query string against a FilterSet and the pagination parameters.

    Returns the cleaned filter values (``StrictFilterSet.values``). Raises DRF's ValidationError
    (400 problem details, ``errors`` by parameter name) for an undeclared parameter, one given
    more than once, a NUL character in a name or value, or a value the FilterSet refuses.
    """
    params = request.query_params
    declared = set(filterset_class.base_filters) if filterset_class else set()
    allowed = declared | pagination_params | ALWAYS_ALLOWED
    errors: dict[str, list[str]] = {}
    for name in params:
        values = params.getlist(name)
        shown = name.replace(NUL, "\\x00")
        if name not in allowed:
            hint = (
                f" Known here: {', '.join(sorted(declared | pagination_params))}." if allowed - ALWAYS_ALLOWED else ""
            )
            errors[shown] = [f"Unknown query parameter.{hint}"]
        elif any(NUL in value for value in values):
            errors[shown] = [NUL_MESSAGE]
        elif (
            filterset_class is not None
            and filterset_class.refuse_empty
            and name in declared
            and "" in values
            and not isinstance(filterset_class.base_filters[name], django_filters.CharFilter)
        ):
            errors[shown] = ["Give a value, or leave the parameter out."]
        elif len(values) > 1:
            errors[shown] = ["Give this parameter once."]
        elif name in pagination_params & NUMBERED_PAGE_PARAMS:
            try:
                page_number_read(request, name)
            except ValidationError as exc:
                errors.update(exc.detail)  # type: ignore[arg-type]
    if errors:
        raise ValidationError(errors)
    if filterset_class is None:
        return {}
    # no queryset: the FilterSet only validates here (a model-less FilterSet would otherwise look for one)
    filterset = filterset_class(data=params, queryset=_NOTHING_TO_FILTER, request=request)
    if not filterset.is_valid():
        raise ValidationError({name: list(messages) for name, messages in filterset.errors.items()})
    return filterset.values()


class SelectorFilterBackend(DjangoFilterBackend):  # type: ignore[misc]  # django-filter ships no type hints
    """Documents a view's FilterSet for the schema; filters nothing (``StrictQueryMixin`` validated the
    query, and the view's selector applies ``view.query_filters``)."""

    def filter_queryset(self, request: Request, queryset: QuerySet[Any], view: Any) -> QuerySet[Any]:
        return queryset

    def get_filterset_class(self, view: Any, queryset: QuerySet[Model] | None = None) -> Any:
        """The FilterSet ``StrictQueryMixin`` applies to this view and action (None: no filters)."""
        own = vars(view).get("filterset_class")  # set by @action(filterset_class=...)
        if own is not None or getattr(view, "action", "list") not in ("list", None):
            return own
        return getattr(view, "filterset_class", None)

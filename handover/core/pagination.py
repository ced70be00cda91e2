"""Pagination: the one API pagination class (``{count, count_capped, next, previous, results}`` with
absolute links and a page-size cap) and the pages' paginator, both counting at most a capped number of
rows (``settings.LIST_COUNT_CAP``, 10,000: "10,000+") so that a list over years of history never
runs an unbounded ``COUNT(*)``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Generic, TypeVar, overload

from django.conf import settings
from django.core.paginator import Paginator
from django.db.models import Model, QuerySet
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response


def count_cap() -> int:
    """How many rows a list counts before it says "N+" (``settings.LIST_COUNT_CAP``, default 10,000)."""
    return int(getattr(settings, "LIST_COUNT_CAP", 10_000))


def count_at_most(rows: Any, limit: int) -> int:
    """How many rows ``rows`` holds, counting no further than ``limit``: ``min(len(rows), limit)``.

    ``rows`` is a QuerySet (one query: ``SELECT COUNT(*) FROM (SELECT id … LIMIT limit)``, with no
    ORDER BY and no annotations, so the database stops after ``limit`` rows of any plan), an object
    with its own ``count_at_most(limit)`` (e.g. the inbox's parts), or any sized sequence.
    """
    own = getattr(rows, "count_at_most", None)
    if callable(own):
        return int(own(limit))
    if isinstance(rows, QuerySet):
        return _bounded(rows, limit).count()
    return min(len(rows), limit)


def _bounded(rows: QuerySet[Any], limit: int) -> QuerySet[Any]:
    """``rows`` limited to ``limit`` for counting: ids only and no ORDER BY when that keeps its rows
    (a plain filtered queryset), else the queryset itself sliced (grouped, combined, already sliced
    -- a search's first N -- or distinct on fields)."""
    query = rows.query
    if query.is_sliced or query.combinator or query.group_by is not None or query.distinct_fields:
        return rows[:limit]
    return rows.order_by().values("pk")[:limit]


def capped_label(count: int, cap: int | None = None) -> str:
    """``count`` for a page: ``"10,000+"`` when it is past ``cap`` (default :func:`count_cap`), else the number."""
    cap = count_cap() if cap is None else cap
    return f"{cap:,}+" if count > cap else str(count)


# The deepest a count reaches (``LIMIT horizon + 1`` must fit a signed 64-bit integer, the LIMIT of
# PostgreSQL and SQLite alike): a page number past it is a page past the end (404), not a database error.
MAX_HORIZON = 2**62


def count_reach(number: object, per_page: int) -> int:
    """How many rows a capped list counts for page ``number`` (a query parameter, any text): the cap
    and one more, or ``number × per_page`` and one more when that page lies deeper -- what
    :class:`CappedPaginator` counts for it. A missing or unreadable number counts as page 1."""
    try:
        wanted = int(str(number))
    except (TypeError, ValueError):
        wanted = 1
    return max(count_cap(), min(max(wanted, 1) * per_page, MAX_HORIZON)) + 1


class CappedPaginator(Paginator):  # type: ignore[type-arg]  # pages rows of any kind
    """Django's paginator counting at most ``horizon + 1`` rows: the cap, or further when a page asks.

    ``horizon`` starts at the cap (``settings.LIST_COUNT_CAP``) and grows to ``number × per_page`` when
    page ``number`` is asked for (that page's OFFSET reads as many rows anyway), so every page that
    exists is found and has a "next" when more rows follow. ``count`` is then at most ``horizon + 1``:
    ``count_capped`` says it stopped there, ``shown_count`` is the count to show (``horizon`` when
    capped: "at least"), and ``count_label``/``num_pages_label`` are "10,000+" / "200+" for pages.
    """

    def __init__(self, object_list: Any, per_page: int | str, *, cap: int | None = None, **kwargs: Any) -> None:
        super().__init__(object_list, per_page, **kwargs)
        self.horizon = count_cap() if cap is None else cap

    def validate_number(self, number: Any) -> int:
        """Django's check of a page number, after widening the horizon to reach that page."""
        try:
            wanted = int(number)
        except (TypeError, ValueError):
            wanted = 0  # Django's own check answers it (PageNotAnInteger)
        reach = min(wanted * int(self.per_page), MAX_HORIZON)
        if reach > self.horizon:
            counted = self.__dict__.get("count")
            was_capped = counted is not None and counted > self.horizon
            self.horizon = reach
            if was_capped:  # counted against a nearer horizon: count again
                self.__dict__.pop("count", None)
                self.__dict__.pop("num_pages", None)
        return int(super().validate_number(number))

    @cached_property
    def count(self) -> int:
        """Rows, counted up to ``horizon + 1`` (one query for a QuerySet)."""
        return count_at_most(self.object_list, self.horizon + 1)

    @property
    def count_capped(self) -> bool:
        """Whether counting stopped at the horizon: there are more than ``shown_count`` rows."""
        return self.count > self.horizon

    @property
    def shown_count(self) -> int:
        """The count to show: exact, or the horizon ("at least") when capped."""
        return min(self.count, self.horizon)

    @property
    def count_label(self) -> str:
        """``"1234"``, or ``"10,000+"`` when capped."""
        return f"{self.horizon:,}+" if self.count_capped else str(self.count)

    @property
    def num_pages_label(self) -> str:
        """``"7"``, or ``"200+"`` (whole pages within the horizon) when capped."""
        return f"{max(self.horizon // self.per_page, 1):,}+" if self.count_capped else str(self.num_pages)


def page_number_read(request: Request, name: str) -> int | None:
    """The positive whole number in query parameter ``name``; None when absent.

    Raises DRF's ValidationError (400 naming the parameter) for anything else: the schema says
    "integer", so ``?page=x`` is a bad request, not a missing page.
    """
    value = request.query_params.get(name)
    if value is None:
        return None
    text = value.strip()
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise ValidationError({name: ["Give a whole number of 1 or more."]})
    return int(text)


class DefaultPagination(PageNumberPagination):
    """Page-number pagination; ``?page_size=`` up to 200 (larger asks get 200). A page past the end is a 404.

    ``count`` is counted up to the cap (:class:`CappedPaginator`): past it, ``count`` is the cap (or the
    end of the page asked for, when deeper) and ``count_capped`` is true -- "at least ``count``"
    (docs/api-changes.md).
    """

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200
    django_paginator_class = CappedPaginator

    def get_paginated_response(self, data: Any) -> Response:
        """DRF's page, with ``count`` capped and ``count_capped`` beside it."""
        assert self.page is not None  # set by paginate_queryset, which the view called first
        paginator = self.page.paginator
        assert isinstance(paginator, CappedPaginator)
        return Response(
            {
                "count": paginator.shown_count,
                "count_capped": paginator.count_capped,
                "next": self.get_next_link(),
                "previous": self.get_previous_link(),
                "results": data,
            }
        )

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        """DRF's page schema with ``count`` described as capped and ``count_capped`` (required)."""
        result = super().get_paginated_response_schema(schema)
        cap = count_cap()
        result["properties"]["count"]["description"] = (
            f"Rows in the list, counted up to {cap:,} (or to the end of the page asked for, when deeper); "
            "when count_capped is true there are more: at least this many."
        )
        properties = result["properties"]
        result["properties"] = {
            "count": properties["count"],
            "count_capped": {
                "type": "boolean",
                "description": "True when counting stopped at count: the list holds more rows than count.",
                "example": False,
            },
            **{name: value for name, value in properties.items() if name != "count"},
        }
        result["required"] = ["count", "count_capped", "results"]
        return result

    def get_page_size(self, request: Request) -> int | None:
        size = page_number_read(request, self.page_size_query_param)
        return self.page_size if size is None else min(size, self.max_page_size)

    def paginate_queryset(self, queryset: QuerySet[Any], request: Request, view: Any = None) -> list[Any] | None:
        page_number_read(request, self.page_query_param)  # a malformed page number is a 400, not a 404
        return super().paginate_queryset(queryset, request, view)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            parameter["schema"] = {"type": "integer", "minimum": 1}
            if parameter["name"] == self.page_size_query_param:
                parameter["description"] = f"Results per page (default {self.page_size}, at most {self.max_page_size})."
        return parameters


def counts_at_most(querysets: dict[str, QuerySet[Any]], limit: int) -> dict[str, int]:
    """Several :func:`count_at_most` counts in one query: ``{name: min(rows, limit)}``.

    One ``SELECT (SELECT COUNT(*) FROM (… LIMIT limit)), …`` on the first queryset's database (the
    router's read alias), each inner query without ORDER BY or annotations; parameters stay bound.
    An empty mapping answers ``{}`` without a query; a queryset that can match nothing counts 0
    without SQL.
    """
    from django.core.exceptions import EmptyResultSet
    from django.db import connections

    if not querysets:
        return {}
    counts = dict.fromkeys(querysets, 0)
    parts: list[tuple[str, str]] = []
    params: list[Any] = []
    alias = next(iter(querysets.values())).db
    for name, queryset in querysets.items():
        inner = _bounded(queryset, limit)
        try:
            sql, inner_params = inner.query.get_compiler(using=alias).as_sql()
        except EmptyResultSet:  # a filter that can match nothing (``pk__in=[]``): 0, no SQL
            continue
        parts.append((name, f"(SELECT COUNT(*) FROM ({sql}) AS capped_rows)"))
        params.extend(inner_params)
    if parts:
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT " + ", ".join(sql for _, sql in parts), params)
            row = cursor.fetchone()
        counts.update({name: int(n) for (name, _), n in zip(parts, row, strict=True)})
    return counts


M = TypeVar("M", bound=Model)


@dataclass
class CountedApart(Generic[M]):
    """Rows to page, counted as the sum of disjoint parts: ``rows`` is one ordered queryset (every page
    of it is one query), ``parts`` are querysets that together hold exactly ``rows``' rows, no row in
    two, each counted on its own.

    For a list filtered by an ``OR`` of branches that each have an index of their own (a person's
    alerts with and without a run): ``OR``-ed in one capped count, PostgreSQL read every row of the
    history before the first one counted; counted apart, each part stops after the rows still
    wanted. ``count_at_most(limit)`` is what ``CappedPaginator`` asks; ``count()`` counts exactly
    (one query per part).
    """

    rows: QuerySet[M]
    parts: list[QuerySet[M]]

    @property
    def ordered(self) -> bool:
        """The paginator's check: whether ``rows`` has an order."""
        return self.rows.ordered

    def count_at_most(self, limit: int) -> int:
        """The rows, counted no further than ``limit``: the parts in order, each up to what ``limit``
        leaves (queries: one per part counted). The parts after ``limit`` is reached are not counted
        at all: proving a part empty can cost more than counting one (the linked alerts of an outcome
        that has no run: PostgreSQL reads every alert of that outcome to find none)."""
        counted = 0
        for part in self.parts:
            if counted >= limit:
                break
            counted += count_at_most(part, limit - counted)
        return counted

    def count(self) -> int:
        """Every row (exact)."""
        return sum(part.count() for part in self.parts)

    def __len__(self) -> int:
        return self.count()

    @overload
    def __getitem__(self, key: int) -> M: ...

    @overload
    def __getitem__(self, key: slice) -> list[M]: ...

    def __getitem__(self, key: int | slice) -> M | list[M]:
        """One row by its position, or a slice of ``rows`` (one query)."""
        if isinstance(key, int):
            return self.rows[key]
        return list(self.rows[key])

    def __iter__(self) -> Iterator[M]:
        return iter(self.rows)

"""The one pagination class: ``{count, next, previous, results}`` with absolute links and a page-size cap."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request


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
    """Page-number pagination; ``?page_size=`` up to 200 (larger asks get 200). A page past the end is a 404."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200

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

"""The one pagination class: ``{count, next, previous, results}`` with absolute links and a page-size cap."""

from __future__ import annotations

from rest_framework.pagination import PageNumberPagination


class DefaultPagination(PageNumberPagination):
    """Page-number pagination; ``?page_size=`` up to 200."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200

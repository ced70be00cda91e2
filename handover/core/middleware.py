"""Problem details for every 404 under ``/api/``, whatever ``DEBUG`` and the ``Accept`` header say.

``handler404`` (``handover.core.error_views``) only runs with ``DEBUG`` off; with it on, Django answers
an unknown path with its HTML debug page. An API client must get the one error shape (RFC 9457
problem details, docs/architecture.md) in both cases, so this middleware replaces any 404 under
``/api/`` that is not already problem details.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from handover.core.error_views import not_found
from handover.core.errors import PROBLEM_CONTENT_TYPE


class ApiNotFoundMiddleware:
    """Turn a non-problem 404 under ``/api/`` (Django's debug or plain page) into problem details."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            response.status_code == 404
            and request.path.startswith("/api/")
            and not response.get("Content-Type", "").startswith(PROBLEM_CONTENT_TYPE)
        ):
            return not_found(request)
        return response

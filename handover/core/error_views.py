"""Error pages of the URL conf (``handler404``, ``handler500``): problem details under ``/api/``.

An API client that sends a malformed id (``/api/v1/runs/not-a-uuid/``) never reaches a view: the URL
resolver answers. It still gets RFC 9457 problem details, like every other API error; people get
Django's pages.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

from handover.core.errors import PROBLEM_CONTENT_TYPE, problem


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """404: problem details for the API, Django's page otherwise."""
    if _is_api(request):
        return JsonResponse(
            problem(404, "Not found", "There is nothing at this address."),
            status=404,
            content_type=PROBLEM_CONTENT_TYPE,
        )
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """500: problem details for the API (the error is logged by Django), Django's page otherwise."""
    if _is_api(request):
        return JsonResponse(
            problem(500, "Internal server error", "Something went wrong on our side; it has been logged."),
            status=500,
            content_type=PROBLEM_CONTENT_TYPE,
        )
    return defaults.server_error(request)

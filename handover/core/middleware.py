"""Problem details for every 404 under ``/api/``, whatever ``DEBUG`` and the ``Accept`` header say.

``handler404`` (``handover.core.error_views``) only runs with ``DEBUG`` off; with it on, Django answers
an unknown path with its HTML debug page. An API client must get the one error shape (RFC 9457
problem details, docs/architecture.md) in both cases, so this middleware replaces any 404 under
``/api/`` that is not already problem details.

Also the trimmed path of integration posts: the middlewares of people's requests (session,
authentication, audit actor, messages, htmx, time zone) wrapped so that a request for a
view marked ``integration_endpoint`` skips them (``is_integration_request``); the security headers
(``SecurityMiddleware``, CSP, ``X-Frame-Options``) and ``CommonMiddleware`` still run for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import Resolver404, resolve
from django.utils.module_loading import import_string

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


# --- the trimmed request path of integration posts ------------------------------------------------------

# Where integration endpoints live: a cheap test before the address is resolved (most requests are pages).
INTEGRATION_PATH_PREFIXES = ("/api/v1/alerts/", "/api/v1/replays/")


def is_integration_request(request: HttpRequest) -> bool:
    """True when the request is for a view marked ``integration_endpoint = True`` (the alert ingestion
    views, the job runner's replay views): authenticated by its own key, never by a person's session.

    Decided once per request (remembered on it): a path under ``INTEGRATION_PATH_PREFIXES`` is resolved
    and its view class read; any other path, or one that resolves to nothing, is a page's (False).
    """
    known = getattr(request, "_handover_integration", None)
    if known is not None:
        return bool(known)
    flag = False
    path = request.path_info
    if path.startswith(INTEGRATION_PATH_PREFIXES):
        try:
            match = resolve(path, getattr(request, "urlconf", None))
        except Resolver404:
            match = None
        view_class = getattr(match.func, "view_class", None) if match is not None else None
        flag = bool(getattr(view_class, "integration_endpoint", False))
    request._handover_integration = flag  # type: ignore[attr-defined]
    return flag


class _PageOnly:
    """Mixed into a middleware class: its work runs for every request but integration posts.

    An integration post goes straight to the next middleware: it reads no session or message cookie and
    gets no ``request.user`` (no cookie authenticates it). A wrapped class's ``process_view`` hook is
    skipped for it likewise. Subclasses of the wrapped class,
    so Django's and the admin's checks still find them.
    """

    get_response: Callable[[HttpRequest], HttpResponse]

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if is_integration_request(request):
            return self.get_response(request)
        response: HttpResponse = super().__call__(request)  # type: ignore[misc]  # the wrapped middleware class
        return response


def _page_only(path: str) -> type:
    """A subclass of the middleware at ``path`` that integration posts skip (``_PageOnly``)."""
    base = import_string(path)
    attrs: dict[str, Any] = {"__doc__": f"``{path}``, skipped for integration posts.", "__module__": __name__}
    if hasattr(base, "process_view"):

        def process_view(self: Any, request: HttpRequest, view: Any, args: Any, kwargs: Any) -> HttpResponse | None:
            if is_integration_request(request):
                return None
            return base.process_view(self, request, view, args, kwargs)  # type: ignore[no-any-return]

        attrs["process_view"] = process_view
    return type(base.__name__, (_PageOnly, base), attrs)


# The middlewares of people's requests, skipped for integration posts (``settings.MIDDLEWARE``).
# Django's CSRF middleware and django-axes's stay as they are: their checks ask for them by name (the
# integration views are CSRF-exempt, so CSRF does no check for them; axes only reads the response).
SessionMiddleware = _page_only("django.contrib.sessions.middleware.SessionMiddleware")
AuthenticationMiddleware = _page_only("django.contrib.auth.middleware.AuthenticationMiddleware")
AuditActorMiddleware = _page_only("runs.audit.middleware.AuditActorMiddleware")
MessageMiddleware = _page_only("django.contrib.messages.middleware.MessageMiddleware")
HtmxMiddleware = _page_only("django_htmx.middleware.HtmxMiddleware")
ViewerTimeZoneMiddleware = _page_only("handover.accounts.middleware.ViewerTimeZoneMiddleware")

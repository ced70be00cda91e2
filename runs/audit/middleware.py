"""Attribute audited writes to the signed-in person for the length of a request."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from runs.audit.services import audit_request_actor


class AuditActorMiddleware:
    """Make ``request.user`` the actor of audit events recorded by ``runs.audit.receivers`` during the request.

    Place after ``AuthenticationMiddleware``. ``request.user`` stays lazy: the session is read only
    when something is audited.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with audit_request_actor(getattr(request, "user", None)):
            return self.get_response(request)

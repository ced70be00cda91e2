"""Domain errors and the one API error shape: RFC 9457 problem details (``application/problem+json``).

Every API error has ``type``, ``title``, ``status``, ``detail`` and, for validation, ``errors``
(field -> messages). Domain errors carry their own type and status; Django's ValidationError,
Http404 and PermissionDenied are mapped too; anything else is a logged 500.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

logger = logging.getLogger(__name__)

PROBLEM_CONTENT_TYPE = "application/problem+json"
PROBLEM_BASE = "https://handover.example/problems/"


class DomainError(Exception):
    """Base of the errors services raise; ``status`` is the HTTP status the API maps it to."""

    status = 400
    type = "domain-error"
    title = "The request cannot be carried out"
    # members added to the problem body beside type/title/status/detail (e.g. the current version)
    extra: dict[str, Any] | None = None

    def __init__(self, detail: str, *, errors: dict[str, list[str]] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors or {}


class InvalidTransition(DomainError):
    """A state change that the object's transition table does not allow from its current status."""

    status = 409
    type = "invalid-transition"
    title = "Not allowed in the current state"


class Conflict(DomainError):
    """A write that would break a uniqueness rule."""

    status = 409
    type = "conflict"
    title = "Conflicts with an existing record"


class PreconditionFailed(DomainError):
    """A precondition of the request does not hold: ``If-Match`` names no current ``ETag`` of the record, or is
    malformed (HTTP 412, RFC 9110 §13.1.1 and §15.5.13). Nothing was written."""

    status = 412
    type = "precondition-failed"
    title = "Precondition failed"


class Forbidden(DomainError, exceptions.PermissionDenied):  # type: ignore[misc]  # detail: a str (DRF: ErrorDetail, a str too)
    """The caller may see the object but may not take this action on it (the role rules: ``runs.permissions``).

    Also DRF's own permission error, so DRF's machinery that asks a view's permission checks and takes only
    DRF's errors as a "no" (the browsable API's forms, ``?format=api``) sees a refusal, not a crash."""

    status = 403
    type = "forbidden"
    title = "Forbidden"


class NotFound(DomainError, exceptions.NotFound):  # type: ignore[misc]  # detail: a str, as for Forbidden
    """The object does not exist or the caller may not see it (no existence leak). Also DRF's own
    not-found error, as ``Forbidden`` is DRF's permission error."""

    status = 404
    type = "not-found"
    title = "Not found"


def problem(
    status_code: int,
    title: str,
    detail: str,
    *,
    type_: str = "about:blank",
    errors: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build a problem-details body. ``type_`` is a slug under PROBLEM_BASE or ``about:blank``."""
    body: dict[str, Any] = {
        "type": type_ if type_ == "about:blank" or "://" in type_ else PROBLEM_BASE + type_,
        "title": title,
        "status": status_code,
        "detail": detail,
    }
    if errors:
        body["errors"] = errors
    if extra:
        body.update(extra)
    return body


def problem_response(body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    """A DRF response carrying a problem body with the problem content type."""
    response = Response(body, status=body["status"], headers=headers)
    response.content_type = PROBLEM_CONTENT_TYPE
    return response


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    if isinstance(detail, dict):
        out: dict[str, list[str]] = {}
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            out.update(_flatten(value, name))
        return out
    if isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            return {prefix or "non_field_errors": [str(item) for item in detail]}
        out = {}
        for index, item in enumerate(detail):
            out.update(_flatten(item, f"{prefix}.{index}" if prefix else str(index)))
        return out
    return {prefix or "non_field_errors": [str(detail)]}


def problem_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF EXCEPTION_HANDLER: turn every error into RFC 9457 problem details."""
    if isinstance(exc, DomainError):
        return problem_response(
            problem(exc.status, exc.title, exc.detail, type_=exc.type, errors=exc.errors, extra=exc.extra)
        )
    if isinstance(exc, RequestDataTooBig):  # Django refused to read a body over DATA_UPLOAD_MAX_MEMORY_SIZE
        return problem_response(problem(413, "Request body too large", str(exc)))
    if isinstance(exc, SuspiciousOperation):  # e.g. TooManyFieldsSent: a malformed request, not our error
        return problem_response(problem(400, "Bad request", str(exc) or "The request is malformed."))
    if isinstance(exc, DjangoValidationError):
        errors = exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        exc = exceptions.ValidationError(errors)
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()

    response = exception_handler(exc, context)
    if response is None:
        logger.exception("unhandled error in %s", context.get("view").__class__.__name__)
        return problem_response(
            problem(500, "Internal server error", "Something went wrong on our side; it has been logged.")
        )
    if isinstance(exc, exceptions.ValidationError):
        errors = _flatten(exc.detail)
        fields = ", ".join(sorted(errors))
        body = problem(400, "Invalid input", f"Check these fields: {fields}.", type_="validation", errors=errors)
    else:
        detail = exc.detail if isinstance(exc, exceptions.APIException) else str(exc)
        title = {
            400: "Bad request",
            401: "Not authenticated",
            403: "Forbidden",
            404: "Not found",
            405: "Method not allowed",
            413: "Request body too large",
            415: "Unsupported media type",
            429: "Too many requests",
        }.get(response.status_code, "Error")
        body = problem(response.status_code, title, str(detail))
    headers = {k: v for k, v in response.items() if k in ("WWW-Authenticate", "Retry-After", "Allow")}
    return problem_response(body, headers=headers)


__all__ = [
    "Conflict",
    "DomainError",
    "InvalidTransition",
    "NotFound",
    "problem",
    "problem_response",
    "status",
]

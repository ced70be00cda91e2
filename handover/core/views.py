"""The shared body of a person's POST form: validate, call one service, report, redirect."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse

from handover.core.errors import DomainError, Forbidden, NotFound

T = TypeVar("T")


@contextmanager
def refusals() -> Iterator[None]:
    """A service's refusal as the page's: ``Forbidden`` -> 403 (PermissionDenied), ``NotFound`` -> 404.

    Pages wrap the service call (or the service module's ``..._require_...`` guard, called before a
    form is read) in it, so the role rule and its refusal live in the service, not in the view.
    """
    try:
        yield
    except Forbidden as exc:
        raise PermissionDenied(exc.detail) from exc
    except NotFound as exc:
        raise Http404(exc.detail) from exc


def is_htmx(request: HttpRequest) -> bool:
    """Whether ``request`` was sent by htmx (django-htmx's middleware sets ``request.htmx``, which the
    HttpRequest type does not declare)."""
    return bool(getattr(request, "htmx", False))


def form_post(
    request: HttpRequest,
    form: forms.Form,
    *,
    invalid: str,
    act: Callable[[dict[str, Any]], T],
    success: Callable[[T], str],
    done: HttpResponse,
    extra_tags: str = "",
) -> HttpResponse:
    """Validate ``form`` and ``act`` on its cleaned data, then return ``done`` (a redirect) either way.

    An invalid form shows ``invalid`` followed by what is wrong with each field (its label and the
    form's message, e.g. a value over its length limit); the service's result shows
    ``success(result)``; a DomainError shows its detail. ``extra_tags`` lets the page show the
    message next to the form that produced it.
    """
    if not form.is_valid():
        problems = [
            f"{form.fields[name].label or name.replace('_', ' ').capitalize()}: {' '.join(str(e) for e in errors)}"
            if name in form.fields
            else " ".join(str(e) for e in errors)
            for name, errors in form.errors.items()
        ]
        messages.error(request, " ".join([invalid, *problems]), extra_tags=extra_tags)
        return done
    try:
        result = act(form.cleaned_data)
        messages.success(request, success(result), extra_tags=extra_tags)
    except DomainError as exc:
        messages.error(request, exc.detail, extra_tags=extra_tags)
    return done

"""The shared body of a person's POST form: validate, call one service, report, redirect."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse

from handover.core.errors import DomainError

T = TypeVar("T")


def form_post(
    request: HttpRequest,
    form: forms.Form,
    *,
    invalid: str,
    act: Callable[[dict[str, Any]], T],
    success: Callable[[T], str],
    done: HttpResponse,
) -> HttpResponse:
    """Validate ``form`` and ``act`` on its cleaned data, then return ``done`` (a redirect) either way.

    An invalid form shows ``invalid``; the service's result shows ``success(result)``; a DomainError
    shows its detail.
    """
    if not form.is_valid():
        messages.error(request, invalid)
        return done
    try:
        result = act(form.cleaned_data)
        messages.success(request, success(result))
    except DomainError as exc:
        messages.error(request, exc.detail)
    return done

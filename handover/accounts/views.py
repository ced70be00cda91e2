"""A person's own personal API tokens (/account/tokens/): list, create (shown once), revoke.

Only the signed-in person's tokens are ever found here, admins included: another person's prefix
answers 404. A new token's secret is rendered in the answer to the POST that created it, marked
``no-store``, instead of POST -> redirect -> GET: carrying it to the next request would mean
writing it to the session or the URL.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from knox.models import AuthToken

from handover.accounts.selectors import api_token_get, api_token_list
from handover.accounts.services import LABEL_MAX_LENGTH, api_token_create, api_token_expiry_choices, api_token_revoke
from handover.core.errors import DomainError, NotFound


class ApiTokenCreateForm(forms.Form):
    label = forms.CharField(
        max_length=LABEL_MAX_LENGTH, help_text="What it is for, e.g. “nightly export check”: shown in the list."
    )
    expires_in_days = forms.TypedChoiceField(coerce=int, label="Expires in")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = api_token_expiry_choices()
        field = self.fields["expires_in_days"]
        assert isinstance(field, forms.TypedChoiceField)
        field.choices = [(days, f"{days} days") for days in choices]
        field.initial = choices[-1]


def _token(request: HttpRequest, prefix: str) -> AuthToken:
    token = api_token_get(user=request.user, prefix=prefix)
    if token is None:
        raise Http404("No such token")
    return token


def _list_page(request: HttpRequest, *, form: ApiTokenCreateForm | None = None, status: int = 200) -> HttpResponse:
    return render(
        request,
        "handover/accounts/api_tokens.html",
        {"tokens": api_token_list(user=request.user), "form": form or ApiTokenCreateForm()},
        status=status,
    )


@login_required
@never_cache
def api_token_list_view(request: HttpRequest) -> HttpResponse:
    """The person's tokens (prefix, label, created, expires, last used) and the form for a new one."""
    return _list_page(request)


ISSUED_SESSION_KEY = "handover:api-token-issued"


@login_required
@never_cache
def api_token_create_view(request: HttpRequest) -> HttpResponse:
    """POST: create a token (audited), then redirect; GET: show the secret just issued, this once.

    POST → redirect → GET, so reloading the page never creates a second token: the POST keeps the
    secret in the person's server-side session only until the GET that follows takes it out and
    shows it; a reload of that page (or any later GET) finds nothing and goes back to the list.
    """
    if request.method != "POST":
        issued = request.session.pop(ISSUED_SESSION_KEY, None)
        if not issued:
            messages.info(request, "A token's secret is shown only once, right after it is issued.")
            return redirect("handover:api-token-list")
        # never_cache marks the answer no-store: no browser or proxy keeps the secret
        return render(request, "handover/accounts/api_token_issued.html", {"issued": issued})
    form = ApiTokenCreateForm(request.POST)
    if not form.is_valid():
        return _list_page(request, form=form, status=400)
    try:
        token = api_token_create(
            user=request.user,  # type: ignore[arg-type]
            label=form.cleaned_data["label"],
            expires_in_days=form.cleaned_data["expires_in_days"],
            actor=request.user,  # type: ignore[arg-type]
        )
    except DomainError as exc:
        messages.error(request, exc.detail)
        return _list_page(request, form=form, status=exc.status)
    request.session[ISSUED_SESSION_KEY] = {
        "raw": token.raw,
        "label": token.label,
        "prefix": token.token.token_key,
        "expiry": token.token.expiry.isoformat() if token.token.expiry else None,
    }
    return redirect("handover:api-token-create")


@login_required
def api_token_revoke_view(request: HttpRequest, prefix: str) -> HttpResponse:
    """GET: ask to confirm; POST: revoke the token now (audited), then back to the list."""
    token = _token(request, prefix)
    if request.method != "POST":
        return render(request, "handover/accounts/api_token_revoke.html", {"token": token})
    try:
        api_token_revoke(token=token, actor=request.user)  # type: ignore[arg-type]
    except NotFound as exc:  # revoked or cleared meanwhile
        raise Http404(exc.detail) from exc
    messages.success(request, f"Token {token.token_key}… revoked: scripts using it now get 401.")
    return redirect("handover:api-token-list")

"""Reads of personal API tokens: a person's own tokens, never anyone else's."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser
from django.db.models import BooleanField, ExpressionWrapper, F, Q, QuerySet
from django.utils import timezone
from knox.models import AuthToken

from handover.core.people import Person


def api_token_list(*, user: Person | AnonymousUser) -> QuerySet[AuthToken]:
    """``user``'s personal API tokens, newest first, expired ones included (knox deletes those lazily).

    Each token is annotated with ``label`` (``ApiTokenLabel``, None without one), ``last_used_at``
    (``ApiTokenUse``, None if never used) and ``is_expired`` (as of now), so a list costs one query. Nobody sees
    another person's tokens here, admins included (they revoke those in the Django admin).
    """
    tokens: QuerySet[AuthToken] = AuthToken.objects.all()  # django-rest-knox ships no type hints
    if not user.is_authenticated:
        return tokens.none()
    listed: QuerySet[AuthToken] = (
        tokens.filter(user=user)
        .annotate(
            label=F("token_label__label"),
            last_used_at=F("use__last_used_at"),
            is_expired=ExpressionWrapper(Q(expiry__lte=timezone.now()), output_field=BooleanField()),
        )
        .order_by("-created", "token_key")
    )
    return listed


def api_token_get(*, user: Person | AnonymousUser, prefix: str) -> AuthToken | None:
    """``user``'s token whose knox ``token_key`` is ``prefix`` (e.g. ``ho_1a2b3c4d5e6f``), or None.

    None too for another person's token: callers answer 404 either way (no existence leak). Two
    tokens of one person sharing a 12-hex-digit prefix is a 1 in 2^48 chance; the newest wins.
    """
    return api_token_list(user=user).filter(token_key=prefix).first()

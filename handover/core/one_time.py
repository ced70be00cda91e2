"""One-time secrets across POST -> redirect -> GET: a page that issues a secret shows it once.

The POST that issues a secret stashes it here and redirects to a GET carrying only a random nonce
(``?issued=<nonce>``); that GET pops it, so a reload or going back shows it no more and issues nothing.
The payload lives in the cache only: bound to the signed-in person and a scope, five minutes at most,
deleted when read; never in the URL (but for the nonce), the session or a log.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.core.cache import cache
from django.http import HttpRequest

ONE_TIME_TTL_SECONDS = 300
NONCE_MAX_LENGTH = 64


def _cache_key(request: HttpRequest, scope: str, nonce: str) -> str:
    return f"one-time:{scope}:{request.user.pk}:{nonce}"


def one_time_stash(request: HttpRequest, *, scope: str, payload: dict[str, Any]) -> str:
    """Keep ``payload`` for this person's next GET in ``scope``; return the nonce to put in its URL.

    The entry expires after ``ONE_TIME_TTL_SECONDS`` if that GET never comes.
    """
    nonce = secrets.token_urlsafe(16)
    cache.set(_cache_key(request, scope, nonce), dict(payload), ONE_TIME_TTL_SECONDS)
    return nonce


def one_time_pop(request: HttpRequest, *, scope: str, nonce: str) -> dict[str, Any] | None:
    """The payload stashed under ``nonce`` by this same person in ``scope``, once; None otherwise.

    The entry is deleted as it is read, so a second call (a reload) gets None. Another person's
    nonce, another scope's, an expired or malformed one all give None.
    """
    if not nonce or len(nonce) > NONCE_MAX_LENGTH or not request.user.is_authenticated:
        return None
    key = _cache_key(request, scope, nonce)
    value = cache.get(key)
    cache.delete(key)
    return value if isinstance(value, dict) else None

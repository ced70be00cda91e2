"""A create form sent twice (a double click, a resubmitted page) creates once.

Each create form carries a one-off token (``{% submission_field %}``: a hidden ``submission`` field,
new at every render). The view creates inside ``submission_once``, which claims the token, records where
the result is once the view names it, and forgets the token when the block fails (a refusal or a
crash: the same page may be sent again); the same token again answers with the recorded place instead
of creating a second problem, residual exception, integration key or runner credential (or rotating a
key twice: the second click is shown the new key the first one issued). The claim is the cache's
atomic ``add`` (Redis in production; the embedded file cache is per machine, which is where a double
click lands). A post without a token (an older page, a script) creates as before. The API's creates
are not covered: an API client retries with its own idempotency.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.core.cache import cache
from django.http import HttpRequest

FIELD = "submission"
KEEP_SECONDS = 3600  # a page left open and sent again within the hour is still recognised
WAIT_SECONDS = 3.0  # how long a second click waits for the first one's result
_PENDING = ""
ALREADY_SENT = "This form was sent twice: it was saved once, shown here."
STILL_SAVING = "This form was sent twice and its first sending is still being saved: nothing was saved again."
_TOKEN = re.compile(r"^[0-9a-f]{32}$")


def submission_token() -> str:
    """A new one-off token for a form (32 hex characters)."""
    return uuid.uuid4().hex


def _key(request: HttpRequest) -> str | None:
    """The cache key of the token ``request`` was sent with (per person); None without a valid token."""
    token = str(request.POST.get(FIELD, ""))
    return f"submission:{getattr(request.user, 'pk', '')}:{token}" if _TOKEN.match(token) else None


def _claim(request: HttpRequest) -> str | None:
    """Claim the token the form was sent with. Returns None when this is its first sending (or it has no
    valid token): the view goes on and creates. Otherwise the path the first sending recorded
    (``Submission.record``), waited for up to ``WAIT_SECONDS`` while it is still being saved; ``""``
    when it recorded none in that time (it failed, or is slow): the view then creates nothing."""
    key = _key(request)
    if key is None:
        return None
    if cache.add(key, _PENDING, KEEP_SECONDS):
        return None
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        place = cache.get(key, _PENDING)
        if place or time.monotonic() >= deadline:
            return str(place or "")
        time.sleep(0.1)


def _record(request: HttpRequest, path: str) -> None:
    """Record ``path`` (where the created record is shown) as the result of the claimed token."""
    key = _key(request)
    if key is not None:
        cache.set(key, path, KEEP_SECONDS)


def _release(request: HttpRequest) -> None:
    """Forget the claimed token when nothing was created (a refusal): the same page may be sent again."""
    key = _key(request)
    if key is not None:
        cache.delete(key)


@dataclass
class Submission:
    """One sending of a create form, its token claimed. ``earlier`` is None when this sending is the first
    (the view creates); else the path the first sending recorded, or ``""`` while it is still being saved
    (the view creates nothing and tells ``notice``). ``place`` is the path the view recorded, if any."""

    earlier: str | None
    place: str = ""

    @property
    def notice(self) -> str:
        """What to tell the person whose form was sent twice."""
        return ALREADY_SENT if self.earlier else STILL_SAVING

    def record(self, path: str) -> None:
        """Name ``path`` (where the created record is shown) as this sending's result, recorded for a second
        sending when the block ends without an error."""
        self.place = path


@contextmanager
def submission_once(request: HttpRequest) -> Iterator[Submission]:
    """Create once per form token: claim the token ``request`` was sent with for the block, and yield its
    ``Submission`` (``earlier`` not None: a second sending, create nothing).

    When the block of a first sending ends normally, the path it recorded (``Submission.record``) is kept
    for ``KEEP_SECONDS`` as the token's result (none recorded: the token stays claimed, and a second
    sending creates nothing). When it raises -- a ``DomainError`` refusal or anything else -- the token is
    forgotten, so the same page may be sent again, and the error goes on to the view. A post without a
    valid token yields a first sending every time. Side effects: cache writes only."""
    sent = Submission(earlier=_claim(request))
    if sent.earlier is not None:
        yield sent
        return
    try:
        yield sent
    except BaseException:
        _release(request)
        raise
    if sent.place:
        _record(request, sent.place)

"""The type of a person in the code: ``Person`` (the project's user model, Django's ``auth.User``: the
project sets no AUTH_USER_MODEL, so every foreign key to a person is typed with it) and ``Viewer``
(a person or the anonymous user, as ``request.user`` is).

Services take the acting person as ``actor: Person``; selectors and permission predicates take the
viewer as ``user: Viewer``. A view passes ``signed_in(request.user)`` as the actor.
"""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as Person

from handover.core.errors import Forbidden

Viewer = Person | AnonymousUser

__all__ = ["Person", "Viewer", "person_or_none", "signed_in"]


def signed_in(user: Person | AnonymousUser) -> Person:
    """``user`` as the acting person of a service. Views behind ``login_required`` or DRF's
    IsAuthenticated never pass the anonymous user; if one does, Forbidden (403), not a crash."""
    if isinstance(user, Person):
        return user
    raise Forbidden("Sign in to do this.")


def person_or_none(user: Person | AnonymousUser) -> Person | None:
    """``user`` when a person is signed in, else None: for services that record who acted where nobody
    may be signed in (``signed_in`` refuses instead)."""
    return user if isinstance(user, Person) else None

"""Integration keys and runner credentials: 32 random bytes, shown once, stored as SHA-256.

Looked up by a short indexed prefix and compared with ``hmac.compare_digest``; never Django's
password hasher on the ingest path (~0.3 s a check, docs/production.md "Toolchain facts").
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from django.db.models import Q
from django.http import HttpRequest
from django.utils import timezone

from runs.catalog.models import IntegrationKey, RunnerCredential

PREFIX_LENGTH = 12  # "hk_" + 9 characters: enough to find the row, too short to guess the key


@dataclass(frozen=True)
class NewSecret:
    """A freshly generated secret: ``key`` is shown once; ``prefix`` and ``secret_hash`` are stored."""

    key: str
    prefix: str
    secret_hash: str


def hash_secret(key: str) -> str:
    """Hex SHA-256 of a key (keys carry 256 bits of randomness, so no salt or stretching is needed)."""
    return hashlib.sha256(key.encode()).hexdigest()


def generate_secret(kind: str) -> NewSecret:
    """Generate a key ``<kind>_<43 url-safe characters>`` from 32 random bytes (``kind``: hk, hu, rc)."""
    key = f"{kind}_{secrets.token_urlsafe(32)}"
    return NewSecret(key=key, prefix=key[:PREFIX_LENGTH], secret_hash=hash_secret(key))


def bearer_from_request(request: HttpRequest) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    header = str(request.META.get("HTTP_AUTHORIZATION", ""))
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


def integration_key_authenticate(key: str | None, *, kind: str = IntegrationKey.Kind.HEADER) -> IntegrationKey | None:
    """Return the active, unrevoked IntegrationKey of ``kind`` matching ``key`` (constant-time compare), or None.

    A key of the other kind is not found: a URL key never authenticates a header, nor the reverse.
    """
    if not key or len(key) < PREFIX_LENGTH:
        return None
    wanted = hash_secret(key)
    candidates = (
        IntegrationKey.objects.select_related("integration")
        # A rotated key stays valid until its (future) revocation time: the grace period. Revoking
        # it moves that time to now (``integration_key_revoke``): read per post, never cached, so a
        # post that starts after the revocation commits is refused.
        .filter(Q(revoked_at__isnull=True) | Q(revoked_at__gt=timezone.now()), prefix=key[:PREFIX_LENGTH], kind=kind)
        .filter(Q(integration__is_active=True))
    )
    for candidate in candidates:
        if hmac.compare_digest(candidate.secret_hash, wanted):
            return candidate
    return None


def runner_credential_authenticate(key: str | None) -> RunnerCredential | None:
    """Return the unrevoked RunnerCredential matching ``key`` (constant-time compare), or None."""
    if not key or len(key) < PREFIX_LENGTH:
        return None
    wanted = hash_secret(key)
    for candidate in RunnerCredential.objects.select_related("job").filter(
        prefix=key[:PREFIX_LENGTH], revoked_at__isnull=True
    ):
        if hmac.compare_digest(candidate.secret_hash, wanted):
            return candidate
    return None

"""Integration keys and runner credentials: 32 random bytes, shown once, stored as SHA-256.

Looked up by a short indexed prefix and compared with ``hmac.compare_digest``; never Django's
password hasher on the ingest path (~0.3 s a check, docs/production.md "Toolchain facts").
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.http import HttpRequest
from django.utils import timezone

from runs.catalog.models import Integration, IntegrationKey, RunnerCredential, key_unrevoked_at

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
        .filter(key_unrevoked_at(timezone.now()), prefix=key[:PREFIX_LENGTH], kind=kind)
        .filter(integration__is_active=True)
    )
    for candidate in candidates:
        if hmac.compare_digest(candidate.secret_hash, wanted):
            return candidate
    return None


# --- the ingest path's cache of verified keys ----------------------------------------------------------

# A verified key (its row and its integration's) is kept in the process this long; every post still
# reads the key's revocation, the integration's active flag and both rows' versions (one indexed query by
# primary key), so the cache never lets a revoked key or a deactivated integration through.
KEY_CACHE_SECONDS = 30.0
KEY_CACHE_SIZE = 1024


@dataclass(frozen=True)
class _CachedKey:
    key: IntegrationKey  # never handed out: each post gets its own copy
    version: tuple[Any, ...]  # the key's and the integration's ``updated_at`` as the database spells them
    expires: float  # time.monotonic() seconds


_KEY_CACHE: dict[tuple[str, str], _CachedKey] = {}
_KEY_CACHE_LOCK = threading.Lock()


def _key_state_sql() -> str:
    key_table = connection.ops.quote_name(IntegrationKey._meta.db_table)
    integration_table = connection.ops.quote_name(Integration._meta.db_table)
    return (
        "SELECT (k.revoked_at IS NULL OR k.revoked_at > %s) AND i.is_active, k.updated_at, i.updated_at, "
        f"k.last_used_at FROM {key_table} k JOIN {integration_table} i ON i.id = k.integration_id WHERE k.id = %s"
    )


def _key_state(pk: int, now: datetime) -> tuple[bool, tuple[Any, ...], datetime | None] | None:
    """One indexed read of a key's state: usable now (unrevoked or revoked in the future, its integration
    active), its version (both rows' ``updated_at``), its ``last_used_at``. None when the row is gone."""
    with connection.cursor() as cursor:
        cursor.execute(_key_state_sql(), [connection.ops.adapt_datetimefield_value(now), pk])
        row = cursor.fetchone()
    if row is None:
        return None
    usable, key_version, integration_version, last_used_at = row
    convert = getattr(connection.ops, "convert_datetimefield_value", None)  # SQLite spells times as text
    if convert is not None:
        key_version, integration_version, last_used_at = (
            None if value is None else convert(value, None, connection)
            for value in (key_version, integration_version, last_used_at)
        )
    return bool(usable), (key_version, integration_version), last_used_at


def _own_copy(cached: IntegrationKey, last_used_at: datetime | None) -> IntegrationKey:
    """A copy of a cached key and its integration for one post (a post may set attributes on them)."""
    key = copy.copy(cached)
    key.integration = copy.copy(cached.integration)
    key.integration.settings = copy.deepcopy(cached.integration.settings)
    key.last_used_at = last_used_at
    return key


def integration_key_authenticate_cached(
    key: str | None, *, kind: str = IntegrationKey.Kind.HEADER
) -> IntegrationKey | None:
    """``integration_key_authenticate`` for the ingest path, with the verified key kept in the process.

    A key verified in the last ``KEY_CACHE_SECONDS`` is checked with one indexed query by primary key
    instead of the lookup by prefix (no row decoded, no integration settings parsed): it must still be
    unrevoked (or revoked in the future: a rotation's grace), its integration active, and neither row
    changed since it was cached (``updated_at``; a change drops the entry and the key is looked up
    again). The query runs at the post's start, so a post that starts after a revocation commits is
    refused, in every process. Unknown keys are never cached. Returns the post's own copy of the key
    (with its integration), or None. Thread-safe.
    """
    if not key or len(key) < PREFIX_LENGTH:
        return None
    wanted = (str(kind), hash_secret(key))
    now = timezone.now()
    cached = _KEY_CACHE.get(wanted)
    if cached is not None and cached.expires > time.monotonic():
        state = _key_state(cached.key.pk, now)
        if state is not None and state[1] == cached.version:
            return _own_copy(cached.key, state[2]) if state[0] else None
    found = integration_key_authenticate(key, kind=kind)
    with _KEY_CACHE_LOCK:
        _KEY_CACHE.pop(wanted, None)
    if found is None:
        return None
    # the lookup has just read both rows (usable now): their versions are those it read, no second query
    version = (found.updated_at, found.integration.updated_at)
    with _KEY_CACHE_LOCK:
        if len(_KEY_CACHE) >= KEY_CACHE_SIZE:
            _KEY_CACHE.pop(next(iter(_KEY_CACHE)), None)
        _KEY_CACHE[wanted] = _CachedKey(key=found, version=version, expires=time.monotonic() + KEY_CACHE_SECONDS)
    return _own_copy(found, found.last_used_at)


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

"""HMAC signatures of ingestion posts, for integrations configured with a signing secret.

A signature scheme is data, set per integration (``runs.catalog.keys.integration_security_update``):

- ``scheme``, what is signed: ``ts:body`` (the product's own: ``<timestamp>:<raw body>``, the timestamp
  in its own header), ``ts.body`` (``<timestamp>.<raw body>``), ``body`` (the raw body alone, no
  timestamp: GitHub's ``X-Hub-Signature-256``), or ``t=,v1=`` (one header ``t=<timestamp>,v1=<sig>``,
  several ``v1`` allowed, over ``<timestamp>.<raw body>``: Stripe's scheme);
- ``algorithm``: ``sha256`` (default), ``sha1`` or ``sha512``;
- ``encoding`` of the digest: ``hex`` (case-insensitive; an ``<algorithm>=`` prefix is accepted) or
  ``base64``;
- the header names and the timestamp tolerance (seconds either way; UNIX seconds or milliseconds).

The comparison is constant-time (``hmac.compare_digest``). Where the secret is kept: ``runs.catalog.keys``.
Scheme catalogue with the senders that use each: docs/integrations/transport.md.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass

from handover.core.durations import seconds_in_words

SCHEMES = ("ts:body", "ts.body", "body", "t=,v1=")
ALGORITHMS = {"sha256": hashlib.sha256, "sha1": hashlib.sha1, "sha512": hashlib.sha512}
ENCODINGS = ("hex", "base64")


@dataclass(frozen=True)
class SignatureCheck:
    """The outcome of verifying a signed post: ``ok``, or the reason it failed (no secret in it)."""

    ok: bool
    reason: str = ""


def _stale(timestamp: str, tolerance_seconds: int, now: float) -> SignatureCheck | None:
    try:
        stamp = float(timestamp.strip())
    except ValueError:
        return SignatureCheck(False, "the timestamp is not a UNIX time")
    if stamp > 1e11:  # milliseconds
        stamp /= 1000
    if abs(now - stamp) > tolerance_seconds:
        away = seconds_in_words(tolerance_seconds)
        return SignatureCheck(False, f"the timestamp is more than {away} away from the server's time")
    return None


def _digest_matches(expected: bytes, given: str, *, algorithm: str, encoding: str) -> bool:
    given = given.strip()
    if encoding == "base64":
        try:
            decoded = base64.b64decode(given, validate=True)
        except (binascii.Error, ValueError):
            return False
        return hmac.compare_digest(expected, decoded)
    if given.lower().startswith(f"{algorithm}="):
        given = given[len(algorithm) + 1 :]
    return hmac.compare_digest(expected.hex().encode(), given.lower().encode())


def signature_verify(
    *,
    secret: str,
    body: bytes,
    signature: str | None,
    timestamp: str | None,
    tolerance_seconds: int,
    now: float,
    scheme: str = "ts:body",
    algorithm: str = "sha256",
    encoding: str = "hex",
) -> SignatureCheck:
    """Verify ``signature`` over ``body`` under ``secret`` by the integration's scheme (see the module).

    ``signature`` is the signature header's value (for ``t=,v1=`` the whole ``t=…,v1=…`` value);
    ``timestamp`` the timestamp header's value (``ts:body`` and ``ts.body`` only). A timestamp must lie
    within ``tolerance_seconds`` of ``now`` (UNIX seconds) either way, so a captured post cannot be
    replayed later; ``body`` signs nothing in time, so its sender's posts can be replayed (the
    integration page says so). Returns ``SignatureCheck``; never raises for bad input.
    """
    if scheme not in SCHEMES or algorithm not in ALGORITHMS or encoding not in ENCODINGS:
        return SignatureCheck(False, "the integration's signature scheme is not valid")
    digest = ALGORITHMS[algorithm]
    if not signature:
        return SignatureCheck(False, "the post is not signed (the signature header is missing)")
    candidates: list[str]
    if scheme == "t=,v1=":
        parts = [part.strip().partition("=") for part in signature.split(",")]
        stamps = [value for name, _, value in parts if name == "t"]
        candidates = [value for name, _, value in parts if name == "v1"]
        if len(stamps) != 1 or not candidates:
            return SignatureCheck(False, "the signature header is not `t=<timestamp>,v1=<signature>`")
        timestamp = stamps[0]
        message = timestamp.encode() + b"." + body
    elif scheme == "body":
        candidates, message = [signature], body
    else:
        if not timestamp:
            return SignatureCheck(False, "the post is not signed (signature and timestamp headers are required)")
        separator = b":" if scheme == "ts:body" else b"."
        candidates, message = [signature], timestamp.strip().encode() + separator + body
    if scheme != "body":
        stale = _stale(timestamp or "", tolerance_seconds, now)
        if stale is not None:
            return stale
    expected = hmac.new(secret.encode(), message, digest).digest()
    # every candidate is compared (no early exit on the first match), so timing says nothing of which
    matches = [_digest_matches(expected, given, algorithm=algorithm, encoding=encoding) for given in candidates]
    if not any(matches):
        return SignatureCheck(False, "the signature does not match the body")
    return SignatureCheck(True)

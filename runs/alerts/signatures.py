"""HMAC signatures of ingestion posts, for integrations configured with a signing secret.

The sender signs ``<timestamp>:<raw body>`` with HMAC-SHA256 under the shared secret and sends the
hex digest (optionally ``sha256=``-prefixed) and the UNIX timestamp in two headers (names set per
integration; ``X-Handover-Signature`` and ``X-Handover-Timestamp`` by default). Where the secret is
kept: ``runs.catalog.keys``.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass


@dataclass(frozen=True)
class SignatureCheck:
    """The outcome of verifying a signed post: ``ok``, or the reason it failed (no secret in it)."""

    ok: bool
    reason: str = ""


def signature_verify(
    *,
    secret: str,
    body: bytes,
    signature: str | None,
    timestamp: str | None,
    tolerance_seconds: int,
    now: float,
) -> SignatureCheck:
    """Verify ``signature`` = hex HMAC-SHA256 of ``<timestamp>:<body>`` under ``secret``.

    ``signature`` may carry a ``sha256=`` prefix; ``timestamp`` is UNIX seconds (or milliseconds) and
    must lie within ``tolerance_seconds`` of ``now`` either way, so a captured post cannot be
    replayed later. The comparison is constant-time (``hmac.compare_digest``).
    """
    if not signature or not timestamp:
        return SignatureCheck(False, "the post is not signed (signature and timestamp headers are required)")
    try:
        stamp = float(timestamp.strip())
    except ValueError:
        return SignatureCheck(False, "the timestamp is not a UNIX time")
    if stamp > 1e11:  # milliseconds
        stamp /= 1000
    if abs(now - stamp) > tolerance_seconds:
        return SignatureCheck(False, f"the timestamp is more than {tolerance_seconds} s away from the server's time")
    expected = hmac.new(secret.encode(), timestamp.strip().encode() + b":" + body, hashlib.sha256).hexdigest()
    given = signature.strip()
    if given.lower().startswith("sha256="):
        given = given[7:]
    if not hmac.compare_digest(expected.encode(), given.lower().encode()):
        return SignatureCheck(False, "the signature does not match the body")
    return SignatureCheck(True)

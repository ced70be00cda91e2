"""A compressed post (``Content-Encoding: gzip``): read as the body it carries, never past the size limit.

Senders that compress their webhooks (Vector's and Fluent Bit's HTTP outputs, agents that batch) send
``Content-Encoding: gzip`` (RFC 9110 section 8.4; the coding is RFC 1952) or ``deflate`` (a zlib
stream, RFC 1950 -- some senders send a raw deflate stream, RFC 1951, under that name, which is read
too). The body is inflated before it is decoded and parsed, in pieces, and never beyond
``HANDOVER_MAX_BODY_BYTES``: a small post that inflates without bound (a decompression bomb) is kept
as its first bytes and refused as oversized, like any oversized post. The delivery's hash and size
stay those of the bytes as received (rule 9: hashed over the raw bytes), and a signature is checked
over them before anything is inflated. An encoding Handover does not read (``br``, ``zstd``) or a
stream that does not inflate is refused with the reason, the post kept as sent.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

IDENTITY = frozenset({"", "identity"})
INFLATED = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
_PIECE = 64 * 1024


@dataclass(frozen=True)
class Inflated:
    """A post's body after its content coding: ``body`` the bytes to decode (the inflated ones, or what was
    sent when nothing could be inflated), ``oversized`` when inflating passed the limit (``body`` is then
    its first ``kept`` bytes), ``problem`` why the post cannot be read ("" when it can), ``coding`` the
    content coding read ("" for none)."""

    body: bytes
    oversized: bool = False
    problem: str = ""
    coding: str = ""


def body_inflate(raw: bytes, content_encoding: str, *, limit: int, kept: int) -> Inflated:
    """``raw`` inflated by its ``Content-Encoding`` header value, at most ``limit`` bytes (of which ``kept``
    are kept when it is more). Codings listed with commas are undone last first (RFC 9110 8.4); none
    or ``identity`` gives ``raw`` itself. Never raises."""
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip().lower() not in IDENTITY]
    if not codings:
        return Inflated(raw)
    unknown = [c for c in codings if c not in INFLATED]
    if unknown:
        return Inflated(
            raw,
            problem=f"Content-Encoding {unknown[0][:40]!r} is not read here: send the body uncompressed, "
            "or compressed with gzip or deflate.",
            coding=",".join(codings)[:100],
        )
    body = raw
    for coding in reversed(codings):
        try:
            body, oversized = _inflate(body, INFLATED[coding], limit)
        except zlib.error as exc:
            if coding != "deflate":
                return Inflated(raw, problem=f"The body is not valid {coding} ({exc}).", coding=coding)
            try:  # "deflate" sent as a raw deflate stream, without the zlib wrapper
                body, oversized = _inflate(body, -zlib.MAX_WBITS, limit)
            except zlib.error as again:
                return Inflated(raw, problem=f"The body is not valid deflate ({again}).", coding=coding)
        if oversized:
            return Inflated(body[:kept], oversized=True, coding=",".join(codings))
    return Inflated(body, coding=",".join(codings))


def _inflate(data: bytes, wbits: int, limit: int) -> tuple[bytes, bool]:
    """``data`` inflated, at most ``limit`` + 1 bytes produced; ``(bytes, True)`` when it would be more.
    A gzip body of several members (concatenated gzip files) is read whole. Raises ``zlib.error``."""
    pieces: list[bytes] = []
    size = 0
    rest = data
    while rest:
        inflater = zlib.decompressobj(wbits)
        pending = rest
        while True:  # at most a piece of output per call, so a bomb never inflates past the limit
            piece = inflater.decompress(pending, _PIECE)
            pieces.append(piece)
            size += len(piece)
            if size > limit:
                return b"".join(pieces), True
            pending = inflater.unconsumed_tail
            if not pending and (not piece or inflater.eof):
                break
        piece = inflater.flush()
        pieces.append(piece)
        size += len(piece)
        if size > limit:
            return b"".join(pieces), True
        if not inflater.eof:
            raise zlib.error("the stream ends before its end")
        rest = inflater.unused_data if wbits > zlib.MAX_WBITS else b""
    return b"".join(pieces), False

"""Body decoders, chosen per integration: turn a post's stored text into the JSON its adapter parses.

The stored body is always the post as received (redacted); decoding happens when it is parsed, so
reprocessing decodes it again the same way. Decoders (``transport.decoder.kind`` in an integration's
settings; docs/integrations/transport.md):

- ``json``: the body as it is (the default).
- ``ndjson``: one JSON value per non-empty line, decoded into a JSON array of the lines.
- ``envelope``: a newline-delimited envelope -- a header line, then per item an item header line and
  its payload (the payload's length in bytes when the item header gives ``length``, else one line),
  as Sentry's envelopes are framed. Decoded into an array of
  ``{"envelope": <header>, "header": <item header>, "payload": <payload>}``, keeping only items whose
  header ``type`` is in ``item_types`` (all when empty). A payload that is not JSON is kept as text.
- ``form``: ``application/x-www-form-urlencoded``, decoded into one object (a repeated name becomes a
  list of its values).
- A ``GET`` ingestion (opt-in) stores its query string as the body; it is always decoded as ``form``.

Every decoder raises ``FormatError`` (the post breaks the format: stored ``rejected``, answered 400)
for a body it cannot read. Every JSON text (a line, a header, a payload) is read by
``json_loads_noting_repeats``: a value a repeated key hides is in the body alone, and redaction must
know it (``DecodedBody.hidden``), as it must know an envelope item its ``item_types`` skip. Pure functions, no ORM.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from runs.alerts.parsers.base import FormatError, json_loads_noting_repeats

DECODERS = ("json", "ndjson", "envelope", "form")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_ITEMS = 1000


@dataclass(frozen=True)
class DecodedBody:
    """A body decoded for its adapter: ``body`` the JSON bytes it parses; ``hidden`` what the body holds
    that the adapter never gets, in text order: each value a key repeated within one JSON text hid (as
    ``{key: value}``), and each envelope item its ``item_types`` skip (as the decoded item)."""

    body: bytes
    hidden: tuple[Any, ...] = ()


def _json_line(line: str, where: str, shadowed: list[Any]) -> Any:
    try:
        document, hidden = json_loads_noting_repeats(line)
    except (ValueError, RecursionError) as exc:  # ValueError: JSONDecodeError, or an integer too long to read
        why = "nested too deep" if isinstance(exc, RecursionError) else getattr(exc, "msg", str(exc).split(":")[0])
        raise FormatError(f"{where} is not JSON: {why}", field="body") from exc
    shadowed.extend(hidden)
    return document


def _ndjson(text: str, shadowed: list[Any]) -> list[Any]:
    lines = enumerate(text.splitlines(), 1)
    items = [_json_line(line, f"line {n}", shadowed) for n, line in lines if line.strip()]
    if not items:
        raise FormatError("The body has no JSON line.", field="body")
    return items


def _envelope(raw: bytes, item_types: tuple[str, ...], shadowed: list[Any]) -> list[dict[str, Any]]:
    head, _, rest = raw.partition(b"\n")
    header = _json_line(head.decode("utf-8", errors="replace"), "the envelope header", shadowed)
    if not isinstance(header, dict):
        raise FormatError("The envelope header is not a JSON object.", field="body")
    items: list[dict[str, Any]] = []
    number = 0
    while rest.strip():
        number += 1
        line, _, rest = rest.partition(b"\n")
        if not line.strip():
            continue
        item_header = _json_line(line.decode("utf-8", errors="replace"), f"item header {number}", shadowed)
        if not isinstance(item_header, dict):
            raise FormatError(f"Item header {number} is not a JSON object.", field="body")
        length = item_header.get("length")
        if isinstance(length, int) and not isinstance(length, bool) and length >= 0:
            if len(rest) < length:
                raise FormatError(f"Item {number} is shorter than its length {length}.", field="body")
            payload_bytes, rest = rest[:length], rest[length:]
            rest = rest[1:] if rest.startswith(b"\n") else rest
        else:
            payload_bytes, _, rest = rest.partition(b"\n")
        payload_text = payload_bytes.decode("utf-8", errors="replace")
        try:
            payload, hidden = json_loads_noting_repeats(payload_text)
            shadowed.extend(hidden)
        except (ValueError, RecursionError):  # not JSON (or an integer too long to read): kept as text
            payload = payload_text
        item = {"envelope": header, "header": item_header, "payload": payload}
        if not item_types or item_header.get("type") in item_types:
            items.append(item)
        else:  # not the adapter's, but the post's: a secret in it is one to find where it recurs
            shadowed.append(item)
        if number > MAX_ITEMS:
            raise FormatError(f"The envelope has more than {MAX_ITEMS} items.", field="body")
    return items


def form_decode(text: str) -> dict[str, Any]:
    """``a=1&b=2&b=3`` -> ``{"a": "1", "b": ["2", "3"]}`` (blank values kept, ``+`` read as a space)."""
    result: dict[str, Any] = {}
    for name, value in parse_qsl(text.strip(), keep_blank_values=True):
        if name in result:
            previous = result[name]
            result[name] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            result[name] = value
    return result


def decoder_problem(decoder: Mapping[str, Any]) -> str | None:
    """Why a decoder setting is not valid, in words, or None (``{"kind": ..., "item_types": [...]}``)."""
    kind = decoder.get("kind", "json")
    if kind not in DECODERS:
        return f"A decoder is one of {', '.join(DECODERS)}, not {kind!r}."
    types = decoder.get("item_types", [])
    if not isinstance(types, list) or not all(isinstance(t, str) and t for t in types):
        return "item_types is a list of item type names."
    if types and kind != "envelope":
        return "item_types applies to the envelope decoder only."
    return None


def body_decode(body: bytes, *, decoder: Mapping[str, Any], method: str = "POST") -> bytes:
    """Decode a stored body by the integration's ``decoder`` into JSON bytes for the adapter.

    ``method`` ``GET``: the body is a query string, decoded as a form. ``json`` returns ``body``
    unchanged (byte for byte). Raises ``FormatError`` for a body the decoder cannot read.
    """
    return body_decode_noting_repeats(body, decoder=decoder, method=method).body


def body_decode_noting_repeats(body: bytes, *, decoder: Mapping[str, Any], method: str = "POST") -> DecodedBody:
    """``body_decode``, and what the body holds that the decoded JSON does not (``DecodedBody.hidden``).

    The decoded JSON is written from the documents, so it repeats no key: a value a repeated key hid
    (``{"password": "S1", "password": "S2"}`` on one ndjson line) or an envelope item of a type not
    read is in the body as sent alone, and its secrets must still be the post's (docs/security.md
    "Redaction"). ``json`` (the body as it is) notes none here: the whole-body parse (``json_body``)
    does. Raises ``FormatError`` as ``body_decode`` does.
    """
    kind = "form" if method == "GET" else str(decoder.get("kind") or "json")
    if kind == "json" or kind not in DECODERS:
        return DecodedBody(body)
    text = body.decode("utf-8", errors="replace")
    shadowed: list[Any] = []
    decoded: Any
    if kind == "ndjson":
        decoded = _ndjson(text, shadowed)
    elif kind == "envelope":
        types = decoder.get("item_types") or []
        decoded = _envelope(body, tuple(str(t) for t in types) if isinstance(types, list) else (), shadowed)
    else:
        decoded = form_decode(text)
    # A line may spell a lone surrogate (``"\ud800"``): no UTF-8 encodes it, so it stays an escape
    # (the adapter reads it as a whole JSON body's, and storing makes it U+FFFD), never a failure.
    written = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", json.dumps(decoded, ensure_ascii=False))
    return DecodedBody(written.encode(), tuple(shadowed))

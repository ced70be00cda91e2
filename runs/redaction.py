"""Redaction of secrets and personal data before anything is stored, shown or logged (DESIGN.md rule 8).

Two passes: by JSON field path per source (routing keys, tokens, passwords, authorization values,
and any key whose name says it is a secret), then in free text (bearer tokens, Luhn-valid card
numbers, e-mail addresses). Values are replaced in the raw text, so the rest of the body stays
byte-for-byte as sent and can be parsed again for reprocessing. Dedup keys and hashes are
computed from the raw bytes before this runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

REDACTED = "[REDACTED]"

# Keys whose values are secrets wherever they appear in a payload.
SECRET_KEY_NAMES = re.compile(
    r"^(password|passwd|secret|client_secret|token|access_token|refresh_token|api_key|apikey|"
    r"authorization|routing_key|integration_key|private_key|x-api-key)$",
    re.IGNORECASE,
)
# ``{"name": "DB_PASSWORD", "value": "..."}`` pairs (Kubernetes container env, many APIs' tag lists):
# the secret is named by a sibling field, not by the key holding it.
SECRET_NAME_VALUES = re.compile(r"(?i)(pass(word|wd)?|secret|token|api[_-]?key|private[_-]?key|credential|auth)")
_BEARER = re.compile(r"(?i)\b(bearer|token)\s+[A-Za-z0-9\-._~+/]{12,}=*")
_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
# 13-19 digits, optionally grouped by spaces or dashes. Cards start with 2-6 (Mastercard 2-series,
# Amex 3, Visa 4, Mastercard 5, Discover 6); epoch milliseconds (1.7e12 today) start with 1.
_CARD = re.compile(r"(?<![\d])([2-6]\d{3}(?:[ -]?\d){9,15})(?![\d])")


def luhn_valid(digits: str) -> bool:
    """True when ``digits`` (only 0-9) passes the Luhn checksum (ISO/IEC 7812-1)."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2 == 1:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"[ -]", "", match.group(1))
    if 13 <= len(digits) <= 19 and luhn_valid(digits):
        return REDACTED
    return match.group(0)


def redact_text(text: str) -> str:
    """Redact bearer tokens, e-mail addresses and Luhn-valid card numbers in free text."""
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _EMAIL.sub(REDACTED, text)
    return _CARD.sub(_card, text)


def _walk(node: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _walk(value, [*path, str(key)])
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, [*path, str(index)])


def _matches(path: list[str], pattern: str) -> bool:
    parts = pattern.split(".")
    return len(parts) == len(path) and all(p in ("*", q) for p, q in zip(parts, path, strict=True))


def secret_values(document: Any, paths: Iterable[str]) -> list[str]:
    """The string values in ``document`` at any of ``paths``, under a secret-looking key name, or
    in a ``{"name": <secret-looking>, "value": ...}`` pair."""
    patterns = list(paths)
    found: list[str] = []
    for path, value in _walk(document, []):
        if isinstance(value, dict) and isinstance(value.get("name"), str) and isinstance(value.get("value"), str):
            if SECRET_NAME_VALUES.search(value["name"]) and value["value"]:
                found.append(value["value"])
            continue
        if not isinstance(value, (str, int)) or isinstance(value, bool) or not path:
            continue
        if SECRET_KEY_NAMES.match(path[-1]) or any(_matches(path, p) for p in patterns):
            text = str(value)
            if text and text != REDACTED:
                found.append(text)
    return found


def redact_body(raw: bytes, paths: Iterable[str] = ()) -> str:
    """Return the body as text with secrets and personal data replaced by ``[REDACTED]``.

    ``raw`` is decoded as UTF-8 (invalid bytes replaced). When it is JSON, values at ``paths``
    (dotted, ``*`` for any key or index) and under secret key names are replaced where they occur
    as JSON strings; free-text redaction then runs over the whole text.
    """
    text = raw.decode("utf-8", errors="replace")
    try:
        document = json.loads(text)
    except ValueError:
        document = None
    if document is not None:
        for value in sorted(set(secret_values(document, paths)), key=len, reverse=True):
            for encoded in {json.dumps(value), json.dumps(value, ensure_ascii=False)}:
                text = text.replace(encoded, json.dumps(REDACTED))
            if len(value) >= 8:  # the same secret repeated inside free text
                text = text.replace(value, REDACTED)
    return redact_text(text)

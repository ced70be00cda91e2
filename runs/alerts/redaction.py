"""Redaction of secrets and personal data before anything is stored, shown or logged (rule 8 in docs/architecture.md).

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
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
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


# While a post is processed (``redaction_scope``): the secret values found in it, which redact_text
# replaces too (a password that also appears in an error message is gone from the error summary),
# and the integration's extra redaction names, which ``redact_secret_keys`` applies.
_SCOPE: ContextVar[tuple[tuple[str, ...], frozenset[str]]] = ContextVar(
    "handover_redaction_scope", default=((), frozenset())
)
MIN_SECRET_LENGTH = 8  # shorter values ("on", "prod") would redact ordinary words


@contextmanager
def redaction_scope(values: Iterable[str], names: Iterable[str] = ()) -> Iterator[None]:
    """Within the block, ``redact_text`` also replaces each of ``values`` (8 characters or more) and
    ``redact_secret_keys`` also redacts the keys ``names`` (casefolded)."""
    outer_values, outer_names = _SCOPE.get()
    wanted = {v for v in values if len(v) >= MIN_SECRET_LENGTH} | set(outer_values)
    token = _SCOPE.set((tuple(sorted(wanted, key=len, reverse=True)), outer_names | {n.casefold() for n in names}))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def redact_text(text: str) -> str:
    """Redact bearer tokens, e-mail addresses and Luhn-valid card numbers in free text, and the
    secret values of the post being processed (``redaction_scope``)."""
    for value in _SCOPE.get()[0]:
        if value in text:
            text = text.replace(value, REDACTED)
    # The token and e-mail patterns cannot match without their word or an "@": a substring test is
    # ten times cheaper than letting the regex try every position (most strings hold neither).
    # ``lower()`` folds what IGNORECASE does for these letters (the Kelvin sign K included).
    lowered = text.lower()
    if "bearer" in lowered or "token" in lowered:
        text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    if "@" in text:
        text = _EMAIL.sub(REDACTED, text)
    return _CARD.sub(_card, text)


@lru_cache(maxsize=1024)
def _is_secret_key(name: str) -> bool:
    """True for a key whose value is a secret wherever it appears (memoised: payloads repeat their keys)."""
    return SECRET_KEY_NAMES.match(name) is not None


def _still_matching(patterns: list[tuple[str, ...]], depth: int, key: str) -> list[tuple[str, ...]]:
    """The patterns whose part ``depth`` accepts ``key`` (``*`` or equal), of those that matched so far."""
    return [p for p in patterns if len(p) > depth and p[depth] in ("*", key)]


def _collect(node: Any, key: str | None, patterns: list[tuple[str, ...]], depth: int, found: list[str]) -> None:
    """Add the secret values under ``node`` to ``found``.

    ``key`` is the node's own key (None for the document itself); ``patterns`` are the dotted paths
    whose first ``depth`` parts match the path to the node, so a subtree no path reaches is walked
    with an empty list (only the key-name and name/value rules, which apply at any depth, remain).
    """
    if isinstance(node, dict):
        name, value = node.get("name"), node.get("value")
        if isinstance(name, str) and isinstance(value, str) and value and SECRET_NAME_VALUES.search(name):
            found.append(value)
        for child_key, child in node.items():
            child_key = str(child_key)
            below = _still_matching(patterns, depth, child_key) if patterns else patterns
            _collect(child, child_key, below, depth + 1, found)
    elif isinstance(node, list):
        for index, child in enumerate(node):
            # An index never matches a secret key name, so it matters only to the path patterns.
            below = _still_matching(patterns, depth, str(index)) if patterns else patterns
            _collect(child, "", below, depth + 1, found)
    elif key is not None and isinstance(node, (str, int)) and not isinstance(node, bool):
        if _is_secret_key(key) or any(len(p) == depth for p in patterns):
            text = str(node)
            if text and text != REDACTED:
                found.append(text)


def secret_values(document: Any, paths: Iterable[str]) -> list[str]:
    """The string values in ``document`` at any of ``paths``, under a secret-looking key name, or
    in a ``{"name": <secret-looking>, "value": ...}`` pair."""
    found: list[str] = []
    _collect(document, None, [tuple(p.split(".")) for p in paths], 0, found)
    return found


def integration_redact_names(settings: Any) -> frozenset[str]:
    """An integration's extra redaction names (``settings["redact_names"]``), casefolded."""
    names = settings.get("redact_names") if isinstance(settings, dict) else None
    if not isinstance(names, list):
        return frozenset()
    return frozenset(n.casefold() for n in names if isinstance(n, str) and n)


def named_values(document: Any, names: Iterable[str]) -> list[str]:
    """The values in ``document`` under any of ``names`` (any case, any depth), or in a
    ``{"name": <one of names>, "value": ...}`` pair: an integration's own redaction names."""
    wanted = frozenset(n.casefold() for n in names)
    found: list[str] = []
    if not wanted:
        return found
    stack = [document]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            name, value = node.get("name"), node.get("value")
            if isinstance(name, str) and isinstance(value, str) and value and name.casefold() in wanted:
                found.append(value)
            for key, child in node.items():
                if str(key).casefold() in wanted and isinstance(child, (str, int)) and not isinstance(child, bool):
                    if str(child) and str(child) != REDACTED:
                        found.append(str(child))
                else:
                    stack.append(child)
        elif isinstance(node, list):
            stack.extend(node)
    return found


def body_secret_values(raw: bytes, paths: Iterable[str] = (), names: Iterable[str] = ()) -> list[str]:
    """The secret values a JSON body holds (source paths, secret key names, ``names``); none if not JSON."""
    try:
        document = json.loads(raw.decode("utf-8", errors="replace"))
    except ValueError:
        return []
    return secret_values(document, paths) + named_values(document, names)


def redact_secret_keys(value: Any) -> Any:
    """Parsed data (dicts, lists) with the values under secret key names -- built-in, or the extra
    names of the post being processed -- and those of secret ``{"name", "value"}`` pairs replaced."""
    names = _SCOPE.get()[1]
    if isinstance(value, dict):
        name = value.get("name")
        pair = isinstance(name, str) and isinstance(value.get("value"), str)
        secret_pair = pair and bool(SECRET_NAME_VALUES.search(name) or name.casefold() in names)
        out = {}
        for key, child in value.items():
            text_key = str(key)
            secret = secret_pair and key == "value"
            if isinstance(child, (str, int)) and not isinstance(child, bool):
                secret = secret or SECRET_KEY_NAMES.match(text_key) is not None or text_key.casefold() in names
            out[key] = REDACTED if secret else redact_secret_keys(child)
        return out
    if isinstance(value, list):
        return [redact_secret_keys(child) for child in value]
    return value


def redact_body(raw: bytes, paths: Iterable[str] = (), names: Iterable[str] = ()) -> str:
    """Return the body as text with secrets and personal data replaced by ``[REDACTED]``.

    ``raw`` is decoded as UTF-8 (invalid bytes replaced). When it is JSON, values at ``paths``
    (dotted, ``*`` for any key or index), under secret key names and under ``names`` (an
    integration's extra redaction names, any case) are replaced where they occur
    as JSON strings; free-text redaction then runs over the whole text.
    """
    text = raw.decode("utf-8", errors="replace")
    try:
        document = json.loads(text)
    except ValueError:
        document = None
    if document is not None:
        found = set(secret_values(document, paths)) | set(named_values(document, names))
        for value in sorted(found, key=len, reverse=True):
            for encoded in {json.dumps(value), json.dumps(value, ensure_ascii=False)}:
                text = text.replace(encoded, json.dumps(REDACTED))
            if len(value) >= 8:  # the same secret repeated inside free text
                text = text.replace(value, REDACTED)
    return redact_text(text)

"""Redaction of secrets and personal data before anything is stored, shown or logged (rule 8 in docs/architecture.md).

A secret becomes a deterministic token, ``‹redacted:<8 hex>›``: the first 8 hex digits of
HMAC-SHA256(the redaction key, the secret). The same secret gives the same token everywhere, so an
identity field that held one still groups and correlates; the key is derived from Django's
``SECRET_KEY`` (``redaction_key``), so nobody without it can confirm a guess from a token. Dedup keys
and hashes are computed from the raw values before anything here runs.

Where (the shapes: ``runs.alerts.secret_shapes``; the list and its limits: docs/security.md "Redaction"):

1. Structured data (``redact_body``, ``redact_data``): the whole value at a source's field paths
   (``REDACT_PATHS``), under a secret-looking key name anywhere (``secret_name``; every value of a
   container under one), in ``{"name": <secret-looking>, "value": …}`` pairs, and under the
   integration's extra redaction names.
2. Free text (``redact_text``), in every string, keys included: the secrets found by 1 in the same
   post (``redaction_scope``; as written, percent-encoded, and inside a JSON string literal whatever
   escapes spell it -- such a literal is redacted as the text it spells), PEM private key blocks,
   URLs (user info, Apprise URLs, chat webhook and URL-key paths), provider key shapes
   (detect-secrets' pattern plugins), ``name=value`` and ``"name": "value"`` pairs with
   secret-looking names (query strings too; a bare ``key=`` only when its value looks random),
   ``Bearer``/``Basic``/``Token`` values, e-mail addresses and Luhn-valid card numbers.

A body that is not JSON (a cut 413 head, a form post) goes through the free-text rules whole, whose
pair rule also reads ``"routing_key": "…"`` in broken JSON. Rules compiled per set of an integration's
extra names are cached (``text_rules``).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import hmac
import json
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import quote, quote_plus, unquote_plus

from django.conf import settings

from runs.alerts.parsers.base import (
    AttemptState,
    JsonBody,
    ParsedAlert,
    json_depth_exceeds,
    json_loads_noting_repeats,
)
from runs.alerts.secret_shapes import (
    APPRISE_URL,
    AUTH_VALUE,
    BASIC_AUTH,
    CARD,
    CREDENTIAL_PATHS,
    EMAIL,
    PAIR_NAME_WORDS,
    PRIVATE_KEY_BLOCK,
    SHAPES,
    TOKEN_TAIL,
    USER_INFO,
    looks_random,
    luhn_valid,
    secret_name,
    weak_secret_name,
)

TOKEN_PATTERN = re.compile(r"‹redacted:[0-9a-f]{8}›")
LEGACY_REDACTED = "[REDACTED]"  # what rows written before deterministic tokens hold
MIN_SECRET_LENGTH = 8  # a post's secret shorter than this is not searched for in its free text ("on", "prod")
_MIN_TEXT_LENGTH = 6  # no rule matches fewer characters (``a@b.io``)


# --- tokens -----------------------------------------------------------------------------------------


@lru_cache(maxsize=4)
def _derived_key(secret_key: str) -> bytes:
    return hmac.new(secret_key.encode(), b"handover.redaction.v1", hashlib.sha256).digest()


def redaction_key() -> bytes:
    """The HMAC key of redaction tokens: derived from ``SECRET_KEY`` (rotating it changes every new token)."""
    return _derived_key(str(settings.SECRET_KEY))


def redaction_token(value: str) -> str:
    """``‹redacted:<8 hex>›`` for ``value``: the same value gives the same token (HMAC-SHA256, 32 bits shown)."""
    digest = hmac.new(redaction_key(), value.encode("utf-8", errors="surrogatepass"), hashlib.sha256).hexdigest()
    return f"‹redacted:{digest[:8]}›"


def is_redacted(value: str) -> bool:
    """True when ``value`` is a redaction token (or the marker older rows hold): it is never redacted again."""
    return value == LEGACY_REDACTED or TOKEN_PATTERN.fullmatch(value) is not None


def _token(value: str) -> str:
    return value if not value or is_redacted(value) else redaction_token(value)


# --- the post being processed -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Scope:
    values: tuple[str, ...] = ()
    names: frozenset[str] = frozenset()


_NO_SCOPE = _Scope()
_SCOPE: ContextVar[_Scope | None] = ContextVar("handover_redaction_scope", default=None)


def _scope() -> _Scope:
    return _SCOPE.get() or _NO_SCOPE


@contextmanager
def redaction_scope(values: Iterable[str], names: Iterable[str] = ()) -> Iterator[None]:
    """Within the block, ``redact_text`` also replaces each of ``values`` (8 characters or more) and
    every rule also treats the key ``names`` (an integration's extra redaction names, any case) as secret."""
    outer = _scope()
    wanted = {v for v in values if len(v) >= MIN_SECRET_LENGTH and not is_redacted(v)} | set(outer.values)
    scope = _Scope(
        values=tuple(sorted(wanted, key=len, reverse=True)),
        names=outer.names | {n.casefold() for n in names if n},
    )
    token = _SCOPE.set(scope)
    try:
        yield
    finally:
        _SCOPE.reset(token)


def redact_names_listed(settings: Any) -> tuple[str, ...]:
    """An integration's extra redaction names as written (``settings["redact_names"]``): its non-empty
    texts, in order. One name written without its list is a list of one (still redacted, never ignored);
    any other shape holds none (the admin and the security editor refuse it: ``security_errors``)."""
    names = settings.get("redact_names") if isinstance(settings, dict) else None
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list):
        return ()
    return tuple(n for n in names if isinstance(n, str) and n)


def integration_redact_names(settings: Any) -> frozenset[str]:
    """An integration's extra redaction names (``redact_names_listed``), casefolded."""
    return frozenset(n.casefold() for n in redact_names_listed(settings))


@dataclass(frozen=True)
class IntegrationRedaction:
    """An integration's redaction, compiled once per version of its settings (``integration_redaction``):
    its extra names (casefolded) and the free-text rules holding them."""

    names: frozenset[str]
    rules: TextRules
    raw_names: Any  # ``settings["redact_names"]`` as read, to notice an edit the version does not show


_COMPILED: dict[tuple[Any, Any], IntegrationRedaction] = {}
_COMPILED_SIZE = 512


def integration_redaction(integration: Any, paths: Iterable[str] = ()) -> IntegrationRedaction:
    """The redaction of ``integration`` (anything with ``pk``, ``updated_at`` and ``settings``), compiled
    once per version of its settings: keyed by its primary key and ``updated_at``, and checked against the
    names its settings hold now (an edit in memory compiles again). ``paths`` (the source's
    ``REDACT_PATHS``) are not compiled here. Thread-safe (a race compiles twice, harmlessly)."""
    settings_ = getattr(integration, "settings", None)
    raw = settings_.get("redact_names") if isinstance(settings_, dict) else None
    version = (getattr(integration, "pk", None), getattr(integration, "updated_at", None))
    compiled = _COMPILED.get(version) if version[0] is not None else None
    if compiled is not None and compiled.raw_names == raw:
        return compiled
    names = integration_redact_names(settings_)
    compiled = IntegrationRedaction(names=names, rules=text_rules(names), raw_names=copy.deepcopy(raw))
    if version[0] is not None:
        if len(_COMPILED) >= _COMPILED_SIZE:
            try:
                _COMPILED.pop(next(iter(_COMPILED)), None)
            except (StopIteration, RuntimeError):  # another thread changed it first
                pass
        _COMPILED[version] = compiled
    return compiled


# --- free text ----------------------------------------------------------------------------------------


# The last parameter name of a query string a key ends with (``…/x?api_key``, ``…&token``).
_QUERY_TAIL = re.compile(r"[?&;#]([\w.\-]{1,64})\Z")


@dataclass(frozen=True)
class TextRules:
    """The free-text rules for one set of extra names: the compiled pair pattern and the name test."""

    names: frozenset[str]
    pair: re.Pattern[str]

    def is_secret_name(self, name: str) -> bool:
        """True for a built-in secret-looking name or one of ``names`` (any case); also for a name that
        is text ending in a query parameter's name (``see https://h/x?api_key``): a form whose value held
        an unencoded ``&`` splits there, and the parameter's value becomes the value of that name."""
        if name.casefold() in self.names or secret_name(name):
            return True
        tail = _QUERY_TAIL.search(name) if len(name) > 1 else None
        return tail is not None and (tail.group(1).casefold() in self.names or secret_name(tail.group(1)))


@lru_cache(maxsize=256)
def text_rules(names: frozenset[str] = frozenset()) -> TextRules:
    """The free-text rules with an integration's extra names, compiled once per set of names."""
    words = [re.escape(w) for w in PAIR_NAME_WORDS] + [re.escape(n) for n in sorted(names, key=len, reverse=True)]
    pair = re.compile(
        # the name: a word holding one of ``words``, optionally quoted (also JSON-escaped quotes)
        r"(?i)(?<![\w.\-])(?P<name>[\w.\-]{0,40}?(?:" + "|".join(words) + r")[\w.\-]{0,40})"
        r"(?:\\?[\"'])?\]?[ \t]*(?::=|=>|==?|:)[ \t]*"
        r"(?:(?P<scheme>bearer|basic|token|digest)[ \t]+)?"
        # the value: double-quoted (JSON escapes inside), inside an escaped JSON string, single-quoted,
        # or bare; a quoted value cut by the end of a line or of the text (a 413 head) runs to there
        r"(?:\"(?P<dq>(?:[^\"\\\r\n]|\\.)*)(?:\"|(?=[\r\n])|$)"
        r"|\\\"(?P<eq>(?:(?!\\\")[^\r\n])*)(?:\\\"|(?=[\r\n])|$)"
        r"|'(?P<sq>[^'\r\n]*)(?:'|(?=[\r\n])|$)"
        r"|(?P<v>[^\s,;&\"'<>(){}\[\]\\]+))"
    )
    return TextRules(names=names, pair=pair)


def _group_token(group: int) -> Callable[[re.Match[str]], str]:
    """A replacement that tokenises ``group`` of the match and keeps the rest of it."""

    def replace(match: re.Match[str]) -> str:
        start, end = match.span(group)
        whole_start = match.start()
        text = match.group(0)
        secret = text[start - whole_start : end - whole_start]
        return text[: start - whole_start] + _token(secret) + text[end - whole_start :]

    return replace


_LONG_RUN = re.compile(r"[0-9A-Za-z_\-+/=.]{11}")
_SHAPE_EDGE = frozenset(" \t\r\n=:\"'")


def _shape_pass(text: str) -> str:
    """Replace provider key shapes: the plugin's match (its secret group when it has one), run on to
    the end of the token, cut at the first blank (a pattern ending in ``.+`` stops at the token)."""
    if _LONG_RUN.search(text) is None:  # every shape needs a run of 11 token characters or more
        return text
    for shape in SHAPES:
        if shape.hint and shape.hint not in text:
            continue
        if shape.regex.search(text) is None:
            continue
        pieces: list[str] = []
        position = 0
        for match in shape.regex.finditer(text):
            group = (
                shape.group if shape.group and match.group(shape.group) and len(match.group(shape.group)) >= 8 else 0
            )
            start, end = match.span(group)
            while start < end and text[start] in _SHAPE_EDGE:  # a pattern that takes its separator
                start += 1
            if start < position:
                continue
            blank = re.search(r"[\s\"']", text[start:end])
            if blank is not None:
                end = start + blank.start()
            tail = TOKEN_TAIL.match(text, end)
            if tail is not None:
                end = tail.end()
            while end > start and text[end - 1] == ".":  # a sentence's full stop
                end -= 1
            secret = text[start:end]
            if not secret or "‹" in secret or is_redacted(secret) or not shape.accept(secret):
                continue
            pieces += [text[position:start], _token(secret)]
            position = end
        text = "".join(pieces) + text[position:]
    return text


def _group_redacted(match: re.Match[str], group: str, found: list[str] | None) -> str:
    """``match``'s text with its ``group`` (a secret value) replaced by the value's token; the value is
    also appended to ``found`` when given."""
    value = match.group(group)
    if found is not None:
        found.append(value)
    start, end = match.span(group)
    offset = match.start()
    whole = match.group(0)
    return whole[: start - offset] + _token(value) + whole[end - offset :]


def _pair_replace(rules: TextRules, found: list[str] | None = None) -> Callable[[re.Match[str]], str]:
    """The pair rule's replacement; each value it redacts is also appended to ``found`` when given."""

    def replace(match: re.Match[str]) -> str:
        name = match.group("name")
        group = next((g for g in ("dq", "eq", "sq", "v") if match.group(g) is not None), "v")
        value = match.group(group) or ""
        if not value or "‹" in value or is_redacted(value):
            return match.group(0)
        if weak_secret_name(name) and name.casefold() not in rules.names:
            if not looks_random(value):
                return match.group(0)
        elif not rules.is_secret_name(name):
            return match.group(0)
        return _group_redacted(match, group, found)

    return replace


def _auth_value(match: re.Match[str]) -> str:
    scheme, value = match.group(1), match.group(2)
    if "‹" in value or (scheme.lower() == "token" and (len(value) < 16 or not any(c.isdigit() for c in value))):
        return match.group(0)  # "token expired": prose, not a credential
    return f"{scheme} {_token(value)}"


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"[ -]", "", match.group(1))
    if 13 <= len(digits) <= 19 and luhn_valid(digits):
        return match.group(0).replace(match.group(1), _token(digits))
    return match.group(0)


# A query or fragment parameter whose value is percent-encoded: ``?q=password%3Dhunter2%20…``.
_ENCODED_PARAM = re.compile(r"([?&#;][^=&#\s\"'<>\\]{1,100}=)([^&#\s\"'<>\\]*%[0-9A-Fa-f]{2}[^&#\s\"'<>\\]*)")


def _encoded_param(match: re.Match[str]) -> str:
    """Redact a percent-encoded parameter value as the text it encodes; encode the result again."""
    decoded = unquote_plus(match.group(2))
    redacted = redact_text(decoded)
    if redacted == decoded:
        return match.group(0)
    # tokens stay readable; the text around them is encoded again
    parts = TOKEN_PATTERN.split(redacted)
    tokens = TOKEN_PATTERN.findall(redacted)
    encoded = "".join(quote(part, safe="") + (tokens[i] if i < len(tokens) else "") for i, part in enumerate(parts))
    return match.group(1) + encoded


def redact_text(text: str, names: Iterable[str] = ()) -> str:
    """Redact secrets and personal data in free text (rule 2 of the module docstring).

    ``names``: extra secret key names (an integration's) on top of those of the current
    ``redaction_scope``. Deterministic and idempotent: a token is never redacted again. Returns the
    text with each secret replaced by its ``‹redacted:…›`` token.
    """
    if not text:
        return text
    scope = _scope()
    extra = frozenset(scope.names | {n.casefold() for n in names if n}) if names else scope.names
    return _redact_text(text, scope.values, text_rules(extra), redaction_key())


@lru_cache(maxsize=1024)
def _spellings(value: str) -> tuple[str, ...]:
    """A secret as free text may spell it: as it is, and percent-encoded as a form or a query string
    carries it (``+`` or ``%20`` for a space) -- a post's secret recurring in another field of a form.
    Spellings with JSON escapes are too many to list: ``_escaped_literals`` reads such literals instead."""
    return tuple(dict.fromkeys((value, quote_plus(value, safe=""), quote(value, safe=""))))


# A JSON string literal that spells something with escapes (``\/``, ``\u0041``, ``\"``, ``\\``): the text it
# stands for is not the text as written, so neither a post's secret nor a rule's shape is found in it
# verbatim. Bounded: a literal stops at a line end (JSON strings hold none).
_STRING_LITERAL = re.compile(r'"(?:[^"\\\n]|\\.)*"')  # alternatives disjoint: no backtracking blow-up
_UNSTORABLE_IN_LITERAL = re.compile("[\x00\ud800-\udfff]")


def _escaped_literals(text: str, values: tuple[str, ...], rules: TextRules, key: bytes) -> str:
    r"""Redact each JSON string literal of ``text`` that holds an escape as the text it spells, and write
    it again as a literal (JSON stays JSON: an ndjson line or an envelope of a stored body parses again).

    Every spelling JSON allows for a secret is found this way, not only the ones ``_spellings`` lists
    (RFC 8259 section 7: any character may be written as ``\uXXXX``, ``/`` as ``\/``). A literal that
    does not read (an invalid escape) is left to the other rules; one whose text holds no secret is kept
    as written.
    """

    def literal(match: re.Match[str]) -> str:
        if "\\" not in match.group(0):
            return match.group(0)
        try:
            spelled = json.loads(match.group(0), strict=False)
        except ValueError:
            return match.group(0)
        redacted = _redact_text(spelled, values, rules, key)
        if redacted == spelled:
            return match.group(0)
        written = json.dumps(redacted, ensure_ascii=False)
        # a lone surrogate or NUL the literal spelled stays an escape: written raw, no text column holds it
        return _UNSTORABLE_IN_LITERAL.sub(lambda m: f"\\u{ord(m.group(0)):04x}", written)

    return _STRING_LITERAL.sub(literal, text)


# A text that is a whole JSON object or array (an SNS ``Message``, an EventBridge ``detail`` sent as a
# string, a field a mapping wrote with ``to_string``): its secrets are in its structure -- a
# ``{"name": "password", "value": …}`` pair, a secret-named key whose value is a number -- which no
# free-text rule reads. Read as data, at most this many documents deep (a string in a string in ...)
# and this many levels within each, so that the walk's recursion stays bounded.
_EMBEDDED_MAX_LEVELS = 4
_EMBEDDED_MAX_DEPTH = 32
_EMBEDDED_LEVEL: ContextVar[int] = ContextVar("handover_redaction_embedded_level", default=0)


def _embedded_document(text: str) -> tuple[Any, tuple[dict[str, Any], ...]] | None:
    """``(document, shadowed)`` when ``text`` is a JSON object or array (surrounding blanks allowed)
    that may be walked, else None. Never raises."""
    stripped = text.strip()
    if len(stripped) < 2 or (stripped[0], stripped[-1]) not in (("{", "}"), ("[", "]")):
        return None
    if _EMBEDDED_LEVEL.get() >= _EMBEDDED_MAX_LEVELS:
        return None
    try:
        document, shadowed = json_loads_noting_repeats(stripped, strict=False)  # a raw control character too
    except (ValueError, RecursionError):
        return None
    if json_depth_exceeds(document, _EMBEDDED_MAX_DEPTH) or json_depth_exceeds(list(shadowed), _EMBEDDED_MAX_DEPTH):
        return None
    return document, shadowed


def _embedded_secrets(document: Any, shadowed: tuple[dict[str, Any], ...], rules: TextRules) -> list[str]:
    """The secret values an embedded document holds by structure (its repeated keys' hidden values too)."""
    level = _EMBEDDED_LEVEL.set(_EMBEDDED_LEVEL.get() + 1)
    try:
        walk = _Walk(rules=rules, free_text=False)
        walk.node([document, *shadowed], [], 0, False)
        return walk.found
    finally:
        _EMBEDDED_LEVEL.reset(level)


def _embedded_json(text: str, values: tuple[str, ...], rules: TextRules, key: bytes) -> str | None:
    """``text`` redacted as the JSON document it is (``_embedded_document``) and written out again, or
    None when it is not one. Its secrets by structure are redacted wherever they recur in it."""
    embedded = _embedded_document(text)
    if embedded is None:
        return None
    document, shadowed = embedded
    found = [v for v in _embedded_secrets(document, shadowed, rules) if len(v) >= MIN_SECRET_LENGTH]
    level = _EMBEDDED_LEVEL.set(_EMBEDDED_LEVEL.get() + 1)
    try:
        wanted = tuple(sorted({*values, *(v for v in found if not is_redacted(v))}, key=len, reverse=True))
        walk = _Walk(rules=rules, free_text=True, values=wanted, key=key)
        redacted = walk.node(document, [], 0, False)
    finally:
        _EMBEDDED_LEVEL.reset(level)
    if redacted == document and not shadowed:
        return text
    written = json.dumps(redacted, ensure_ascii=False)
    return _UNSTORABLE_IN_LITERAL.sub(lambda m: f"\\u{ord(m.group(0)):04x}", written)


def _redact_text(text: str, values: tuple[str, ...], rules: TextRules, key: bytes) -> str:
    """``redact_text`` with the scope's values, the rules and the redaction key already looked up."""
    if text[:1] in "{[ \t\r\n" and text.strip()[:1] in ("{", "["):
        # a JSON document: every string in it (keys too) gets these rules first, so it stays JSON; the
        # rules then read the text as written too (a pair split between a key and its value)
        as_document = _embedded_json(text, values, rules, key)
        if as_document is not None:
            text = as_document
    for value in values:
        for spelling in _spellings(value):
            if spelling in text:
                text = text.replace(spelling, redaction_token(value))
    if "\\" in text and '"' in text:
        text = _escaped_literals(text, values, rules, key)
    if len(text) < _MIN_TEXT_LENGTH:
        return text
    clean_key = (text, rules.names, key) if len(text) <= _CLEAN_MAX_LENGTH else None
    if clean_key is not None and clean_key in _CLEAN:
        return text
    redacted = _redact_rules(text, rules)
    if redacted == text and clean_key is not None:
        _remember_clean(clean_key)
    return redacted


# Texts the rules left unchanged, remembered (bounded, oldest out first): payloads repeat their label
# values, URLs and names post after post, and most text holds no secret. Only text found clean is
# kept, so the cache never holds a secret the rules found.
_CLEAN: dict[tuple[str, frozenset[str], bytes], None] = {}
_CLEAN_SIZE = 20_000
_CLEAN_MAX_LENGTH = 2_000


def _remember_clean(key: tuple[str, frozenset[str], bytes]) -> None:
    _CLEAN[key] = None
    if len(_CLEAN) > _CLEAN_SIZE:
        try:
            del _CLEAN[next(iter(_CLEAN))]
        except (KeyError, StopIteration, RuntimeError):  # another thread evicted it first
            pass


def _name_value_pattern(quote: str, value: str) -> str:
    """A ``{"name": <name>, "value": <value>}`` pair written with ``quote`` (``"``, or ``\\"`` inside a
    JSON string), in either order, ``name``/``key`` and ``value`` in either case."""
    name = rf"{quote}(?:[Nn]ame|[Kk]ey){quote}[ \t]*:[ \t]*{quote}(?P<name{{n}}>[^\"\\\r\n]{{{{1,100}}}}){quote}"
    val = (
        rf"{quote}[Vv]alue{quote}[ \t]*:[ \t]*(?:{quote}(?P<dq{{n}}>{value}){quote}|(?P<num{{n}}>-?[0-9][0-9.eE+\-]*))"
    )
    sep = r"[ \t\r\n]*,[ \t\r\n]*"
    return "(?:" + name.format(n=1) + sep + val.format(n=1) + "|" + val.format(n=2) + sep + name.format(n=2) + ")"


# ``{"name": "DB_PASSWORD", "value": …}`` pairs (container env, tag lists, CloudWatch dimensions) in
# text that is not JSON as a whole (a cut 413 head, a body that is not UTF-8, a JSON string inside it):
# the structural rule for such pairs, read from the text.
_NAME_VALUE_PAIRS = (
    re.compile(_name_value_pattern('"', r'(?:[^"\\\r\n]|\\.)*')),
    re.compile(_name_value_pattern(r'\\"', r'(?:(?!\\")[^\r\n])*')),
)


def _name_value_replace(rules: TextRules, found: list[str] | None = None) -> Callable[[re.Match[str]], str]:
    """The name/value pair rule's replacement; each value it redacts is also appended to ``found``."""

    def replace(match: re.Match[str]) -> str:
        n = 1 if match.group("name1") is not None else 2
        if not rules.is_secret_name(match.group(f"name{n}")):
            return match.group(0)
        group = f"dq{n}" if match.group(f"dq{n}") is not None else f"num{n}"
        value = match.group(group)
        if not value or "‹" in value or is_redacted(value):
            return match.group(0)
        return _group_redacted(match, group, found)

    return replace


def _text_pair_secrets(text: str, rules: TextRules) -> list[str]:
    """The values text that is not JSON as a whole holds in secret pairs (``"password": "…"``,
    ``token=…``, ``{"name": "DB_PASSWORD", "value": …}``): the post's secrets by its names, as a JSON
    body's are by structure, so that they are redacted where they recur without a name (ndjson sent
    to a JSON integration: ``{"note": "again S1", "password": "S1"}``)."""
    found: list[str] = []
    if "=" in text or ":" in text:
        rules.pair.sub(_pair_replace(rules, found), text)
    if "alue" in text and ":" in text:
        for pattern in _NAME_VALUE_PAIRS:
            pattern.sub(_name_value_replace(rules, found), text)
    return found


def _redact_rules(text: str, rules: TextRules) -> str:
    """The free-text rules after the post's own secrets (``redact_text``), in their order."""
    lowered = text.lower()
    if "private key" in lowered or "putty-user-key" in lowered:
        text = PRIVATE_KEY_BLOCK.sub(lambda m: _token(m.group(0)), text)
    if "://" in text:
        text = APPRISE_URL.sub(_group_token(1), text)
        text = BASIC_AUTH.sub(_group_token(1), text)
        text = USER_INFO.sub(_group_token(1), text)
        for path in CREDENTIAL_PATHS:
            text = path.sub(_group_token(1), text)
        if "%" in text:
            text = _ENCODED_PARAM.sub(_encoded_param, text)
    elif "/hooks/" in text or "/k/" in text:
        for path in CREDENTIAL_PATHS:
            text = path.sub(_group_token(1), text)
    text = _shape_pass(text)
    if "=" in text or ":" in text:
        text = rules.pair.sub(_pair_replace(rules), text)
    if "alue" in text and ":" in text:
        for pattern in _NAME_VALUE_PAIRS:
            text = pattern.sub(_name_value_replace(rules), text)
    if "bearer" in lowered or "basic" in lowered or "token" in lowered or "digest" in lowered:
        text = AUTH_VALUE.sub(_auth_value, text)
    if "@" in text or "%40" in text:
        text = EMAIL.sub(lambda m: _token(m.group(0)), text)
    return CARD.sub(_card, text)


# --- structured data ------------------------------------------------------------------------------------

_PAIR_NAME_KEYS = ("name", "Name", "key", "Key")
_PAIR_VALUE_KEYS = ("value", "Value")


@dataclass
class _Walk:
    """One walk over parsed data: the rules, and what it found or changed."""

    rules: TextRules
    free_text: bool
    values: tuple[str, ...] = ()  # the scope's secret values, for the free-text rules
    key: bytes = b""  # the redaction key, looked up once per walk
    found: list[str] = field(default_factory=list)
    changed: dict[str, str] = field(default_factory=dict)
    needs_rewrite: bool = False
    plain: dict[str, None] = field(default_factory=dict)  # without free text: the strings left for its rules

    def secret_pair(self, node: dict[str, Any]) -> str | None:
        """The value key of a ``{"name": <secret-looking>, "value": …}`` pair (tags, container env)."""
        for name_key in _PAIR_NAME_KEYS:
            name = node.get(name_key)
            if isinstance(name, str) and self.rules.is_secret_name(name):
                for value_key in _PAIR_VALUE_KEYS:
                    if value_key in node:
                        return value_key
        return None

    def string(self, value: str, secret: bool) -> str:
        if secret:
            new = _token(value)
        elif self.free_text:
            new = _redact_text(value, self.values, self.rules, self.key)
        else:
            self.plain[value] = None
            return value
        if new != value:
            self.changed[value] = new
        return new

    def node(self, node: Any, patterns: list[tuple[str, ...]], depth: int, secret: bool) -> Any:
        if isinstance(node, dict):
            pair_value = self.secret_pair(node)
            out: dict[Any, Any] = {}
            for key, child in node.items():
                name = str(key)
                below = [p for p in patterns if len(p) > depth and p[depth] in ("*", name)] if patterns else patterns
                child_secret = (
                    secret
                    or name == pair_value
                    or self.rules.is_secret_name(name)
                    or (bool(below) and any(len(p) == depth + 1 for p in below))
                )
                new_key = self.string(key, False) if isinstance(key, str) else key
                out[new_key] = self.node(child, below, depth + 1, child_secret)
            return out
        if isinstance(node, list):
            items = []
            for index, child in enumerate(node):
                if not patterns:
                    items.append(self.node(child, patterns, depth + 1, secret))
                    continue
                below = [p for p in patterns if len(p) > depth and p[depth] in ("*", str(index))]
                items.append(self.node(child, below, depth + 1, secret or any(len(p) == depth + 1 for p in below)))
            return items
        if isinstance(node, str):
            if secret and node and not is_redacted(node):
                self.found.append(node)
            elif not secret and not self.free_text and node[:1] in "{[ \t\r\n":
                embedded = _embedded_document(node)  # a JSON document sent as a string: its secrets are the post's
                if embedded is not None:
                    self.found.extend(_embedded_secrets(*embedded, self.rules))
            return self.string(node, secret)
        if secret and isinstance(node, (int, float)) and not isinstance(node, bool):
            self.found.append(str(node))
            self.needs_rewrite = True  # a number becomes a string: the JSON text cannot be patched in place
            return _token(str(node))
        return node


def _walk(document: Any, paths: Iterable[str], names: Iterable[str], *, free_text: bool) -> tuple[Any, _Walk]:
    scope = _scope()
    rules = text_rules(frozenset(scope.names | {n.casefold() for n in names if n}))
    walk = _Walk(rules=rules, free_text=free_text, values=scope.values, key=redaction_key())
    result = walk.node(document, [tuple(p.split(".")) for p in paths], 0, False)
    return result, walk


def secret_values(document: Any, paths: Iterable[str], names: Iterable[str] = ()) -> list[str]:
    """The values in parsed ``document`` that are secrets by structure: at ``paths`` (dotted, ``*`` for
    any key or index), under a secret-looking key name or one of ``names``, or in a secret
    ``{"name", "value"}`` pair. Numbers are given as their text."""
    return _walk(document, paths, names, free_text=False)[1].found


def _loads(text: str) -> tuple[bool, Any, tuple[dict[str, Any], ...]]:
    """``(ok, document, shadowed)`` of ``text`` read as ``json.loads`` reads it (``json_loads_noting_repeats``)."""
    try:
        return True, *json_loads_noting_repeats(text)
    except (ValueError, RecursionError):
        return False, None, ()


def body_secret_values(raw: bytes | str, paths: Iterable[str] = (), names: Iterable[str] = ()) -> list[str]:
    """The secret values a JSON body holds by structure (``secret_values``); none when it is not JSON."""
    text = raw if isinstance(raw, str) else raw.decode("utf-8", errors="replace")
    ok, document, _ = _loads(text)
    return secret_values(document, paths, names) if ok else []


def redact_body(raw: bytes | str, paths: Iterable[str] = (), names: Iterable[str] = ()) -> str:
    """Return a post's body as text with secrets and personal data replaced by tokens.

    ``raw`` is bytes (decoded as UTF-8, invalid bytes replaced) or already decoded text. When it is
    JSON, every string (keys too) is redacted where it stands: whole under ``paths``, secret-looking
    names and ``names`` (an integration's extra names), the free-text rules elsewhere, with the
    post's own secrets replaced wherever they recur. The changed strings are replaced in the text as
    sent, so the rest stays byte for byte and parses again for reprocessing; when that cannot be done
    exactly (a number under a secret name, a short secret, an escape spelled another way, an object
    that repeats a key -- its earlier values are in the text only, unread) the redacted document is
    written out whole. Not JSON (a cut 413 head, a form post, ndjson): the free-text rules run over
    the whole text, their pair rule reading ``"name": "value"`` as well, and a value a secret pair
    holds is replaced wherever it recurs in the text.
    """
    return redact_body_secrets(raw, paths, names)[0]


def redact_body_secrets(
    raw: bytes | str, paths: Iterable[str] = (), names: Iterable[str] = (), *, parsed: JsonBody | None = None
) -> tuple[str, list[str]]:
    """``redact_body`` and ``body_secret_values`` of the same body in one go: the body as stored, and the
    secret values it holds by structure (when it is not JSON: the values of its secret pairs).

    ``parsed``: the body already parsed by ``load_json`` (``JsonBody``), so that a post's JSON is parsed
    once; when it was refused there (nested too deep, a number out of range), or not given, the body is
    parsed here as ``json.loads`` reads it. May raise ``RecursionError`` for JSON nested too deep to walk.
    """
    text = raw if isinstance(raw, str) else raw.decode("utf-8", errors="replace")
    ok, document, shadowed = (
        (True, parsed.document, parsed.shadowed) if parsed is not None and parsed.ok else _loads(text)
    )
    if not ok:
        # not JSON as a whole: the free-text rules, with the values its secret pairs hold as the post's
        rules = text_rules(frozenset(_scope().names | {n.casefold() for n in names if n}))
        found = list(dict.fromkeys(_text_pair_secrets(text, rules)))
        with redaction_scope(found, names):
            return redact_text(text, names), found
    # One walk finds the secrets by structure and every other string; the free-text rules then run once
    # per distinct string with those secrets in scope. The redacted document is built only when the
    # text cannot be patched in place (or must be checked).
    walk = _walk(document, paths, names, free_text=False)[1]
    # a value a repeated key hides is dropped from the stored body; a secret among them is still the
    # post's own, redacted wherever it recurs
    found = [*walk.found, *secret_values(list(shadowed), (), names)] if shadowed else walk.found
    changed = dict(walk.changed)
    with redaction_scope(found, names):
        values, key = _scope().values, redaction_key()
        for value in walk.plain:
            new = _redact_text(value, values, walk.rules, key)
            if new != value:
                changed[value] = new
    if not changed and not walk.needs_rewrite and not shadowed:
        return text, found

    def redacted() -> Any:
        with redaction_scope(found, names):
            return _walk(document, paths, names, free_text=True)[0]

    rewrite = walk.needs_rewrite or bool(shadowed)
    patched = text
    if not rewrite:
        for original in sorted(changed, key=len, reverse=True):
            spellings = {json.dumps(original), json.dumps(original, ensure_ascii=False)}
            hits = [s for s in spellings if s in patched]
            if len(original) < MIN_SECRET_LENGTH or not hits:
                rewrite = True
                break
            replacement = json.dumps(changed[original], ensure_ascii=False)
            for spelling in hits:
                patched = patched.replace(spelling, replacement)
    if not rewrite and ("\\u" in text or "\\/" in text):
        # one string may be spelled two ways: make sure the patched text says what was redacted
        rewrite = _loads(patched)[:2] != (True, redacted())
    if rewrite:
        return json.dumps(redacted(), ensure_ascii=False), found
    return patched, found


def redact_data(value: Any, names: Iterable[str] = ()) -> Any:
    """Parsed data (dicts, lists, strings) with the structural rules and the free-text rules applied.

    Keys are redacted like values. ``names``: extra secret names on top of the current scope's.
    """
    return _walk(value, (), names, free_text=True)[0]


def redact_secret_keys(value: Any) -> Any:
    """Parsed data with the values under secret key names (built-in, and the extra names of the current
    ``redaction_scope``) and those of secret ``{"name", "value"}`` pairs replaced by tokens."""
    return _walk(value, (), (), free_text=False)[0]


# --- a parsed record ------------------------------------------------------------------------------------

_RECORD_TEXT_FIELDS = (
    "correlation_key",
    "job_key",
    "tenant",
    "environment",
    "execution_id",
    "error_summary",
    "correlation_ref",
    "log_url",
    "config_version",
    "replay_key",
    "group_ref",
    "summary",
)


def _redact_optional(value: str | None) -> str | None:
    return redact_text(value) if value else value


def record_redacted(record: ParsedAlert) -> ParsedAlert:
    """A copy of ``record`` with every text field redacted (identity fields too: a token is
    deterministic, so a reprocessed body -- stored redacted -- names the same run and attempt).

    ``dedup_key`` stays raw: its hash is computed from the raw values; only its display is
    redacted (``runs.alerts.records``). ``details`` and ``problems`` are redacted as data and text.
    """
    values: dict[str, Any] = {name: _redact_optional(getattr(record, name)) for name in _RECORD_TEXT_FIELDS}
    values["related_attempts"] = [
        dataclasses.replace(
            state,
            execution_id=redact_text(state.execution_id),
            error_summary=redact_text(state.error_summary),
        )
        for state in record.related_attempts
        if isinstance(state, AttemptState)
    ]
    values["problems"] = [redact_text(p) for p in record.problems]
    values["details"] = redact_data(record.details)
    return dataclasses.replace(record, **values)

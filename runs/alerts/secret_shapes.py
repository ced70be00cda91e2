"""What a secret looks like: secret key names, provider key shapes, credential-bearing URLs (rule 8 in
docs/architecture.md; the list and its reasons: docs/security.md "Redaction").

Pure tables and predicates, compiled once at import; ``runs.alerts.redaction`` applies them. Provider
key shapes come from detect-secrets' own pattern plugins (their ``denylist`` regexes, imported, not
copied), plus the few shapes detect-secrets 1.5 lacks (``EXTRA_SHAPES``). Its entropy plugins are not
used on free text: they would eat fingerprints, UUIDs and commit ids that people search by.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString, HexHighEntropyString
from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.keyword import DENYLIST as KEYWORD_DENYLIST
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

# detect-secrets' pattern plugins whose ``denylist`` is searched in free text. ArtifactoryDetector's
# ``AP[0-9A-F]…`` shape also matches ordinary upper-case words ("APACHEAIRFLOW"): its matches count
# only with a digit and both cases (``Shape.accept``). Left out on purpose: IPPublicDetector (an
# address is no secret and helps triage), KeywordDetector (its value pattern runs to the end of the
# line; its keyword list is used by ``secret_name``), PrivateKeyDetector (it matches the header only:
# ``PRIVATE_KEY_BLOCK`` takes the whole block), BasicAuthDetector (``BASIC_AUTH``, for URLs) and the
# entropy plugins (see the module docstring).
DETECTORS: tuple[type[RegexBasedDetector], ...] = (
    ArtifactoryDetector,
    AWSKeyDetector,
    AzureStorageKeyDetector,
    CloudantDetector,
    DiscordBotTokenDetector,
    GitHubTokenDetector,
    GitLabTokenDetector,
    IbmCloudIamDetector,
    IbmCosHmacDetector,
    JwtTokenDetector,
    MailchimpDetector,
    NpmDetector,
    OpenAIDetector,
    PypiTokenDetector,
    SendGridDetector,
    SlackDetector,
    SoftlayerDetector,
    SquareOAuthDetector,
    StripeDetector,
    TelegramBotTokenDetector,
    TwilioKeyDetector,
)

# Shapes detect-secrets 1.5 has no plugin for (each a provider's documented token prefix).
EXTRA_SHAPES: dict[str, str] = {
    "Google API key": r"AIza[0-9A-Za-z_\-]{35}",
    "Google OAuth access token": r"ya29\.[0-9A-Za-z_\-]{20,}",
    "GitHub fine-grained token": r"github_pat_[0-9A-Za-z_]{22,}",
    "npm access token": r"npm_[0-9A-Za-z]{36}",
    "OpenAI project or service key": r"sk-(?:proj|svcacct|admin)-[0-9A-Za-z_\-]{20,}",
    "Stripe test or restricted key": r"(?:sk|rk)_(?:test|live)_[0-9a-zA-Z]{16,}",
    "Slack app token": r"xapp-\d-[0-9A-Za-z\-]{10,}",
    # detect-secrets' own ``AKC…`` shape needs a blank or a quote after the key, not ``.`` or ``)``
    "JFrog Artifactory API key": r"AKCp[0-9A-Za-z]{10,}",
    # Handover's own: integration keys, runner credentials, personal API tokens
    "Handover key": r"(?:hk|rc|ho)_[0-9A-Za-z_\-]{20,}",
}


@dataclass(frozen=True)
class Shape:
    """One provider key shape: where it comes from, its regex and the group holding the secret (0: all)."""

    source: str
    regex: re.Pattern[str]
    group: int
    hint: str = ""  # a literal the text must hold for the regex to be tried (a costly pattern)
    mixed_only: bool = False  # a match counts only with a digit, a lower- and an upper-case letter

    def accept(self, secret: str) -> bool:
        """Whether a match of this shape is taken as a secret (see ``mixed_only``)."""
        if not self.mixed_only:
            return True
        return any(c.isdigit() for c in secret) and any(c.islower() for c in secret) and secret.upper() != secret


# NpmDetector's ``//.+/:_authToken=`` would scan every line with a ``//`` to its end.
_HINTS = {"NpmDetector": "_authToken"}


def _shapes() -> tuple[Shape, ...]:
    shapes: list[Shape] = []
    for detector in DETECTORS:
        for pattern in detector.denylist:  # type: ignore[attr-defined]  # a class attribute on each plugin
            # A left boundary: a shape glued to letters or digits is part of a longer word.
            regex = re.compile(rf"(?<![0-9A-Za-z])(?:{pattern.pattern})", pattern.flags)
            name = detector.__name__
            mixed = name == "ArtifactoryDetector"
            shapes.append(Shape(name, regex, 1 if regex.groups else 0, _HINTS.get(name, ""), mixed))
    for name, pattern in EXTRA_SHAPES.items():
        shapes.append(Shape(name, re.compile(rf"(?<![0-9A-Za-z])(?:{pattern})"), 0))
    return tuple(shapes)


SHAPES = _shapes()
# A token runs on over these characters after a shape's match (JWT signatures, longer Stripe keys,
# Slack tokens with upper-case parts: the plugins' patterns stop early or match lazily).
TOKEN_TAIL = re.compile(r"[0-9A-Za-z_\-+/=.]*")

# PEM private key blocks, anchored on detect-secrets' own header list; a block without its END line
# (a cut body) takes the base64 lines that follow the header.
_PEM_HEADERS = "|".join(p.pattern for p in PrivateKeyDetector.denylist if "PuTTY" not in p.pattern)
PRIVATE_KEY_BLOCK = re.compile(
    rf"(?:-----)?(?:{_PEM_HEADERS})(?:-----)?"
    r"(?:[\s\S]{0,20000}?-----END[ A-Z0-9]*-----|(?:(?:\\[rn]|\s)*[0-9A-Za-z+/=:]{16,})*)"
    r"|PuTTY-User-Key-File-\d[\s\S]{0,20000}?Private-MAC:\s*[0-9a-fA-F]+"
)

# User info in a URL (``scheme://user:password@host``): detect-secrets' basic-auth shape, and any user
# info at all (a token or an e-mail used as the user name).
BASIC_AUTH = BasicAuthDetector.denylist[0]
USER_INFO = re.compile(r"(?i)\b[a-z][a-z0-9+.\-]{0,30}://([^/?#\s@\"'<>\\]+)@")

# Apprise notification URLs carry their credentials in every part (``slack://TokenA/TokenB/TokenC``,
# ``tgram://bottoken/ChatID``): everything after the scheme up to the query goes (query parameters
# follow the pair rule). https and http are not among them.
APPRISE_SCHEMES = (
    "apprise", "bark", "barks", "discord", "form", "forms", "gotify", "gotifys", "ifttt", "join", "json",
    "jsons", "kodi", "kodis", "lametric", "line", "mailgun", "mailto", "mailtos", "matrix", "matrixs",
    "mmost", "mmosts", "msteams", "ntfy", "ntfys", "opsgenie", "pagerduty", "pbul", "pover", "prowl",
    "pushed", "pushover", "rocket", "rockets", "sendgrid", "ses", "signal", "signals", "slack", "sns",
    "spush", "strmlabs", "syslog", "teams", "tgram", "twilio", "twist", "webex", "wxteams", "xml", "xmls",
    "zulip",
)  # fmt: skip
APPRISE_URL = re.compile(rf"(?i)\b(?:{'|'.join(APPRISE_SCHEMES)})://([^\s\"'<>`\\?]+)")

# URL paths known to carry a credential (group 1 is the secret part): chat webhooks and Handover's own
# URL-key ingestion path (``/api/v1/alerts/<source>/k/<key>/``).
CREDENTIAL_PATHS: tuple[re.Pattern[str], ...] = (
    re.compile(r"(?i)\bhooks\.slack\.com/((?:services|workflows|triggers)/[^\s\"'<>?#\\]+)"),
    re.compile(r"(?i)\bdiscord(?:app)?\.com/api/webhooks/([^\s\"'<>?#\\]+)"),
    re.compile(r"(?i)\.webhook\.office\.com/(webhookb2/[^\s\"'<>?#\\]+)"),
    re.compile(r"(?i)\boutlook\.office(?:365)?\.com/(webhook/[^\s\"'<>?#\\]+)"),
    re.compile(r"(?i)\bapi\.telegram\.org/(?:file/)?bot([^/\s\"'<>?#\\]+)"),
    # Mattermost (/hooks/<26 characters>) and Rocket.Chat (/hooks/<id>/<token>)
    re.compile(r"(?i)/hooks/([0-9A-Za-z]{16,}(?:/[0-9A-Za-z_\-]{8,})?)"),
    re.compile(r"(?i)/api/v\d+/alerts/[^/\s\"'<>]+/k/([^/\s\"'<>?#\\]+)"),
)

# ``Authorization``-style values in free text: ``Bearer <token>``, ``Basic <base64>``, ``Token <token>``.
AUTH_VALUE = re.compile(r"(?i)\b(bearer|basic|token|digest)\s+([0-9A-Za-z\-._~+/]{8,}=*)")

EMAIL = re.compile(r"(?<![\w.+\-%])[A-Za-z0-9._%+\-]+(?:@|%40)[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}")
# 13-19 digits, optionally grouped by spaces or dashes. Cards start with 2-6 (Mastercard 2-series,
# Amex 3, Visa 4, Mastercard 5, Discover 6); epoch milliseconds (1.7e12 today) start with 1. Not part
# of a longer token: a UUID's digit groups ("-3312-4458-8360-60d5…") can pass Luhn by chance.
CARD = re.compile(r"(?<![\w\-])([2-6]\d{3}(?:[ -]?\d){9,15})(?![\w\-])")

# --- key names -------------------------------------------------------------------------------------

# Names that contain "key" but name an identity an adapter reads (dedup, grouping, correlation,
# replay linking, a Nomad event's Key) or something public: never redacted by name (their values
# still go through the free-text rules). Compared squeezed: lower case, no separators.
IDENTITY_KEY_NAMES = frozenset(
    {
        "key",
        "keys",
        "keyid",
        "keyname",
        "dedupkey",
        "idempotencykey",
        "groupkey",
        "incidentkey",
        "jobkey",
        "replaykey",
        "replaykeyfrom",
        "filterkeys",
        "sortkey",
        "partitionkey",
        "primarykey",
        "foreignkey",
        "cachekey",
        "objectkey",
        "publickey",
        "taskinstancekeystr",
    }
)
# detect-secrets' keyword list (``api_?key``, ``password``, ``secret``, ``pwd``, ...) plus the names
# rule 8 adds: tokens, credentials, authorization (not "author"), cookies, signatures, sessions.
_KEYWORDS = re.compile("|".join(KEYWORD_DENYLIST))
_OWN_KEYWORDS = re.compile(r"token|credential|passphrase|cookie|signature|bearer|sessionid|auth(?!or(?!i[sz]))")
_SHORT_SECRET_NAMES = frozenset({"sig", "pass", "pw", "otp"})
_SQUEEZE = re.compile(r"[\W_]+")
_NAME = re.compile(r"[^\W\d][\w.\- ]{0,63}")


def squeeze(name: str) -> str:
    """``name`` in lower case without separators: ``X-Api-Key`` -> ``xapikey``."""
    return _SQUEEZE.sub("", name.casefold())


@lru_cache(maxsize=8192)
def secret_name(name: str) -> bool:
    """True when a value under the key ``name`` is a secret wherever it appears.

    ``*password*``, ``*secret*``, ``*token*``, ``*credential*``, ``*auth*`` (not ``author``), detect-secrets'
    keyword list, and names ending in ``key``/``keys`` -- except
    ``IDENTITY_KEY_NAMES`` and references (``secretKeyRef``: a name ending in ``ref`` holds no value).
    A "name" that reads like free text (punctuation other than ``_ . -``, over 64 characters) is
    none: the secret is in it, not under it (the free-text rules redact it). Memoised: payloads repeat
    their keys.
    """
    if _NAME.fullmatch(name) is None:  # free text used as a key ("password=… failed"), not a field name
        return False
    squeezed = squeeze(name)
    if not squeezed or squeezed in IDENTITY_KEY_NAMES or squeezed.endswith(("ref", "refs")):
        return False
    if squeezed in _SHORT_SECRET_NAMES or _KEYWORDS.search(squeezed) or _OWN_KEYWORDS.search(squeezed):
        return True
    # "key" as the last word (routing_key, AccountKey, x-api-key), not KeyError or KeyName
    return squeezed.endswith(("key", "keys"))


def weak_secret_name(name: str) -> bool:
    """True for a bare ``key``: in free text (``key=…``) its value is a secret only when it looks random."""
    return squeeze(name) == "key"


# Names a free-text ``name=value`` pair is searched for (then checked with ``secret_name``).
PAIR_NAME_WORDS = (
    "pass",
    "pwd",
    "secret",
    "token",
    "key",
    "auth",
    "credential",
    "cookie",
    "signature",
    "sig",
    "bearer",
    "session",
    "contrase",
)

_BASE64_ENTROPY = Base64HighEntropyString()
_HEX_ENTROPY = HexHighEntropyString()
_HEX = re.compile(r"[0-9a-fA-F]+")


def looks_random(value: str) -> bool:
    """True when ``value`` passes detect-secrets' entropy limits (hex 3.0, base64 4.5 bits a character).

    Used only for values under a secret-looking name (``key=…``), never on free text as a whole.
    """
    if len(value) < 16:
        return False
    if _HEX.fullmatch(value):
        return _HEX_ENTROPY.calculate_shannon_entropy(value) > _HEX_ENTROPY.entropy_limit
    return _BASE64_ENTROPY.calculate_shannon_entropy(value) > _BASE64_ENTROPY.entropy_limit


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

"""Chat/push targets (Apprise URLs): the admin's allow-list, the refusals, encryption and masking.

Apprise makes its own HTTP calls, which cannot be pinned to a checked address, so a URL is checked
at save and again at send (``target_check``): its scheme must be on ``HANDOVER_APPRISE_SCHEMES``;
the generic ``json``/``form``/``xml`` schemes may reach only hosts on ``HANDOVER_APPRISE_GENERIC_HOSTS``;
a self-hosted service's host (Mattermost, ntfy, Gotify, generic) must not be, or resolve to, a
loopback, private or link-local address (``handover.core.outbound``) unless it is on
``HANDOVER_APPRISE_PRIVATE_HOSTS``. What stays open: Apprise resolves the name again when it sends
(DNS rebinding) -- docs/security.md "Outbound calls". URLs are stored as Fernet tokens under
``HANDOVER_NOTIFICATION_KEYS`` (the first key encrypts, every key decrypts: rotation) and shown masked.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from handover.core.outbound import TargetRefused, host_resolve_checked
from handover.core.outbound import TargetUnresolved as NameUnresolved

GENERIC_SCHEMES = frozenset({"json", "jsons", "form", "forms", "xml", "xmls"})
# Services whose address is the one in the URL (self-hosted): the host is checked like a webhook's.
SELF_HOSTED_SCHEMES = GENERIC_SCHEMES | {
    "mmost",
    "mmosts",
    "ntfy",
    "ntfys",
    "gotify",
    "gotifys",
    "rocket",
    "rockets",
    "apprise",
    "apprises",
}


class TargetNotAllowed(Exception):
    """The URL is refused (not Apprise's, a scheme or host off the allow-list, an internal address)."""


class TargetUnresolved(TargetNotAllowed):
    """The target's name does not resolve now: refused at save, retried at send (DNS may come back)."""


@dataclass(frozen=True)
class CheckedTarget:
    """A URL that passed the checks: its scheme, the host checked (empty: a fixed service) and the mask."""

    scheme: str
    host: str
    masked: str


def _fernet() -> MultiFernet:
    keys = list(settings.HANDOVER_NOTIFICATION_KEYS) or [
        # Development and tests without a configured key: derived from the site's secret key.
        base64.urlsafe_b64encode(hashlib.sha256(f"apprise:{settings.SECRET_KEY}".encode()).digest()).decode()
    ]
    return MultiFernet([Fernet(key.encode() if isinstance(key, str) else key) for key in keys])


def url_encrypt(url: str) -> str:
    """The Fernet token of ``url`` under the first notification key."""
    return _fernet().encrypt(url.encode()).decode()


def url_decrypt(token: str) -> str:
    """The URL of a stored token; raises TargetNotAllowed when no configured key opens it."""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise TargetNotAllowed("The stored URL cannot be decrypted with the configured keys.") from exc


def url_mask(url: str, host: str) -> str:
    """``scheme://host/…abcd`` for self-hosted targets, ``scheme://abc…/…abcd`` for services (tokens hidden)."""
    scheme, _, rest = url.partition("://")
    tail = rest[-4:] if len(rest) > 12 else ""
    if host:
        return f"{scheme}://{host}/…{tail}"[:200]
    return f"{scheme}://{rest[:3]}…{tail}"[:200]


def _plugin(url: str) -> Any:
    import apprise

    plugin = apprise.Apprise.instantiate(url, suppress_exceptions=True)
    if plugin is None:
        raise TargetNotAllowed("Apprise does not understand this URL (see the Apprise wiki for the formats).")
    return plugin


def target_check(url: str, *, resolve: bool = True) -> CheckedTarget:
    """Check an Apprise URL against the allow-lists and the address rules; returns what to store.

    ``resolve`` False skips the DNS lookup (the address is checked again at send). Raises
    TargetNotAllowed with the reason a person can act on.
    """
    url = url.strip()
    scheme = url.partition("://")[0].lower()
    if not scheme or "://" not in url:
        raise TargetNotAllowed("Enter an Apprise URL such as slack://…, msteams://…, ntfys://… or jsons://….")
    if scheme not in settings.HANDOVER_APPRISE_SCHEMES:
        allowed = ", ".join(sorted(settings.HANDOVER_APPRISE_SCHEMES)) or "none"
        raise TargetNotAllowed(f"The scheme {scheme}:// is not on this site's allow-list ({allowed}).")
    plugin = _plugin(url)
    host = ""
    if scheme in SELF_HOSTED_SCHEMES and getattr(plugin, "mode", "private") != "cloud":
        host = str(getattr(plugin, "host", "") or "").lower()
        if not host:
            raise TargetNotAllowed("The URL names no host.")
        if scheme in GENERIC_SCHEMES and host not in settings.HANDOVER_APPRISE_GENERIC_HOSTS:
            raise TargetNotAllowed(
                f"Generic {scheme}:// targets may reach only hosts an admin allowed; {host} is not one of them."
            )
        if resolve:
            port = getattr(plugin, "port", None) or (443 if scheme.endswith("s") else 80)
            try:
                host_resolve_checked(host, int(port), allowed_hosts=settings.HANDOVER_APPRISE_PRIVATE_HOSTS)
            except TargetRefused as exc:
                raise TargetNotAllowed(f"Refused: {exc}") from exc
            except NameUnresolved as exc:
                raise TargetUnresolved(str(exc)) from exc
    return CheckedTarget(scheme=scheme, host=host, masked=url_mask(url, host))


def apprise_send(url: str, *, title: str, body: str) -> bool:
    """Send one message through Apprise after ``target_check`` (again, with DNS). The network boundary.

    Returns True only when Apprise reports the service accepted it. Raises TargetNotAllowed for a URL
    the rules now refuse (permanent).
    """
    import apprise

    target_check(url)
    sender = apprise.Apprise()
    if not sender.add(url):
        raise TargetNotAllowed("Apprise does not understand this URL.")
    return bool(sender.notify(title=title, body=body))

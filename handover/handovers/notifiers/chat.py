"""A chat-compatible outbound webhook (Slack, Mattermost, Rocket.Chat: ``{"text": ...}`` JSON).

Only the URL an admin set (``HANDOVER_CHAT_WEBHOOK_URL``) is called; https in production; no
loopback, private or link-local address unless its host is in
``HANDOVER_CHAT_WEBHOOK_ALLOWED_HOSTS``; at most 4 KiB of the answer is kept.
``deliver`` is the network boundary (tests replace it).
"""

from __future__ import annotations

import ipaddress
import json
import socket
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from django.conf import settings

from handover.handovers.models import Handover, HandoverNotification
from handover.handovers.notifiers.base import Delivered, PermanentError, TransientError, handover_message, handover_url

KEPT_RESPONSE_BYTES = 4096
TIMEOUT_SECONDS = 10


def is_configured() -> bool:
    return bool(getattr(settings, "HANDOVER_CHAT_WEBHOOK_URL", ""))


def check_target(url: str) -> None:
    """Refuse a webhook URL that is not http(s), is plain http in production, or resolves to a
    loopback, private, link-local or reserved address (unless its host is allow-listed)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PermanentError("The chat webhook URL must be an http(s) URL.")
    if settings.PRODUCTION and parts.scheme != "https":
        raise PermanentError("The chat webhook URL must use https in production.")
    if parts.hostname in settings.HANDOVER_CHAT_WEBHOOK_ALLOWED_HOSTS:
        return
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or 443, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise TransientError(f"Cannot resolve the webhook host: {exc}") from exc
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if address.is_loopback or address.is_private or address.is_link_local or address.is_reserved:
            raise PermanentError("The chat webhook URL points at a loopback, private or link-local address.")


def deliver(url: str, payload: dict[str, object]) -> Delivered:
    """POST ``payload`` as JSON to ``url`` (after ``check_target``). The network boundary.

    Returns the status and at most 4 KiB of the body for a 2xx answer; raises PermanentError for a
    4xx answer and TransientError for 5xx, timeouts and connection errors.
    """
    check_target(url)
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json", "User-Agent": "handover-notifier"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310 - checked above
            body = response.read(KEPT_RESPONSE_BYTES).decode("utf-8", "replace")
            return Delivered(status=response.status, body=body)
    except urllib.error.HTTPError as exc:
        body = exc.read(KEPT_RESPONSE_BYTES).decode("utf-8", "replace")
        if 400 <= exc.code < 500 and exc.code != 429:
            raise PermanentError(f"The webhook answered {exc.code}: {body[:200]}") from exc
        raise TransientError(f"The webhook answered {exc.code}: {body[:200]}") from exc
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise TransientError(f"{type(exc).__name__}: {exc}") from exc


def send(*, notification: HandoverNotification, handover: Handover) -> Delivered:
    """Post a short message about the handover to the configured chat webhook."""
    url = settings.HANDOVER_CHAT_WEBHOOK_URL
    if not url:
        raise PermanentError("No chat webhook is configured.")
    subject, _ = handover_message(handover)
    owner = handover.escalation_owner.get_username() if handover.escalation_owner_id else "nobody yet"
    first_action = (handover.next_action or "—").splitlines()[0]
    text = f"{subject}\nEscalation owner: {owner}\nNext: {first_action}\n{handover_url(handover)}"
    return deliver(url, {"text": text})

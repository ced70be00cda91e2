"""The replay webhook: signing, the target check and the HTTP call (the network boundary tests replace).

A dispatch is posted as JSON to the job's ``ReplayWebhook.url`` with these headers:

- ``X-Handover-Timestamp``: Unix seconds when this delivery was signed;
- ``X-Handover-Signature``: ``sha256=<hex HMAC-SHA256(secret, "<timestamp>." + body)>`` -- the
  timestamp is signed with the body, so a receiver refuses stale or replayed deliveries;
- ``Idempotency-Key``: the request's one key (the same on every delivery and in the body).

Only URLs an admin set are called; https in production; no loopback, private, link-local or
reserved address unless the host is in ``HANDOVER_REPLAY_WEBHOOK_ALLOWED_HOSTS``. The connection
goes to the address that was checked (no second DNS lookup to rebind), redirects are not followed,
and at most 4 KiB of the answer is read.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from handover.core.outbound import TargetRefused, TargetUnresolved, address_is_internal, host_resolve_checked

KEPT_RESPONSE_BYTES = 4096
SIGNATURE_HEADER = "X-Handover-Signature"
TIMESTAMP_HEADER = "X-Handover-Timestamp"


@dataclass(frozen=True)
class Answer:
    """What the webhook answered: the HTTP status and at most 4 KiB of the body."""

    status: int
    body: str


class TransientError(Exception):
    """Worth retrying: a timeout, a connection error, a 5xx or 429 answer, a name that does not resolve."""

    def __init__(self, message: str, answer: Answer | None = None) -> None:
        super().__init__(message)
        self.answer = answer


class PermanentError(Exception):
    """Not worth retrying: a 4xx answer, a URL that is not allowed."""

    def __init__(self, message: str, answer: Answer | None = None) -> None:
        super().__init__(message)
        self.answer = answer


def webhook_secret(salt: str) -> str:
    """The per-job HMAC secret: HMAC-SHA256 of the salt under the site's secret key (hex).

    Not stored anywhere: a database copy alone does not reveal it. Rotating ``DJANGO_SECRET_KEY``
    changes every job's secret (set the webhooks again and hand the new secrets to the runners).
    """
    return hmac.new(settings.SECRET_KEY.encode(), f"replay-webhook:{salt}".encode(), hashlib.sha256).hexdigest()


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header value for ``body`` sent at ``timestamp``: ``sha256=<hex>``."""
    digest = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def verify(secret: str, timestamp: int, body: bytes, signature: str) -> bool:
    """Whether ``signature`` is the signature of ``body`` at ``timestamp`` (constant-time; for runners and tests)."""
    return hmac.compare_digest(sign(secret, timestamp, body), signature)


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a replay webhook (scheme, host, https in production), or None. No DNS lookup."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "The webhook URL must be an http(s) URL with a host."
    if settings.PRODUCTION and parts.scheme != "https":
        return "The webhook URL must use https in production."
    if parts.username or parts.password:
        return "The webhook URL must not carry credentials."
    host = parts.hostname
    if host in settings.HANDOVER_REPLAY_WEBHOOK_ALLOWED_HOSTS:
        return None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if address_is_internal(address):
        return "The webhook URL points at a loopback, private or link-local address."
    return None


def resolve_target(url: str) -> str:
    """The address to connect to for ``url``: refused (PermanentError) when internal and not allow-listed.

    Raises TransientError when the name does not resolve (DNS may come back).
    """
    problem = url_problem(url)
    if problem:
        raise PermanentError(problem)
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        return host_resolve_checked(host, port, allowed_hosts=settings.HANDOVER_REPLAY_WEBHOOK_ALLOWED_HOSTS)
    except TargetRefused as exc:
        raise PermanentError("The webhook URL resolves to a loopback, private or link-local address.") from exc
    except TargetUnresolved as exc:
        raise TransientError(f"Cannot resolve the webhook host: {exc}") from exc


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection to an address checked beforehand (the Host header keeps the name)."""

    def __init__(self, host: str, address: str, **kwargs: object) -> None:
        super().__init__(host, **kwargs)  # type: ignore[arg-type]
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """An HTTPS connection to an address checked beforehand; the certificate is verified for the name."""

    def __init__(self, host: str, address: str, **kwargs: object) -> None:
        super().__init__(host, context=ssl.create_default_context(), **kwargs)  # type: ignore[arg-type]
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


def deliver(*, url: str, body: bytes, headers: dict[str, str]) -> Answer:
    """POST ``body`` to ``url`` with ``headers``. The network boundary (tests replace it).

    Returns the answer for a 2xx status. Raises PermanentError for a URL that is not allowed and for
    a 4xx answer other than 408/429; TransientError for 5xx, 408, 429, timeouts, connection and DNS
    errors. Redirects are not followed (a 3xx is permanent: fix the URL).
    """
    address = resolve_target(url)
    parts = urlsplit(url)
    host = parts.hostname or ""
    timeout = settings.HANDOVER_REPLAY_WEBHOOK_TIMEOUT_SECONDS
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        connection = _PinnedHTTPSConnection(host, address, port=parts.port or 443, timeout=timeout)
    else:
        connection = _PinnedHTTPConnection(host, address, port=parts.port or 80, timeout=timeout)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    try:
        connection.request("POST", path, body=body, headers={**headers, "Content-Type": "application/json"})
        response = connection.getresponse()
        answer = Answer(status=response.status, body=response.read(KEPT_RESPONSE_BYTES).decode("utf-8", "replace"))
    except (OSError, http.client.HTTPException) as exc:
        raise TransientError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        connection.close()
    if 200 <= answer.status < 300:
        return answer
    if answer.status >= 500 or answer.status in (408, 429):
        raise TransientError(f"The webhook answered {answer.status}.", answer)
    raise PermanentError(f"The webhook answered {answer.status}.", answer)

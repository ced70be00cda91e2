"""Login throttling with django-axes: its backend, and log lines that name no person.

django-axes counts failed logins per (username, address) in the cache and refuses the pair for a
cool-off period after too many (settings: ``AXES_*``). Two adaptations:

- ``LoginThrottleBackend`` lets logins without a request through unchecked (``manage.py shell``,
  the test client's ``login()``): there is no client to throttle, and axes would raise instead.
- ``client_str`` keeps usernames and addresses out of axes' log lines (rule 8 in docs/architecture.md): it logs
  a short hash that tells repeated attempts apart without saying whose they are.
- ``client_ip`` (``AXES_CLIENT_IP_CALLABLE``) knows about reverse proxies. Behind a load balancer
  every request comes from the balancer's address, so counting by ``REMOTE_ADDR`` would lump all
  users together. With ``HANDOVER_TRUSTED_PROXY_COUNT`` = N (> 0) the address is the N-th entry of
  ``X-Forwarded-For`` from the right: each trusted proxy appends the address it was reached from, so
  that entry was written by the outermost trusted proxy and everything left of it is the client's
  word (spoofable) and ignored. With N = 0 (the default) the header is ignored entirely. Axes would
  use django-ipware for this; the rule is short enough not to take another dependency for it.
"""

from __future__ import annotations

import hashlib
import ipaddress
from typing import Any

from axes.backends import AxesStandaloneBackend
from django.conf import settings
from django.http import HttpRequest


class LoginThrottleBackend(AxesStandaloneBackend):  # type: ignore[misc]  # django-axes ships no type hints
    """django-axes' backend, skipped when there is no request to throttle."""

    def authenticate(
        self, request: HttpRequest | None, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> None:
        if request is None:
            return None
        super().authenticate(request, username=username, password=password, **kwargs)
        return None


def client_str(username: str, ip_address: str, user_agent: str, path_info: str, request: HttpRequest) -> str:
    """What axes writes in its log lines: a hash of (username, address) and the path, nothing personal."""
    digest = hashlib.sha256(f"{username}\x00{ip_address}".encode()).hexdigest()[:12]
    return f"{{client: {digest}, path: {path_info!r}}}"


def client_ip(request: HttpRequest) -> str | None:
    """The client's address for login throttling, through ``HANDOVER_TRUSTED_PROXY_COUNT`` proxies.

    0 proxies: ``REMOTE_ADDR``. N proxies: the N-th ``X-Forwarded-For`` entry from the right; when the
    header has fewer entries (the request skipped a proxy), its left-most one; when it is missing or
    that entry is not an IP address, ``REMOTE_ADDR``.
    """
    remote: str | None = request.META.get("REMOTE_ADDR")
    count: int = settings.HANDOVER_TRUSTED_PROXY_COUNT
    if count <= 0:
        return remote
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    if not hops:
        return remote
    candidate = hops[-count] if len(hops) >= count else hops[0]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return remote

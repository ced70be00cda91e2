"""Login throttling with django-axes: its backend, and log lines that name no person.

django-axes counts failed logins per (username, address) in the cache and refuses the pair for a
cool-off period after too many (settings: ``AXES_*``). Two adaptations:

- ``LoginThrottleBackend`` lets logins without a request through unchecked (``manage.py shell``,
  the test client's ``login()``): there is no client to throttle, and axes would raise instead.
- ``client_str`` keeps usernames and addresses out of axes' log lines (DESIGN.md rule 8): it logs
  a short hash that tells repeated attempts apart without saying whose they are.
"""

from __future__ import annotations

import hashlib
from typing import Any

from axes.backends import AxesStandaloneBackend
from django.http import HttpRequest


class LoginThrottleBackend(AxesStandaloneBackend):
    """django-axes' backend, skipped when there is no request to throttle."""

    def authenticate(  # type: ignore[override]
        self, request: HttpRequest | None, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> None:
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def client_str(username: str, ip_address: str, user_agent: str, path_info: str, request: HttpRequest) -> str:
    """What axes writes in its log lines: a hash of (username, address) and the path, nothing personal."""
    digest = hashlib.sha256(f"{username}\x00{ip_address}".encode()).hexdigest()[:12]
    return f"{{client: {digest}, path: {path_info!r}}}"

"""Absolute links: from the request being answered, else from ``HANDOVER_BASE_URL``; never a constant.

A link in an API answer or a page is built from the request (its scheme and host, which Django has
checked against ``ALLOWED_HOSTS``; behind a proxy see docs/production.md "Settings"). A link built
outside a request (an e-mail, a chat message, a replay webhook's body) uses ``HANDOVER_BASE_URL``,
which production requires (``handover/settings.py`` refuses to start without it).
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def absolute_url(path: str, request: HttpRequest | None = None) -> str:
    """``path`` (starting with ``/``) made absolute from ``request`` when given, else from ``HANDOVER_BASE_URL``.

    Raises ValueError for a path that is already absolute or does not start with ``/``.
    """
    if not path.startswith("/") or path.startswith("//"):
        raise ValueError(f"expected a path starting with '/', got {path!r}")
    if request is not None:
        return request.build_absolute_uri(path)
    return str(settings.HANDOVER_BASE_URL).rstrip("/") + path


def base_url(request: HttpRequest | None = None) -> str:
    """The site's root without the trailing slash (``https://handover.example.com``), as ``absolute_url``."""
    return absolute_url("/", request).rstrip("/")

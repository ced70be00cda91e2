"""Lists that refresh themselves: htmx polls a list's fragment with a conditional GET.

A polling page wraps its list in an element with ``hx-get`` (the page's own address),
``hx-trigger="every 30s"`` and ``hx-swap="outerHTML"``; the view answers htmx requests with the
fragment alone. The fragment carries an ``ETag`` computed from a cheap fingerprint of the list's
state (counts and newest change times, one or two aggregate queries), the viewer and the viewer's
zone, so an unchanged list answers ``304 Not Modified`` without rendering; the browser's HTTP cache
revalidates on its own (``Cache-Control: private, no-cache``). Full pages are never answered 304:
they also carry the navigation counts and the messages of the previous request.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from django.shortcuts import render
from django.utils import timezone
from django.utils.cache import patch_vary_headers

# How often a polling list asks for its fragment (seconds); the templates read it as ``poll_seconds``.
POLL_SECONDS = 30


def list_etag(request: HttpRequest, *state: object) -> str:
    """A strong ETag (quoted) for a list fragment: the viewer, their zone, the address and ``state``.

    ``state``: the list's fingerprint (e.g. a count and the newest change time); two requests with the
    same viewer, zone, address and fingerprint render the same fragment (the "updated" time aside).
    """
    parts = (getattr(request.user, "pk", None), timezone.get_current_timezone_name(), request.get_full_path(), state)
    return '"' + hashlib.sha256(repr(parts).encode()).hexdigest()[:32] + '"'


def if_none_match(request: HttpRequest, etag: str) -> bool:
    """Whether the request's ``If-None-Match`` names ``etag`` (or ``*``); weak and strong forms alike."""
    header = request.headers.get("If-None-Match", "")
    tags = {tag.strip().removeprefix("W/") for tag in header.split(",") if tag.strip()}
    return "*" in tags or etag in tags


def poll_fragment(
    request: HttpRequest, state: Callable[[], object], render: Callable[[], HttpResponse]
) -> HttpResponse:
    """Answer an htmx poll: 304 when the list's fingerprint (``state()``) is unchanged, else ``render()``.

    Both answers carry the ETag, ``Cache-Control: private, no-cache`` (stored, revalidated every time,
    never shared) and ``Vary: HX-Request`` (the same address also serves the full page).
    """
    etag = list_etag(request, state())
    response: HttpResponse = HttpResponseNotModified() if if_none_match(request, etag) else render()
    response["ETag"] = etag
    response["Cache-Control"] = "private, no-cache"
    patch_vary_headers(response, ["HX-Request"])
    return response


def list_page(
    request: HttpRequest,
    *,
    template: str,
    fragment: str,
    context: Callable[[], dict[str, Any]],
    state: Callable[[], object],
) -> HttpResponse:
    """A polling list page: the full ``template``, or for htmx polls the ``fragment`` (or 304).

    ``context`` builds the template context (called only when something is rendered, so a 304 runs
    none of the list's queries); ``state`` computes the list's fingerprint for the ETag. Both pages get
    ``poll_seconds``.
    """

    def build() -> dict[str, Any]:
        return {**context(), "poll_seconds": POLL_SECONDS}

    if getattr(request, "htmx", False):
        return poll_fragment(request, state, lambda: render(request, fragment, build()))
    response = render(request, template, build())
    patch_vary_headers(response, ["HX-Request"])
    return response

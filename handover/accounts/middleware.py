"""Activate the viewer's own time zone for display (times are stored in UTC)."""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils import timezone


class ViewerTimeZoneMiddleware:
    """Use the signed-in person's preferred IANA zone (``UserPreference.time_zone``) for templates."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        zone_name = "UTC"
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            preference = getattr(user, "preference", None) if hasattr(user, "preference") else None
            if preference is not None and preference.time_zone:
                zone_name = preference.time_zone
        try:
            timezone.activate(zoneinfo.ZoneInfo(zone_name))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            timezone.activate(zoneinfo.ZoneInfo("UTC"))
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()

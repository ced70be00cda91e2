"""The unread count in the navigation: one indexed COUNT per page, for a signed-in person only."""

from __future__ import annotations

from django.http import HttpRequest

from handover.notifications.selectors import notification_unread_count


def unread_notifications(request: HttpRequest) -> dict[str, int]:
    """``{"unread_notifications": N}`` for a signed-in person, ``{}`` otherwise."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"unread_notifications": notification_unread_count(user=user)}

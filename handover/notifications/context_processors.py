"""The counts in the navigation: needs attention, my approvals, unread notifications.

One query for all three (three scalar subqueries in one SELECT), for a signed-in person only, and
at most once per request (kept on the request, so a page that renders the navigation twice or asks
for the counts again pays nothing more).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import F, Func, IntegerField, QuerySet, Subquery
from django.http import HttpRequest

from approvals.replays.selectors import replay_request_queue
from handover.handovers.attention import attention_failed_runs, attention_unowned_handovers
from handover.notifications.models import Notification

_CACHE_ATTRIBUTE = "_navigation_counts"


def _count(rows: QuerySet[Any]) -> Subquery:
    """``(SELECT COUNT(id) FROM … WHERE …)`` of ``rows``, as a scalar subquery."""
    counted = rows.order_by().annotate(n=Func(F("pk"), function="COUNT", output_field=IntegerField())).values("n")
    return Subquery(counted, output_field=IntegerField())


def navigation_counts(request: HttpRequest) -> dict[str, int]:
    """``{"attention_count", "approvals_waiting", "unread_notifications"}`` for a signed-in person, else ``{}``.

    ``attention_count``: failed runs with no handover plus handovers with no escalation owner (the
    first two sections of "Needs attention", what waits for someone to pick it up);
    ``approvals_waiting``: replay requests waiting for this person's decision (``replay_request_queue``);
    ``unread_notifications``: unread in-app notifications. Queries: one (the role lookups are subqueries).
    """
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    cached = getattr(request, _CACHE_ATTRIBUTE, None)
    if cached is None:
        unread = Notification.objects.filter(recipient_id=user.pk, in_app=True, read_at__isnull=True)
        row: Mapping[str, Any] = (
            get_user_model()
            .objects.filter(pk=user.pk)
            .values(
                failed=_count(attention_failed_runs(user=user)),
                unowned=_count(attention_unowned_handovers(user=user)),
                approvals=_count(replay_request_queue(user=user)),
                unread=_count(unread),
            )
            .first()
            or {}
        )
        cached = {
            "attention_count": (row.get("failed") or 0) + (row.get("unowned") or 0),
            "approvals_waiting": row.get("approvals") or 0,
            "unread_notifications": row.get("unread") or 0,
        }
        setattr(request, _CACHE_ATTRIBUTE, cached)
    return cached

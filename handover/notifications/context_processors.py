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
from django.db.models.expressions import RawSQL
from django.http import HttpRequest

from approvals.replays.selectors import replay_request_queue
from handover.core.pagination import count_cap
from handover.handovers.attention import attention_failed_runs, attention_unowned_handovers
from handover.notifications.models import Notification

_CACHE_ATTRIBUTE = "_navigation_counts"


def _count(rows: QuerySet[Any]) -> Subquery:
    """``(SELECT COUNT(id) FROM … WHERE …)`` of ``rows``, as a scalar subquery."""
    counted = rows.order_by().annotate(n=Func(F("pk"), function="COUNT", output_field=IntegerField())).values("n")
    return Subquery(counted, output_field=IntegerField())


def _count_at_most(rows: QuerySet[Any], limit: int) -> RawSQL:
    """``(SELECT COUNT(*) FROM (SELECT id FROM … LIMIT limit))``: ``min(rows, limit)`` as a scalar
    subquery that stops after ``limit`` of ``rows`` (parameters stay bound)."""
    sql, params = rows.order_by().values("pk")[:limit].query.sql_with_params()
    return RawSQL(f"SELECT COUNT(*) FROM ({sql}) AS capped_rows", params, output_field=IntegerField())


def navigation_counts(request: HttpRequest) -> dict[str, int | str]:
    """``{"attention_count", "attention_label", "approvals_waiting", "unread_notifications"}`` for a signed-in
    person, else ``{}``.

    ``attention_count``: failed runs with no handover plus handovers with no escalation owner (the
    first two sections of "Needs attention", what waits for someone to pick it up); the failed runs
    are counted up to the list cap and one more (``settings.LIST_COUNT_CAP``: years of unhandled
    failures must not make every page count them all), and ``attention_label`` is what the badge
    shows: the number, or "10,000+" past the cap;
    ``approvals_waiting``: replay requests waiting for this person's decision (``replay_request_queue``);
    ``unread_notifications``: unread in-app notifications. Queries: one (the role lookups are subqueries).
    """
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    cached: dict[str, int | str] | None = getattr(request, _CACHE_ATTRIBUTE, None)
    if cached is None:
        cap = count_cap()
        unread = Notification.objects.filter(recipient_id=user.pk, in_app=True, read_at__isnull=True)
        row: Mapping[str, Any] = (
            get_user_model()
            .objects.filter(pk=user.pk)
            .values(
                failed=_count_at_most(attention_failed_runs(user=user), cap + 1),
                unowned=_count(attention_unowned_handovers(user=user)),
                approvals=_count(replay_request_queue(user=user)),
                unread=_count(unread),
            )
            .first()
            or {}
        )
        failed, unowned = row.get("failed") or 0, row.get("unowned") or 0
        cached = {
            "attention_count": failed + unowned,
            "attention_label": f"{cap:,}+" if failed > cap else str(failed + unowned),
            "approvals_waiting": row.get("approvals") or 0,
            "unread_notifications": row.get("unread") or 0,
        }
        setattr(request, _CACHE_ATTRIBUTE, cached)
    return cached

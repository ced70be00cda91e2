"""Reads of notifications: a person's own only (nobody reads another's), the unread count, teams."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser
from django.db.models import Prefetch, QuerySet

from handover.core.people import Person
from handover.notifications.models import AppriseTarget, Notification, NotificationDelivery, Team


def notification_unread_count(*, user: Person | AnonymousUser) -> int:
    """How many of the person's in-app notifications are unread."""
    return Notification.objects.filter(recipient_id=user.pk, in_app=True, read_at__isnull=True).count()


def notification_list(*, user: Person | AnonymousUser, unread: bool | None = None) -> QuerySet[Notification]:
    """The person's in-app notifications, newest first, with their deliveries (how each channel did)."""
    rows = Notification.objects.filter(recipient_id=user.pk, in_app=True)
    if unread is True:
        rows = rows.filter(read_at__isnull=True)
    elif unread is False:
        rows = rows.filter(read_at__isnull=False)
    return rows.prefetch_related(Prefetch("deliveries", queryset=NotificationDelivery.objects.order_by("pk"))).order_by(
        "-created_at", "-pk"
    )


def apprise_target_list(*, user: Person | AnonymousUser) -> QuerySet[AppriseTarget]:
    """The person's own chat/push targets."""
    return AppriseTarget.objects.filter(user_id=int(user.pk or 0)).order_by("pk")


def team_list_of(*, user: Person | AnonymousUser) -> QuerySet[Team]:
    """The teams the person belongs to, with their targets (masked)."""
    return Team.objects.filter(members__pk=int(user.pk or 0)).prefetch_related("apprise_targets").order_by("name")


def notification_rows_about(*, dedup_prefix: str) -> list[Notification]:
    """Everyone's notifications whose subject key starts with ``dedup_prefix`` (e.g. ``handover:<id>:``),
    with recipient and deliveries: what a page shows as "who was told how". Queries: two."""
    return list(
        Notification.objects.filter(dedup_key__startswith=dedup_prefix)
        .select_related("recipient")
        .prefetch_related(Prefetch("deliveries", queryset=NotificationDelivery.objects.order_by("pk")))
        .order_by("created_at", "pk")
    )

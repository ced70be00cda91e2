"""Reads of notifications: a person's own only (nobody reads another's), the unread count, teams."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser
from django.db.models import Count, Max, Prefetch, Q, QuerySet, Sum

from handover.core.people import Person
from handover.notifications.models import AppriseTarget, Notification, NotificationDelivery, Team


def notification_unread_count(*, user: Person | AnonymousUser) -> int:
    """How many of the person's in-app notifications are unread."""
    return Notification.objects.filter(recipient_id=user.pk, in_app=True, read_at__isnull=True).count()


def notification_list(
    *,
    user: Person | AnonymousUser,
    unread: bool | None = None,
    event: str | None = None,
    job_key: str | None = None,
    tenant_slug: str | None = None,
) -> QuerySet[Notification]:
    """The person's in-app notifications, newest first, with their deliveries (how each channel did).

    Filters: ``unread`` (True: unread only, False: read only), ``event`` (a ``Notification.Event``
    value), ``job_key`` and ``tenant_slug`` (exact). Queries: two (rows, deliveries).
    """
    rows = Notification.objects.filter(recipient_id=user.pk, in_app=True)
    if unread is True:
        rows = rows.filter(read_at__isnull=True)
    elif unread is False:
        rows = rows.filter(read_at__isnull=False)
    if event:
        rows = rows.filter(event=event)
    if job_key:
        rows = rows.filter(job_key=job_key)
    if tenant_slug:
        rows = rows.filter(tenant_slug=tenant_slug)
    return rows.prefetch_related(Prefetch("deliveries", queryset=NotificationDelivery.objects.order_by("pk"))).order_by(
        "-created_at", "-pk"
    )


def notification_filter_choices(*, user: Person | AnonymousUser) -> dict[str, list[str]]:
    """What the inbox's filters offer: the events, job keys and tenant slugs of the person's notifications.

    ``{"events": [...], "jobs": [...], "tenants": [...]}``, each sorted, empty values left out. Queries: one.
    """
    rows = (
        Notification.objects.filter(recipient_id=user.pk, in_app=True)
        .order_by()
        .values_list("event", "job_key", "tenant_slug")
        .distinct()
    )
    events, jobs, tenants = set(), set(), set()
    for event, job_key, tenant_slug in rows:
        events.add(event)
        jobs.add(job_key)
        tenants.add(tenant_slug)
    return {"events": sorted(events), "jobs": sorted(jobs - {""}), "tenants": sorted(tenants - {""})}


def notification_list_state(*, user: Person | AnonymousUser) -> tuple[object, ...]:
    """A fingerprint of the person's inbox for its ETag: count, unread count, newest, newest read, newest sent.

    Any new notification, any marking read and any delivery sent or failed changes it. Queries: one.
    """
    totals = Notification.objects.filter(recipient_id=user.pk, in_app=True).aggregate(
        count=Count("pk", distinct=True),  # distinct: the deliveries' join repeats each notification
        unread=Count("pk", distinct=True, filter=Q(read_at__isnull=True)),
        newest=Max("created_at"),
        read=Max("read_at"),
        sent=Max("deliveries__sent_at"),
        attempts=Sum("deliveries__attempt_count"),
    )
    return tuple(totals.values())


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

"""Refused ingestion requests: capped hourly counters per (integration or source, reason, network).

A refused request is not authenticated, so nothing of it is stored but a count (docs/architecture.md,
"Delivery"): no key, a wrong key, a bad signature, a rate limit, a GET to an integration that did not
enable it. Counting is one upsert per refusal; the number of networks counted per source and hour is
capped at ``REFUSED_NETWORKS_PER_HOUR`` (further networks share the row ``*``), and rows older than
``REFUSED_KEEP_DAYS`` are pruned by the beat tick. A sender refused for an hour or more shows on the
admins' *needs attention* page (``refused_senders_attention``).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Max, Min, Q, QuerySet, Sum
from django.http import HttpRequest
from django.utils import timezone

from runs.alerts.models import RefusedRequestCount
from runs.catalog.models import Integration

REFUSED_NETWORKS_PER_HOUR = 50
REFUSED_KEEP_DAYS = 30
OVER_CAP_NETWORK = "*"
# A sender counts as "refused for an hour" when its refusals span at least this long and the latest
# is recent: an Alertmanager with a wrong key retries every group_interval (5 min by default).
REFUSED_ATTENTION_SPAN = timedelta(hours=1)
REFUSED_ATTENTION_RECENT = timedelta(minutes=20)


def client_network(request: HttpRequest) -> str:
    """The client's network as counted: its /24 (IPv4) or /64 (IPv6), e.g. ``203.0.113.0/24``.

    The client address is ``REMOTE_ADDR``, or behind ``HANDOVER_TRUSTED_PROXY_COUNT`` proxies the
    N-th ``X-Forwarded-For`` entry from the right (as the login throttle reads it). ``unknown``
    when no address can be read.
    """
    remote = request.META.get("REMOTE_ADDR") or ""
    count = int(getattr(settings, "HANDOVER_TRUSTED_PROXY_COUNT", 0))
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    candidate = (hops[-count] if len(hops) >= count else hops[0]) if count > 0 and hops else remote
    try:
        address = ipaddress.ip_address(candidate)
    except ValueError:
        try:
            address = ipaddress.ip_address(remote)
        except ValueError:
            return "unknown"
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    prefix = 24 if address.version == 4 else 64
    return str(ipaddress.ip_network(f"{address}/{prefix}", strict=False))


def refused_request_count(
    *,
    source: str,
    reason: str,
    network: str,
    integration: Integration | None = None,
    at: datetime | None = None,
) -> RefusedRequestCount:
    """Count one refused request in its (integration or source, reason, network, UTC hour) row.

    ``reason`` is a ``RefusedRequestCount.Reason``; ``source`` the address's source slug (cut to 50).
    A network beyond the first ``REFUSED_NETWORKS_PER_HOUR`` of the source's hour is counted as
    ``*``. Concurrent refusals of one row add up (an UPDATE with ``F``; a lost race to create the row
    retries the update). Returns the row as counted. Side effects: that row only.
    """
    at = at or timezone.now()
    hour = at.replace(minute=0, second=0, microsecond=0)
    source = source[:50]
    scope = Q(integration=integration) if integration is not None else Q(integration__isnull=True, source=source)
    rows = RefusedRequestCount.objects.filter(scope, reason=reason, hour=hour)
    if not rows.filter(network=network).exists():
        seen = RefusedRequestCount.objects.filter(source=source, hour=hour).values("network").distinct().count()
        if seen >= REFUSED_NETWORKS_PER_HOUR:
            network = OVER_CAP_NETWORK
    for _ in range(2):
        if rows.filter(network=network).update(count=F("count") + 1, last_at=at):
            return rows.get(network=network)
        try:
            with transaction.atomic():
                return RefusedRequestCount.objects.create(
                    source=source,
                    integration=integration,
                    reason=reason,
                    network=network,
                    hour=hour,
                    count=1,
                    first_at=at,
                    last_at=at,
                )
        except IntegrityError:  # a concurrent refusal created the row first: add to it
            continue
    return rows.get(network=network)


def refused_request_prune(*, now: datetime | None = None) -> int:
    """Delete counter rows older than ``REFUSED_KEEP_DAYS``; returns how many. Called by the beat tick."""
    cutoff = (now or timezone.now()) - timedelta(days=REFUSED_KEEP_DAYS)
    deleted, _ = RefusedRequestCount.objects.filter(hour__lt=cutoff).delete()
    return deleted


@dataclass(frozen=True)
class RefusedSummaryRow:
    """Refusals of one reason and network over a period: ``count``, first and last time (UTC)."""

    reason: str
    reason_label: str
    network: str
    count: int
    first_at: datetime
    last_at: datetime


def refused_request_summary(
    *, integration: Integration | None = None, source: str | None = None, days: int = REFUSED_KEEP_DAYS
) -> list[RefusedSummaryRow]:
    """Refusals of the last ``days`` days by (reason, network), most recent first.

    For an ``integration``: the rows that named it. For a ``source``: every row of the source, with or
    without an integration (posts to its address whose key was unknown included). One query.
    """
    rows: QuerySet[RefusedRequestCount] = RefusedRequestCount.objects.filter(
        hour__gte=timezone.now() - timedelta(days=days)
    )
    if integration is not None:
        rows = rows.filter(integration=integration)
    if source is not None:
        rows = rows.filter(source=source)
    labels = dict(RefusedRequestCount.Reason.choices)
    grouped = (
        rows.values("reason", "network")
        .annotate(total=Sum("count"), first=Min("first_at"), last=Max("last_at"))
        .order_by("-last", "reason", "network")
    )
    return [
        RefusedSummaryRow(
            reason=row["reason"],
            reason_label=labels.get(row["reason"], row["reason"]),
            network=row["network"],
            count=row["total"],
            first_at=row["first"],
            last_at=row["last"],
        )
        for row in grouped
    ]


def refused_request_rows_by_source(
    *, source: str | None = None, days: int = REFUSED_KEEP_DAYS
) -> dict[str, list[RefusedSummaryRow]]:
    """Refusals of the last ``days`` days per source address, each by (reason, network); one source or all.

    Source slugs sorted; within a source as ``refused_request_summary``. One query.
    """
    rows = RefusedRequestCount.objects.filter(hour__gte=timezone.now() - timedelta(days=days))
    if source is not None:
        rows = rows.filter(source=source)
    labels = dict(RefusedRequestCount.Reason.choices)
    grouped = (
        rows.values("source", "reason", "network")
        .annotate(total=Sum("count"), first=Min("first_at"), last=Max("last_at"))
        .order_by("source", "-last", "reason", "network")
    )
    result: dict[str, list[RefusedSummaryRow]] = {}
    for row in grouped:
        result.setdefault(row["source"], []).append(
            RefusedSummaryRow(
                reason=row["reason"],
                reason_label=labels.get(row["reason"], row["reason"]),
                network=row["network"],
                count=row["total"],
                first_at=row["first"],
                last_at=row["last"],
            )
        )
    return result


@dataclass(frozen=True)
class RefusedSourceRow:
    """Refusals at one source's address over a period: total, of which no integration was recognised."""

    source: str
    count: int
    keyless_count: int
    last_at: datetime


def refused_request_summary_by_source(*, days: int = REFUSED_KEEP_DAYS) -> list[RefusedSourceRow]:
    """Refusals of the last ``days`` days per source (every row of the source's address). One query."""
    grouped = (
        RefusedRequestCount.objects.filter(hour__gte=timezone.now() - timedelta(days=days))
        .values("source")
        .annotate(
            total=Sum("count"),
            keyless=Sum("count", filter=Q(integration__isnull=True)),
            last=Max("last_at"),
        )
        .order_by("source")
    )
    return [
        RefusedSourceRow(source=r["source"], count=r["total"], keyless_count=r["keyless"] or 0, last_at=r["last"])
        for r in grouped
    ]


@dataclass(frozen=True)
class RefusedSender:
    """A sender refused for an hour or more: where it posts, why it is refused, since when, how often."""

    source: str
    integration_name: str
    integration_public_id: str
    reasons: list[str]
    count: int
    first_at: datetime
    last_at: datetime


def refused_senders_attention(*, now: datetime) -> list[RefusedSender]:
    """Senders (an integration, else a source address) whose refusals span at least an hour and go on.

    Looks at the last two hours: refusals whose first and last times are at least
    ``REFUSED_ATTENTION_SPAN`` apart, the last within ``REFUSED_ATTENTION_RECENT`` of ``now``. Oldest
    first. Two queries (the totals, the reasons).
    """
    # rows are per hour: from the start of the hour two hours back, so a streak that began 70 minutes
    # ago (in the hour before last) is seen whole
    since = (now - REFUSED_ATTENTION_SPAN - timedelta(hours=1)).replace(minute=0, second=0, microsecond=0)
    recent = RefusedRequestCount.objects.filter(hour__gte=since)
    grouped = (
        recent.values("source", "integration__name", "integration__public_id")
        .annotate(total=Sum("count"), first=Min("first_at"), last=Max("last_at"))
        .order_by("first")
    )
    reasons: dict[tuple[str, str], set[str]] = {}
    for source, name, reason in recent.values_list("source", "integration__name", "reason"):
        reasons.setdefault((source, name or ""), set()).add(reason)
    senders = []
    for row in grouped:
        if row["last"] - row["first"] < REFUSED_ATTENTION_SPAN or now - row["last"] > REFUSED_ATTENTION_RECENT:
            continue
        name = row["integration__name"] or ""
        senders.append(
            RefusedSender(
                source=row["source"],
                integration_name=name,
                integration_public_id=str(row["integration__public_id"] or ""),
                reasons=sorted(reasons.get((row["source"], name), set())),
                count=row["total"],
                first_at=row["first"],
                last_at=row["last"],
            )
        )
    return senders

"""The alert inbox and integrations: alerts a person may see, deliveries (recent, rejected, failed),
and what an integration's alerts carry (completeness)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import overload
from uuid import UUID

from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from handover.core.pagination import CountedApart, count_at_most, count_cap, counts_at_most
from runs.alerts.models import Alert, Delivery
from runs.attempts.models import Run
from runs.catalog.models import Integration
from runs.permissions import User, is_admin, is_staff, run_visibility_filter_listed, tenant_list_visible


def alert_visibility(*, user: User) -> tuple[Q, Q] | None:
    """Who sees which alerts, as two disjoint filters on alerts: ``(unlinked, linked)``; None for
    admins, who see every alert.

    ``unlinked``: alerts without a run naming a visible tenant (every one for staff, who register jobs
    and reprocess); ``linked``: alerts whose run is visible (``run_visibility_filter_listed``, on the
    join to the run). The visible tenants and owned jobs are looked up first and written as lists
    (queries: three), so each branch is a plain index range to PostgreSQL. Counting the two branches
    apart lets each use its own index: ``OR``-ed, a count of the linked alerts hashed every visible
    run of the history before its first row."""
    if is_admin(user):
        return None
    return _unlinked_visible(user), run_visibility_filter_listed(user=user, prefix="run__")


def _unlinked_visible(user: User) -> Q:
    """Alerts without a run that ``user`` (not an admin) sees: every one for staff, else those naming
    one of their tenants (the slugs looked up first: one query, none for staff)."""
    if is_staff(user):
        return Q(run__isnull=True)
    slugs = list(tenant_list_visible(user=user).values_list("slug", flat=True))
    return Q(run__isnull=True, tenant_slug__in=slugs)


def alert_list(*, user: User, outcome: str | None = None, source: str | None = None) -> QuerySet[Alert]:
    """Alerts visible to ``user`` (:func:`alert_visibility`): those linked to a visible run, plus
    unlinked ones naming a visible tenant; admins (staff) see every unlinked alert.

    A linked alert's run is checked by ``EXISTS`` on the run's primary key, not by joining the runs:
    under the ``OR`` with the unlinked branch a join made PostgreSQL hash every run of the history
    (or merge the whole alert-run index) before the first counted row (0.7-4 s a count at 1M
    alerts). Queries: the visibility's lookups (none for admins)."""
    alerts = Alert.objects.all()
    if not is_admin(user):
        visible_run = Exists(Run.objects.filter(run_visibility_filter_listed(user=user), pk=OuterRef("run_id")))
        alerts = alerts.filter(_unlinked_visible(user) | visible_run)
    return (
        _filtered(alerts, outcome=outcome, source=source)
        .select_related("delivery", "integration", "duplicate_of", "run__job", "run__tenant", "attempt")
        .order_by("-created_at", "-id")
    )


def _filtered(alerts: QuerySet[Alert], *, outcome: str | None, source: str | None) -> QuerySet[Alert]:
    """``alerts`` narrowed to ``outcome`` and ``source`` (each when given)."""
    if outcome:
        alerts = alerts.filter(outcome=outcome)
    if source:
        alerts = alerts.filter(source=source)
    return alerts


# What the API shows of an alert (``AlertSerializer``): its own columns and the public ids of its
# delivery, original, run and attempt. Not the delivery's body (up to the post size limit each), nor
# the integration, job and tenant: every extra join costs planning time on each page (8 tables
# joined: ~15 ms of planning, more than the page itself).
_API_JOINED = ("delivery", "duplicate_of", "run", "attempt")
_API_SHOWN = (
    *(field.name for field in Alert._meta.concrete_fields),
    *(f"{name}__public_id" for name in _API_JOINED),
)


def alert_list_counted(*, user: User, outcome: str | None = None, source: str | None = None) -> CountedApart[Alert]:
    """:func:`alert_list`'s rows in its order (the same visibility and filters, newest first), paged
    by one query and counted per visibility branch: what ``GET /api/v1/alerts/`` pages.

    ``rows`` tests each alert's visibility on the run it joins anyway (left-joined for its public
    id): ``alert_visibility``'s two branches ``OR``-ed, so a page walks the ``created_at`` index newest
    first and stops after its rows (no ``EXISTS``, which PostgreSQL hashed over every visible run of
    the history before the first row); it joins only what ``AlertSerializer`` reads (``_API_SHOWN``).
    ``parts`` are the two branches apart, counted as the inbox counts them (the unlinked ones by
    ``runs_alert_unlinked_idx``, the linked ones joined to their runs): the unlinked first, the
    linked up to what the cap leaves and not at all once it is reached (``?outcome=unmatched``: no
    scan of every unmatched alert of the history to find none with a run). An admin's one part is
    every alert. Queries: the visibility's lookups (three, none for admins); then one or two capped
    counts and one per page.
    """
    branches = alert_visibility(user=user)
    visible = Alert.objects.all() if branches is None else Alert.objects.filter(branches[0] | branches[1])
    rows = (
        _filtered(visible, outcome=outcome, source=source)
        .select_related(*_API_JOINED)
        .only(*_API_SHOWN)
        .order_by("-created_at", "-id")
    )
    if branches is None:
        return CountedApart(rows=rows, parts=[rows])
    parts = [_filtered(Alert.objects.filter(branch), outcome=outcome, source=source) for branch in branches]
    return CountedApart(rows=rows, parts=parts)


# The inbox lists original alerts in three parts, each newest first: the ones that need a person
# (unmatched), the ones still being applied (pending), then everything else.
INBOX_FIRST = (Alert.Outcome.UNMATCHED, Alert.Outcome.PENDING)


@dataclass
class InboxPart:
    """One part of the inbox: its queryset and how many rows it holds, counted up to ``counted_to``.

    ``size`` is exact when ``counted_to`` is None or ``size < counted_to``; otherwise the part holds at
    least ``size`` rows (it was counted no further).
    """

    queryset: QuerySet[Alert]
    size: int
    counted_to: int | None = None

    @property
    def exact(self) -> bool:
        return self.counted_to is None or self.size < self.counted_to


@dataclass
class InboxAlerts:
    """The inbox's original alerts as one list a ``Paginator`` can page: unmatched, pending, the rest.

    Each part is its own queryset in the order an index gives (``runs_alert_inbox_cover_idx`` on
    (outcome, created_at) for the first two, the ``created_at`` index for the rest), with the number
    of rows it holds from :func:`alert_inbox`'s capped count. Slicing runs one query per part the
    slice touches (one, or two at a boundary), each with its own LIMIT/OFFSET, so a page never sorts
    every alert; a part counted only up to the cap is counted further only when a slice reaches past
    it. ``count_at_most(limit)`` is what ``CappedPaginator`` asks; ``count()`` counts exactly.
    """

    parts: list[InboxPart]
    ordered = True  # the paginator's check: the parts are ordered

    def count_at_most(self, limit: int) -> int:
        """Original alerts in the inbox, counted no further than ``limit`` (at most one query)."""
        if any(not part.exact and part.counted_to is not None and part.counted_to < limit for part in self.parts):
            sizes = counts_at_most({str(n): part.queryset for n, part in enumerate(self.parts)}, limit)
            for n, part in enumerate(self.parts):
                part.size, part.counted_to = sizes[str(n)], limit
        return min(sum(part.size for part in self.parts), limit)

    def count(self) -> int:
        """Every original alert in the inbox (exact: counts each part not yet counted exactly)."""
        for part in self.parts:
            if not part.exact:
                part.size, part.counted_to = part.queryset.count(), None
        return sum(part.size for part in self.parts)

    def __len__(self) -> int:
        return self.count()

    @overload
    def __getitem__(self, key: int) -> Alert: ...

    @overload
    def __getitem__(self, key: slice) -> list[Alert]: ...

    def __getitem__(self, key: int | slice) -> Alert | list[Alert]:
        """A plain slice (one query per part it touches), or one alert by its position."""
        if isinstance(key, int):
            found = self[key : key + 1] if key >= 0 else []
            if not found:
                raise IndexError(key)
            return found[0]
        if key.step not in (None, 1):
            raise TypeError("InboxAlerts supports plain slices only (as Paginator takes them)")
        start, stop = key.start or 0, key.stop
        if stop is None or start < 0 or stop < 0:
            start, stop, _ = key.indices(self.count())
        rows: list[Alert] = []
        offset = 0
        for part in self.parts:
            if offset >= stop:
                break
            need = stop - offset  # rows of this part the slice could reach
            if not part.exact and need > part.size:
                part.size, part.counted_to = count_at_most(part.queryset, need), need
            low, high = max(start - offset, 0), min(need, part.size)
            if low < high:
                rows.extend(part.queryset[low:high])
            offset += part.size
        return rows

    def __iter__(self) -> Iterator[Alert]:
        return iter(self[:])


def alert_inbox(*, user: User) -> tuple[InboxAlerts, dict[str, int]]:
    """The inbox: original alerts visible to ``user``, unmatched first, then pending, then the rest,
    each newest first; plus how many visible alerts (duplicates included) have each outcome.

    Returns ``(alerts, counts)``: ``alerts`` pages like a queryset (``count_at_most()``, ``count()``
    and slices, see :class:`InboxAlerts`), ``counts`` maps each outcome present to its number of
    alerts, counted up to ``LIST_COUNT_CAP + 1`` (the page shows "10,000+" past the cap).
    Queries: the visibility's lookups (:func:`alert_visibility`, none for admins); one of bounded
    counts (per outcome: all alerts; per part: the originals; for each visibility branch apart), each
    ``COUNT(*)`` over a ``LIMIT cap + 1`` subquery an index serves; then one per part a page touches --
    usually one, with the delivery (not its body) and the run joined: what
    ``runs/alerts/_inbox_rows.html`` shows. Nothing reads every visible alert, however long the history.
    """
    alerts = alert_list(user=user)
    limit = count_cap() + 1
    # The rows show the alert, its delivery's notes and a link to its run: join just those (every
    # extra join costs planning time on each read, more than running the bounded page query), and
    # leave out the raw body (up to the post size limit each).
    shown = (
        alerts.filter(duplicate_of__isnull=True)
        .select_related(None)
        .select_related("delivery", "run")
        .defer("delivery__body")
    )
    querysets = [shown.filter(outcome=outcome) for outcome in INBOX_FIRST]
    querysets.append(shown.exclude(outcome__in=INBOX_FIRST))
    # What is counted: every alert per outcome, the originals per part; each visibility branch apart
    # (disjoint: with and without a run), then added up to the cap.
    original = Q(duplicate_of__isnull=True)
    counted_rows = {
        **{f"outcome:{outcome}": Q(outcome=outcome) for outcome in Alert.Outcome.values},
        **{f"part:{n}": original & Q(outcome=outcome) for n, outcome in enumerate(INBOX_FIRST)},
        f"part:{len(INBOX_FIRST)}": original & ~Q(outcome__in=INBOX_FIRST),
    }
    branches = alert_visibility(user=user) or (Q(),)
    by_branch = counts_at_most(
        {
            f"{name}|{n}": Alert.objects.filter(branch, rows)
            for name, rows in counted_rows.items()
            for n, branch in enumerate(branches)
        },
        limit,
    )
    counted = {name: min(sum(by_branch[f"{name}|{n}"] for n in range(len(branches))), limit) for name in counted_rows}
    counts = {
        outcome: counted[f"outcome:{outcome}"] for outcome in Alert.Outcome.values if counted[f"outcome:{outcome}"]
    }
    parts = [InboxPart(queryset, counted[f"part:{n}"], limit) for n, queryset in enumerate(querysets)]
    return InboxAlerts(parts=parts), counts


def alert_get(*, user: User, public_id: UUID | str) -> Alert | None:
    """One alert visible to ``user`` (None when missing or not visible)."""
    return alert_list(user=user).filter(public_id=public_id).first()


def integration_list(*, user: User) -> QuerySet[Integration]:
    """Integrations with key and delivery counts; admins (staff) only, others see none."""
    if not (is_staff(user)):
        return Integration.objects.none()
    return Integration.objects.annotate(
        key_count=Count("keys", filter=Q(keys__revoked_at__isnull=True), distinct=True),
        delivery_count=Count("deliveries", distinct=True),
    ).order_by("name")


def delivery_list_recent(*, integration: Integration, limit: int = 25) -> QuerySet[Delivery]:
    """The newest deliveries of one integration, with their alert outcome counts."""
    return (
        Delivery.objects.filter(integration=integration)
        .select_related("key")
        .annotate(
            alert_count=Count("alerts"),
            # the editor's delivery picker shows what became of each post
            unmatched_count=Count("alerts", filter=Q(alerts__outcome="unmatched")),
        )
        .order_by("-received_at", "-id")[:limit]
    )


# What support needs from an alert: the share of an integration's alerts that carried each.
# Alert.fields holds only the values a parser found (empty ones are left out), so "carried" is a key test.
COMPLETENESS_FIELDS: dict[str, tuple[str, Q]] = {
    "execution_id": ("an execution id", ~Q(execution_id="")),
    "window": ("a window", Q(fields__has_key="window_start") & Q(fields__has_key="window_end")),
    "scheduled_for": ("a scheduled time", Q(fields__has_key="scheduled_for")),
    "correlation_ref": ("a correlation reference", Q(fields__has_key="correlation_ref")),
    "log_url": ("a log link", Q(fields__has_key="log_url")),
}


@dataclass
class CompletenessCell:
    """How many alerts of a row carried one field, and the share in whole percent."""

    field: str
    label: str
    count: int
    percent: int


@dataclass
class CompletenessRow:
    """One job's alerts of an integration (``job_key`` "" for alerts that named no job)."""

    job_key: str
    alert_count: int
    cells: list[CompletenessCell]


@dataclass
class AlertCompleteness:
    """Completeness of an integration's alerts: per job, in total, and the fields most often missing."""

    jobs: list[CompletenessRow]
    total: CompletenessRow
    most_missing: list[CompletenessCell]  # missing count and share, most missing first; only fields ever missing


def _completeness_row(job_key: str, alert_count: int, counts: dict[str, int]) -> CompletenessRow:
    cells = [
        CompletenessCell(
            field=name,
            label=label,
            count=counts[name],
            percent=round(100 * counts[name] / alert_count) if alert_count else 0,
        )
        for name, (label, _) in COMPLETENESS_FIELDS.items()
    ]
    return CompletenessRow(job_key=job_key, alert_count=alert_count, cells=cells)


def alert_completeness(*, integration: Integration) -> AlertCompleteness:
    """The share of an integration's attempt alerts that carried each field support needs, per job.

    Counts original alerts (duplicates and rejected items left out) that report an attempt, grouped
    by the job key they named, with one aggregate query over the ``execution_id`` column and the keys
    of ``Alert.fields``: execution id, window (both ends), scheduled time, correlation reference, log
    link. ``most_missing`` lists the fields by how many alerts lacked them, most first.
    """
    counts = {f"{name}_count": Count("id", filter=condition) for name, (_, condition) in COMPLETENESS_FIELDS.items()}
    rows = (
        Alert.objects.filter(integration=integration, duplicate_of__isnull=True, kind=Alert.Kind.ATTEMPT)
        .exclude(outcome=Alert.Outcome.REJECTED)
        .values("job_key")
        .annotate(alert_count=Count("id"), **counts)
        .order_by("job_key")
    )
    jobs = []
    totals = dict.fromkeys(COMPLETENESS_FIELDS, 0)
    total_count = 0
    for row in rows:
        found = {name: row[f"{name}_count"] for name in COMPLETENESS_FIELDS}
        jobs.append(_completeness_row(row["job_key"], row["alert_count"], found))
        total_count += row["alert_count"]
        for name, value in found.items():
            totals[name] += value
    total = _completeness_row("", total_count, totals)
    missing = [
        CompletenessCell(
            field=cell.field,
            label=cell.label,
            count=total_count - cell.count,
            percent=round(100 * (total_count - cell.count) / total_count),
        )
        for cell in total.cells
        if cell.count < total_count
    ]
    missing.sort(key=lambda c: (-c.count, list(COMPLETENESS_FIELDS).index(c.field)))
    return AlertCompleteness(jobs=jobs, total=total, most_missing=missing)


def alert_count_unmatched(*, integration: Integration) -> int:
    """How many original alerts of this integration are ``unmatched`` (what "reprocess" would retry)."""
    return Alert.objects.filter(
        integration=integration, outcome=Alert.Outcome.UNMATCHED, duplicate_of__isnull=True
    ).count()


def delivery_list_rejected(*, limit: int = 20) -> QuerySet[Delivery]:
    """The newest rejected posts (any integration): for admins, since a rejected post names no tenant."""
    return (
        Delivery.objects.filter(outcome=Delivery.Outcome.REJECTED)
        .select_related("integration")
        .order_by("-received_at", "-id")[:limit]
    )


def delivery_count_by_outcome() -> dict[str, int]:
    """How many posts are ``rejected`` and how many ``failed`` (the inbox's figures), in one grouped
    query: ``{outcome: count}``, an outcome with none left out."""
    rows = (
        Delivery.objects.filter(outcome__in=[Delivery.Outcome.REJECTED, Delivery.Outcome.FAILED])
        .order_by()
        .values("outcome")
        .annotate(n=Count("id"))
    )
    return {row["outcome"]: row["n"] for row in rows}


def delivery_list_failed(*, limit: int = 20) -> QuerySet[Delivery]:
    """The newest ``failed`` posts (any integration; their processing kept failing), for admins:
    with their last error, the integration joined, the body left out."""
    return (
        Delivery.objects.filter(outcome=Delivery.Outcome.FAILED)
        .select_related("integration")
        .defer("body")
        .order_by("-received_at", "-id")[:limit]
    )


def delivery_get_failed(*, public_id: uuid.UUID | str) -> Delivery | None:
    """One ``failed`` delivery by its public id (None when missing or not failed)."""
    return Delivery.objects.filter(public_id=public_id, outcome=Delivery.Outcome.FAILED).first()

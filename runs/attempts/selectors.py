"""Runs a person may see: the filtered list and one run with its attempts and timeline."""

from __future__ import annotations

from uuid import UUID

from django.db.models import Count, IntegerField, Max, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from runs.attempts.business_state import run_business_state_annotate
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Job, Tenant
from runs.permissions import User, run_visibility_filter
from runs.timeline.models import TimelineEvent


def run_list(
    *,
    user: User,
    job: str | None = None,
    tenant: str | None = None,
    environment: str | None = None,
    status: str | None = None,
    window_from: object | None = None,
    window_to: object | None = None,
    search: str | None = None,
) -> QuerySet[Run]:
    """Runs visible to ``user``, newest window first, with job, tenant and the attempt count.

    Filters: job key, tenant slug (case-insensitive), environment, status, window start range
    (aware datetimes), and ``search``: the start of a job's key or name, a tenant's slug or name, or an
    attempt's execution id or correlation reference, case-insensitively (``UPPER(column) LIKE 'X%'``,
    served by the prefix indexes of migration ``runs`` "prefix_search_indexes").
    Queries: one (job and tenant joined; attempt count, last attempt and open handover annotated).

    Besides the business state's facts (``run_business_state_annotate``) each run carries
    ``attempt_count``; ``last_attempt_number``, ``last_attempt_trigger``, ``last_attempt_status`` and
    ``last_attempt_started_at`` (its latest attempt, duplicate triggers included: by start time, else
    scheduled time, else first report; ties by number; None without attempts); and
    ``open_handover_id`` (the public id of its open handover, if any).

    The attempt count is a correlated subquery, not ``Count("attempts")``: an aggregate over the
    join makes PostgreSQL group every visible run before the LIMIT of a page, so the list cost
    grew with history. The subquery is evaluated for the page's rows only (one probe of the
    attempt's run index each), the newest-window index serves the order, and ``count()`` (the
    paginator's) drops the unused annotation and counts runs alone.
    """
    runs = Run.objects.filter(run_visibility_filter(user=user))
    if job:
        runs = runs.filter(job__key=job)
    if tenant:
        runs = runs.filter(tenant__slug_key=tenant.casefold())
    if environment:
        runs = runs.filter(environment=environment)
    if status:
        runs = runs.filter(status=status)
    if window_from:
        runs = runs.filter(window_start__gte=window_from)
    if window_to:
        runs = runs.filter(window_start__lt=window_to)
    if search:
        runs = runs.filter(run_search_filter(search))
    latest = _latest_attempt()
    return run_business_state_annotate(
        runs.select_related("job", "tenant", "target").annotate(
            attempt_count=Coalesce(_attempt_count(), 0),
            last_attempt_number=Subquery(latest.values("number")[:1]),
            last_attempt_trigger=Subquery(latest.values("trigger")[:1]),
            last_attempt_is_trigger_inferred=Subquery(latest.values("is_trigger_inferred")[:1]),
            last_attempt_status=Subquery(latest.values("status")[:1]),
            last_attempt_started_at=Subquery(latest.values("started_at")[:1]),
            open_handover_id=Subquery(
                Run.objects.filter(pk=OuterRef("pk"), handover_links__is_open=True).values(
                    "handover_links__handover__public_id"
                )[:1]
            ),
        )
    ).order_by("-window_start", "-id")


def run_list_state(*, runs: QuerySet[Run], reach: int) -> tuple[object, ...]:
    """A fingerprint of a runs list for its ETag: how many runs, their newest change and newest event,
    over the list's first ``reach`` runs in its order (newest window first).

    ``(count, max updated_at, max timeline event id)`` over those runs of ``runs`` (a ``run_list``
    queryset, any page): every change a row of the list shows writes a timeline event on the run
    (attempts, ledger totals, handovers, explanations) or touches the run, and a run entering or
    leaving the first ``reach`` changes which runs are fingerprinted. ``reach`` is what the polled page
    counts to (:func:`handover.core.pagination.count_reach`: the cap and one more, or further for a
    deeper page), so the count is at most ``reach`` -- "10,000+" stays "10,000+" -- and the cost of a
    poll stays bounded however long the history. Queries: two.
    """
    first = runs.order_by("-window_start", "-id").values("pk")[:reach]
    totals = Run.objects.filter(pk__in=first).aggregate(count=Count("pk"), updated=Max("updated_at"))
    newest_event = TimelineEvent.objects.filter(run__in=first).aggregate(newest=Max("pk"))["newest"]
    return (totals["count"], totals["updated"], newest_event)


def run_search_filter(search: str) -> Q:
    """Runs whose job key or name, tenant slug or name, or an attempt's execution id or correlation
    reference starts with ``search``, ignoring case. Each branch is a prefix match on an indexed
    ``UPPER(column)`` (a subquery per table), so a search stays an index range scan as history grows."""
    term = search.strip()
    jobs = Job.objects.filter(Q(key__istartswith=term) | Q(name__istartswith=term)).values("pk")
    tenants = Tenant.objects.filter(Q(slug__istartswith=term) | Q(name__istartswith=term)).values("pk")
    attempts = Attempt.objects.filter(Q(execution_id__istartswith=term) | Q(correlation_ref__istartswith=term))
    return Q(job__in=jobs) | Q(tenant__in=tenants) | Q(pk__in=attempts.values("run_id"))


def _latest_attempt() -> QuerySet[Attempt]:
    """The outer run's attempts, latest first: by start time, else scheduled time, else first report."""
    return Attempt.objects.filter(run=OuterRef("pk")).order_by(
        Coalesce("started_at", "scheduled_at", "created_at").desc(), "-number"
    )


def _attempt_count() -> Subquery:
    """How many attempts the outer run has: ``(SELECT COUNT(*) FROM attempt WHERE run_id = run.id)``."""
    per_run = Attempt.objects.filter(run=OuterRef("pk")).order_by().values("run").annotate(n=Count("pk")).values("n")
    return Subquery(per_run, output_field=IntegerField())


def run_get(*, user: User, public_id: UUID | str) -> Run | None:
    """One run visible to ``user`` with its attempts (by number) and timeline (in order) prefetched.

    Returns None when it does not exist or may not be seen (callers answer 404 either way).
    The business state's facts are annotated (``runs.attempts.business_state``).
    Queries: run, attempts, timeline (with actors), runner reports.
    """
    return (
        run_business_state_annotate(Run.objects.filter(run_visibility_filter(user=user), public_id=public_id))
        .select_related("job", "tenant", "target")
        .prefetch_related(
            Prefetch(
                "attempts",
                # the replay request a manual_replay attempt came from (the approvals app's dispatch row)
                queryset=Attempt.objects.select_related("replay_dispatch__request__requested_by").order_by(
                    "number", "created_at", "id"
                ),
            ),
            Prefetch(
                "timeline",
                queryset=TimelineEvent.objects.select_related("actor_user", "actor_integration", "attempt").order_by(
                    "occurred_at", "recorded_at", "id"
                ),
            ),
            Prefetch("attempts__runner_reports"),
        )
        .first()
    )


def run_duplicate_triggers_unexplained(*, run: Run) -> list[Attempt]:
    """Attempts of ``run`` flagged as duplicate triggers that no person has explained yet, by number.

    While there is one, no replay of the run is approved or dispatched and its next-run check does
    not pass (docs/slots.md). Queries: one.
    """
    return list(
        Attempt.objects.filter(run=run, is_duplicate_trigger=True, duplicate_explained_at__isnull=True).order_by(
            "number", "id"
        )
    )

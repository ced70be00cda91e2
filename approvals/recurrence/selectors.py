"""Recurrence figures: per job, tenant and failure class, what failures cost the support desk (docs/recurrence.md).

Built on ``runs.attempts.failures.run_failure_list`` (the failed runs the viewer may see), one query for
the per-(job, tenant, class) counts, one for the durations the percentiles need, one for the handovers
linked to those runs, and one each for the jobs, their technical owners, their owning teams and
escalation owners (``handover.ownership``) and the tenants: a constant number of queries whatever the
number of runs. Medians and 90th percentiles are computed in Python (SQLite has no percentile
aggregate); every formula is in docs/recurrence.md. It lives in the approvals app because it reads
runs, handovers and replay requests (the app that may import the others).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.db.models import Count, DateTimeField, F, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from guardian.models import UserObjectPermission

from approvals.replays.models import ReplayRequest
from handover.handovers.models import HandoverRun
from handover.ownership.selectors import Owner, owners_resolve
from runs.attempts.failures import Period, TrendPoint, failure_trend, run_failure_list
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Job, Tenant
from runs.permissions import TECHNICAL_OWNER_CODENAME, User

# Weights of the cost score (docs/recurrence.md "Cost to the support desk").
WEIGHT_FAILURE = 1.0
WEIGHT_HANDOVER = 3.0
WEIGHT_REPLAY = 2.0
WEIGHT_DAY_OPEN = 1.0
WEIGHT_OWNER_EXPLAINED = 5.0


@dataclass(slots=True)
class FailedRun:
    """One failed run's facts, reduced to what the figures need: its keys, run time (UTC), counts and its
    spans from the failure ``t0`` in seconds (``None`` when the step has not happened; negative spans are 0).
    ``open_seconds``: (recovery, else the period's end) − ``t0``, capped at the period's length."""

    run_id: int
    job_id: int
    tenant_id: int
    class_code: str
    run_at: datetime
    failures: int
    duplicates: int
    replays: int
    to_handover: float | None
    to_approved: float | None
    to_recovery: float | None
    open_seconds: float


@dataclass
class Figures:
    """The recurrence figures of a set of failed runs. Durations are seconds; ``None`` without a sample."""

    failures: int = 0
    runs_affected: int = 0
    handovers: int = 0
    owner_explained: int = 0
    replays: int = 0
    duplicates: int = 0
    days_open: float = 0.0
    to_handover_median: float | None = None
    to_handover_p90: float | None = None
    to_approved_replay_median: float | None = None
    to_approved_replay_p90: float | None = None
    to_recovery_median: float | None = None
    to_recovery_p90: float | None = None
    unrecovered: int = 0
    score: float = 0.0


@dataclass
class GroupFigures:
    """Figures of one (tenant, failure class) of a job."""

    tenant: Tenant
    class_code: str
    figures: Figures

    @property
    def class_words(self) -> str:
        """The failure class in words (``partially committed``; ``unclassified``)."""
        return self.class_code.replace("_", " ")


@dataclass
class JobRecurrence:
    """One job's row of the ranking: its figures, its technical owners, its owning team and escalation owner
    (``ownership``, the job's own: docs/ownership.md), groups and trend."""

    job: Job
    owners: list[str]
    figures: Figures
    ownership: Owner = field(default_factory=Owner)
    groups: list[GroupFigures] = field(default_factory=list)
    trend: list[TrendPoint] = field(default_factory=list)


@dataclass
class RecurrenceReport:
    """The ranking (highest cost first) over ``period``, and the trend of all the jobs together."""

    period: Period
    jobs: list[JobRecurrence]
    trend: list[TrendPoint]


def percentile(values: Sequence[float], share: float) -> float | None:
    """The nearest-rank percentile: the smallest value with at least ``share`` of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(math.ceil(share * len(ordered)), 1) - 1]


def _seconds(start: datetime, end: datetime | None) -> float | None:
    return None if end is None else max((end - start).total_seconds(), 0.0)


def figures_of(runs: Sequence[FailedRun], *, links: dict[int, list[tuple[int, bool]]]) -> Figures:
    """The figures of ``runs`` (docs/recurrence.md "Figures"). ``links``: run id → ``(handover id, the handover
    needed the technical owner to explain)``. One pass over the runs; percentiles sort the spans present."""
    handovers: dict[int, bool] = {}
    to_handover: list[float] = []
    to_approved: list[float] = []
    to_recovery: list[float] = []
    failures = duplicates = replays = unrecovered = 0
    open_seconds = 0.0
    for r in runs:
        for handover_id, explained in links.get(r.run_id, ()):
            handovers[handover_id] = handovers.get(handover_id, False) or explained
        failures += r.failures
        duplicates += r.duplicates
        replays += r.replays
        open_seconds += r.open_seconds
        if r.to_handover is not None:
            to_handover.append(r.to_handover)
        if r.to_approved is not None:
            to_approved.append(r.to_approved)
        if r.to_recovery is not None:
            to_recovery.append(r.to_recovery)
        else:
            unrecovered += 1
    figures = Figures(
        failures=failures,
        runs_affected=len(runs),
        handovers=len(handovers),
        owner_explained=sum(1 for explained in handovers.values() if explained),
        replays=replays,
        duplicates=duplicates,
        days_open=round(open_seconds / 86400, 2),
        to_handover_median=percentile(to_handover, 0.5),
        to_handover_p90=percentile(to_handover, 0.9),
        to_approved_replay_median=percentile(to_approved, 0.5),
        to_approved_replay_p90=percentile(to_approved, 0.9),
        to_recovery_median=percentile(to_recovery, 0.5),
        to_recovery_p90=percentile(to_recovery, 0.9),
        unrecovered=unrecovered,
    )
    figures.score = round(
        WEIGHT_FAILURE * figures.failures
        + WEIGHT_HANDOVER * figures.handovers
        + WEIGHT_REPLAY * figures.replays
        + WEIGHT_DAY_OPEN * figures.days_open
        + WEIGHT_OWNER_EXPLAINED * figures.owner_explained,
        2,
    )
    return figures


def failed_run_facts(
    *,
    user: User,
    period: Period,
    jobs: Iterable[Job] | None = None,
    tenants: Iterable[Tenant] | None = None,
) -> list[FailedRun]:
    """The failed runs the viewer may see in ``period``, with their spans to handover, approved replay and recovery
    (seconds) and their time open within the period. Queries: one."""
    first_handover = (
        HandoverRun.objects.filter(run=OuterRef("pk"), handover__handed_over_at__isnull=False)
        .order_by("handover__handed_over_at")
        .values("handover__handed_over_at")[:1]
    )
    first_approval = (
        ReplayRequest.objects.filter(run=OuterRef("pk"), approved_at__isnull=False)
        .order_by("approved_at")
        .values("approved_at")[:1]
    )
    replays = ReplayRequest.objects.filter(run=OuterRef("pk")).order_by().values("run").annotate(n=Count("pk"))
    # when the attempt that made the run succeed finished, as its executor reported it (not when it was heard
    # of): the last succeeded attempt to end, a duplicate trigger (a second firing of the slot) left out
    last_success = (
        Attempt.objects.filter(run=OuterRef("pk"), status=Attempt.Status.SUCCEEDED, is_duplicate_trigger=False)
        .annotate(done_at=Coalesce("ended_at", "status_changed_at"))
        .order_by(F("done_at").desc(nulls_last=True), "-number")
        .values("done_at")[:1]
    )
    rows = (
        run_failure_list(user=user, since=period.since, until=period.until, jobs=jobs, tenants=tenants)
        .annotate(
            handed_over_at=Subquery(first_handover, output_field=DateTimeField()),
            approved_at=Subquery(first_approval, output_field=DateTimeField()),
            replay_count=Coalesce(Subquery(replays.values("n"), output_field=IntegerField()), Value(0)),
            succeeded_at=Subquery(last_success, output_field=DateTimeField()),
        )
        .values_list(
            "pk",
            "job_id",
            "tenant_id",
            "class_code",
            "run_at",
            "failed_at",
            "failed_attempts",
            "possible_duplicate_count",
            "duplicate_triggers",
            "handed_over_at",
            "approved_at",
            "status",
            "status_changed_at",
            "replay_count",
            "succeeded_at",
        )
    )
    until = period.until
    period_seconds = (period.until - period.since).total_seconds()
    facts = []
    for (
        pk,
        job_id,
        tenant_id,
        class_code,
        run_at,
        failed_at,
        failed_attempts,
        possible_duplicates,
        duplicate_triggers,
        handed_over_at,
        approved_at,
        status,
        status_changed_at,
        replay_count,
        succeeded_at,
    ) in rows:
        done_at = succeeded_at or status_changed_at
        recovered = status == Run.Status.SUCCEEDED and done_at is not None and done_at >= failed_at
        recovered_at = done_at if recovered else None
        facts.append(
            FailedRun(
                run_id=pk,
                job_id=job_id,
                tenant_id=tenant_id,
                class_code=class_code,
                run_at=run_at,
                failures=max(failed_attempts, 1),
                duplicates=possible_duplicates + duplicate_triggers,
                replays=replay_count,
                to_handover=_seconds(failed_at, handed_over_at),
                to_approved=_seconds(failed_at, approved_at),
                to_recovery=_seconds(failed_at, recovered_at),
                open_seconds=min(max(((recovered_at or until) - failed_at).total_seconds(), 0.0), period_seconds),
            )
        )
    return facts


def handover_links(*, runs: QuerySet[Run]) -> dict[int, list[tuple[int, bool]]]:
    """Run id → ``(handover id, is_supportability_defect)`` for every handover linked to ``runs``. Queries: one.

    ``runs`` goes in as a subquery, not a list of ids: 90 days of failures can exceed SQLite's limit
    on query parameters."""
    links: dict[int, list[tuple[int, bool]]] = defaultdict(list)
    rows = HandoverRun.objects.filter(run__in=runs.order_by().values("pk")).values_list(
        "run_id", "handover_id", "handover__is_supportability_defect"
    )
    for run_id, handover_id, explained in rows:
        links[run_id].append((handover_id, explained))
    return links


def job_technical_owners(*, job_ids: Iterable[int]) -> dict[int, list[str]]:
    """Job id → the usernames holding the technical-owner role on it (sorted). Queries: one (two the first time:
    the content type)."""
    ids = [str(pk) for pk in job_ids]
    owners: dict[int, list[str]] = defaultdict(list)
    if not ids:
        return owners
    username = get_user_model().USERNAME_FIELD
    rows = UserObjectPermission.objects.filter(
        content_type=ContentType.objects.get_for_model(Job),
        permission__codename=TECHNICAL_OWNER_CODENAME,
        object_pk__in=ids,
        user__is_active=True,
    ).values_list("object_pk", f"user__{username}")
    for object_pk, name in rows:
        owners[int(object_pk)].append(name)
    return {pk: sorted(set(names), key=str.casefold) for pk, names in owners.items()}


def job_owning(*, job_ids: Iterable[int]) -> dict[int, Owner]:
    """Job id → its owning team and escalation owner (``handover.ownership.selectors.owners_resolve`` on the job
    alone, no target: a job row spans every target). A job with neither maps to an empty ``Owner`` ("no owner").
    Queries: one (none for no jobs)."""
    resolved = owners_resolve({(pk, None) for pk in job_ids})
    return {job_id: owner for (job_id, _target), owner in resolved.items()}


def recurrence_report(
    *,
    user: User,
    period: Period,
    tenants: Iterable[Tenant] | None = None,
    job_public_id: UUID | None = None,
) -> RecurrenceReport:
    """The ranking of jobs by cost to the support desk over ``period``, on the runs the viewer may see.

    ``tenants`` narrows to those tenants; ``job_public_id`` to one job (no row when the viewer sees none of
    its failed runs). Each job row holds its figures, its groups by (tenant, failure class) and its trend.
    Queries: a constant six or seven, whatever the number of runs.
    """
    jobs = Job.objects.filter(public_id=job_public_id) if job_public_id is not None else None
    facts = failed_run_facts(user=user, period=period, jobs=jobs, tenants=tenants)
    links = (
        handover_links(
            runs=run_failure_list(user=user, since=period.since, until=period.until, jobs=jobs, tenants=tenants)
        )
        if facts
        else {}
    )
    by_job: dict[int, list[FailedRun]] = defaultdict(list)
    for fact in facts:
        by_job[fact.job_id].append(fact)
    job_rows = Job.objects.in_bulk(list(by_job))
    tenant_rows = Tenant.objects.in_bulk({f.tenant_id for f in facts})
    owners = job_technical_owners(job_ids=by_job)
    owning = job_owning(job_ids=by_job)

    def figures(runs: Sequence[FailedRun]) -> Figures:
        return figures_of(runs, links=links)

    report = []
    for job_id, runs in by_job.items():
        groups: dict[tuple[int, str], list[FailedRun]] = defaultdict(list)
        for run in runs:
            groups[(run.tenant_id, run.class_code)].append(run)
        group_rows = [
            GroupFigures(tenant=tenant_rows[tenant_id], class_code=class_code, figures=figures(group))
            for (tenant_id, class_code), group in groups.items()
        ]
        group_rows.sort(key=lambda g: (-g.figures.score, g.tenant.slug_key, g.class_code))
        report.append(
            JobRecurrence(
                job=job_rows[job_id],
                owners=owners.get(job_id, []),
                ownership=owning.get(job_id) or Owner(),
                figures=figures(runs),
                groups=group_rows,
                trend=failure_trend(period=period, points=((r.run_at, r.failures) for r in runs)),
            )
        )
    report.sort(key=lambda j: (-j.figures.score, j.job.key))
    return RecurrenceReport(
        period=period,
        jobs=report,
        trend=failure_trend(period=period, points=((f.run_at, f.failures) for f in facts)),
    )

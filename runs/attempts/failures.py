"""Failed runs over a period, for recurrence figures and trend charts (docs/recurrence.md "Failures").

A run *failed* when its business state was ``failed`` or ``missed`` at some point. The business state
is computed, not stored (``runs.attempts.business_state``), and for a run that is not ``succeeded`` it
is the technical status; a run recovered later is ``succeeded`` now, so the past is read from its
attempts: a run counts when its status is ``failed`` or ``missed`` now, **or** one of its attempts
ended ``failed``, ``timed_out``, ``cancelled`` or ``abandoned`` (the statuses that set a run ``failed``).
Every figure comes from one query over the runs the viewer may see (``run_visibility_filter``), with
correlated subqueries per run; grouping and percentiles are done in Python on the fetched rows, so the
number of queries does not grow with the number of runs. Days are the viewer's local days.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.db.models import (
    Case,
    Count,
    DateTimeField,
    Exists,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce
from django.utils import timezone

from runs.attempts.models import Attempt, Run
from runs.catalog.models import Job, Tenant
from runs.permissions import User, run_visibility_filter

# the attempt statuses that set a run ``failed`` (docs/architecture.md "Vocabulary": Run)
FAILED_ATTEMPT_STATUSES = ("failed", "timed_out", "cancelled", "abandoned")
FAILED_RUN_STATUSES = ("failed", "missed")
UNCLASSIFIED = "unclassified"
PERIOD_DAYS = (7, 30, 90)


@dataclass(frozen=True)
class Period:
    """``[since, until)`` in UTC, ``days`` long, ending at the end of the viewer's local day ``last_day``."""

    days: int
    since: datetime
    until: datetime
    last_day: date


def period_ending(*, days: int, last_day: date | None = None) -> Period:
    """The ``days`` local days ending with ``last_day`` (default: today in the active zone), as UTC bounds.

    Local midnights are computed in the active time zone (DST-safe: each day boundary is localised on its
    own), so a day bucket is a calendar day where the viewer is.
    """
    zone = timezone.get_current_timezone()
    last = last_day or timezone.localdate()
    first = last - timedelta(days=days - 1)
    since = datetime.combine(first, datetime.min.time(), tzinfo=zone)
    until = datetime.combine(last + timedelta(days=1), datetime.min.time(), tzinfo=zone)
    return Period(days=days, since=since, until=until, last_day=last)


def _failed_attempts() -> QuerySet[Attempt]:
    return Attempt.objects.filter(run=OuterRef("pk"), status__in=FAILED_ATTEMPT_STATUSES)


def _count(queryset: QuerySet[Attempt]) -> Coalesce:
    counted = queryset.order_by().values("run").annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def run_failure_list(
    *,
    user: User,
    since: datetime,
    until: datetime,
    jobs: Iterable[Job] | None = None,
    tenants: Iterable[Tenant] | None = None,
) -> QuerySet[Run]:
    """Failed runs the viewer may see whose run time falls in ``[since, until)`` (UTC), annotated.

    The run time (``run_at``) is the slot (``scheduled_for``), else the window's end. Annotations:
    ``failed_attempts`` (attempts that ended failed, timed out, cancelled or abandoned), ``failed_at``
    (when the first of them ended, else the run's last status change, for a missed run), ``class_code``
    (the confirmed failure class, else the suggested one, else ``unclassified``) and
    ``duplicate_triggers`` (attempts flagged as duplicate triggers). ``jobs`` / ``tenants`` narrow it.
    Ordered by run time, then id.
    """
    first_failure = (
        _failed_attempts()
        .annotate(failure_end=Coalesce("ended_at", "status_changed_at", "started_at", "created_at"))
        .order_by("failure_end", "number")
        .values("failure_end")[:1]
    )
    runs = (
        Run.objects.filter(run_visibility_filter(user=user))
        .annotate(run_at=Coalesce("scheduled_for", "window_end"))
        .filter(run_at__gte=since, run_at__lt=until)
        .filter(Q(status__in=FAILED_RUN_STATUSES) | Exists(_failed_attempts()))
    )
    if jobs is not None:
        runs = runs.filter(job__in=jobs)
    if tenants is not None:
        runs = runs.filter(tenant__in=tenants)
    return runs.annotate(
        failed_attempts=_count(_failed_attempts()),
        failed_at=Coalesce(
            Subquery(first_failure, output_field=DateTimeField()),
            "status_changed_at",
            "run_at",
        ),
        class_code=Case(
            When(~Q(failure_class=""), then=F("failure_class")),
            When(~Q(failure_class_suggested=""), then=F("failure_class_suggested")),
            default=Value(UNCLASSIFIED),
        ),
        duplicate_triggers=_count(Attempt.objects.filter(run=OuterRef("pk"), is_duplicate_trigger=True)),
    ).order_by("run_at", "pk")


@dataclass(frozen=True)
class TrendPoint:
    """One bar of a failure trend: the local days ``[start, end]`` and the failures of runs in them."""

    start: date
    end: date
    failures: int
    runs: int

    @property
    def label(self) -> str:
        """``"28 Nov"`` for a day, ``"23–29 Nov"`` for a week."""
        if self.start == self.end:
            return f"{self.start:%-d %b}"
        return f"{self.start:%-d %b}–{self.end:%-d %b}"


def failure_trend(*, period: Period, points: Iterable[tuple[datetime, int]]) -> list[TrendPoint]:
    """Failures per local day (periods up to 30 days) or per week of 7 days counted back from the
    period's last day (longer periods). ``points``: ``(run_at, failures)`` per failed run. Every bucket of
    the period is present, empty ones with 0."""
    step = 1 if period.days <= 31 else 7
    first = period.last_day - timedelta(days=period.days - 1)
    buckets: list[list[object]] = []
    start = first
    while start <= period.last_day:
        end = min(start + timedelta(days=step - 1), period.last_day)
        buckets.append([start, end, 0, 0])
        start = end + timedelta(days=1)
    zone = timezone.get_current_timezone()  # once: looking it up per point cost more than the bucketing
    for run_at, failures in points:
        day = run_at.astimezone(zone).date()
        index = (day - first).days // step
        if 0 <= index < len(buckets):
            buckets[index][2] += failures  # type: ignore[operator]
            buckets[index][3] += 1  # type: ignore[operator]
    return [TrendPoint(start=b[0], end=b[1], failures=b[2], runs=b[3]) for b in buckets]  # type: ignore[arg-type]


def job_failure_trend(*, user: User, job: Job, period: Period) -> list[TrendPoint]:
    """The failure trend of ``job`` over ``period``, on the runs the viewer may see. Queries: one."""
    failed = run_failure_list(user=user, since=period.since, until=period.until, jobs=[job])
    rows = failed.values_list("run_at", "failed_attempts")  # type: ignore[misc]  # run_failure_list's annotations
    return failure_trend(period=period, points=((run_at, max(n, 1)) for run_at, n in rows))

"""The supportability report: per job, what its alerts lacked and how often a handover needed its technical
owner to explain what happened (docs/recurrence.md "Supportability").

An alert's parsed fields are kept on the row (``Alert.fields``, the non-empty fields of the parsed
record), so "lacked" is a JSON key test done in SQL (``has_key``, on SQLite and PostgreSQL alike):

- a **run reference**: neither ``correlation_ref`` (the source's own id of its run or trace) nor
  ``log_url`` — nothing an engineer can look the execution up by;
- a **window**: no ``window_start`` (the window was derived from the schedule, not reported);
- an **execution id**: no ``execution_id``, or one the adapter inferred (``details.execution_id_inferred``);
- a **business-impact statement**: no ``business_impact`` key in the details, their annotations, labels
  or custom details.

Alerts counted: ``accepted`` alerts reporting a failure (status ``failed``, ``timed_out`` or ``cancelled``:
the ones support calls engineering about) on runs the viewer may see whose run time (slot, else window
end) is in the period, as on the recurrence page (duplicates, rejected, unmatched and ignored ones name
no run of theirs). One aggregate query for the alerts, one
for the handovers, one for the jobs, one for their technical owners and one for their owning teams.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db.models import Count, Exists, OuterRef, Q
from django.db.models.functions import Coalesce

from approvals.recurrence.selectors import WEIGHT_OWNER_EXPLAINED, job_owning, job_technical_owners
from handover.handovers.models import Handover, HandoverRun
from handover.ownership.selectors import Owner
from runs.alerts.models import Alert
from runs.attempts.failures import Period
from runs.catalog.models import Job, Tenant
from runs.permissions import User, run_visibility_filter

IMPACT_KEY = "business_impact"
# the attempt statuses an alert reports a failure with (``ParsedAlert.status``)
FAILURE_STATUSES = ["failed", "timed_out", "cancelled"]
# field code -> (words, what to add to the job's alerts)
MISSING_FIELDS = {
    "run_reference": (
        "run reference",
        "send the run's own id (correlation id, DAG run id, trace id) or a log link with every alert",
    ),
    "window": ("window", "send the processing window (window_start, window_end) the run covered"),
    "execution_id": ("execution id", "send the executor's own execution id (not one Handover must infer)"),
    "business_impact": (
        "business-impact statement",
        f"add a {IMPACT_KEY} annotation or field saying who is affected and how",
    ),
}


def _has_impact() -> Q:
    return (
        Q(fields__details__has_key=IMPACT_KEY)
        | Q(fields__details__annotations__has_key=IMPACT_KEY)
        | Q(fields__details__labels__has_key=IMPACT_KEY)
        | Q(fields__details__custom_details__has_key=IMPACT_KEY)
    )


# Counted as positive conditions only, and "missing" = alerts − present: a JSON path absent from an alert
# is NULL in SQL, and NOT NULL is NULL, so a negated condition would leave such alerts uncounted on
# PostgreSQL (three-valued logic); a positive one counts exactly the alerts where it holds.
PRESENT_QUERIES = {
    "run_reference": Q(fields__has_key="correlation_ref") | Q(fields__has_key="log_url"),
    "window": Q(fields__has_key="window_start"),
    "execution_id": Q(fields__has_key="execution_id"),
    "inferred_execution_id": Q(fields__has_key="execution_id") & Q(fields__details__execution_id_inferred=True),
    "business_impact": _has_impact(),
}


def _missing(total: int, present: dict[str, int]) -> dict[str, int]:
    """Alerts lacking each field, from the counts of ``PRESENT_QUERIES`` (an inferred execution id is none)."""
    missing = {code: total - present[code] for code in MISSING_FIELDS}
    missing["execution_id"] += present["inferred_execution_id"]
    return missing


@dataclass
class SourceGaps:
    """One source's alerts of a job: how many, and how many lacked each field (``MISSING_FIELDS`` codes)."""

    source: str
    alerts: int
    missing: dict[str, int]


@dataclass
class ExplainedHandover:
    """A handover that needed the technical owner to explain what happened."""

    public_id: str
    title: str
    ticket: str


@dataclass
class JobSupportability:
    """One job's row: its technical owners, owning team and escalation owner (``ownership``: docs/ownership.md),
    alert gaps per source, handovers, and the handovers the owner had to explain."""

    job: Job
    owners: list[str]
    ownership: Owner = field(default_factory=Owner)
    sources: list[SourceGaps] = field(default_factory=list)
    handovers: int = 0
    owner_explained: list[ExplainedHandover] = field(default_factory=list)

    @property
    def alerts(self) -> int:
        """Alerts counted, every source together."""
        return sum(s.alerts for s in self.sources)

    @property
    def missing(self) -> dict[str, int]:
        """Alerts that lacked each field, every source together (``MISSING_FIELDS`` order)."""
        return {code: sum(s.missing[code] for s in self.sources) for code in MISSING_FIELDS}

    @property
    def score(self) -> float:
        """Gaps (alerts × fields missing) + 5 × handovers the owner had to explain (docs/recurrence.md)."""
        return sum(self.missing.values()) + WEIGHT_OWNER_EXPLAINED * len(self.owner_explained)

    @property
    def missing_lines(self) -> list[tuple[str, int, int, str]]:
        """``(field in words, alerts lacking it, alerts, what to add)`` for each field some alert lacked."""
        total = self.alerts
        return [
            (MISSING_FIELDS[code][0], count, total, MISSING_FIELDS[code][1])
            for code, count in self.missing.items()
            if count
        ]


@dataclass
class SupportabilityReport:
    """The ranking (highest score first) over ``period``."""

    period: Period
    jobs: list[JobSupportability]


def supportability_report(
    *, user: User, period: Period, tenants: Iterable[Tenant] | None = None
) -> SupportabilityReport:
    """Jobs ranked by what their alerts lacked and how often the owner had to explain, on what the viewer sees.

    Alerts and handovers by their runs' run time (a run's slot, else its window's end: the recurrence
    figures' rule), within ``[period.since, period.until)``, so an alert received late or a handover
    written days after the failure counts in the period of the failure it is about; a handover counts
    when one of its runs is visible, of the period (and of ``tenants``, when given). Queries: five
    or six, whatever the number of alerts.
    """
    alerts = (
        Alert.objects.filter(
            run_visibility_filter(user=user, prefix="run__"),
            outcome=Alert.Outcome.ACCEPTED,
            run__isnull=False,
            fields__status__in=FAILURE_STATUSES,
        )
        .alias(run_at=Coalesce("run__scheduled_for", "run__window_end"))
        .filter(run_at__gte=period.since, run_at__lt=period.until)
    )
    links = (
        HandoverRun.objects.filter(run_visibility_filter(user=user, prefix="run__"), handover=OuterRef("pk"))
        .alias(run_at=Coalesce("run__scheduled_for", "run__window_end"))
        .filter(run_at__gte=period.since, run_at__lt=period.until)
    )
    if tenants is not None:
        tenants = list(tenants)
        alerts = alerts.filter(run__tenant__in=tenants)
        links = links.filter(run__tenant__in=tenants)
    counts = {f"has_{code}": Count("pk", filter=query) for code, query in PRESENT_QUERIES.items()}
    gap_rows = (
        alerts.order_by().values("run__job_id", "source").annotate(total=Count("pk"), **counts).order_by("source")
    )
    handovers = list(
        Handover.objects.filter(Exists(links))
        .order_by("created_at", "pk")
        .values_list("job_id", "public_id", "title", "supportability_ticket", "is_supportability_defect")
    )
    by_job: dict[int, JobSupportability] = {}
    sources: dict[int, list[SourceGaps]] = defaultdict(list)
    for row in gap_rows:
        sources[row["run__job_id"]].append(
            SourceGaps(
                source=row["source"],
                alerts=row["total"],
                missing=_missing(row["total"], {code: row[f"has_{code}"] for code in PRESENT_QUERIES}),
            )
        )
    job_ids = set(sources) | {row[0] for row in handovers}
    jobs = Job.objects.in_bulk(list(job_ids))
    owners = job_technical_owners(job_ids=job_ids)
    owning = job_owning(job_ids=job_ids)
    for job_id in job_ids:
        by_job[job_id] = JobSupportability(
            job=jobs[job_id],
            owners=owners.get(job_id, []),
            ownership=owning.get(job_id) or Owner(),
            sources=sources[job_id],
        )
    for job_id, public_id, title, ticket, explained in handovers:
        job_row = by_job[job_id]
        job_row.handovers += 1
        if explained:
            job_row.owner_explained.append(ExplainedHandover(public_id=str(public_id), title=title, ticket=ticket))
    ranked = sorted(by_job.values(), key=lambda j: (-j.score, j.job.key))
    return SupportabilityReport(period=period, jobs=[j for j in ranked if j.score or j.handovers])

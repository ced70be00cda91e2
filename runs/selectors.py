"""Reads of the runs app, scoped to what a person may see (django-guardian object permissions).

A person sees a tenant's runs when they hold a tenant role there (support, business owner,
auditor), and a job's runs (all its tenants) when they are its technical owner. Superusers see
everything. Never a global group check (DESIGN.md "Who uses it").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Case, Count, IntegerField, Prefetch, Q, QuerySet, Value, When
from guardian.shortcuts import get_objects_for_user

from runs import schedule
from runs.models import (
    Alert,
    Attempt,
    Delivery,
    Integration,
    Job,
    JobTarget,
    NextRunCheck,
    Run,
    Tenant,
    TimelineEvent,
    WorkItem,
    WorkItemChange,
    WorkItemLoad,
)

TENANT_READ_PERMS = ["runs.act_as_support", "runs.act_as_business_owner", "runs.act_as_auditor"]
JOB_READ_PERMS = ["runs.act_as_technical_owner"]

User = AbstractBaseUser | AnonymousUser


def tenant_list_visible(*, user: User) -> QuerySet[Tenant]:
    """Tenants on which ``user`` holds any tenant role (all for superusers; none for anonymous)."""
    if not user.is_authenticated:
        return Tenant.objects.none()
    if user.is_superuser:
        return Tenant.objects.all()
    return get_objects_for_user(user, TENANT_READ_PERMS, klass=Tenant, any_perm=True, accept_global_perms=False)


def job_list_owned(*, user: User) -> QuerySet[Job]:
    """Jobs of which ``user`` is a technical owner (all for superusers)."""
    if not user.is_authenticated:
        return Job.objects.none()
    if user.is_superuser:
        return Job.objects.all()
    return get_objects_for_user(user, JOB_READ_PERMS, klass=Job, any_perm=True, accept_global_perms=False)


def run_visibility_filter(*, user: User, prefix: str = "") -> Q:
    """A Q object limiting rows with a run (``prefix`` = path to the run, e.g. ``run__``) to what ``user`` sees."""
    if user.is_authenticated and user.is_superuser:
        return Q()
    tenants = tenant_list_visible(user=user).values("pk")
    jobs = job_list_owned(user=user).values("pk")
    return Q(**{f"{prefix}tenant__in": tenants}) | Q(**{f"{prefix}job__in": jobs})


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
    (aware datetimes), and ``search`` over execution ids and correlation references.
    Queries: one (job and tenant joined; attempt count annotated).
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
        matching = Attempt.objects.filter(Q(execution_id__icontains=search) | Q(correlation_ref__icontains=search))
        runs = runs.filter(pk__in=matching.values("run_id"))
    return (
        runs.select_related("job", "tenant", "target")
        .annotate(attempt_count=Count("attempts", distinct=True))
        .order_by("-window_start", "-id")
    )


def run_get(*, user: User, public_id: object) -> Run | None:
    """One run visible to ``user`` with its attempts (by number) and timeline (in order) prefetched.

    Returns None when it does not exist or may not be seen (callers answer 404 either way).
    Queries: run, attempts, timeline (with actors), runner reports.
    """
    return (
        Run.objects.filter(run_visibility_filter(user=user), public_id=public_id)
        .select_related("job", "tenant", "target")
        .prefetch_related(
            Prefetch("attempts", queryset=Attempt.objects.order_by("number", "created_at", "id")),
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


def alert_list(*, user: User, outcome: str | None = None, source: str | None = None) -> QuerySet[Alert]:
    """Alerts visible to ``user``: those linked to a visible run, plus unlinked ones naming a
    visible tenant; admins (staff) see every unlinked alert, since they register jobs and reprocess."""
    alerts = Alert.objects.all()
    if not (user.is_authenticated and user.is_superuser):
        tenants = tenant_list_visible(user=user)
        unlinked = (
            Q(run__isnull=True)
            if user.is_authenticated and user.is_staff
            else Q(run__isnull=True, tenant_slug__in=tenants.values("slug"))
        )
        alerts = alerts.filter(Q(run__isnull=False) & run_visibility_filter(user=user, prefix="run__") | unlinked)
    if outcome:
        alerts = alerts.filter(outcome=outcome)
    if source:
        alerts = alerts.filter(source=source)
    return alerts.select_related(
        "delivery", "integration", "duplicate_of", "run__job", "run__tenant", "attempt"
    ).order_by("-created_at", "-id")


def alert_inbox(*, user: User) -> tuple[QuerySet[Alert], dict[str, int]]:
    """The inbox: original alerts, unmatched first then newest; plus counts per outcome."""
    alerts = alert_list(user=user)
    counts = {row["outcome"]: row["n"] for row in alerts.order_by().values("outcome").annotate(n=Count("id"))}
    # unmatched (needs a person) first, then pending, then newest
    needs_person = Case(
        When(outcome=Alert.Outcome.UNMATCHED, then=Value(0)),
        When(outcome=Alert.Outcome.PENDING, then=Value(1)),
        default=Value(2),
        output_field=IntegerField(),
    )
    originals = alerts.filter(duplicate_of__isnull=True).order_by(needs_person, "-created_at", "-id")
    return originals, counts


def alert_get(*, user: User, public_id: object) -> Alert | None:
    """One alert visible to ``user`` (None when missing or not visible)."""
    return alert_list(user=user).filter(public_id=public_id).first()


def integration_list(*, user: User) -> QuerySet[Integration]:
    """Integrations with key and delivery counts; admins (staff) only, others see none."""
    if not (user.is_authenticated and user.is_staff):
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
        .annotate(alert_count=Count("alerts"))
        .order_by("-received_at", "-id")[:limit]
    )


# What support needs from an alert (issue 9): the share of an integration's alerts that carried each.
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
        Alert.objects.filter(integration=integration, duplicate_of__isnull=True, kind="attempt")
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


def delivery_count_rejected() -> int:
    """How many posts were rejected in all (the inbox's "rejected posts" figure)."""
    return Delivery.objects.filter(outcome=Delivery.Outcome.REJECTED).count()


# --- jobs, targets and next-run checks ----------------------------------------------------------


def target_is_visible(*, user: User, target: JobTarget) -> bool:
    """Whether ``user`` may see ``target`` (a tenant role on its tenant, or technical owner of its job)."""
    if not user.is_authenticated or not user.is_active:
        return False
    if user.is_superuser:
        return True
    return any(user.has_perm(p, target.tenant) for p in TENANT_READ_PERMS) or any(
        user.has_perm(p, target.job) for p in JOB_READ_PERMS
    )


def target_may_act(*, user: User, target: JobTarget) -> bool:
    """Whether ``user`` may create, waive or confirm checks of ``target``: support or technical owner."""
    if not user.is_authenticated or not user.is_active:
        return False
    if user.is_superuser:
        return True
    return user.has_perm("runs.act_as_support", target.tenant) or user.has_perm(
        "runs.act_as_technical_owner", target.job
    )


def target_list_visible(*, user: User, job: Job | None = None) -> QuerySet[JobTarget]:
    """Active and inactive targets ``user`` may see (optionally of one job), with job and tenant joined."""
    targets = JobTarget.objects.all()
    if not (user.is_authenticated and user.is_superuser):
        tenants = tenant_list_visible(user=user).values("pk")
        jobs = job_list_owned(user=user).values("pk")
        targets = targets.filter(Q(tenant__in=tenants) | Q(job__in=jobs))
    if job is not None:
        targets = targets.filter(job=job)
    return targets.select_related("job", "tenant").order_by("job__key", "tenant__slug_key", "environment")


def job_list_visible(*, user: User) -> QuerySet[Job]:
    """Jobs ``user`` owns technically, or that run for a tenant they hold a role on."""
    if not user.is_authenticated:
        return Job.objects.none()
    if user.is_superuser:
        return Job.objects.order_by("key")
    tenants = tenant_list_visible(user=user).values("pk")
    jobs = job_list_owned(user=user).values("pk")
    return (
        Job.objects.filter(
            Q(pk__in=jobs)
            | Q(pk__in=JobTarget.objects.filter(tenant__in=tenants).values("job_id"))
            | Q(pk__in=Run.objects.filter(tenant__in=tenants).values("job_id"))
        )
        .annotate(target_count=Count("targets", distinct=True))
        .order_by("key")
    )


def job_get(*, user: User, public_id: object) -> Job | None:
    """One job ``user`` may see (None when missing or not visible)."""
    return job_list_visible(user=user).filter(public_id=public_id).first()


def check_visibility_filter(*, user: User) -> Q:
    """A Q object limiting next-run checks to targets ``user`` may see."""
    if user.is_authenticated and user.is_superuser:
        return Q()
    tenants = tenant_list_visible(user=user).values("pk")
    jobs = job_list_owned(user=user).values("pk")
    return Q(target__tenant__in=tenants) | Q(target__job__in=jobs)


def check_list(
    *,
    user: User,
    status: str | None = None,
    job: str | None = None,
    tenant: str | None = None,
    target: object | None = None,
) -> QuerySet[NextRunCheck]:
    """Next-run checks ``user`` may see, earliest deadline first, filterable by status, job key,
    tenant slug (case-insensitive) and target public id. Queries: one (everything shown is joined)."""
    checks = NextRunCheck.objects.filter(check_visibility_filter(user=user))
    if status:
        checks = checks.filter(status=status)
    if job:
        checks = checks.filter(target__job__key=job)
    if tenant:
        checks = checks.filter(target__tenant__slug_key=tenant.casefold())
    if target:
        checks = checks.filter(target__public_id=target)
    return checks.select_related(
        "target__job",
        "target__tenant",
        "recovered_run",
        "next_run",
        "evidence_attempt",
        "late_success_attempt",
        "created_by",
        "waived_by",
        "waiver_owner",
        "confirmed_by",
    ).order_by("deadline_at", "id")


def check_get(*, user: User, public_id: object) -> NextRunCheck | None:
    """One next-run check ``user`` may see (None when missing or not visible)."""
    return check_list(user=user).filter(public_id=public_id).first()


def check_list_for_run(*, run: Run) -> QuerySet[NextRunCheck]:
    """Checks about ``run``: those verifying its recovery, and the one expecting it as the next run."""
    expecting = Q(next_run=run)
    if run.target_id and run.scheduled_for:
        expecting |= Q(target_id=run.target_id, expected_at=run.scheduled_for)
    return (
        NextRunCheck.objects.filter(Q(recovered_run=run) | expecting)
        .select_related("target__job", "target__tenant", "waiver_owner", "evidence_attempt", "late_success_attempt")
        .order_by("expected_at", "id")
    )


CHECK_SECTION_LIMIT = 100


def check_sections(*, user: User, now: datetime) -> dict[str, list[NextRunCheck]]:
    """The checks page: ``due`` (deadline passed, or a person must confirm), ``upcoming``, ``failed``,
    ``waived`` and recently ``passed``; at most 100 each. Queries: five, one per section."""
    visible = check_list(user=user)
    scheduled = visible.filter(status=NextRunCheck.Status.SCHEDULED)
    awaiting = Q(evidence_attempt__isnull=False, duplicate_check=NextRunCheck.DuplicateCheck.NO_LEDGER)
    newest = ("-status_changed_at", "-id")
    return {
        "due": list(scheduled.filter(Q(deadline_at__lte=now) | awaiting)[:CHECK_SECTION_LIMIT]),
        "upcoming": list(scheduled.filter(deadline_at__gt=now).exclude(awaiting)[:CHECK_SECTION_LIMIT]),
        "failed": list(visible.filter(status=NextRunCheck.Status.FAILED).order_by(*newest)[:CHECK_SECTION_LIMIT]),
        "waived": list(
            visible.filter(status=NextRunCheck.Status.WAIVED).order_by("waiver_checkpoint", "id")[:CHECK_SECTION_LIMIT]
        ),
        "passed": list(visible.filter(status=NextRunCheck.Status.PASSED).order_by(*newest)[:20]),
    }


@dataclass(frozen=True)
class Outage:
    """Consecutive fire times of a target that did not run on time, and what the missed-run policy did.

    All instants UTC. ``covered``: slots a catch-up (or late) run reported on; ``awaiting``: missed
    slots the policy says a catch-up run will cover; ``omitted``: missed slots the policy leaves out
    (nobody will run them); ``policy`` names the job's missed-run policy.
    """

    slots: tuple[datetime, ...]
    covered: tuple[datetime, ...]
    awaiting: tuple[datetime, ...]
    omitted: tuple[datetime, ...]
    policy: str


def target_outage_list(*, target: JobTarget, now: datetime, days: int = 30, limit: int = 5) -> list[Outage]:
    """The target's outages of the last ``days``, newest first: runs ``missed`` or only run by catch-up.

    For each outage, the job's missed-run policy (``schedule.missed_slots``) is applied from the
    last run before it to the moment the scheduler came back (the first catch-up start, else the
    next on-time run, else ``now``), which splits the still-missed slots into awaiting catch-up and
    omitted. Queries: two (runs, their attempts).
    """
    job = target.job
    runs = list(
        Run.objects.filter(
            job_id=target.job_id,
            tenant_id=target.tenant_id,
            environment=target.environment,
            scheduled_for__gte=now - timedelta(days=days),
            scheduled_for__lte=now,
        )
        .prefetch_related(Prefetch("attempts", queryset=Attempt.objects.order_by("number", "id")))
        .order_by("scheduled_for", "id")
    )
    groups: list[tuple[Run | None, list[Run], Run | None]] = []
    before: Run | None = None
    current: list[Run] = []
    for run in runs:
        attempts = list(run.attempts.all())
        late = bool(attempts) and all(a.trigger == Attempt.Trigger.CATCH_UP for a in attempts)
        if run.status == Run.Status.MISSED or late:
            if not current:
                group_before = before
            current.append(run)
            continue
        if current:
            groups.append((group_before, current, run))
            current = []
        before = run
    if current:
        groups.append((group_before, current, None))

    cron = target.schedule_override or job.schedule
    zone = target.timezone_override or job.timezone
    policies = {
        "dst_gap": target.dst_gap_override or job.dst_gap_policy,
        "dst_overlap": target.dst_overlap_override or job.dst_overlap_policy,
    }
    outages: list[Outage] = []
    for group_before, group, after in reversed(groups[-limit:]):
        slots = [r.scheduled_for for r in group if r.scheduled_for]
        catch_up_starts = [
            a.started_at or a.created_at
            for r in group
            for a in r.attempts.all()
            if a.trigger == Attempt.Trigger.CATCH_UP
        ]
        back_at = min(catch_up_starts) if catch_up_starts else (after.scheduled_for if after else now)
        last = group_before.scheduled_for if group_before and group_before.scheduled_for else None
        try:
            plan = schedule.missed_slots(
                cron,
                zone,
                last or (slots[0] - timedelta(seconds=1)),
                back_at or now,
                policy=job.missed_run_policy,
                expire_after_seconds=job.missed_run_expire_after_seconds,
                **policies,
            )
            to_run = {s.astimezone(UTC) for s in plan.to_run}
        except schedule.ScheduleError:
            to_run = set(slots)
        reported = {r.scheduled_for for r in group if list(r.attempts.all())}
        missing = [s for s in slots if s not in reported]
        outages.append(
            Outage(
                slots=tuple(slots),
                covered=tuple(s for s in slots if s in reported),
                awaiting=tuple(s for s in missing if s in to_run),
                omitted=tuple(s for s in missing if s not in to_run),
                policy=job.missed_run_policy,
            )
        )
    return outages


# --- work ledger ----------------------------------------------------------------------------------

# Cache key of a load's progress (written by runs.services.ledger, polled by the run page).
LOAD_PROGRESS_KEY = "runs:ledger-load:{}"


def run_ledger_writable(*, user: User, run: Run) -> bool:
    """Whether ``user`` may load into or change ``run``'s work ledger.

    Support on the run's tenant, technical owners of its job, and superusers. Auditors and
    business owners read the ledger but do not change it. Guardian caches per object, so calling
    this for one run costs at most the two permission queries.
    """
    if not user.is_authenticated or not user.is_active:
        return False
    if user.is_superuser:
        return True
    return user.has_perm("runs.act_as_support", run.tenant) or user.has_perm("runs.act_as_technical_owner", run.job)


def run_get_for_ledger(*, user: User, public_id: object) -> Run | None:
    """One run visible to ``user`` with its job and tenant, nothing prefetched (the ledger endpoints).

    Returns None when it does not exist or may not be seen. Queries: one.
    """
    return (
        Run.objects.filter(run_visibility_filter(user=user), public_id=public_id)
        .select_related("job", "tenant", "failure_class_confirmed_by")
        .first()
    )


def work_item_list(
    *,
    run: Run,
    outcome: str | None = None,
    possible_duplicate: bool | None = None,
    record_id: str | None = None,
) -> QuerySet[WorkItem]:
    """A run's work items by record id (the keyset order), with the evidence's person joined.

    Filters: outcome, possible-duplicate flag, exact record id. Served by the unique (run,
    record_id) index, or (run, outcome, record_id) when filtered by outcome.
    """
    items = WorkItem.objects.filter(run=run)
    if outcome:
        items = items.filter(outcome=outcome)
    if possible_duplicate is not None:
        items = items.filter(is_possible_duplicate=possible_duplicate)
    if record_id:
        items = items.filter(record_id=record_id)
    return items.select_related("evidence_by").order_by("record_id")


@dataclass
class WorkItemPage:
    """One page of a run's items, paged by key: ``after``/``before`` are record ids, never offsets."""

    items: list[WorkItem]
    has_next: bool
    has_previous: bool

    @property
    def first_key(self) -> str:
        return self.items[0].record_id if self.items else ""

    @property
    def last_key(self) -> str:
        return self.items[-1].record_id if self.items else ""


def work_item_page(
    *,
    run: Run,
    outcome: str | None = None,
    possible_duplicate: bool | None = None,
    after: str | None = None,
    before: str | None = None,
    limit: int = 50,
) -> WorkItemPage:
    """The page of ``limit`` items after (or before) a record id, in record-id order.

    Queries: one (``limit + 1`` rows read through the index, so the cost does not grow with the
    page's position; the extra row tells whether another page follows).
    """
    items = work_item_list(run=run, outcome=outcome, possible_duplicate=possible_duplicate)
    if before:
        rows = list(items.filter(record_id__lt=before).order_by("-record_id")[: limit + 1])
        has_more = len(rows) > limit
        return WorkItemPage(items=rows[:limit][::-1], has_next=True, has_previous=has_more)
    if after:
        items = items.filter(record_id__gt=after)
    rows = list(items[: limit + 1])
    return WorkItemPage(items=rows[:limit], has_next=len(rows) > limit, has_previous=bool(after))


def work_item_search(*, user: User, record_id: str, limit: int = 100) -> QuerySet[WorkItem]:
    """Every work item with exactly ``record_id`` in the runs ``user`` may see, newest window first.

    "What happened to INV-1003?" Served by the record-id index. Queries: one.
    """
    record_id = record_id.strip()
    if not record_id:
        return WorkItem.objects.none()
    return (
        WorkItem.objects.filter(run_visibility_filter(user=user, prefix="run__"), record_id=record_id)
        .select_related("run__job", "run__tenant", "evidence_by")
        .order_by("-run__window_start", "-run_id")[:limit]
    )


def work_item_change_list(*, run: Run, record_id: str | None = None) -> QuerySet[WorkItemChange]:
    """The change history of a run's items (people's changes and provider lookups), newest first."""
    changes = WorkItemChange.objects.filter(run=run)
    if record_id:
        changes = changes.filter(work_item__record_id=record_id)
    return changes.select_related("work_item", "changed_by", "load").order_by("-changed_at", "-id")


def work_item_load_list(*, run: Run) -> QuerySet[WorkItemLoad]:
    """A run's loads, newest first, without the stored bytes."""
    return (
        WorkItemLoad.objects.filter(run=run)
        .defer("content")
        .select_related("created_by")
        .order_by("-created_at", "-id")
    )


def work_item_load_get(*, run: Run, public_id: object) -> WorkItemLoad | None:
    """One load of ``run`` (None when it is not this run's), without the stored bytes."""
    return work_item_load_list(run=run).filter(public_id=public_id).first()


def work_item_load_progress(*, load: WorkItemLoad) -> dict[str, object]:
    """Where a load is: ``{"phase", "percent", "message"}`` from the cache, else from the row's status."""
    from django.core.cache import cache

    found = cache.get(LOAD_PROGRESS_KEY.format(load.public_id))
    if isinstance(found, dict) and (load.status in ("pending", "running") or found.get("phase") == load.status):
        return found
    percent = 100 if load.status in ("committed", "failed") else 0
    return {"phase": load.status, "percent": percent, "message": load.error}

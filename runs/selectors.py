"""Reads of the runs app, scoped to what a person may see (django-guardian object permissions).

A person sees a tenant's runs when they hold a tenant role there (support, business owner,
auditor), and a job's runs (all its tenants) when they are its technical owner. Superusers see
everything. Never a global group check (DESIGN.md "Who uses it").
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Case, Count, IntegerField, Prefetch, Q, QuerySet, Value, When
from guardian.shortcuts import get_objects_for_user

from runs.models import Alert, Attempt, Delivery, Integration, Job, Run, Tenant, TimelineEvent

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

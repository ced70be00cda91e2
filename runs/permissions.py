"""Who may see and do what: one predicate per rule of the role table (docs/architecture.md "Roles and
permissions"), used by selectors to filter and by services to refuse, so the page, the API and a
script get the same answer. Roles are django-guardian object permissions on Tenant and Job, never a
global group check: support, business owner and auditor on a tenant; technical owner on a job (all
its tenants). Superusers (admins) see every tenant and may do what a role may, except approving
(rule 4: approvals need an explicitly held role).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, cast

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.db.models import Q, QuerySet
from guardian.shortcuts import get_objects_for_user, get_users_with_perms

from handover.core.errors import Forbidden, NotFound
from handover.core.people import Person
from runs.attempts.models import Run
from runs.catalog.models import Job, JobTarget, Tenant

TECHNICAL_OWNER_CODENAME = "act_as_technical_owner"
BUSINESS_OWNER_CODENAME = "act_as_business_owner"
SUPPORT = "runs.act_as_support"
BUSINESS_OWNER = f"runs.{BUSINESS_OWNER_CODENAME}"
AUDITOR = "runs.act_as_auditor"
TECHNICAL_OWNER = f"runs.{TECHNICAL_OWNER_CODENAME}"
TENANT_READ_PERMS = [SUPPORT, BUSINESS_OWNER, AUDITOR]
JOB_READ_PERMS = [TECHNICAL_OWNER]
# approval kind (``Approval.Kind``) -> (permission codename, what it is granted on)
APPROVER_PERMISSIONS = {
    "business": (BUSINESS_OWNER_CODENAME, "tenant"),
    "technical": (TECHNICAL_OWNER_CODENAME, "job"),
}

User = Person | AnonymousUser


class ReplayRequestLike(Protocol):
    """What the replay rules read of a replay request (the model lives in the approvals app)."""

    @property
    def requested_by_id(self) -> int | None: ...

    @property
    def run(self) -> Run: ...


def _active(user: User) -> bool:
    return bool(user.is_authenticated and user.is_active)


def _has_perm(user: User, perm: str, obj: Tenant | Job) -> bool:
    """``user.has_perm(perm, obj)`` (django-guardian's object permission backend)."""
    return bool(user.has_perm(perm, obj))


def is_admin(user: User) -> bool:
    """Whether ``user`` is an active superuser."""
    return _active(user) and user.is_superuser


def is_staff(user: User) -> bool:
    """Whether ``user`` is active staff (the admin site's flag): reads the unmatched alerts and the
    integrations' delivery counts; with ``is_admin``, the audit trail."""
    return _active(user) and user.is_staff


def may_reprocess_alert(*, user: User) -> bool:
    """Whether ``user`` may reprocess an unmatched or pending alert (parse its stored body again):
    active staff (the people who read the unmatched inbox)."""
    return is_staff(user)


# --- seeing ---------------------------------------------------------------------------------------


def tenant_list_visible(*, user: User) -> QuerySet[Tenant]:
    """Tenants on which ``user`` holds any tenant role (all for superusers; none for anonymous)."""
    if not user.is_authenticated:
        return Tenant.objects.none()
    if is_admin(user):
        return Tenant.objects.all()
    return get_objects_for_user(user, TENANT_READ_PERMS, klass=Tenant, any_perm=True, accept_global_perms=False)


def job_list_owned(*, user: User) -> QuerySet[Job]:
    """Jobs of which ``user`` is a technical owner (all for superusers)."""
    if not user.is_authenticated:
        return Job.objects.none()
    if is_admin(user):
        return Job.objects.all()
    return get_objects_for_user(user, JOB_READ_PERMS, klass=Job, any_perm=True, accept_global_perms=False)


def tenant_list_supported(*, user: User) -> QuerySet[Tenant]:
    """Tenants on which ``user`` is support (all for superusers; none for anonymous)."""
    if not user.is_authenticated:
        return Tenant.objects.none()
    if is_admin(user):
        return Tenant.objects.all()
    return get_objects_for_user(user, SUPPORT, klass=Tenant, accept_global_perms=False)


def tenant_list_audited(*, user: User) -> QuerySet[Tenant]:
    """Tenants on which ``user`` is an auditor (explicitly; admins read the audit trail through ``is_admin``)."""
    if not user.is_authenticated:
        return Tenant.objects.none()
    return get_objects_for_user(user, AUDITOR, klass=Tenant, accept_global_perms=False)


def run_visibility_filter(*, user: User, prefix: str = "") -> Q:
    """A Q object limiting rows with a run (``prefix`` = path to the run, e.g. ``run__``) to what ``user`` sees:
    a tenant role on the run's tenant, or technical owner of its job."""
    if is_admin(user):
        return Q()
    tenants = tenant_list_visible(user=user).values("pk")
    jobs = job_list_owned(user=user).values("pk")
    return Q(**{f"{prefix}tenant__in": tenants}) | Q(**{f"{prefix}job__in": jobs})


def run_visibility_filter_listed(*, user: User, prefix: str = "") -> Q:
    """:func:`run_visibility_filter`'s rule with the visible tenants' and owned jobs' ids looked up first
    (queries: two, none for admins) and written as literal lists.

    For a query that tests visibility row by row (an ``EXISTS`` per alert of a capped count): PostgreSQL
    estimates each test of a literal list at an index probe, where the permission subqueries made it
    guess hundreds of times more and choose plans that read every row of the history."""
    if is_admin(user):
        return Q()
    tenants = list(tenant_list_visible(user=user).values_list("pk", flat=True))
    jobs = list(job_list_owned(user=user).values_list("pk", flat=True))
    return Q(**{f"{prefix}tenant_id__in": tenants}) | Q(**{f"{prefix}job_id__in": jobs})


def may_read_run(*, user: User, run: Run) -> bool:
    """Whether ``user`` sees ``run``: any tenant role on its tenant, or technical owner of its job. Queries: one."""
    if not _active(user):
        return False
    return is_admin(user) or Run.objects.filter(run_visibility_filter(user=user), pk=run.pk).exists()


def may_read_target(*, user: User, target: JobTarget) -> bool:
    """Whether ``user`` sees ``target``: any tenant role on its tenant, or technical owner of its job."""
    if not _active(user):
        return False
    if is_admin(user):
        return True
    return any(_has_perm(user, p, target.tenant) for p in TENANT_READ_PERMS) or any(
        _has_perm(user, p, target.job) for p in JOB_READ_PERMS
    )


# --- acting: support on the tenant, or technical owner of the job ---------------------------------


def may_act_on(*, user: User, tenant: Tenant, job: Job) -> bool:
    """The rule of every write on a tenant's part of a job (handovers, the work ledger, next-run checks,
    attempt corrections, recovery decisions): support on ``tenant``, or technical owner of ``job``;
    superusers always. Auditors and business owners read but do not act. Guardian caches per object,
    so this costs at most two queries per tenant and job."""
    if not _active(user):
        return False
    return is_admin(user) or _has_perm(user, SUPPORT, tenant) or _has_perm(user, TECHNICAL_OWNER, job)


def may_act_on_run(*, user: User, run: Run) -> bool:
    """``may_act_on`` for ``run``'s tenant and job."""
    return may_act_on(user=user, tenant=run.tenant, job=run.job)


def may_act_on_target(*, user: User, target: JobTarget) -> bool:
    """``may_act_on`` for ``target``'s tenant and job (create, waive or confirm its next-run checks)."""
    return may_act_on(user=user, tenant=target.tenant, job=target.job)


def may_act_on_runs(*, user: User, runs: Iterable[Run]) -> bool:
    """``may_act_on`` for every one of ``runs`` (a handover about several runs); False for none.
    Queries: at most two, whatever the number of runs."""
    runs = list(runs)
    if not _active(user):
        return False
    if is_admin(user):
        return True
    if not runs:
        return False
    owned = set(job_list_owned(user=user).filter(pk__in={r.job_id for r in runs}).values_list("pk", flat=True))
    if all(run.job_id in owned for run in runs):
        return True
    supported = set(
        tenant_list_supported(user=user).filter(pk__in={r.tenant_id for r in runs}).values_list("pk", flat=True)
    )
    return all(run.tenant_id in supported or run.job_id in owned for run in runs)


def act_filter(*, user: User, prefix: str = "") -> Q:
    """A Q object limiting rows with a run (``prefix`` = path to the run) to those ``user`` may act on."""
    if is_admin(user):
        return Q()
    tenants = tenant_list_supported(user=user).values("pk")
    jobs = job_list_owned(user=user).values("pk")
    return Q(**{f"{prefix}tenant__in": tenants}) | Q(**{f"{prefix}job__in": jobs})


def require_act_on_run(*, user: User, run: Run, what: str, error: type[Forbidden] = Forbidden) -> None:
    """Refuse unless ``user`` may act on ``run`` (``may_act_on_run``); return None when they may.

    Raises NotFound (404) for a run the person may not see, ``error`` (a Forbidden, 403) for one they
    may only read; ``what`` completes the refusal ("change a run's work ledger"). Queries: the
    guardian checks, plus one when refused.
    """
    if may_act_on_run(user=user, run=run):
        return
    if not may_read_run(user=user, run=run):
        raise NotFound("No such run.")
    raise error(f"Only support (on this tenant), the job's technical owners and admins {what}.")


def require_act_on_target(*, user: User, target: JobTarget, what: str, error: type[Forbidden] = Forbidden) -> None:
    """Refuse unless ``user`` may act on ``target`` (``may_act_on_target``); return None when they may.

    Raises NotFound (404) for a target the person may not see, ``error`` (a Forbidden, 403) for one
    they may only read; ``what`` completes the refusal ("waive or confirm its next-run checks").
    """
    if may_act_on_target(user=user, target=target):
        return
    if not may_read_target(user=user, target=target):
        raise NotFound("No such target.")
    raise error(f"Only support (on this tenant), the job's technical owners and admins {what}.")


# --- replays ------------------------------------------------------------------------------------


def may_request_replay(*, user: User, run: Run) -> bool:
    """Whether ``user`` may request a replay of ``run``: support on its tenant (superusers too)."""
    if not _active(user):
        return False
    return is_admin(user) or _has_perm(user, SUPPORT, run.tenant)


def may_manage_replay(*, user: User, request: ReplayRequestLike) -> bool:
    """Whether ``user`` may cancel, re-scope, trigger the dispatch of or settle ``request``: its
    requester, or anyone who may act on its run (``may_act_on_run``)."""
    if not _active(user):
        return False
    return request.requested_by_id == user.pk or may_act_on_run(user=user, run=request.run)


def manage_replay_filter(*, user: User) -> Q:
    """A Q object on replay requests limiting them to those ``user`` may manage (``may_manage_replay``)."""
    if not _active(user):
        return Q(pk__in=[])
    return Q(requested_by=user) | act_filter(user=user, prefix="run__")


def approvers_eligible(*, run: Run, kind: str, exclude: Person | None = None) -> QuerySet[Person]:
    """Active people who may give a ``kind`` approval (``business`` or ``technical``) on ``run``, by username.

    Rule 4 (docs/architecture.md): ``business`` needs ``act_as_business_owner`` on the run's tenant,
    ``technical`` ``act_as_technical_owner`` on its job, held explicitly (directly or through a
    group); superuser status counts for nothing. ``exclude`` (the requester) is left out. Queries:
    one when evaluated.
    """
    codename, on = APPROVER_PERMISSIONS[str(kind)]
    obj: Tenant | Job = run.tenant if on == "tenant" else run.job
    # without attach_perms guardian returns a QuerySet of people (its stubs widen the return type)
    users = cast(
        "QuerySet[Person]",
        get_users_with_perms(obj, only_with_perms_in=[codename], with_superusers=False, with_group_users=True),
    )
    users = users.filter(is_active=True)
    if exclude is not None:
        users = users.exclude(pk=exclude.pk)
    return users.order_by(get_user_model().USERNAME_FIELD)


def may_decide(*, user: User, run: Run, kind: str) -> bool:
    """Whether ``user`` may give a ``kind`` approval on ``run`` (``approvers_eligible``; the requester and
    the one-kind-per-person rule are the decision service's)."""
    if not isinstance(user, Person) or not _active(user):
        return False
    return approvers_eligible(run=run, kind=kind).filter(pk=user.pk).exists()


def decide_filters(*, user: User, prefix: str = "") -> tuple[Q, Q]:
    """Two Q objects on rows with a run (``prefix`` = path to the run): runs whose business side
    ``user`` may approve, and runs whose technical side they may (explicit roles, superusers not exempt)."""
    tenants = get_objects_for_user(
        user, BUSINESS_OWNER, klass=Tenant, with_superuser=False, accept_global_perms=False
    ).values("pk")
    jobs = get_objects_for_user(
        user, TECHNICAL_OWNER, klass=Job, with_superuser=False, accept_global_perms=False
    ).values("pk")
    return Q(**{f"{prefix}tenant__in": tenants}), Q(**{f"{prefix}job__in": jobs})


# --- pausing --------------------------------------------------------------------------------------


def may_pause_job(*, user: User, job: Job) -> bool:
    """Whether ``user`` may pause or resume ``job`` as a whole (every tenant it runs for): its
    technical owner, or an admin. Support pauses a target (``may_pause_target``), never the job."""
    if not _active(user):
        return False
    return is_admin(user) or _has_perm(user, TECHNICAL_OWNER, job)


def may_pause_target(*, user: User, target: JobTarget) -> bool:
    """Whether ``user`` may pause or resume ``target`` (its tenant's part of the job): support on its
    tenant, or whoever may pause the whole job."""
    if not _active(user):
        return False
    return _has_perm(user, SUPPORT, target.tenant) or may_pause_job(user=user, job=target.job)


# --- runner credentials ---------------------------------------------------------------------------


def may_manage_runner_credentials(*, user: User, job: Job) -> bool:
    """Whether ``user`` may issue, list and revoke ``job``'s runner credentials: an admin or a
    technical owner of the job (docs/architecture.md "Roles and permissions")."""
    if not _active(user):
        return False
    return is_admin(user) or _has_perm(user, TECHNICAL_OWNER, job)


# --- ownership of aged work -----------------------------------------------------------------------


def may_manage_job_ownership(*, user: User, job: Job) -> bool:
    """Whether ``user`` may name the owning team and escalation owner of ``job`` and of its targets: an
    admin or a technical owner of the job (docs/ownership.md). Readers of the job see the owners."""
    if not _active(user):
        return False
    return is_admin(user) or _has_perm(user, TECHNICAL_OWNER, job)


# --- problems (the systemic cause behind handovers; docs/problems.md "Who may do what") -------------


def may_act_anywhere(*, user: User) -> bool:
    """Whether ``user`` holds an acting role somewhere: support on some tenant, technical owner of some
    job, or admin. Who may open a problem not yet linked to any handover. Queries: at most two."""
    if not _active(user):
        return False
    return is_admin(user) or tenant_list_supported(user=user).exists() or job_list_owned(user=user).exists()


def may_act_on_any_run(*, user: User, runs: Iterable[Run]) -> bool:
    """Whether ``user`` may act (``may_act_on``) on at least one of ``runs``: support on a run's tenant,
    technical owner of a run's job, or admin. The rule of a problem's writes (edit, link, transition):
    support of a linked tenant or technical owner of a linked job. False for no runs (admins aside).
    Queries: at most two, whatever the number of runs."""
    runs = list(runs)
    if not _active(user):
        return False
    if is_admin(user):
        return True
    if not runs:
        return False
    if job_list_owned(user=user).filter(pk__in={r.job_id for r in runs}).exists():
        return True
    return tenant_list_supported(user=user).filter(pk__in={r.tenant_id for r in runs}).exists()


# --- what a page offers ---------------------------------------------------------------------------


def may_read_audit(*, user: User) -> bool:
    """Whether ``user`` may open the audit trail (``/audit/``): admins (staff) and auditors of some tenant.

    ``runs.audit.selectors.audit_require_reader`` refuses with it; ``audit_event_list`` then filters
    the rows. Queries: one for a person who is neither.
    """
    if not _active(user):
        return False
    if is_admin(user) or getattr(user, "is_staff", False):
        return True
    return tenant_list_audited(user=user).exists()


def run_needs_recovery(*, run: Run) -> bool:
    """Whether ``run`` is one to recover: anything but the business state ``ok`` (a succeeded run with
    nothing unresolved, unexplained or open). Only such a run offers the failure actions -- drafting a
    handover, requesting a replay, recording a recovery route, loading a ledger, confirming a failure
    class. Reads the business-state annotations when ``run`` has them (one query otherwise)."""
    from runs.attempts.business_state import run_business_state  # the business state reads the checks slice

    return run_business_state(run).state != "ok"


@dataclass(frozen=True)
class RunControls:
    """What ``run_controls`` answers: which of the run page's controls to render."""

    act: bool
    request_replay: bool
    failure_actions: bool
    pause_job: bool


def run_controls(*, user: User, run: Run) -> RunControls:
    """The controls the run page (and its fragments) offers ``user``, decided in this one place.

    ``act``: writes on the run (``may_act_on_run``: ledger, attempt corrections); ``failure_actions``:
    ``act`` on a run that needs recovery (``run_needs_recovery``: draft a handover, record a recovery
    route, load a ledger, confirm a failure class); ``request_replay``: ``may_request_replay`` on such
    a run; ``pause_job``: ``may_pause_job`` on its job. Queries: the guardian checks, plus the business
    state's when ``run`` is not annotated.
    """
    act = may_act_on_run(user=user, run=run)
    recover = run_needs_recovery(run=run) if _active(user) else False
    return RunControls(
        act=act,
        request_replay=recover and may_request_replay(user=user, run=run),
        failure_actions=recover and act,
        pause_job=may_pause_job(user=user, job=run.job),
    )

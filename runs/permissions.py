"""Who sees what: tenants by tenant role, jobs by technical ownership, and the Q object that
limits rows with a run to those (django-guardian object permissions, never a global group check)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet
from guardian.shortcuts import get_objects_for_user

from runs.catalog.models import Job, Tenant

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

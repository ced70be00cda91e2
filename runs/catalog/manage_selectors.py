"""Reads for the admin pages (roles, keys), scoped to who may read them."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AnonymousUser
from django.contrib.contenttypes.models import ContentType
from django.db.models import QuerySet
from guardian.models import UserObjectPermission

from handover.core.people import Person
from runs.audit.receivers import ROLE_BY_CODENAME
from runs.catalog.models import Integration, IntegrationKey, Job, Tenant

User = Person | AnonymousUser


@dataclass(frozen=True)
class RoleHolding:
    """One role one person holds on one tenant or job."""

    user: Person
    role: str
    obj: Tenant | Job

    @property
    def kind(self) -> str:
        return "tenant" if isinstance(self.obj, Tenant) else "job"

    @property
    def role_label(self) -> str:
        return self.role.replace("_", " ")


def role_holding_list() -> list[RoleHolding]:
    """Every role held, by person then object. Queries: three (permissions with users, tenants, jobs)."""
    tenant_type = ContentType.objects.get_for_model(Tenant)
    job_type = ContentType.objects.get_for_model(Job)
    rows = list(
        UserObjectPermission.objects.filter(
            permission__codename__in=list(ROLE_BY_CODENAME), content_type__in=[tenant_type, job_type]
        ).select_related("user", "permission")
    )
    tenants = Tenant.objects.in_bulk([int(r.object_pk) for r in rows if r.content_type_id == tenant_type.pk])
    jobs = Job.objects.in_bulk([int(r.object_pk) for r in rows if r.content_type_id == job_type.pk])
    holdings = []
    for row in rows:
        table = tenants if row.content_type_id == tenant_type.pk else jobs
        obj = table.get(int(row.object_pk))
        if obj is not None:
            holdings.append(RoleHolding(user=row.user, role=ROLE_BY_CODENAME[row.permission.codename], obj=obj))
    return sorted(holdings, key=lambda h: (h.user.get_username().casefold(), h.kind, str(h.obj), h.role))


def integration_key_list() -> QuerySet[IntegrationKey]:
    """Every integration key, newest first, with integration, tenants and creator (no secret is stored)."""
    return (
        IntegrationKey.objects.select_related("integration", "created_by")
        .prefetch_related("tenants")
        .order_by("integration__name", "-created_at", "-id")
    )


def integration_list_all() -> QuerySet[Integration]:
    """Every integration by name (the admin pages' choices)."""
    return Integration.objects.order_by("name")

"""Reads of the audit trail, scoped to who may read it."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from runs.audit.models import AuditEvent
from runs.catalog.manage_selectors import User
from runs.catalog.models import JobTarget
from runs.permissions import is_admin, is_staff, tenant_list_audited


def audit_event_list(*, user: User, action: str | None = None) -> QuerySet[AuditEvent]:
    """Audit events ``user`` may read, newest first.

    Admins (staff) read all. An auditor of a tenant reads the events concerning that tenant, those
    concerning every tenant, and those on jobs that run for it. Anyone else reads none.
    Queries: the auditor's tenants, then the events (actor, subject and job joined), then their tenants.
    """
    events = AuditEvent.objects.all()
    if not user.is_authenticated:
        return events.none()
    if not (is_staff(user) or is_admin(user)):
        audited = list(tenant_list_audited(user=user).values_list("pk", flat=True))
        if not audited:
            return events.none()
        jobs = JobTarget.objects.filter(tenant__in=audited).values("job_id")
        matching = AuditEvent.objects.filter(Q(is_all_tenants=True) | Q(tenants__in=audited) | Q(job__in=jobs)).values(
            "pk"
        )
        # The tenant join may repeat an event; filter by id rather than DISTINCT over a JSON column.
        events = events.filter(pk__in=matching)
    if action:
        events = events.filter(action=action)
    return events.select_related("actor", "subject", "job").prefetch_related("tenants").order_by("-occurred_at", "-id")


def audit_is_readable(*, user: User) -> bool:
    """Whether ``user`` may open the audit trail at all: admins and auditors of some tenant."""
    if not user.is_authenticated:
        return False
    if is_staff(user) or is_admin(user):
        return True
    return tenant_list_audited(user=user).exists()

"""Reads of the audit trail, scoped to who may read it."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from handover.core.errors import Forbidden
from runs.audit.models import AuditEvent
from runs.catalog.manage_selectors import User
from runs.catalog.models import JobTarget
from runs.permissions import is_admin, is_staff, may_read_audit, tenant_list_audited


def audit_require_reader(*, user: User) -> None:
    """Refuse a person who may not open the audit trail at all (Forbidden, 403): the rule is
    ``runs.permissions.may_read_audit`` (admins, staff, auditors of some tenant). The trail is not an
    object to hide, so the refusal is 403, never 404. ``audit_event_list`` calls it; the API calls it
    before it reads the query string. Queries: one for a person who is neither staff nor an admin.
    """
    if not may_read_audit(user=user):
        raise Forbidden("Only admins and auditors read the audit trail.")


def audit_event_list(*, user: User, action: str | None = None) -> QuerySet[AuditEvent]:
    """Audit events ``user`` may read, newest first.

    Admins (staff) read all. An auditor of a tenant reads the events concerning that tenant, those
    concerning every tenant, and those on jobs that run for it. Anyone else is refused
    (``audit_require_reader``: Forbidden, 403). Queries: the auditor's tenants, then the events
    (actor, subject and job joined), then their tenants.
    """
    audit_require_reader(user=user)
    events = AuditEvent.objects.all()
    if not (is_staff(user) or is_admin(user)):
        audited = list(tenant_list_audited(user=user).values_list("pk", flat=True))
        jobs = JobTarget.objects.filter(tenant__in=audited).values("job_id")
        matching = AuditEvent.objects.filter(Q(is_all_tenants=True) | Q(tenants__in=audited) | Q(job__in=jobs)).values(
            "pk"
        )
        # The tenant join may repeat an event; filter by id rather than DISTINCT over a JSON column.
        events = events.filter(pk__in=matching)
    if action:
        events = events.filter(action=action)
    return events.select_related("actor", "subject", "job").prefetch_related("tenants").order_by("-occurred_at", "-id")

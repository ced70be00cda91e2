"""The audit trail page (``/audit/``): admins read all of it, auditors their tenants' part."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from handover.core.pagination import CappedPaginator
from handover.core.replica import replica_reads
from runs.audit.models import AuditEvent
from runs.audit.selectors import audit_event_list, audit_is_readable

# --- audit ----------------------------------------------------------------------------------------


@login_required
@replica_reads
def audit_list_view(request: HttpRequest) -> HttpResponse:
    """The audit trail the viewer may read (admins: all; auditors: their tenants'); 403 for others."""
    if not audit_is_readable(user=request.user):
        raise PermissionDenied("Only admins and auditors read the audit trail.")
    action = request.GET.get("action") or None
    if action not in AuditEvent.Action.values:
        action = None
    page = CappedPaginator(audit_event_list(user=request.user, action=action), 50).get_page(request.GET.get("page"))
    return render(
        request,
        "runs/audit/audit_list.html",
        {"page": page, "actions": AuditEvent.Action.choices, "action": action or ""},
    )

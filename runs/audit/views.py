"""The audit trail page (``/audit/``): admins read all of it, auditors their tenants' part."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from handover.core.pagination import CappedPaginator
from handover.core.replica import replica_reads
from handover.core.views import refusals
from runs.audit.models import AuditEvent
from runs.audit.selectors import audit_event_list

# --- audit ----------------------------------------------------------------------------------------


@login_required
@replica_reads
def audit_list_view(request: HttpRequest) -> HttpResponse:
    """The audit trail the viewer may read (admins: all; auditors: their tenants'); 403 for others
    (``audit_event_list`` refuses them)."""
    action = request.GET.get("action") or None
    if action not in AuditEvent.Action.values:
        action = None
    with refusals():  # the selector's refusal (403) for anyone neither an admin nor an auditor
        events = audit_event_list(user=request.user, action=action)
    page = CappedPaginator(events, 50).get_page(request.GET.get("page"))
    return render(
        request,
        "runs/audit/audit_list.html",
        {"page": page, "actions": AuditEvent.Action.choices, "action": action or ""},
    )

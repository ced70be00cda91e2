"""Whether the navigation links the audit trail: for admins and auditors only (``may_read_audit``)."""

from __future__ import annotations

from django.http import HttpRequest

from runs.permissions import may_read_audit


def audit_link(request: HttpRequest) -> dict[str, bool]:
    """``{"may_read_audit": bool}`` for a signed-in person, ``{}`` otherwise. Queries: at most one."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"may_read_audit": may_read_audit(user=user)}

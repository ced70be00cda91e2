"""The audit trail: the one place AuditEvent rows are written.

Services that change permissions, keys or integrations call ``audit_record`` themselves, with the
acting person. Writes that bypass our services (the Django admin, guardian's permission pages, the
shell) are caught by the receivers in ``runs.audit.receivers``; they learn who acts from ``audit_actor``,
which ``runs.audit.middleware.AuditActorMiddleware`` sets for each request.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any

from django.db import models
from django.utils import timezone

from handover.core.people import Person
from runs.alerts.redaction import redact_text
from runs.audit.models import AuditEvent
from runs.catalog.models import IntegrationKey, Job, Tenant

_actor: ContextVar[Person | None] = ContextVar("handover_audit_actor", default=None)


@contextmanager
def audit_actor(user: Person | None) -> Iterator[None]:
    """Within the block, writes caught by the audit receivers are attributed to ``user``.

    ``None`` keeps whoever acts already (the request's person, else the system).
    """
    if user is None or not user.is_authenticated:
        yield
        return
    token = _actor.set(user)
    try:
        yield
    finally:
        _actor.reset(token)


@contextmanager
def audit_request_actor(user: object) -> Iterator[None]:
    """Like ``audit_actor`` for a request's (lazy) user: it is resolved only if something is audited."""
    token = _actor.set(user)  # type: ignore[arg-type]
    try:
        yield
    finally:
        _actor.reset(token)


def audit_current_actor() -> Person | None:
    """The person the current request acts as (None outside a request: the system or the shell)."""
    user = _actor.get()
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    return user


def audit_record(
    *,
    actor: Person | None,
    action: str,
    summary: str,
    tenants: Iterable[Tenant] = (),
    is_all_tenants: bool = False,
    job: Job | None = None,
    subject: Person | None = None,
    obj: models.Model | None = None,
    object_ref: str = "",
    data: dict[str, Any] | None = None,
) -> AuditEvent:
    """Write one audit event now (UTC), in the caller's transaction.

    ``actor`` None means the system (a beat task, the shell). ``tenants`` are the tenants the act
    concerns; their auditors may read it. ``obj`` names the object acted on (its type and public id,
    or ``object_ref``). ``data`` must hold no secret. ``summary`` is redacted (``runs.alerts.redaction``)
    and cut to 500 characters.
    Side effects: one AuditEvent row and its tenant links.
    """
    if actor is not None and not actor.is_authenticated:
        actor = None
    ref = object_ref
    if obj is not None and not ref:
        ref = str(getattr(obj, "public_id", None) or obj.pk)
    event = AuditEvent.objects.create(
        occurred_at=timezone.now(),
        actor=actor,
        actor_name=actor.get_username()[:150] if actor is not None else "",
        action=action,
        summary=redact_text(summary)[:500] or action,
        subject=subject,
        is_all_tenants=is_all_tenants,
        job=job,
        object_type=obj._meta.label_lower if obj is not None else "",
        object_ref=ref[:200],
        data=data or {},
    )
    tenant_list = [t for t in tenants if t is not None]
    if tenant_list:
        event.tenants.set(tenant_list)
    return event


def audit_key_change(
    *, key: IntegrationKey, actor: Person | None, action: str, grace_ended_at: datetime | None = None
) -> AuditEvent:
    """Record a key's creation, rotation or revocation: by prefix, never the secret.

    The event concerns the key's tenants (or all tenants), so their auditors read it.
    ``grace_ended_at``: for a revocation that cut a rotation's grace short, the revocation time the
    key had (UTC; in ``data`` as ``grace_was_until``).
    """
    verb = {"key_create": "created", "key_rotate": "issued (rotation)", "key_revoke": "revoked"}.get(action, action)
    if grace_ended_at is not None and action == "key_revoke":
        verb = f"revoked now, ending its rotation grace early (it ran until {grace_ended_at:%Y-%m-%d %H:%M:%S}Z)"
    tenants = list(key.tenants.all())
    binding = "all tenants" if key.all_tenants else ", ".join(sorted(t.slug for t in tenants)) or "no tenant"
    data: dict[str, Any] = {
        "integration": key.integration.name,
        "prefix": key.prefix,
        "label": key.label,
        "tenants": sorted(t.slug for t in tenants),
        "all_tenants": key.all_tenants,
    }
    if key.revoked_at is not None:
        data["revoked_at"] = key.revoked_at.isoformat()
    if grace_ended_at is not None:
        data["grace_was_until"] = grace_ended_at.isoformat()
    return audit_record(
        actor=actor,
        action=action,
        summary=f"Integration key {key.prefix}… of {key.integration.name} {verb} (bound to {binding})",
        tenants=tenants,
        is_all_tenants=key.all_tenants,
        obj=key,
        data=data,
    )

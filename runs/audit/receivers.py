"""Audit receivers: record permission and admin changes however they were made.

Signals are for decoupled chores, never domain flow (docs/architecture.md "Layout rules"); the
audit trail is one. Role grants may be made by
``runs.catalog.services.role_grant``, on guardian's admin pages or from the shell, and admin edits
go through Django's admin: the one place that sees all of them is the row written, so the
receivers below record them. The acting person comes from ``runs.audit.services.audit_actor``.
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib import admin
from django.contrib.admin import ModelAdmin
from django.contrib.admin.actions import delete_selected
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.contenttypes.models import ContentType
from django.db.models import Model, QuerySet
from django.db.models.signals import m2m_changed, post_delete, post_save
from django.http import HttpRequest
from django.template.response import TemplateResponse
from guardian.models import GroupObjectPermission, UserObjectPermission

from handover.core.people import Person, person_or_none
from runs.audit.services import audit_current_actor, audit_record
from runs.catalog.models import Job, Tenant

logger = logging.getLogger(__name__)

ROLE_BY_CODENAME = {
    "act_as_support": "support",
    "act_as_business_owner": "business_owner",
    "act_as_auditor": "auditor",
    "act_as_technical_owner": "technical_owner",
}


def _scope(obj: Model | None) -> tuple[list[Tenant], Job | None]:
    """The tenants and job an object belongs to, for the audit event's visibility."""
    if isinstance(obj, Tenant):
        return [obj], None
    if isinstance(obj, Job):
        return [], obj
    tenant = getattr(obj, "tenant", None) if obj is not None else None
    job = getattr(obj, "job", None) if obj is not None else None
    return ([tenant] if isinstance(tenant, Tenant) else []), (job if isinstance(job, Job) else None)


def _permission_changed(row: UserObjectPermission | GroupObjectPermission, granted: bool) -> None:
    codename = row.permission.codename
    obj = row.content_object
    holder = getattr(row, "user", None) or getattr(row, "group", None)
    role = ROLE_BY_CODENAME.get(codename, codename)
    tenants, job = _scope(obj)
    where = f"{type(obj).__name__.lower()} {obj}" if obj is not None else f"object {row.object_pk}"
    holder_name = holder.get_username() if isinstance(holder, Person) else f"group {holder}"
    audit_record(
        actor=audit_current_actor(),
        action="role_grant" if granted else "role_revoke",
        summary=f"{'Granted' if granted else 'Revoked'} {role.replace('_', ' ')} on {where} "
        f"{'to' if granted else 'from'} {holder_name}",
        tenants=tenants,
        job=job,
        subject=holder if isinstance(holder, get_user_model()) else None,
        obj=obj,
        data={"role": role, "permission": codename, "holder": holder_name},
    )


def user_permission_saved(sender: Any, instance: UserObjectPermission, created: bool, **kwargs: Any) -> None:
    if created:
        _permission_changed(instance, granted=True)


def user_permission_deleted(sender: Any, instance: UserObjectPermission, **kwargs: Any) -> None:
    _permission_changed(instance, granted=False)


def group_permission_saved(sender: Any, instance: GroupObjectPermission, created: bool, **kwargs: Any) -> None:
    if created:
        _permission_changed(instance, granted=True)


def group_permission_deleted(sender: Any, instance: GroupObjectPermission, **kwargs: Any) -> None:
    _permission_changed(instance, granted=False)


def user_groups_changed(
    sender: Any, instance: Any, action: str, reverse: bool, model: Any, pk_set: set[int] | None, **kwargs: Any
) -> None:
    """A person joined or left a group: the group's object permissions come or go with it."""
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    if reverse:  # group.user_set.add(...): instance is the group, pk_set are users
        pairs = [(user, instance) for user in get_user_model().objects.filter(pk__in=pk_set or [])]
    else:
        pairs = [(instance, group) for group in Group.objects.filter(pk__in=pk_set or [])]
    verb = "joined" if action == "post_add" else "left"
    for user, group in pairs:
        audit_record(
            actor=audit_current_actor(),
            action="group_change",
            summary=f"{user.get_username()} {verb} group {group.name}",
            is_all_tenants=True,
            subject=user,
            obj=group,
            data={"group": group.name, "change": verb},
        )
    if action == "post_clear":
        audit_record(
            actor=audit_current_actor(),
            action="group_change",
            summary=f"Group memberships of {instance} cleared",
            is_all_tenants=True,
            subject=instance if not reverse else None,
        )


FLAG_WORDS = {ADDITION: "Added", CHANGE: "Changed", DELETION: "Deleted"}


def admin_entry_saved(sender: Any, instance: LogEntry, created: bool, **kwargs: Any) -> None:
    """Every Django admin add, change and delete writes a LogEntry; mirror it into the audit trail."""
    if not created:
        return
    obj = None
    if instance.action_flag != DELETION and instance.content_type is not None:
        try:
            obj = instance.get_edited_object()
        except Exception:  # the object is gone or its model was removed: keep the entry without scope
            obj = None
    tenants, job = _scope(obj)
    content_type = instance.content_type  # the stubs type the foreign key loosely
    label = str(content_type.model) if isinstance(content_type, ContentType) else "object"
    message = instance.get_change_message()
    # People and groups carry site-wide powers (staff, superuser, group permissions): every
    # tenant's auditors may read those edits.
    site_wide = isinstance(content_type, ContentType) and content_type.app_label == "auth"
    audit_record(
        actor=instance.user if isinstance(instance.user, Person) else None,
        action="admin_edit",
        is_all_tenants=site_wide,
        summary=f"{FLAG_WORDS.get(instance.action_flag, 'Edited')} {label} {instance.object_repr}"
        + (f": {message}" if message else ""),
        tenants=tenants,
        job=job,
        object_ref=str(instance.object_id or ""),
        data={"model": label, "object_id": instance.object_id, "flag": instance.action_flag},
    )


def audited_delete_selected(
    modeladmin: ModelAdmin[Any], request: HttpRequest, queryset: QuerySet[Any]
) -> TemplateResponse | None:
    """Django's bulk delete, audited: above one object Django writes its log entries in bulk,
    which sends no signal, so the deletion is recorded here (one event per object)."""
    confirmed = bool(request.POST.get("post"))
    doomed = [(str(obj.pk), str(obj), *_scope(obj)) for obj in queryset] if confirmed else []
    response = delete_selected(modeladmin, request, queryset)
    if confirmed and response is None and len(doomed) > 1:
        label = queryset.model._meta.model_name
        for pk, text, tenants, job in doomed:
            audit_record(
                actor=person_or_none(request.user),
                action="admin_edit",
                summary=f"Deleted {label} {text} (bulk)",
                tenants=tenants,
                job=job,
                object_ref=pk,
                data={"model": label, "object_id": pk, "flag": DELETION},
            )
    return response


audited_delete_selected.allowed_permissions = ("delete",)  # type: ignore[attr-defined]
audited_delete_selected.short_description = delete_selected.short_description  # type: ignore[attr-defined]


def connect() -> None:
    """Connect the receivers (``RunsConfig.ready``). Idempotent: each has a dispatch uid."""
    post_save.connect(user_permission_saved, sender=UserObjectPermission, dispatch_uid="audit-uop-save")
    post_delete.connect(user_permission_deleted, sender=UserObjectPermission, dispatch_uid="audit-uop-delete")
    post_save.connect(group_permission_saved, sender=GroupObjectPermission, dispatch_uid="audit-gop-save")
    post_delete.connect(group_permission_deleted, sender=GroupObjectPermission, dispatch_uid="audit-gop-delete")
    m2m_changed.connect(user_groups_changed, sender=get_user_model().groups.through, dispatch_uid="audit-groups")
    post_save.connect(admin_entry_saved, sender=LogEntry, dispatch_uid="audit-admin-entry")
    admin.site.add_action(audited_delete_selected, "delete_selected")

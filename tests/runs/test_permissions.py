"""Roles, keys and integration security as services, and the audit trail they write."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Group
from django.utils import timezone
from guardian.shortcuts import assign_perm, remove_perm

from handover.core.errors import DomainError, Forbidden, InvalidTransition
from runs.attempts.models import Run
from runs.audit.models import AuditEvent
from runs.audit.selectors import audit_event_list, audit_require_reader
from runs.audit.services import audit_actor
from runs.catalog.authentication import integration_key_authenticate
from runs.catalog.keys import integration_key_rotate, integration_security, integration_security_update
from runs.catalog.manage_selectors import role_holding_list
from runs.catalog.models import IntegrationKey
from runs.catalog.services import (
    integration_get_or_create,
    integration_key_create,
    integration_key_revoke,
    role_grant,
    role_revoke,
)
from runs.permissions import may_read_audit
from tests.factories import JobFactory, JobTargetFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_role_grant_records_actor_role_and_tenant() -> None:
    admin, person, tenant = UserFactory(admin=True), UserFactory(), TenantFactory()

    role_grant(user=person, role="auditor", obj=tenant, actor=admin)

    event = AuditEvent.objects.get()
    assert (event.action, event.actor, event.subject, event.actor_name) == (
        "role_grant",
        admin,
        person,
        admin.username,
    )
    assert list(event.tenants.all()) == [tenant]
    assert event.data["role"] == "auditor"
    assert event.occurred_at is not None
    assert person.has_perm("runs.act_as_auditor", tenant)


def test_role_grant_twice_records_once_and_revoke_records_once() -> None:
    admin, person, job = UserFactory(admin=True), UserFactory(), JobFactory()

    role_grant(user=person, role="technical_owner", obj=job, actor=admin)
    role_grant(user=person, role="technical_owner", obj=job, actor=admin)
    role_revoke(user=person, role="technical_owner", obj=job, actor=admin)
    role_revoke(user=person, role="technical_owner", obj=job, actor=admin)

    assert list(AuditEvent.objects.order_by("id").values_list("action", "job_id")) == [
        ("role_grant", job.pk),
        ("role_revoke", job.pk),
    ]


def test_grant_outside_services_is_audited_with_the_current_actor() -> None:
    # guardian's admin pages call assign_perm directly; the receiver still records it
    admin, person, tenant = UserFactory(admin=True), UserFactory(), TenantFactory()

    with audit_actor(admin):
        assign_perm("runs.act_as_support", person, tenant)
    remove_perm("runs.act_as_support", person, tenant)

    grant, revoke = AuditEvent.objects.order_by("id")
    assert (grant.action, grant.actor) == ("role_grant", admin)
    assert (revoke.action, revoke.actor, revoke.actor_name) == ("role_revoke", None, "")


def test_group_membership_and_group_permissions_are_audited() -> None:
    person, tenant = UserFactory(), TenantFactory()
    group = Group.objects.create(name="night shift")

    assign_perm("runs.act_as_support", group, tenant)
    person.groups.add(group)

    actions = list(AuditEvent.objects.order_by("id").values_list("action", flat=True))
    assert actions == ["role_grant", "group_change"]


def test_admin_log_entries_become_audit_events() -> None:
    admin, tenant = UserFactory(admin=True), TenantFactory()

    LogEntry.objects.log_actions(admin.pk, [tenant], CHANGE, change_message="Changed name.", single_object=True)

    event = AuditEvent.objects.get()
    assert (event.action, event.actor) == ("admin_edit", admin)
    assert list(event.tenants.all()) == [tenant]
    assert "Changed name." in event.summary


def test_key_create_and_revoke_are_audited_by_prefix_never_the_secret() -> None:
    admin, tenant = UserFactory(admin=True), TenantFactory()
    integration = integration_get_or_create(source="generic")

    issued = integration_key_create(integration=integration, tenants=[tenant], created_by=admin, label="grafana")
    integration_key_revoke(key=issued.record, actor=admin)
    integration_key_revoke(key=issued.record, actor=admin)  # idempotent: recorded once

    created, revoked = AuditEvent.objects.order_by("id")
    assert (created.action, revoked.action) == ("key_create", "key_revoke")
    assert created.data["prefix"] == issued.record.prefix
    assert list(created.tenants.all()) == [tenant]
    for event in (created, revoked):
        assert issued.key not in str(event.data) + event.summary
    assert integration_key_authenticate(issued.key) is None


def test_key_rotation_keeps_the_binding_and_the_old_key_works_through_the_grace_period() -> None:
    admin, tenant = UserFactory(admin=True), TenantFactory()
    integration = integration_get_or_create(source="generic")
    old = integration_key_create(integration=integration, tenants=[tenant], label="am")

    new = integration_key_rotate(key=old.record, actor=admin, grace_seconds=3600)

    assert list(new.record.tenants.all()) == [tenant]
    assert new.record.label == "am"
    assert integration_key_authenticate(new.key) == new.record
    assert integration_key_authenticate(old.key) == old.record  # still in its grace period
    with time_machine.travel(timezone.now() + timedelta(hours=1, seconds=1)):
        assert integration_key_authenticate(old.key) is None
        assert integration_key_authenticate(new.key) == new.record
    actions = list(AuditEvent.objects.filter(actor=admin).order_by("id").values_list("action", flat=True))
    assert actions == ["key_rotate", "key_revoke"]


def test_rotating_a_revoked_key_is_refused() -> None:
    integration = integration_get_or_create(source="generic")
    issued = integration_key_create(integration=integration, all_tenants=True)
    integration_key_revoke(key=issued.record)

    with pytest.raises(InvalidTransition):
        integration_key_rotate(key=issued.record, actor=None)
    assert IntegrationKey.objects.count() == 1


def test_integration_security_update_validates_and_audits_names_not_values() -> None:
    admin = UserFactory(admin=True)
    integration = integration_get_or_create(source="generic")

    with pytest.raises(DomainError) as error:
        integration_security_update(
            integration=integration,
            actor=admin,
            redact_names=["ok", "bad name!"],
            signing_secret_env="DJANGO_SECRET_KEY",
        )
    assert set(error.value.errors) == {"redact_names", "signing_secret_env"}

    integration_security_update(
        integration=integration,
        actor=admin,
        redact_names=["Customer_Ref", " "],
        signing_secret_env="HANDOVER_SIGNING_SECRET_GENERIC",
        signature_tolerance_seconds=120,
    )
    security = integration_security(integration=integration)
    assert security.redact_names == ("Customer_Ref",)
    assert security.signing_secret_env == "HANDOVER_SIGNING_SECRET_GENERIC"
    assert security.signature_tolerance_seconds == 120
    event = AuditEvent.objects.get(action="integration_update")
    assert event.actor == admin
    assert event.data["after"]["signing_secret_env"] == "HANDOVER_SIGNING_SECRET_GENERIC"

    integration_security_update(
        integration=integration,
        actor=admin,
        redact_names=["Customer_Ref"],
        signing_secret_env="HANDOVER_SIGNING_SECRET_GENERIC",
        signature_tolerance_seconds=120,
    )
    assert AuditEvent.objects.filter(action="integration_update").count() == 1  # nothing changed


def test_auditors_read_their_tenants_events_and_site_wide_ones_only() -> None:
    admin, auditor, support = UserFactory(admin=True), UserFactory(), UserFactory()
    mine, other = TenantFactory(), TenantFactory()
    job_of_mine = JobTargetFactory(tenant=mine).job
    role_grant(user=auditor, role="auditor", obj=mine, actor=admin)
    role_grant(user=support, role="support", obj=other, actor=admin)
    role_grant(user=support, role="technical_owner", obj=job_of_mine, actor=admin)
    integration_key_create(integration=integration_get_or_create(source="generic"), all_tenants=True, created_by=admin)

    seen = {e.summary for e in audit_event_list(user=auditor)}

    assert len(seen) == 3  # own grant, the job running for mine, the all-tenant key
    assert not any(other.slug in s for s in seen)
    assert audit_event_list(user=admin).count() == 4
    assert may_read_audit(user=auditor) and not may_read_audit(user=support)
    with pytest.raises(Forbidden):
        audit_event_list(user=support)


@pytest.mark.parametrize("role", ["business_owner", None])  # a reader of the tenant, and an outsider
def test_the_audit_selector_refuses_who_may_not_read_the_trail(role: str | None) -> None:
    """The refusal the audit page and API used to make themselves, asked of the selector directly."""
    admin, person, tenant = UserFactory(admin=True), UserFactory(), TenantFactory()
    if role:
        role_grant(user=person, role=role, obj=tenant, actor=admin)
    events = AuditEvent.objects.count()

    with pytest.raises(Forbidden):
        audit_require_reader(user=person)
    with pytest.raises(Forbidden):
        audit_event_list(user=person, action=AuditEvent.Action.ROLE_GRANT)
    assert AuditEvent.objects.count() == events  # a refused read writes nothing either
    audit_require_reader(user=admin)


def test_role_holding_list_names_person_role_and_object() -> None:
    person, tenant, job = UserFactory(username="zoe"), TenantFactory(slug="acme"), JobFactory(key="export")
    role_grant(user=person, role="support", obj=tenant)
    role_grant(user=person, role="technical_owner", obj=job)

    holdings = [(h.user.username, h.role, h.kind, str(h.obj)) for h in role_holding_list()]

    assert holdings == [("zoe", "technical_owner", "job", "export"), ("zoe", "support", "tenant", "acme")]


def test_audit_rows_have_content_types_for_the_objects_acted_on() -> None:
    integration = integration_get_or_create(source="generic")
    issued = integration_key_create(integration=integration, all_tenants=True)
    event = AuditEvent.objects.get()
    assert event.object_type == "runs.integrationkey"
    assert event.object_ref == str(issued.record.public_id)


@pytest.mark.postgres
def test_audit_trail_is_append_only_on_postgresql() -> None:
    from django.db import IntegrityError, connection, transaction

    if connection.vendor != "postgresql":
        pytest.skip("the append-only trigger exists on PostgreSQL only")
    role_grant(user=UserFactory(), role="support", obj=TenantFactory(), actor=UserFactory(admin=True))
    event = AuditEvent.objects.get()
    with pytest.raises(IntegrityError), transaction.atomic():
        AuditEvent.objects.filter(pk=event.pk).update(summary="rewritten")
    with pytest.raises(IntegrityError), transaction.atomic():
        AuditEvent.objects.filter(pk=event.pk).delete()


# --- the role predicates (runs/permissions.py) -----------------------------------------------------

ROLE_ROWS = ("support", "business_owner", "auditor", "technical_owner", "admin", "other_support", "nobody")
# role -> (may_read_run, may_act_on_run, may_request_replay, may_pause_job, may_pause_target)
EXPECTED = {
    "support": (True, True, True, False, True),
    "business_owner": (True, False, False, False, False),
    "auditor": (True, False, False, False, False),
    "technical_owner": (True, True, False, True, True),
    "admin": (True, True, True, True, True),
    "other_support": (False, False, False, False, False),
    "nobody": (False, False, False, False, False),
}


@pytest.mark.parametrize("role", ROLE_ROWS)
def test_each_role_rule_has_one_predicate(role: str) -> None:
    from runs.permissions import (
        may_act_on_run,
        may_act_on_runs,
        may_act_on_target,
        may_pause_job,
        may_pause_target,
        may_read_run,
        may_request_replay,
        run_visibility_filter,
    )
    from tests.factories import RunFactory

    job, tenant, other = JobFactory(), TenantFactory(), TenantFactory()
    target = JobTargetFactory(job=job, tenant=tenant)
    run = RunFactory(job=job, tenant=tenant, target=target)
    person = UserFactory(admin=role == "admin")
    if role in ("support", "business_owner", "auditor"):
        role_grant(user=person, role=role, obj=tenant)
    elif role == "technical_owner":
        role_grant(user=person, role=role, obj=job)
    elif role == "other_support":
        role_grant(user=person, role="support", obj=other)

    reads, acts, requests, pauses_job, pauses_target = EXPECTED[role]
    assert may_read_run(user=person, run=run) is reads
    assert Run.objects.filter(run_visibility_filter(user=person), pk=run.pk).exists() is reads
    assert may_act_on_run(user=person, run=run) is acts
    assert may_act_on_target(user=person, target=target) is acts
    assert may_act_on_runs(user=person, runs=[run]) is acts
    assert may_request_replay(user=person, run=run) is requests
    assert may_pause_job(user=person, job=job) is pauses_job
    assert may_pause_target(user=person, target=target) is pauses_target


def test_acting_on_several_runs_needs_each_of_them() -> None:
    from runs.permissions import may_act_on_runs
    from tests.factories import RunFactory

    job, tenant, other = JobFactory(), TenantFactory(), TenantFactory()
    mine, theirs = RunFactory(job=job, tenant=tenant), RunFactory(job=job, tenant=other)
    person = UserFactory()
    role_grant(user=person, role="support", obj=tenant)

    assert may_act_on_runs(user=person, runs=[mine])
    assert not may_act_on_runs(user=person, runs=[mine, theirs])
    assert not may_act_on_runs(user=person, runs=[])
    role_grant(user=person, role="technical_owner", obj=job)
    assert may_act_on_runs(user=person, runs=[mine, theirs])


def test_the_role_rule_is_written_once() -> None:
    """No module but ``runs/permissions.py`` names the role permissions to decide who may act (the audit
    trail's labels, the role grants and the approver lists name them for what they are)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    allowed = {
        "runs/permissions.py",
        "runs/catalog/models.py",  # declares them
        "runs/catalog/services.py",  # grants them
        "runs/audit/receivers.py",  # labels them in the audit trail
    }
    pattern = re.compile(r"act_as_(support|technical_owner|business_owner|auditor)")
    found = sorted(
        str(path.relative_to(root))
        for app in ("runs", "handover", "approvals")
        for path in (root / app).rglob("*.py")
        if "migrations" not in path.parts
        and str(path.relative_to(root)) not in allowed
        and pattern.search(path.read_text(encoding="utf-8"))
    )
    assert found == []

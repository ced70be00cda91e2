"""Revoking an integration key is immediate, also during a rotation's grace period, and always audited."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from runs.alerts.models import Delivery
from runs.audit.models import AuditEvent
from runs.catalog.keys import integration_key_rotate
from runs.catalog.models import IntegrationKey
from runs.catalog.services import integration_get_or_create, integration_key_create, integration_key_revoke
from tests.conftest import fixture_path
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_revoking_a_key_during_its_rotation_grace_refuses_the_next_post_and_is_audited(
    post_alert: Any, story_tenants: dict[str, Any]
) -> None:
    admin = UserFactory(admin=True)
    integration = integration_get_or_create(source="generic")
    old = integration_key_create(integration=integration, tenants=list(story_tenants.values()), label="grafana")
    integration_key_rotate(key=old.record, actor=admin, grace_seconds=7 * 24 * 3600)
    body = fixture_path("generic", "01-first-failure.json")
    assert post_alert("generic", body, old.key).status_code == 202  # in its grace: still works

    revoked = integration_key_revoke(key=old.record, actor=admin)

    assert revoked.revoked_at is not None and revoked.revoked_at <= timezone.now()
    response = post_alert("generic", body, old.key)
    assert response.status_code == 401
    assert Delivery.objects.count() == 1  # the refused post stored nothing
    events = list(AuditEvent.objects.filter(action=AuditEvent.Action.KEY_REVOKE).order_by("id"))
    assert len(events) == 2  # the rotation's (future) revocation, then this one
    assert events[1].actor == admin and "grace" in events[1].summary
    assert events[1].data["prefix"] == old.record.prefix and "grace_was_until" in events[1].data
    assert old.key not in events[1].summary + str(events[1].data)


def test_revoking_twice_records_once_and_keeps_the_first_time() -> None:
    integration = integration_get_or_create(source="generic")
    issued = integration_key_create(integration=integration, all_tenants=True)
    first = integration_key_revoke(key=issued.record).revoked_at

    with time_machine.travel(timezone.now() + timedelta(minutes=5)):
        again = integration_key_revoke(key=issued.record)

    assert again.revoked_at == first
    assert AuditEvent.objects.filter(action=AuditEvent.Action.KEY_REVOKE).count() == 1


def test_a_later_scheduled_revocation_never_extends_an_earlier_one() -> None:
    integration = integration_get_or_create(source="generic")
    issued = integration_key_create(integration=integration, all_tenants=True)
    soon = timezone.now() + timedelta(hours=1)
    integration_key_revoke(key=issued.record, at=soon)

    integration_key_revoke(key=issued.record, at=soon + timedelta(days=1))

    assert IntegrationKey.objects.get(pk=issued.record.pk).revoked_at == soon
    assert AuditEvent.objects.filter(action=AuditEvent.Action.KEY_REVOKE).count() == 1

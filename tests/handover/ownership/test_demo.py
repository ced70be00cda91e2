"""The demo's owners: set through the services on a fixed date, once (a second load changes nothing)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from handover.notifications.models import Team
from handover.ownership.demo import demo_ownership_load
from handover.ownership.models import JobOwnership, TargetOwnership
from runs.timeline.models import TimelineEvent
from tests.factories import JobFactory, JobTargetFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_the_demo_names_owners_once_on_a_fixed_date() -> None:
    job = JobFactory(key="nightly-invoice-export")
    target = JobTargetFactory(job=job, tenant=TenantFactory(slug="dunmore-pharmacy"))
    JobTargetFactory(job=job, tenant=TenantFactory(slug="acme-foods"))
    UserFactory(username="admin", admin=True)
    owner, support = UserFactory(username="tech-owner"), UserFactory(username="support")

    assert demo_ownership_load() and demo_ownership_load()

    row = JobOwnership.objects.get(job=job)
    assert (row.team.name, row.escalation_owner, row.set_at) == (
        "Invoicing platform",
        owner,
        datetime(2026, 11, 20, 9, 0, tzinfo=UTC),
    )
    assert TargetOwnership.objects.get().target == target
    assert TargetOwnership.objects.get().escalation_owner == support
    assert sorted(Team.objects.get(name="Invoicing platform").members.values_list("username", flat=True)) == [
        "support",
        "tech-owner",
    ]
    events = TimelineEvent.objects.filter(kind=TimelineEvent.Kind.OWNERSHIP_CHANGED)
    assert events.count() == 2 and {e.occurred_at for e in events} == {datetime(2026, 11, 20, 9, 0, tzinfo=UTC)}


def test_the_demo_names_no_owner_without_its_job() -> None:
    assert demo_ownership_load() is False
    assert not JobOwnership.objects.exists()

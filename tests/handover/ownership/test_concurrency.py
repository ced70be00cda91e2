"""Two aged-work sweeps at the same instant send each ladder step once (PostgreSQL: real unique-index
waits). Threads released together by one Barrier; the losing sweep really ran and found the step taken."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection  # noqa: F401 - read by the skipif condition

from handover.notifications.models import Notification, Team
from handover.ownership.models import AgedWorkEscalation
from handover.ownership.selectors import aged_work_list
from handover.ownership.services import SweepResult, aged_item_escalate, aged_work_escalate, job_ownership_set
from runs.attempts.models import Run
from runs.timeline.models import TimelineEvent
from tests.concurrency import run_concurrently
from tests.factories import UserFactory
from tests.handover.helpers import World

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif("connection.vendor != 'postgresql'", reason="real row locks and unique indexes need PostgreSQL"),
]
T = datetime(2026, 11, 28, 6, 0, tzinfo=UTC)


def test_two_escalations_of_one_step_at_once_write_it_once(world: World) -> None:
    Run.objects.filter(pk=world.run.pk).update(status_changed_at=T)
    now = T + timedelta(days=1)
    [item] = aged_work_list(now=now, kinds=["failed_run"])  # both read it before either wrote: the race

    results = run_concurrently([lambda: aged_item_escalate(item=item, step=1, now=now)] * 2)

    assert sorted(results) == [False, True]  # the loser met the unique row and stopped
    assert AgedWorkEscalation.objects.count() == 1
    assert TimelineEvent.objects.filter(kind=TimelineEvent.Kind.AGED_WORK_ESCALATED).count() == 1
    assert Notification.objects.filter(event="aged_work").count() == 1  # the technical owner (no owner named)


def test_two_sweeps_at_once_send_each_step_once(world: World) -> None:
    team = Team.objects.create(name="Billing")
    team.members.add(world.owner, UserFactory(username="bea-billing"))
    job_ownership_set(actor=world.owner, job=world.job, team=team, escalation_owner=world.support)
    Run.objects.filter(pk=world.run.pk).update(status_changed_at=T)
    now = T + timedelta(days=1, minutes=5)

    results = run_concurrently([lambda: aged_work_escalate(now=now)] * 2)

    assert all(isinstance(r, SweepResult) and r.aged >= 1 for r in results)
    # one sweep sent the step; the other either found it taken at insert or saw it already sent
    assert sorted(r.sent for r in results) == [0, 1]
    assert AgedWorkEscalation.objects.filter(kind="failed_run", subject=world.run.public_id).count() == 1
    assert TimelineEvent.objects.filter(kind=TimelineEvent.Kind.AGED_WORK_ESCALATED).count() == 1
    assert Notification.objects.filter(event="aged_work").count() == 2  # olga, sam once each (bea sees nothing)

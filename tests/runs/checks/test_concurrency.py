"""Concurrent sweeps on PostgreSQL: every due check settled once, one event each, losers really skipped."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
import time_machine
from django.db import connection

from handover.core.errors import InvalidTransition
from runs.attempts.models import Run
from runs.catalog.models import Job
from runs.catalog.services import role_grant
from runs.checks.decisions import next_run_check_waive
from runs.checks.missed_runs import run_sweep_missed
from runs.checks.models import NextRunCheck
from runs.checks.sweep import next_run_check_sweep
from runs.timeline.models import TimelineEvent
from tests.concurrency import run_concurrently
from tests.factories import JobTargetFactory, NextRunCheckFactory, TenantFactory, UserFactory

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="SKIP LOCKED row claims and real concurrency need PostgreSQL"
    ),
]
NOW = datetime(2026, 12, 31, 12, 0, tzinfo=UTC)


def test_four_concurrent_sweeps_settle_every_due_check_exactly_once() -> None:
    target = JobTargetFactory()
    checks = [
        NextRunCheckFactory(target=target, expected_at=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=i))
        for i in range(250)
    ]

    with time_machine.travel(NOW, tick=False):
        results = run_concurrently([lambda: next_run_check_sweep(batch_size=25)] * 4)

    assert NextRunCheck.objects.filter(status=NextRunCheck.Status.FAILED).count() == len(checks)
    assert TimelineEvent.objects.filter(kind="next_run_check_failed").count() == len(checks)
    assert sum(r.failed for r in results) == len(checks)
    # the losing path really ran: rows another sweep held or had settled were skipped, not redone
    assert sum(r.skipped for r in results) == sum(r.due for r in results) - len(checks) > 0


def test_sweep_and_waiver_racing_on_one_check_leave_one_outcome() -> None:
    check = NextRunCheckFactory(expected_at=NOW - timedelta(hours=2))
    person = UserFactory()
    role_grant(user=person, role="support", obj=check.target.tenant)

    def waive() -> str:
        try:
            next_run_check_waive(check=check, actor=person, owner=person, checkpoint=date(2027, 2, 1), reason="far")
            return "waived"
        except InvalidTransition:
            return "refused"

    def sweep() -> str:
        return "failed" if next_run_check_sweep().failed else "skipped"

    with time_machine.travel(NOW, tick=False):
        results = run_concurrently([waive, sweep])

    check.refresh_from_db()
    assert sorted(results) in (["failed", "refused"], ["skipped", "waived"])
    assert check.status == ("waived" if "waived" in results else "failed")
    assert TimelineEvent.objects.filter(kind__in=["next_run_check_failed", "next_run_check_waived"]).count() == 1


def test_concurrent_missed_run_sweeps_create_one_run_and_one_event_per_fire_time(story_job: Job) -> None:
    target = JobTargetFactory(job=story_job, tenant=TenantFactory(), created_at=NOW - timedelta(days=5, hours=12))

    with time_machine.travel(NOW, tick=False):
        results = run_concurrently([run_sweep_missed] * 4)

    # fire times 2026-12-26 .. 12-31 at 02:00 CET, all past their deadline
    assert sum(results) == 6
    assert Run.objects.filter(target=target, status=Run.Status.MISSED).count() == 6
    assert TimelineEvent.objects.filter(kind="run_missed").count() == 6

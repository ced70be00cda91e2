"""Missed runs (one per fire time, never twice), catch-up covered vs omitted, and overlap detection."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine

from runs.attempts.models import Attempt, Run
from runs.catalog.models import Job, JobTarget
from runs.catalog.selectors import target_outage_list
from runs.checks import tasks as check_tasks
from runs.checks.missed_runs import run_sweep_missed
from runs.timeline.models import TimelineEvent
from tests.factories import JobTargetFactory, TenantFactory

pytestmark = pytest.mark.django_db

CREATED = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SLOT_21 = datetime(2026, 11, 21, 1, 0, tzinfo=UTC)  # 02:00 CET
SLOT_22 = SLOT_21 + timedelta(days=1)
SLOT_23 = SLOT_22 + timedelta(days=1)


@pytest.fixture
def target(story_job: Job) -> JobTarget:
    """A success-reporting target of the story job, created on 2026-11-20."""
    return JobTargetFactory(job=story_job, tenant=TenantFactory(slug="harbor"), created_at=CREATED)


def sweep(at: datetime) -> int:
    with time_machine.travel(at, tick=False):
        return run_sweep_missed()


def missed_runs(target: JobTarget) -> list[Run]:
    return list(Run.objects.filter(target=target, status=Run.Status.MISSED).order_by("scheduled_for"))


def generic(slot: datetime, **fields: Any) -> dict[str, Any]:
    body = {
        "schema": "handover.alert/v1",
        "job": "nightly-invoice-export",
        "tenant": "harbor",
        "environment": "prod",
        "scheduled_for": slot.isoformat(),
        "execution_id": f"exp-{slot:%Y%m%d}",
        "status": "succeeded",
        "ended_at": (slot + timedelta(minutes=10)).isoformat(),
    }
    body.update(fields)
    return body


def test_each_fire_time_without_a_report_by_its_deadline_becomes_one_missed_run(target: JobTarget) -> None:
    created = sweep(SLOT_23 + timedelta(minutes=30))  # exactly the 23rd's deadline

    runs = missed_runs(target)
    assert created == 3
    assert [r.scheduled_for for r in runs] == [SLOT_21, SLOT_22, SLOT_23]
    first = runs[0]
    assert (first.window_start, first.window_end) == (
        datetime(2026, 11, 19, 23, 0, tzinfo=UTC),
        datetime(2026, 11, 20, 23, 0, tzinfo=UTC),
    )
    assert first.status_changed_at == SLOT_23 + timedelta(minutes=30)
    events = TimelineEvent.objects.filter(kind="run_missed").order_by("occurred_at")
    assert [e.run for e in events] == runs
    assert events[0].occurred_at == SLOT_21 + timedelta(minutes=30)
    assert "2026-11-21 02:00 CET" in events[0].summary


def test_missed_run_sweep_never_alerts_twice_for_a_fire_time(target: JobTarget) -> None:
    assert sweep(SLOT_22 + timedelta(minutes=29, seconds=59)) == 1  # the 22nd's deadline is one second away
    assert sweep(SLOT_22 + timedelta(minutes=30)) == 1
    assert sweep(SLOT_22 + timedelta(hours=5)) == 0
    with time_machine.travel(SLOT_22 + timedelta(hours=6), tick=False):
        assert check_tasks.run_sweep_missed() == 0  # the task twice: nothing new

    assert len(missed_runs(target)) == 2
    assert TimelineEvent.objects.filter(kind="run_missed").count() == 2


def test_a_reported_fire_time_is_not_missed_and_a_late_report_updates_the_missed_run(
    target: JobTarget, make_key: Any, post_alert: Any
) -> None:
    key = make_key("generic", tenants=[target.tenant])
    post_alert("generic", generic(SLOT_21), key)
    sweep(SLOT_22 + timedelta(hours=1))
    assert [r.scheduled_for for r in missed_runs(target)] == [SLOT_22]

    # the 22nd's run reports late (a catch-up): the same run, now succeeded; no second run
    response = post_alert("generic", generic(SLOT_22, trigger="catch_up"), key)

    assert response.json()["alerts"][0]["outcome"] == "accepted"
    run = Run.objects.get(scheduled_for=SLOT_22)
    assert run.status == Run.Status.SUCCEEDED
    assert Run.objects.filter(target=target).count() == 2
    assert sweep(SLOT_22 + timedelta(hours=2)) == 0


@pytest.mark.parametrize("change", ["failures_only", "inactive", "paused"])
def test_no_missed_runs_for_targets_that_report_no_successes_or_are_off(
    target: JobTarget, story_job: Job, change: str
) -> None:
    if change == "failures_only":
        JobTarget.objects.filter(pk=target.pk).update(reports_successes=False)
    elif change == "inactive":
        JobTarget.objects.filter(pk=target.pk).update(is_active=False)
    else:
        Job.objects.filter(pk=story_job.pk).update(paused_at=CREATED, pause_reason="migration")

    assert sweep(SLOT_23 + timedelta(hours=1)) == 0
    assert not Run.objects.exists()


def test_a_long_outage_is_walked_from_the_latest_run_a_few_slots_per_tick(target: JobTarget) -> None:
    now = SLOT_21 + timedelta(days=9, hours=1)
    with time_machine.travel(now, tick=False):
        assert run_sweep_missed(max_slots_per_target=4) == 4
        assert run_sweep_missed(max_slots_per_target=4) == 4
        assert run_sweep_missed(max_slots_per_target=4) == 2
        assert run_sweep_missed(max_slots_per_target=4) == 0
    assert len(missed_runs(target)) == 10


# --- catch-up: covered vs omitted ---------------------------------------------------------------


def catch_up(run: Run, started_at: datetime) -> None:
    Attempt.objects.create(
        run=run,
        execution_id=f"catch-up-{run.pk}",
        trigger=Attempt.Trigger.CATCH_UP,
        status=Attempt.Status.SUCCEEDED,
        started_at=started_at,
        ended_at=started_at + timedelta(minutes=5),
    )
    Run.objects.filter(pk=run.pk).update(status=Run.Status.SUCCEEDED)


@pytest.mark.parametrize(
    ("policy", "expire", "covered", "awaiting", "omitted"),
    [
        # latest_only keeps a missed streak instead of missed runs: tests/runs/checks/test_slot_placement.py
        ("catch_up_all", None, [SLOT_23], [SLOT_21, SLOT_22], []),
        ("expire_after", 36 * 3600, [SLOT_23], [SLOT_22], [SLOT_21]),
    ],
)
def test_outage_lists_periods_covered_by_catch_up_and_those_omitted(
    target: JobTarget,
    story_job: Job,
    policy: str,
    expire: int | None,
    covered: list[datetime],
    awaiting: list[datetime],
    omitted: list[datetime],
) -> None:
    Job.objects.filter(pk=story_job.pk).update(missed_run_policy=policy, missed_run_expire_after_seconds=expire)
    target.refresh_from_db()
    sweep(SLOT_23 + timedelta(hours=1))
    catch_up(Run.objects.get(scheduled_for=SLOT_23), started_at=SLOT_23 + timedelta(hours=8))

    outages = target_outage_list(target=target, now=SLOT_23 + timedelta(days=1))

    assert len(outages) == 1
    outage = outages[0]
    assert outage.slots == (SLOT_21, SLOT_22, SLOT_23)
    assert (list(outage.covered), list(outage.awaiting), list(outage.omitted)) == (covered, awaiting, omitted)
    assert outage.policy == policy


# --- overlap ------------------------------------------------------------------------------------


@pytest.fixture
def post(target: JobTarget, make_key: Any, post_alert: Any) -> Any:
    key = make_key("generic", tenants=[target.tenant])

    def _post(slot: datetime, **fields: Any) -> dict[str, Any]:
        response = post_alert("generic", generic(slot, **fields), key)
        assert response.status_code == 202
        return response.json()["alerts"][0]

    return _post


@pytest.mark.parametrize(
    ("policy", "kind", "is_breach"),
    [("skip", "overlap_breach", True), ("queue", "overlap_breach", True), ("allow", "overlap_detected", False)],
)
def test_an_attempt_starting_while_an_earlier_run_runs_is_recorded_on_both_timelines(
    story_job: Job, post: Any, policy: str, kind: str, is_breach: bool
) -> None:
    Job.objects.filter(pk=story_job.pk).update(overlap_policy=policy)
    post(SLOT_21, status="running", started_at=SLOT_21.isoformat(), ended_at=None)

    post(SLOT_22, status="running", started_at=SLOT_22.isoformat(), ended_at=None)

    earlier, later = Run.objects.get(scheduled_for=SLOT_21), Run.objects.get(scheduled_for=SLOT_22)
    on_later = TimelineEvent.objects.get(run=later, kind=kind)
    on_earlier = TimelineEvent.objects.get(run=earlier, kind=kind)
    assert on_later.data == on_earlier.data
    assert on_later.data["active_run"] == str(earlier.public_id)
    assert on_later.data["started_run"] == str(later.public_id)
    assert (on_later.data["policy"], on_later.data["is_breach"]) == (policy, is_breach)
    assert on_later.attempt == later.attempts.get() and on_earlier.attempt == earlier.attempts.get()
    assert on_later.occurred_at == SLOT_22


def test_no_overlap_when_the_earlier_run_finished_and_none_twice_on_redelivery(story_job: Job, post: Any) -> None:
    Job.objects.filter(pk=story_job.pk).update(overlap_policy="skip")
    post(SLOT_21)  # succeeded
    post(SLOT_22, status="running", started_at=SLOT_22.isoformat(), ended_at=None)
    assert not TimelineEvent.objects.filter(kind__startswith="overlap").exists()

    post(SLOT_23, status="queued", started_at=None, ended_at=None)
    post(SLOT_23, status="running", started_at=SLOT_23.isoformat(), ended_at=None)  # queued -> running
    post(SLOT_23, status="running", started_at=SLOT_23.isoformat(), ended_at=None)  # redelivered

    assert TimelineEvent.objects.filter(kind="overlap_breach").count() == 2  # 23rd vs the running 22nd


def test_a_paused_target_is_skipped_and_its_pause_is_never_counted_missed(target: JobTarget) -> None:
    """runs/catalog/pause.py: while paused no missed run; after the resume, the pause's fire times stay unmissed."""
    JobTarget.objects.filter(pk=target.pk).update(paused_at=CREATED, pause_reason="tenant migration", paused_by=None)
    assert sweep(SLOT_23 + timedelta(minutes=30)) == 0
    JobTarget.objects.filter(pk=target.pk).update(
        paused_at=None, pause_reason="", resumed_at=SLOT_22 + timedelta(hours=2)
    )

    assert sweep(SLOT_23 + timedelta(minutes=30)) == 1
    assert [r.scheduled_for for r in missed_runs(target)] == [SLOT_23]

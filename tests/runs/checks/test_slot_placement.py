"""Slot placement (the eight Slot rules), pure and through ingestion, built from public bug reports of
schedulers and monitors; and missed streaks instead of a missed run per slot."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import time_machine

from runs.attempts.models import Attempt, Run
from runs.catalog.models import Job, JobTarget
from runs.checks.missed_runs import run_sweep_missed
from runs.checks.models import MissedStreak
from runs.checks.schedule.slots import (
    DST_HINT,
    TZ_HINT,
    SlotReport,
    SlotSchedule,
    TimeKind,
    placement_describe,
    slot_place,
)
from runs.timeline.models import TimelineEvent
from tests.factories import JobTargetFactory, TenantFactory

BERLIN = ZoneInfo("Europe/Berlin")
NIGHTLY = SlotSchedule(cron="0 2 * * *", timezone="Europe/Berlin", grace_seconds=1800)
FAR_LATER = datetime(2030, 1, 1, tzinfo=UTC)
POSTED_AT = datetime(2026, 11, 29, 11, tzinfo=UTC)


def berlin(*args: int) -> datetime:
    return datetime(*args, tzinfo=BERLIN)  # type: ignore[misc]


def place(schedule: SlotSchedule, t: datetime, kind: str = TimeKind.SCHEDULED, **extra: Any) -> Any:
    return slot_place(
        schedule, SlotReport(received_at=extra.pop("received_at", FAR_LATER), t=t, time_kind=kind, **extra)
    )


# --- pure rules ---------------------------------------------------------------------------------


def test_a_ping_one_minute_early_from_a_fast_clock_belongs_to_the_coming_slot() -> None:
    """https://github.com/healthchecks/healthchecks/issues/888 — a daily 01:00 task on a machine whose
    clock runs one minute ahead pings at 00:59; the monitor counted it for the previous day and then
    reported the 01:00 run failed. With e = min(60 s, 24 h / 4) the report belongs to the 01:00 slot."""
    daily = SlotSchedule(cron="0 1 * * *", timezone="UTC")
    placement = place(daily, datetime(2023, 9, 5, 0, 59, tzinfo=UTC), TimeKind.START)
    assert placement.slot == datetime(2023, 9, 5, 1, 0, tzinfo=UTC)
    assert (placement.offset_seconds, placement.tolerance_seconds, placement.is_late) == (-60, 60, False)


def test_an_ok_signal_a_minute_early_is_not_counted_for_the_previous_slot() -> None:
    """https://github.com/healthchecks/healthchecks/issues/830 — a job scheduled 22:51 sent its OK at
    22:50; the monitor waited for a signal at or after 22:51 and alerted. One second early reads
    "reported 22:50:59, 1 second early: slot 22:51"."""
    schedule = SlotSchedule(cron="51 22 * * *", timezone="UTC")
    placement = place(schedule, datetime(2023, 5, 15, 22, 50, 59, tzinfo=UTC))
    assert placement.slot == datetime(2023, 5, 15, 22, 51, tzinfo=UTC)
    assert placement_describe(placement, "UTC") == "reported 22:50:59, 1 second early: slot 2023-05-15 22:51"


def test_a_report_whole_hours_off_is_late_with_the_time_zone_hint() -> None:
    """https://github.com/healthchecks/healthchecks/issues/418 — a `0 8 * * *` job with one hour of
    grace pinged on time by the server's clock, but the monitor's zone differed: every run looked
    an hour late. Placed on its slot, flagged late, with "time-zone or DST policy mismatch?"."""
    schedule = SlotSchedule(cron="0 8 * * *", timezone="Europe/Berlin", grace_seconds=3600)
    placement = place(schedule, berlin(2020, 8, 28, 10, 0, 30), TimeKind.START)
    assert placement.slot == berlin(2020, 8, 28, 8).astimezone(UTC)
    assert (placement.is_late, placement.offset_seconds, placement.hint) == (True, 7230, TZ_HINT)


def test_seventy_seven_minutes_late_is_placed_and_flagged() -> None:
    placement = place(NIGHTLY, berlin(2026, 11, 28, 3, 17), TimeKind.START)
    assert placement.slot == berlin(2026, 11, 28, 2).astimezone(UTC)
    assert placement.is_late and "1 hour 17 minutes late" in placement_describe(placement, "Europe/Berlin")


def test_off_schedule_times_future_inactive_and_past_deadline_are_unmatched_with_two_nearest_slots() -> None:
    future = place(NIGHTLY, berlin(2026, 11, 28, 2), received_at=berlin(2026, 11, 28, 1, 58))
    assert future.slot is None and "future" in future.reason
    assert future.nearest == (berlin(2026, 11, 28, 2).astimezone(UTC), berlin(2026, 11, 29, 2).astimezone(UTC))
    inactive = place(
        NIGHTLY.__class__(**{**NIGHTLY.__dict__, "active_from": berlin(2026, 12, 1)}), berlin(2026, 11, 28, 2)
    )
    assert inactive.slot is None and "before the target is active" in inactive.reason
    deadline = SlotSchedule(cron="0 2 * * *", timezone="Europe/Berlin", starting_deadline_seconds=200)
    late_start = place(deadline, berlin(2026, 11, 28, 2, 4), TimeKind.START)
    assert late_start.slot is None and "starting deadline" in late_start.reason


def test_a_second_start_in_the_repeated_autumn_hour_is_the_same_slot() -> None:
    """https://github.com/kubernetes/kubernetes/issues/121594 (cases C02.B) — in the repeated hour a
    CronJob started the 02:00 job a second time. By wall-clock time (rule 7) the second 02:00 CET
    belongs to the single slot the `first` policy keeps (02:00 CEST), not to a new one-hour run."""
    first = berlin(2023, 10, 29, 2).astimezone(UTC)  # 00:00Z, CEST
    second = first + timedelta(hours=1)  # 01:00Z, 02:00 CET
    placement = place(NIGHTLY, second, TimeKind.START)
    assert (placement.slot, placement.rule, placement.is_late) == (first, 7, False)
    kept_second = SlotSchedule(cron="0 2 * * *", timezone="Europe/Berlin", dst_overlap="second")
    assert place(kept_second, first, TimeKind.START).slot == second


def test_a_report_right_after_a_skipped_gap_belongs_to_the_skipped_wall_slot() -> None:
    skip = SlotSchedule(cron="30 2 * * *", timezone="Europe/Berlin", dst_gap="skip")
    after_gap = berlin(2027, 3, 28, 3, 0).astimezone(UTC)  # 01:00Z, the first instant after the gap
    placement = place(skip, after_gap, TimeKind.START)
    assert (placement.slot, placement.hint, placement.rule) == (after_gap, DST_HINT, 7)


def test_under_queue_a_start_on_a_slot_that_ran_goes_to_the_earliest_free_slot_inferred() -> None:
    hourly = SlotSchedule(cron="0 * * * *", timezone="UTC", overlap_policy="queue")
    ran = {datetime(2026, 11, 28, 3, tzinfo=UTC)}
    placement = place(
        hourly,
        datetime(2026, 11, 28, 3, 20, tzinfo=UTC),
        TimeKind.START,
        infer_earlier=True,
        slot_taken=lambda slot: slot in ran or slot < datetime(2026, 11, 28, 1, tzinfo=UTC),
    )
    assert (placement.slot, placement.is_inferred, placement.rule) == (datetime(2026, 11, 28, 1, tzinfo=UTC), True, 8)


def test_a_manual_run_is_never_placed_by_its_start_alone_and_a_detection_time_uses_no_tolerance() -> None:
    manual = place(NIGHTLY, berlin(2026, 11, 28, 10, 12), TimeKind.START, is_manual=True)
    assert manual.slot is None and manual.reason == "a manual run names no window"
    detection = place(NIGHTLY, berlin(2026, 11, 28, 1, 59, 30), TimeKind.DETECTION)
    assert detection.slot == berlin(2026, 11, 27, 2).astimezone(UTC) and detection.tolerance_seconds == 0


# --- through ingestion ---------------------------------------------------------------------------


@pytest.fixture
def target(story_job: Job) -> JobTarget:
    return JobTargetFactory(job=story_job, tenant=TenantFactory(slug="harbor"), created_at=berlin(2026, 11, 1))


@pytest.fixture
def post(target: JobTarget, make_key: Any, post_alert: Any) -> Any:
    key = make_key("generic", tenants=[target.tenant])

    def _post(at: datetime = POSTED_AT, **fields: Any) -> dict[str, Any]:
        body = {"schema": "handover.alert/v1", "job": "nightly-invoice-export", "tenant": "harbor"}
        body.update({k: v.isoformat() if isinstance(v, datetime) else v for k, v in fields.items()})
        with time_machine.travel(at, tick=False):
            response = post_alert("generic", body, key)
        assert response.status_code == 202, response.content
        return response.json()["alerts"][0]

    return _post


@pytest.mark.django_db
def test_a_scheduled_time_a_second_early_joins_the_real_slot_and_its_window(post: Any) -> None:
    """The early report of the issue: 01:59:59 is the 02:00 slot, window [27th, 28th) by day."""
    alert = post(scheduled_for=berlin(2026, 11, 28, 1, 59, 59), execution_id="e1", status="succeeded")
    run = Run.objects.get()
    assert alert["outcome"] == "accepted"
    assert (run.scheduled_for, run.window_start, run.window_end) == (
        berlin(2026, 11, 28, 2),
        berlin(2026, 11, 27),
        berlin(2026, 11, 28),
    )
    attempt = run.attempts.get()
    assert (attempt.slot_offset_seconds, attempt.slot_tolerance_seconds, attempt.scheduled_at) == (
        -1,
        60,
        berlin(2026, 11, 28, 1, 59, 59),
    )
    note = run.timeline.get(kind="schedule_mismatch").summary
    assert "reported 01:59:59, 1 second early: slot 2026-11-28 02:00" in note


@pytest.mark.django_db
def test_a_start_without_scheduled_time_and_no_attempt_number_is_numbered_and_retries_inferred(post: Any) -> None:
    """No attempt number and no trigger in the source: Handover numbers 1, 2 and infers the retry."""
    post(
        started_at=berlin(2026, 11, 28, 2, 0, 5),
        ended_at=berlin(2026, 11, 28, 2, 9),
        execution_id="x1",
        status="failed",
    )
    post(
        started_at=berlin(2026, 11, 28, 2, 15),
        ended_at=berlin(2026, 11, 28, 2, 20),
        execution_id="x2",
        status="succeeded",
    )
    run = Run.objects.get()
    rows = list(
        run.attempts.order_by("number").values_list("number", "source_number", "trigger", "is_trigger_inferred")
    )
    assert rows == [(1, None, "scheduled", False), (2, None, "automatic_retry", True)]
    assert run.status == Run.Status.SUCCEEDED


@pytest.mark.django_db
def test_two_scheduled_starts_of_one_slot_flag_the_later_as_a_duplicate_trigger(post: Any) -> None:
    """https://github.com/apache/airflow-site/issues/217 — every scheduled DAG ran twice a day, at
    5:10:16 and 5:10:58, with nothing flagged. The second start overlaps the first (not ended): it is
    a duplicate trigger, numbered 2, it does not set the run's status, and the timeline says so."""
    post(
        scheduled_for=berlin(2026, 11, 28, 2),
        started_at=berlin(2026, 11, 28, 2, 0, 16),
        execution_id="a",
        status="running",
    )
    post(
        scheduled_for=berlin(2026, 11, 28, 2),
        started_at=berlin(2026, 11, 28, 2, 0, 58),
        execution_id="b",
        status="failed",
        ended_at=berlin(2026, 11, 28, 2, 3),
    )
    run = Run.objects.get()
    first, second = run.attempts.order_by("number")
    assert (first.number, first.is_duplicate_trigger) == (1, False)
    assert (second.number, second.trigger, second.is_duplicate_trigger) == (2, "scheduled", True)
    assert run.status == Run.Status.RUNNING  # from attempt 1, not from the duplicate
    assert run.timeline.filter(kind="duplicate_trigger", attempt=second).count() == 1


@pytest.mark.django_db
def test_a_later_report_with_the_same_status_and_a_new_error_is_kept(post: Any) -> None:
    post(scheduled_for=berlin(2026, 11, 28, 2), execution_id="e", status="failed", error="first", dedup_key="k1")
    post(scheduled_for=berlin(2026, 11, 28, 2), execution_id="e", status="failed", error="second", dedup_key="k2")
    attempt = Attempt.objects.get()
    assert attempt.error_summary == "second"
    assert TimelineEvent.objects.filter(kind="attempt_details_changed", attempt=attempt).count() == 1


@pytest.mark.django_db
def test_a_latest_only_outage_is_one_missed_streak_not_a_missed_run_per_slot(target: JobTarget, post: Any) -> None:
    """https://github.com/kubernetes/kubernetes/issues/42649 — after controller downtime a CronJob
    missed over 100 start times ("too many missed start time (> 100)") and stopped for good. Under
    ``latest_only`` the slots missed during an outage are one streak row (opened, then closed by the
    next run), never one ``missed`` run each."""
    Job.objects.filter(pk=target.job_id).update(missed_run_policy="latest_only")
    with time_machine.travel(berlin(2026, 11, 5, 12), tick=False):
        assert run_sweep_missed() == 0
    streak = MissedStreak.objects.get()
    assert (streak.first_slot_at, streak.last_slot_at, streak.slot_count, streak.closed_at) == (
        berlin(2026, 11, 1, 2),
        berlin(2026, 11, 5, 2),
        5,
        None,
    )
    assert not Run.objects.filter(status=Run.Status.MISSED).exists()
    post(at=berlin(2026, 11, 6, 3), scheduled_for=berlin(2026, 11, 6, 2), execution_id="back", status="succeeded")
    with time_machine.travel(berlin(2026, 11, 6, 4), tick=False):
        run_sweep_missed()
    streak.refresh_from_db()
    assert streak.closed_at is not None and streak.closed_by_run == Run.objects.get(
        scheduled_for=berlin(2026, 11, 6, 2)
    )
    kinds = list(TimelineEvent.objects.filter(kind__startswith="missed_streak").values_list("kind", flat=True))
    assert sorted(kinds) == ["missed_streak_closed", "missed_streak_opened"]

"""The identity cases of tests/data/cases.json (types ``classify_event``, ``forbid_timeline``, ``dedup``,
``grouping``, ``replay_guard``, ``run_identity``) through the functions the app uses: ingestion
(Alertmanager and generic posts, dedup keys, alert instances, slot placement, duplicate triggers),
``run_get_or_create``/``slot_window``, the missed-run sweep and next-run checks. Each expected value is
the case's; where a case's alert lacks a field our conventions need (an execution id label, a
scheduled time), the test adds it and says so."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import time_machine

from runs.alerts.models import Alert, Delivery
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Job, JobTarget, Tenant
from runs.catalog.services import job_get_or_create, job_target_get_or_create, tenant_get_or_create
from runs.checks.missed_runs import run_sweep_missed
from runs.checks.models import MissedStreak
from runs.checks.scheduling import next_run_check_schedule
from runs.checks.slot_placement import slot_window
from runs.timeline.models import TimelineEvent

pytestmark = pytest.mark.django_db

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).resolve().parents[2] / "data" / "cases.json").read_text(encoding="utf-8")
)
CASE_INPUTS = {f"{c['id']}.{part}": given for c in CASES for part, given in c["input"].items()}
CASE_EXPECTED = {f"{c['id']}.{part}": c["expected"].get(part, {}) for c in CASES for part in c["input"]}
IDENTITY_TYPES = {"classify_event", "forbid_timeline", "dedup", "grouping", "replay_guard", "run_identity"}
# Every identity case, and the test below that runs it.
COVERED = {
    "C02.B": "test_c02b_a_second_start_in_the_repeated_hour_is_a_duplicate_start_of_the_same_slot",
    "C09.A": "test_c09_forbid_runs_keep_their_own_slot_and_skipped_slots_are_one_streak",
    "C09.B": "test_c09_forbid_runs_keep_their_own_slot_and_skipped_slots_are_one_streak",
    "C10.A": "test_c10ab_an_alert_instance_from_two_peers_and_a_repeat_is_one_attempt",
    "C10.B": "test_c10ab_an_alert_instance_from_two_peers_and_a_repeat_is_one_attempt",
    "C10.C": "test_c10c_one_payload_for_three_jobs_is_three_attempts_and_a_resolve_closes_one",
    "C11.A": "test_c11_a_redelivered_task_is_one_attempt_with_one_success",
    "C12.A": "test_c12a_a_manual_run_for_june_and_the_scheduled_july_run_are_two_runs",
    "C12.B": "test_c12b_two_triggers_half_a_second_apart_are_two_executions_never_merged_by_time",
}


def test_every_identity_case_is_run_here() -> None:
    found = {case_id for case_id, given in CASE_INPUTS.items() if given.get("type") in IDENTITY_TYPES}
    assert found == set(COVERED)


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.fixture
def acme(make_key: Any) -> Tenant:
    tenant, _ = tenant_get_or_create(slug="acme")
    return tenant


def job_for(key: str, tenant: Tenant, schedule: str, **extra: Any) -> tuple[Job, JobTarget]:
    since = extra.pop("since", datetime(2000, 1, 1, tzinfo=UTC))
    job, _ = job_get_or_create(key=key, defaults={"schedule": schedule, "timezone": extra.pop("tz", "UTC"), **extra})
    target, _ = job_target_get_or_create(job=job, tenant=tenant, environment="prod")
    JobTarget.objects.filter(pk=target.pk).update(created_at=since)
    target.refresh_from_db()
    return job, target


def post(post_alert: Any, source: str, key: str, body: dict[str, Any], at: datetime) -> list[dict[str, Any]]:
    with time_machine.travel(at, tick=False):
        response = post_alert(source, body, key)
    assert response.status_code == 202, response.content
    return response.json()["alerts"]


def am_delivery(event: dict[str, Any], slot: datetime) -> dict[str, Any]:
    """An Alertmanager webhook from a case's delivery; our conventions add ``job_name`` (the case's
    ``job`` label), ``execution_id`` (one per fingerprint) and the ``scheduled_for`` annotation."""
    alerts = []
    for alert in event["alerts"]:
        labels = {
            "alertname": "JobFailed",
            "job": "nightly-backup",
            "tenant": "acme",
            "env": "prod",
            **alert.get("labels", {}),
        }
        labels.update(job_name=labels["job"], execution_id=f"exec-{alert['fingerprint']}")
        alerts.append(
            {
                **alert,
                "labels": labels,
                "annotations": {"scheduled_for": slot.isoformat()},
                "endsAt": alert.get("endsAt", "0001-01-01T00:00:00Z"),
            }
        )
    return {"version": "4", "status": alerts[0]["status"], "groupKey": event.get("groupKey", "{}"), "alerts": alerts}


# --- C10: Alertmanager alert instances ---------------------------------------------------------------


def test_c10ab_an_alert_instance_from_two_peers_and_a_repeat_is_one_attempt(
    acme: Tenant, make_key: Any, post_alert: Any
) -> None:
    """C10.A (two HA Alertmanagers deliver one instance, 40 s apart) and C10.B (the same instance
    re-notified after repeat_interval=4h): deliveries recorded 2 then 3, attempts recorded 1, one
    notification (one ``attempt_failed`` event), no new failure on the repeat."""
    job_for("nightly-backup", acme, "0 3 * * *")
    key = make_key("alertmanager", tenants=[acme])
    slot = datetime(2026, 11, 2, 3, tzinfo=UTC)
    for event in CASE_INPUTS["C10.A"]["events"]:
        post(post_alert, "alertmanager", key, am_delivery(event, slot), utc(event["received_at"]))
    want = CASE_EXPECTED["C10.A"]["value"]
    assert Delivery.objects.count() == want["deliveries_recorded"]
    assert Attempt.objects.count() == want["attempts_recorded"]
    assert TimelineEvent.objects.filter(kind="attempt_failed").count() == want["notifications_sent"]
    (repeat,) = CASE_INPUTS["C10.B"]["events"]
    alerts = post(post_alert, "alertmanager", key, am_delivery(repeat, slot), utc(repeat["received_at"]))
    assert CASE_EXPECTED["C10.B"]["value"]["new_failure"] is False
    assert alerts[0]["outcome"] == "duplicate"
    assert Attempt.objects.count() == 1 and TimelineEvent.objects.filter(kind="attempt_failed").count() == 1


def test_c10c_one_payload_for_three_jobs_is_three_attempts_and_a_resolve_closes_one(
    acme: Tenant, make_key: Any, post_alert: Any
) -> None:
    """C10.C: one webhook with three firing alerts for three jobs (three fingerprints), the identical
    payload re-sent, then job #2's alert resolved: attempts 3, still 3, and 2 still open (an attempt
    whose instance has no ``resolved`` event)."""
    for n in (1, 2, 3):
        job_for(f"job-{n}", acme, "0 3 * * *")
    key = make_key("alertmanager", tenants=[acme])
    slot = datetime(2026, 11, 2, 3, tzinfo=UTC)
    alerts = [
        {"fingerprint": f"f00d00000000000{n}", "status": "firing", "startsAt": "2026-11-02T03:05:00Z"}
        for n in (1, 2, 3)
    ]
    event = {"groupKey": '{}:{alertname="JobFailed"}', "alerts": alerts}
    body = am_delivery(event, slot)
    for alert, n in zip(body["alerts"], (1, 2, 3), strict=True):
        alert["labels"]["job_name"] = f"job-{n}"
    want = CASE_EXPECTED["C10.C"]["value"]
    post(post_alert, "alertmanager", key, body, datetime(2026, 11, 2, 3, 6, tzinfo=UTC))
    assert Attempt.objects.count() == want["attempts_after_first_payload"]
    post(post_alert, "alertmanager", key, body, datetime(2026, 11, 2, 3, 7, tzinfo=UTC))
    assert Attempt.objects.count() == want["attempts_after_resend"]
    resolved = {**body, "status": "resolved", "alerts": [{**body["alerts"][1], "status": "resolved"}]}
    resolved["alerts"][0]["endsAt"] = "2026-11-02T03:20:00Z"
    post(post_alert, "alertmanager", key, resolved, datetime(2026, 11, 2, 3, 21, tzinfo=UTC))
    open_attempts = Attempt.objects.exclude(timeline__kind="resolved").count()
    assert open_attempts == want["open_after_job2_resolved"]


# --- C11, C12: executions and runs ---------------------------------------------------------------------


def test_c11_a_redelivered_task_is_one_attempt_with_one_success(acme: Tenant, make_key: Any, post_alert: Any) -> None:
    """C11.A (Celery #2481): a task redelivered after the Redis visibility timeout is received twice
    (3601 s apart) and succeeds twice. Reported per event in the generic format, the task id as the
    execution id: attempts recorded 1, the success applied once, the second success a duplicate
    delivery (its alert a ``duplicate``), the redelivery gap 3601 s between the two deliveries."""
    job_for("celery-report", acme, "40 19 * * *")
    key = make_key("generic", tenants=[acme])
    status = {"received": "running", "succeeded": "succeeded"}
    outcomes = []
    for event in CASE_INPUTS["C11.A"]["events"]:
        at = utc(event["t"])
        body = {
            "schema": "handover.alert/v1",
            "job": "celery-report",
            "tenant": "acme",
            "environment": "prod",
            "execution_id": event["task_id"],
            "status": status[event["event"]],
            "scheduled_for": "2015-02-01T19:40:00Z",
            **({"started_at": event["t"]} if event["event"] == "received" else {"ended_at": event["t"]}),
        }
        outcomes.append(post(post_alert, "generic", key, body, max(at, datetime(2015, 2, 1, 19, 41, tzinfo=UTC)))[0])
    want = CASE_EXPECTED["C11.A"]["value"]
    assert Attempt.objects.count() == want["attempts_recorded"]
    assert TimelineEvent.objects.filter(kind="attempt_succeeded").count() == want["side_effects_applied"]
    assert "duplicate delivery" in want["second_execution"] and outcomes[3]["outcome"] == "duplicate"
    received = [utc(e["t"]) for e in CASE_INPUTS["C11.A"]["events"] if e["event"] == "received"]
    assert (received[1] - received[0]).total_seconds() == want["redelivery_gap_s"]


def test_c12a_a_manual_run_for_june_and_the_scheduled_july_run_are_two_runs(
    acme: Tenant, make_key: Any, post_alert: Any
) -> None:
    """C12.A (Airflow #41208): a manual run and the scheduled run both "dated" 2024-07-01, for the
    windows June and July. Two runs (identity is the window, the trigger an attribute); the scheduled
    window is the one the July slot derives and is still expected; its check is due 2024-08-01 + grace."""
    job, target = job_for("monthly", acme, "0 0 1 * *", window_alignment="none", grace_seconds=600)
    key = make_key("generic", tenants=[acme])
    given = CASE_INPUTS["C12.A"]
    for event in given["events"]:
        body = {
            "schema": "handover.alert/v1",
            "job": "monthly",
            "tenant": "acme",
            "environment": "prod",
            "execution_id": event["run_id"],
            "status": "succeeded",
            "window_start": event["window"][0],
            "window_end": event["window"][1],
            "trigger": "manual_rerun" if event["kind"] == "manual" else "scheduled",
        }
        post(post_alert, "generic", key, body, datetime(2024, 8, 1, 0, 5, tzinfo=UTC))
    want = CASE_EXPECTED["C12.A"]["value"]
    assert Run.objects.count() == want["logical_runs"]
    scheduled = next(e for e in given["events"] if e["kind"] == "scheduled")
    july = slot_window(job=job, target=target, slot=utc(scheduled["window"][1]))
    assert list(july) == [utc(t) for t in scheduled["window"]]
    manual_runs = Run.objects.filter(attempts__trigger="manual_rerun")
    still_expected = not manual_runs.filter(window_start=july[0], window_end=july[1]).exists()
    assert still_expected is want["scheduled_window_still_expected"]
    with time_machine.travel(datetime(2024, 7, 15, tzinfo=UTC), tick=False):
        check, _ = next_run_check_schedule(target=target, after=datetime(2024, 7, 15, tzinfo=UTC))
    assert check.expected_at == utc("2024-08-01T00:00:00Z")  # "2024-08-01T00:00:00Z + grace"
    assert check.deadline_at == check.expected_at + timedelta(seconds=600)
    assert (check.window_start, check.window_end) == july


def test_c12b_two_triggers_half_a_second_apart_are_two_executions_never_merged_by_time(
    acme: Tenant, make_key: Any, post_alert: Any
) -> None:
    """C12.B (Airflow #28486): two API triggers 0.5 s apart with distinct run ids are two executions
    (Handover's attempts; here both scheduled on one slot, the second a flagged duplicate trigger);
    the same run id sent twice is one."""
    job_for("api-job", acme, "35 6 * * *")
    key = make_key("generic", tenants=[acme])
    for event in [*CASE_INPUTS["C12.B"]["events"], CASE_INPUTS["C12.B"]["events"][0]]:
        body = {
            "schema": "handover.alert/v1",
            "job": "api-job",
            "tenant": "acme",
            "environment": "prod",
            "execution_id": event["run_id"],
            "status": "running",
            "started_at": event["t"],
        }
        post(post_alert, "generic", key, body, datetime(2022, 11, 3, 6, 36, tzinfo=UTC))
    want = CASE_EXPECTED["C12.B"]["value"]
    assert Attempt.objects.count() == want["logical_runs"]
    assert list(Attempt.objects.order_by("number").values_list("number", "is_duplicate_trigger")) == [
        (1, False),
        (2, True),
    ]


# --- C02.B, C09: slots of a start ---------------------------------------------------------------------


def test_c02b_a_second_start_in_the_repeated_hour_is_a_duplicate_start_of_the_same_slot(
    acme: Tenant, make_key: Any, post_alert: Any
) -> None:
    """C02.B (Kubernetes #121594): `0 2 * * *` Europe/Berlin; a run-started report at 2023-10-29T01:00Z
    (02:00 CET, the repeated hour) while the 00:00Z run is active. The same slot (00:00Z), a duplicate
    start overlapping the active run, not a new logical run."""
    job_for("berlin-nightly", acme, "0 2 * * *", tz="Europe/Berlin", window_alignment="none")
    key = make_key("generic", tenants=[acme])
    for execution, started in (("k-1", "2023-10-29T00:00:05Z"), ("k-2", "2023-10-29T01:00:00Z")):
        body = {
            "schema": "handover.alert/v1",
            "job": "berlin-nightly",
            "tenant": "acme",
            "environment": "prod",
            "execution_id": execution,
            "status": "running",
            "started_at": started,
        }
        post(post_alert, "generic", key, body, datetime(2023, 10, 29, 1, 1, tzinfo=UTC))
    value = CASE_EXPECTED["C02.B"]["value"]
    run = Run.objects.get()  # new_logical_run: false
    assert value["new_logical_run"] is False
    assert run.scheduled_for == utc("2023-10-29T00:00:00Z")
    first, second = run.attempts.order_by("number")
    assert "duplicate" in value["classification"] and second.is_duplicate_trigger
    assert "overlap with active run" in value["classification"] and first.status == Attempt.Status.RUNNING


@pytest.mark.parametrize("case_id", ["C09.A", "C09.B"])
def test_c09_forbid_runs_keep_their_own_slot_and_skipped_slots_are_one_streak(
    acme: Tenant, make_key: Any, post_alert: Any, case_id: str
) -> None:
    """C09 (Kubernetes CronJob `concurrencyPolicy: Forbid`, a 2 h 10 min job every hour): the runs the
    case lists are reported with their slot and actual start; each is placed on its own slot (a late
    start belongs to the slot it was created for). Under overlap ``skip`` the skipped slots are one
    missed streak of the case's count, never a ``missed`` run each."""
    given, value = CASE_INPUTS[case_id], CASE_EXPECTED[case_id]["value"]
    day = date.fromisoformat(given["day"])
    since = datetime(day.year, day.month, day.day, tzinfo=UTC) - timedelta(minutes=1)  # the horizon's start
    job_for(
        f"forbid-{case_id[-1].lower()}", acme, given["cron"], overlap_policy="skip", grace_seconds=3600, since=since
    )
    key = make_key("generic", tenants=[acme])

    def clock(text: str) -> datetime:
        hours, minutes = text.rstrip("Z").split(":")
        return datetime(day.year, day.month, day.day, int(hours), int(minutes), tzinfo=UTC)

    duration = timedelta(hours=2, minutes=10)
    for run in value["runs"]:
        slot, started = clock(run["slot"]), clock(run["started"])
        body = {
            "schema": "handover.alert/v1",
            "job": f"forbid-{case_id[-1].lower()}",
            "tenant": "acme",
            "environment": "prod",
            "execution_id": f"job-{slot:%H%M}",
            "status": "succeeded",
            "scheduled_for": slot.isoformat(),
            "started_at": started.isoformat(),
            "ended_at": (started + duration).isoformat(),
        }
        post(post_alert, "generic", key, body, max(started + duration, utc(given["horizon_end"])))
    # the sweep when the horizon's last instant has passed its grace (no slot beyond the horizon is due)
    with time_machine.travel(utc(given["horizon_end"]) + timedelta(hours=1), tick=False):
        assert run_sweep_missed() == 0
    runs = list(Run.objects.order_by("scheduled_for"))
    assert [r.scheduled_for for r in runs] == [clock(r["slot"]) for r in value["runs"]]
    assert [r.attempts.get().started_at for r in runs] == [clock(r["started"]) for r in value["runs"]]
    streak = MissedStreak.objects.get()
    skipped = [clock(t) for t in value["skipped_overlap"]]
    assert (streak.first_slot_at, streak.slot_count) == (skipped[0], len(skipped))
    assert not Run.objects.filter(status=Run.Status.MISSED).exists()
    assert not Alert.objects.exclude(outcome="accepted").exists()

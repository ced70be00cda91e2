"""Formats we have never seen, configured purely by mapping, posted through the real API.

Each story (``tests/data/custom/README.md``) registers the fixtures' job and tenants, creates a
``custom`` integration through ``POST /api/v1/integrations/`` from the format's ``mapping.json`` (no
code), then posts every file to ``POST /api/v1/alerts/custom/`` with the issued key and checks the
answer, the alerts, the runs, every attempt field and the timeline after each one.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
import time_machine

from runs.alerts.mapping import (
    integration_custom_update,
    integration_reprocess_unmatched,
    samples_from_deliveries,
)
from runs.alerts.models import Alert, Delivery
from runs.alerts.selectors import alert_completeness
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Tenant
from runs.timeline.models import TimelineEvent
from tests.conftest import PostAlert
from tests.runs.custom_support import (
    DAY_27,
    DAY_28,
    FIRE_28,
    FIRE_29,
    CustomStory,
    berlin,
    create_custom_story,
    data_path,
    load_mapping,
    utc,
)

pytestmark = pytest.mark.django_db

A1 = "5b2c1e9a-7d1f-4c1e-9a55-0f3c2d8e6b11"
A2 = "c81f0b7e-2a4d-4f7e-8d0b-6e1f9a3c5d27"
A3 = "0d7e4b91-6c2a-4e55-b1f3-9a8c7d6e5f40"
B1 = "e4a9d2c3-1b7f-4a60-9c8e-2d5f6a7b8c91"
NOMAD_UI = "https://nomad.example.internal/ui/allocations/"
JENKINS = "https://jenkins.example.internal/job/nightly-invoice-export/"
COMMIT = "9f2c4e1b7a3d5c6e8f0a1b2c3d4e5f6a7b8c9d0e"


@pytest.fixture
def nomad(story_tenants: dict[str, Tenant], post_alert: PostAlert) -> CustomStory:
    return create_custom_story("nomad", ["borealis-retail"], post_alert)


@pytest.fixture
def jenkins(story_tenants: dict[str, Tenant], post_alert: PostAlert) -> CustomStory:
    return create_custom_story("jenkins", ["cedar-health"], post_alert)


def jenkins_body(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(data_path("jenkins", name).read_text())
    return body


def outcomes(response: Any) -> list[tuple[str, str]]:
    assert response.status_code == 202, response.content
    return [(a["outcome"], a["reason"]) for a in response.json()["alerts"]]


def run_fields(run: Run) -> dict[str, Any]:
    run.refresh_from_db()
    return {
        "job": run.job.key,
        "tenant": run.tenant.slug,
        "environment": run.environment,
        "window": (run.window_start, run.window_end),
        "scheduled_for": run.scheduled_for,
        "status": run.status,
        "has_target": run.target_id is not None,
    }


def attempt_fields(attempt: Attempt) -> dict[str, Any]:
    attempt.refresh_from_db()
    return {
        "execution_id": attempt.execution_id,
        "number": attempt.number,
        "trigger": attempt.trigger,
        "status": attempt.status,
        "scheduled_at": attempt.scheduled_at,
        "started_at": attempt.started_at,
        "ended_at": attempt.ended_at,
        "error_summary": attempt.error_summary,
        "correlation_ref": attempt.correlation_ref,
        "log_url": attempt.log_url,
        "config_version": attempt.config_version,
    }


def events(run: Run) -> list[tuple[str, datetime, int | None]]:
    return [
        (e.kind, e.occurred_at, e.attempt.number if e.attempt else None)
        for e in run.timeline.select_related("attempt").order_by("occurred_at", "recorded_at", "id")
    ]


def counts() -> tuple[int, int, int]:
    return Run.objects.count(), Attempt.objects.count(), TimelineEvent.objects.count()


# --- Nomad ----------------------------------------------------------------------------------------


def test_nomad_story_first_failure_retry_duplicate_and_next_run(nomad: CustomStory) -> None:
    # 01: a frame with a Job event (not a record) and two events of allocation A1: running, then failed
    first = nomad.post("01-first-failure.json", at=utc(2026, 11, 28, 1, 19, 41))

    assert outcomes(first) == [("accepted", ""), ("accepted", "")]
    run = Run.objects.get()
    assert run_fields(run) == {
        "job": "nightly-invoice-export",
        "tenant": "borealis-retail",
        "environment": "prod",  # the integration's default: the prod cluster's sink
        "window": DAY_27,
        "scheduled_for": FIRE_28,  # from the periodic child's id: periodic-1795827600
        "status": "failed",
        "has_target": True,
    }
    attempt = run.attempts.get()
    assert attempt_fields(attempt) == {
        "execution_id": A1,
        "number": 1,
        "trigger": "scheduled",
        "status": "failed",
        "scheduled_at": None,
        "started_at": utc(2026, 11, 28, 1, 0, 3, 482113),  # RFC 3339 nanoseconds, cut to µs
        "ended_at": utc(2026, 11, 28, 1, 19, 40, 913),
        "error_summary": 'Exit Code: 1, Exit Message: "invoice API answered 503 after 3 retries (batch 2 of 4)"',
        "correlation_ref": "",
        "log_url": NOMAD_UI + A1,
        "config_version": "",
    }
    assert events(run) == [
        ("attempt_running", utc(2026, 11, 28, 1, 0, 3, 482113), 1),
        ("attempt_failed", utc(2026, 11, 28, 1, 19, 40, 913), 1),
    ]
    delivery = Delivery.objects.get()
    assert delivery.integration == nomad.integration and delivery.outcome == "processed"
    assert [a.summary for a in delivery.alerts.order_by("index")] == [
        f"nightly-invoice-export/periodic-1795827600: allocation {A1} running",
        f"nightly-invoice-export/periodic-1795827600: allocation {A1} failed",
    ]
    assert all(e.actor_integration == nomad.integration for e in run.timeline.all())

    # 02: the rescheduled allocation A2 fails too
    retry = nomad.post("02-retry-failure.json", at=utc(2026, 11, 28, 1, 24, 53))

    assert outcomes(retry) == [("accepted", "")]
    second = run.attempts.get(number=2)
    assert attempt_fields(second) == {
        "execution_id": A2,
        "number": 2,
        "trigger": "automatic_retry",
        "status": "failed",
        "scheduled_at": utc(2026, 11, 28, 1, 20, 10),  # RescheduleTime, epoch nanoseconds
        "started_at": utc(2026, 11, 28, 1, 20, 11, 104000),
        "ended_at": utc(2026, 11, 28, 1, 24, 52, 310000),
        "error_summary": 'Exit Code: 1, Exit Message: "invoice API answered 503 after 3 retries (batch 1 of 4)"',
        "correlation_ref": "",
        "log_url": NOMAD_UI + A2,
        "config_version": "",
    }
    assert run_fields(run)["status"] == "failed"
    assert events(run)[-1] == ("attempt_failed", utc(2026, 11, 28, 1, 24, 52, 310000), 2)

    # 03: the sink re-sends the same frame: a duplicate that changes nothing
    before = counts()
    again = nomad.post("03-duplicate-redelivery.json", at=utc(2026, 11, 28, 1, 25, 30))

    [(outcome, reason)] = outcomes(again)
    original = Alert.objects.get(public_id=retry.json()["alerts"][0]["id"])
    assert outcome == "duplicate" and str(original.public_id) in reason
    assert counts() == before
    duplicate = Alert.objects.get(public_id=again.json()["alerts"][0]["id"])
    assert duplicate.duplicate_of == original and duplicate.attempt == second
    original.refresh_from_db()
    assert original.repeat_count == 1

    # 04: the next night's allocation completes
    ok = nomad.post("04-next-run-ok.json", at=utc(2026, 11, 29, 1, 14, 6))

    assert outcomes(ok) == [("accepted", "")]
    next_run = Run.objects.get(window_start=DAY_28[0])
    assert run_fields(next_run) | {"window": next_run.window_end} == {
        "job": "nightly-invoice-export",
        "tenant": "borealis-retail",
        "environment": "prod",
        "window": DAY_28[1],
        "scheduled_for": FIRE_29,
        "status": "succeeded",
        "has_target": True,
    }
    assert [(a.execution_id, a.number, a.status) for a in next_run.attempts.all()] == [(B1, 1, "succeeded")]
    assert events(next_run) == [("attempt_succeeded", utc(2026, 11, 29, 1, 14, 5), 1)]
    assert run_fields(run)["status"] == "failed"  # the failed night stays failed


def test_nomad_lost_allocation_is_unmatched_until_the_mapping_is_fixed_then_reprocessed(nomad: CustomStory) -> None:
    for name, at in [
        ("01-first-failure.json", utc(2026, 11, 28, 1, 19, 41)),
        ("02-retry-failure.json", utc(2026, 11, 28, 1, 24, 53)),
    ]:
        nomad.post(name, at=at)
    before = counts()

    lost = nomad.post("05-lost-allocation.json", at=utc(2026, 11, 28, 1, 35))

    [(outcome, reason)] = outcomes(lost)
    assert outcome == "unmatched"
    assert reason == (
        "status: the value 'lost' has no mapping: add it to status_map "
        "(to one of queued, running, succeeded, failed, timed_out, cancelled) (found by `ClientStatus`)"
    )
    assert counts() == before  # nothing guessed
    alert = Alert.objects.get(public_id=lost.json()["alerts"][0]["id"])
    assert (alert.job_key, alert.tenant_slug, alert.execution_id) == ("nightly-invoice-export", "borealis-retail", A3)

    # the fix: map `lost` (the node died) to failed, proven on the stored delivery, then reprocess
    mapping = load_mapping("nomad")
    mapping["status_map"]["lost"] = "failed"
    samples = samples_from_deliveries(integration=nomad.integration, delivery_ids=[alert.delivery.public_id])
    integration_custom_update(integration=nomad.integration, mapping=mapping, samples=samples, require_samples=True)
    with time_machine.travel(utc(2026, 11, 28, 8, 0), tick=False):
        summary = integration_reprocess_unmatched(integration=nomad.integration)

    assert (summary.tried, summary.outcomes, summary.failures, summary.remaining) == (1, {"accepted": 1}, [], 0)
    alert.refresh_from_db()
    assert (alert.outcome, alert.reason) == ("accepted", "")
    third = Attempt.objects.get(execution_id=A3)
    assert alert.attempt == third
    assert (third.number, third.trigger, third.status, third.scheduled_at, third.started_at, third.ended_at) == (
        3,
        "automatic_retry",
        "failed",
        utc(2026, 11, 28, 1, 25, 22),
        utc(2026, 11, 28, 1, 25, 23, 900000),
        None,  # a lost allocation never finished
    )
    assert third.run.window_start == DAY_27[0] and third.run.status == "failed"


# --- Jenkins --------------------------------------------------------------------------------------


def test_jenkins_story_phases_retry_duplicate_and_next_run(jenkins: CustomStory) -> None:
    # 01: STARTED (no status yet: the phase maps to running); SCHEDULED_FOR is naive Berlin time
    started = jenkins.post("01-started.json", at=utc(2026, 11, 28, 1, 0, 6))

    assert outcomes(started) == [("accepted", "")]
    run = Run.objects.get()
    assert run_fields(run) == {
        "job": "nightly-invoice-export",
        "tenant": "cedar-health",
        "environment": "prod",
        "window": DAY_27,
        "scheduled_for": FIRE_28,
        "status": "running",
        "has_target": True,
    }
    attempt = run.attempts.get()
    assert attempt_fields(attempt)["status"] == "running"
    assert attempt.ended_at is None  # the end is only computed once the build is over

    # 02: COMPLETED FAILURE
    failed = jenkins.post("02-completed-failure.json", at=utc(2026, 11, 28, 1, 19, 41))

    assert outcomes(failed) == [("accepted", "")]
    assert attempt_fields(attempt) == {
        "execution_id": "nightly-invoice-export#812",
        "number": 1,
        "trigger": "scheduled",
        "status": "failed",
        "scheduled_at": None,
        "started_at": utc(2026, 11, 28, 1, 0, 5, 123000),  # epoch milliseconds
        "ended_at": utc(2026, 11, 28, 1, 19, 40, 123000),  # timestamp + duration
        "error_summary": "ERROR: invoice API answered 503 after 3 retries",
        "correlation_ref": "jx-20261128-cedar-7c41",
        "log_url": JENKINS + "812/console",
        "config_version": COMMIT,
    }
    assert run_fields(run)["status"] == "failed"

    # 03: FINALIZED repeats the same failure: a duplicate
    before = counts()
    finalized = jenkins.post("03-finalized-failure.json", at=utc(2026, 11, 28, 1, 19, 42))

    [(outcome, _)] = outcomes(finalized)
    assert outcome == "duplicate" and counts() == before

    # 04: the retry build, attempt 2
    retry = jenkins.post("04-retry-failure.json", at=utc(2026, 11, 28, 1, 35, 44))

    assert outcomes(retry) == [("accepted", "")]
    second = run.attempts.get(number=2)
    assert attempt_fields(second) | {"error_summary": ""} == {
        "execution_id": "nightly-invoice-export#813",
        "number": 2,
        "trigger": "automatic_retry",
        "status": "failed",
        "scheduled_at": None,
        "started_at": utc(2026, 11, 28, 1, 31, 2),
        "ended_at": utc(2026, 11, 28, 1, 35, 43, 500000),
        "error_summary": "",
        "correlation_ref": "",
        "log_url": JENKINS + "813/console",
        "config_version": COMMIT,
    }
    assert events(run) == [
        ("attempt_running", utc(2026, 11, 28, 1, 0, 5, 123000), 1),
        ("attempt_failed", utc(2026, 11, 28, 1, 19, 40, 123000), 1),
        ("attempt_failed", utc(2026, 11, 28, 1, 35, 43, 500000), 2),
    ]

    # 05: the next night succeeds
    ok = jenkins.post("05-next-run-ok.json", at=utc(2026, 11, 29, 1, 14, 8))

    assert outcomes(ok) == [("accepted", "")]
    next_run = Run.objects.get(window_start=DAY_28[0])
    assert (next_run.window_end, next_run.scheduled_for, next_run.status) == (DAY_28[1], FIRE_29, "succeeded")
    assert attempt_fields(next_run.attempts.get())["correlation_ref"] == "jx-20261129-cedar-0b2e"


def test_both_formats_side_by_side_keep_their_tenants_apart(nomad: CustomStory, jenkins: CustomStory) -> None:
    nomad.post("01-first-failure.json", at=utc(2026, 11, 28, 1, 19, 41))
    jenkins.post("02-completed-failure.json", at=utc(2026, 11, 28, 1, 19, 41))

    assert sorted(Run.objects.values_list("tenant__slug", "window_start", "status")) == [
        ("borealis-retail", DAY_27[0], "failed"),
        ("cedar-health", DAY_27[0], "failed"),
    ]
    # a Jenkins payload posted with the Nomad key is mapped by the Nomad mapping: nothing fits
    wrong = nomad.post_alert("custom", json.dumps({"name": "x", "build": {}}).encode(), nomad.key)
    [(outcome, reason)] = outcomes(wrong)
    assert outcome == "unmatched" and "job_key: `split(JobID, '/periodic-')[0]` failed" in reason


def test_a_naive_scheduled_time_in_the_spring_dst_gap_is_unmatched_with_the_reason(
    jenkins: CustomStory, post_alert: PostAlert
) -> None:
    body = jenkins_body("02-completed-failure.json")
    body["build"]["parameters"]["SCHEDULED_FOR"] = "2027-03-28 02:30:00"  # Berlin skips 02:00-03:00

    response = post_alert("custom", body, jenkins.key)

    [(outcome, reason)] = outcomes(response)
    assert outcome == "unmatched"
    assert reason == (
        "scheduled_for: '2027-03-28 02:30:00' does not exist in Europe/Berlin (the clocks skipped it: a DST gap) "
        "(found by `build.parameters.SCHEDULED_FOR`)"
    )
    assert Run.objects.count() == 0


def test_the_tenant_of_a_custom_alert_must_be_bound_to_the_key(jenkins: CustomStory, post_alert: PostAlert) -> None:
    body = jenkins_body("02-completed-failure.json")
    body["build"]["parameters"]["TENANT"] = "acme-foods"  # exists, but this key writes for cedar-health only

    [(outcome, reason)] = outcomes(post_alert("custom", body, jenkins.key))

    assert (outcome, reason) == ("unmatched", "tenant 'acme-foods' is not available to this integration key")


# --- a monitor with no run identity: the latest fire time at or before the alert ------------------


HEALTHCHECKS_MAPPING = {
    "fields": {
        "job_key": "check",
        "tenant": "split(tags, ' ')[1]",
        "environment": "split(tags, ' ')[0]",
        "scheduled_for": "now",
        "execution_id": {"template": "hc-{{ code }}@{{ now }}"},
        "status": "status",
    },
    "status_map": {"down": "failed", "up": "succeeded"},
    "scheduled_for_rule": "latest_fire_at_or_before",
}


def test_a_healthchecks_down_webhook_lands_in_the_run_of_the_latest_fire_time(
    story_tenants: dict[str, Tenant], post_alert: PostAlert
) -> None:
    story = create_custom_story("healthchecks", ["elmwood-books"], post_alert, mapping=HEALTHCHECKS_MAPPING)
    down = {
        "check": "nightly-invoice-export",
        "code": "3f1a6c2e-9b7d-4e21-8c5a-0d4f6e8a1b2c",
        "status": "down",
        "now": "2026-11-28T01:32:00+00:00",
        "tags": "prod elmwood-books",
    }

    with time_machine.travel(utc(2026, 11, 28, 1, 32, 1), tick=False):
        response = post_alert("custom", down, story.key)

    assert outcomes(response) == [("accepted", "")]
    run = Run.objects.get()
    assert (run.window_start, run.window_end, run.scheduled_for, run.status) == (*DAY_27, FIRE_28, "failed")
    assert run.attempts.get().execution_id == "hc-3f1a6c2e-9b7d-4e21-8c5a-0d4f6e8a1b2c@2026-11-28T01:32:00+00:00"
    # up the next night, after 02:00 Berlin: the next run
    up = {**down, "status": "up", "now": "2026-11-29T01:05:00+00:00"}
    post_alert("custom", up, story.key)
    assert Run.objects.get(window_start=DAY_28[0]).status == "succeeded"


# --- completeness -----------------------------------------------------------------------------------


def test_completeness_counts_what_each_integrations_alerts_carried(nomad: CustomStory, jenkins: CustomStory) -> None:
    for name in ["01-first-failure.json", "02-retry-failure.json", "03-duplicate-redelivery.json"]:
        nomad.post(name, at=berlin(2026, 11, 28, 3))
    nomad.post("04-next-run-ok.json", at=berlin(2026, 11, 29, 3))
    nomad.post("05-lost-allocation.json", at=berlin(2026, 11, 28, 4))
    for path in sorted(data_path("jenkins", "").glob("0*.json")):
        jenkins.post(path.name, at=berlin(2026, 11, 29, 3))

    nomad_numbers = alert_completeness(integration=nomad.integration)
    jenkins_numbers = alert_completeness(integration=jenkins.integration)

    def cells(row: Any) -> dict[str, tuple[int, int]]:
        return {c.field: (c.count, c.percent) for c in row.cells}

    # Nomad: 5 originals (two in 01, 02, 04, the unmatched 05; the duplicate not counted)
    [nomad_job] = nomad_numbers.jobs
    assert (nomad_job.job_key, nomad_job.alert_count) == ("nightly-invoice-export", 5)
    assert cells(nomad_job) == {
        "execution_id": (5, 100),
        "window": (0, 0),
        "scheduled_for": (5, 100),
        "correlation_ref": (0, 0),
        "log_url": (5, 100),
    }
    assert [(m.field, m.count, m.percent) for m in nomad_numbers.most_missing] == [
        ("window", 5, 100),
        ("correlation_ref", 5, 100),
    ]
    # Jenkins: 4 originals (FINALIZED is a duplicate); the retry build had no correlation id
    assert jenkins_numbers.total.alert_count == 4
    assert cells(jenkins_numbers.total) == {
        "execution_id": (4, 100),
        "window": (0, 0),
        "scheduled_for": (4, 100),
        "correlation_ref": (3, 75),
        "log_url": (4, 100),
    }
    assert [(m.field, m.count, m.percent) for m in jenkins_numbers.most_missing] == [
        ("window", 4, 100),
        ("correlation_ref", 1, 25),
    ]


def test_completeness_is_one_query_grouped_by_job(
    jenkins: CustomStory, post_alert: PostAlert, django_assert_num_queries: Any
) -> None:
    base = jenkins_body("02-completed-failure.json")
    for number, job in enumerate(["nightly-invoice-export", "weekly-ledger-close", "weekly-ledger-close"]):
        body = json.loads(json.dumps(base))
        body["name"], body["build"]["number"] = job, 900 + number
        if number:
            body["build"]["parameters"].pop("CORRELATION_ID")
        post_alert("custom", body, jenkins.key)

    with django_assert_num_queries(1):  # the grouped aggregate
        numbers = alert_completeness(integration=jenkins.integration)

    assert [(r.job_key, r.alert_count) for r in numbers.jobs] == [
        ("nightly-invoice-export", 1),
        ("weekly-ledger-close", 2),  # unmatched (not registered), still counted: it is what the alert said
    ]
    assert {c.field: c.count for c in numbers.jobs[1].cells}["correlation_ref"] == 0
    assert numbers.most_missing[0].field == "window"


def test_received_times_do_not_matter_for_identity(jenkins: CustomStory) -> None:
    jenkins.post("02-completed-failure.json", at=datetime(2026, 12, 24, 12, 0, tzinfo=UTC))

    assert Run.objects.get().window_start == DAY_27[0]

"""Events that refer to earlier events: correlation by a mapping's ``correlate_by`` (in order and out of
order), the key's binding re-checked on correlated fields, retries under a reused id (``<id>#<n>``), a
reported ``missed`` (an event, no attempt), and re-sends that change nothing; all through the real endpoint."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import pytest
from django.db import connection  # noqa: F401 - read by the skipif condition
from django.test import Client

from runs.alerts.models import Alert
from runs.alerts.parsers.custom.catalogue.entries import catalogue_entry
from runs.alerts.parsers.custom.compiler import mapping_errors
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Integration, Job, Tenant
from runs.catalog.services import integration_get_or_create, integration_key_create
from runs.checks.models import MissedStreak
from runs.timeline.models import TimelineEvent
from tests.concurrency import run_concurrently
from tests.runs.custom_support import admin_api

MAPPING: dict[str, Any] = {
    "correlate_by": "run_id",
    "fields": {
        "job_key": "job",
        "tenant": "tenant",
        "scheduled_for": "scheduled_for",
        "execution_id": "run_id",
        "status": "event",
        "started_at": "started_at",
        "ended_at": "ended_at",
        "error_summary": {"path": "error", "optional": True},
    },
    "status_map": {"received": "received", "start": "running", "fail": "failed", "ok": "succeeded", "skip": "missed"},
    "defaults": {"environment": "prod"},
}
FIRE = "2026-11-28T02:00:00+01:00"
RECEIVED = {
    "event": "received",
    "run_id": "r-1",
    "job": "nightly-invoice-export",
    "tenant": "acme-foods",
    "scheduled_for": FIRE,
}
START = {"event": "start", "run_id": "r-1", "started_at": "2026-11-28T01:00:05Z"}
FAIL = {"event": "fail", "run_id": "r-1", "started_at": "2026-11-28T01:00:05Z", "ended_at": "2026-11-28T01:10:00Z",
        "error": "invoice API answered 503"}  # fmt: skip


def _integration(name: str = "runner-events") -> Integration:
    integration = integration_get_or_create(source="custom", name=name)
    integration.settings = {"mapping": MAPPING}
    integration.save()
    return integration


def _key(integration: Integration, tenants: list[Tenant]) -> str:
    return integration_key_create(integration=integration, tenants=tenants).key


def _post(key: str, body: dict[str, Any], client: Client | None = None) -> dict[str, Any]:
    response = (client or Client()).post(
        "/api/v1/alerts/custom/",
        data=json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    assert response.status_code == 202, response.content
    alert: dict[str, Any] = response.json()["alerts"][0]
    return alert


def _alert(answer: dict[str, Any]) -> Alert:
    return Alert.objects.select_related("run__job", "run__tenant", "attempt").get(public_id=answer["id"])


def test_a_mapping_with_correlate_by_needs_no_job_tenant_or_window_and_never_makes_it_optional() -> None:
    assert mapping_errors(MAPPING) == {}
    without = {**MAPPING, "correlate_by": None}
    assert "fields.job_key" not in mapping_errors(without)  # mapped
    partial = {**MAPPING, "fields": {k: v for k, v in MAPPING["fields"].items() if k not in ("job_key", "tenant")}}
    assert mapping_errors(partial) == {}
    assert "fields.job_key" in mapping_errors({**partial, "correlate_by": None})
    optional = {**MAPPING, "correlate_by": {"path": "run_id", "optional": True}}
    assert "never optional" in mapping_errors(optional)["correlate_by"][0]
    tenant_optional = {**MAPPING, "fields": {**MAPPING["fields"], "tenant": {"path": "tenant", "optional": True}}}
    assert "never optional" in mapping_errors(tenant_optional)["fields.tenant"][0]


@pytest.mark.django_db
def test_a_failure_carrying_only_the_id_is_placed_on_the_run_its_received_event_registered(
    story_tenants: dict[str, Tenant],
) -> None:
    integration = _integration()
    key = _key(integration, [story_tenants["acme-foods"]])

    received = _alert(_post(key, RECEIVED))
    assert received.outcome == Alert.Outcome.ACCEPTED and received.attempt is None
    run = received.run
    assert run is not None and run.status == Run.Status.EXPECTED and run.tenant.slug == "acme-foods"
    assert not run.attempts.exists()

    start, fail = _alert(_post(key, START)), _alert(_post(key, FAIL))

    assert start.outcome == fail.outcome == Alert.Outcome.ACCEPTED
    assert start.run_id == fail.run_id == run.pk
    assert fail.job_key == "nightly-invoice-export" and fail.tenant_slug == "acme-foods"  # shown on the alert
    attempt = Attempt.objects.get(run=run)
    assert attempt.execution_id == "r-1" and attempt.status == Attempt.Status.FAILED
    assert attempt.error_summary == "invoice API answered 503"
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    kinds = list(TimelineEvent.objects.filter(run=run).order_by("id").values_list("kind", flat=True))
    assert kinds == [
        TimelineEvent.Kind.RUN_REPORTED,
        TimelineEvent.Kind.ATTEMPT_RUNNING,
        TimelineEvent.Kind.ATTEMPT_FAILED,
    ]


@pytest.mark.django_db
def test_a_failure_before_its_correlating_event_waits_and_is_placed_when_that_event_arrives(
    story_tenants: dict[str, Tenant],
) -> None:
    integration = _integration()
    key = _key(integration, [story_tenants["acme-foods"]])

    first = _post(key, FAIL)

    assert first["outcome"] == "unmatched"
    assert first["reason"].startswith("correlate_by: waiting for") and "'r-1'" in first["reason"]
    assert len(first["reason"]) < 160
    assert not Attempt.objects.exists()

    received = _alert(_post(key, RECEIVED))

    waited = Alert.objects.get(public_id=first["id"])
    assert waited.outcome == Alert.Outcome.ACCEPTED, waited.reason
    assert waited.run_id == received.run_id and waited.attempt is not None
    assert waited.attempt.execution_id == "r-1" and waited.attempt.status == Attempt.Status.FAILED
    assert waited.attempt.error_summary == "invoice API answered 503"
    assert Run.objects.get(pk=received.run_id).status == Run.Status.FAILED


@pytest.mark.django_db
def test_a_correlated_event_whose_earlier_tenant_is_outside_the_key_binding_is_unmatched(
    story_tenants: dict[str, Tenant],
) -> None:
    integration = _integration()
    acme_key = _key(integration, [story_tenants["acme-foods"]])
    other_key = _key(integration, [story_tenants["borealis-retail"]])
    _post(acme_key, RECEIVED)

    answer = _post(other_key, FAIL)

    assert answer["outcome"] == "unmatched"
    assert answer["reason"] == (
        "tenant: the tenant of the earlier event with correlate_by 'r-1' is not available to this integration key"
    )
    assert "acme" not in answer["reason"]  # a key never learns another key's tenants
    assert not Attempt.objects.exists()
    # and a record that names a job of its own must agree with the earlier event
    clash = _post(acme_key, {**FAIL, "job": "another-job", "ended_at": "2026-11-28T01:11:00Z"})
    assert clash["outcome"] == "unmatched"
    assert clash["reason"] == "job_key: 'another-job' differs from the earlier event with correlate_by 'r-1'"


@pytest.mark.django_db
def test_a_retry_under_a_reused_id_is_a_new_attempt_numbered_by_its_retry_ordinal(
    story_tenants: dict[str, Tenant],
) -> None:
    integration = _integration()
    key = _key(integration, [story_tenants["acme-foods"]])
    _post(key, RECEIVED)
    _post(key, START)
    _post(key, FAIL)
    late = _post(key, START)  # a re-send of the first start: nothing new
    assert late["outcome"] == "duplicate"

    for retry, minute in ((2, 20), (3, 40)):
        started = f"2026-11-28T01:{minute}:00Z"
        _post(key, {**START, "started_at": started})
        ended = _alert(_post(key, {**FAIL, "started_at": started, "ended_at": f"2026-11-28T01:{minute + 5}:00Z"}))
        assert ended.attempt is not None and ended.attempt.execution_id == f"r-1#{retry}"
        assert ended.attempt.status == Attempt.Status.FAILED

    attempts = list(Attempt.objects.order_by("number").values_list("number", "execution_id", "status", "trigger"))
    assert attempts == [
        (1, "r-1", "failed", "scheduled"),
        (2, "r-1#2", "failed", "automatic_retry"),
        (3, "r-1#3", "failed", "automatic_retry"),
    ]
    # a repeated failure with no start of its own is the same execution again, not a fourth
    again = _alert(_post(key, {"event": "fail", "run_id": "r-1", "ended_at": "2026-11-28T01:50:00Z", "error": "x"}))
    assert again.attempt is not None and again.attempt.execution_id == "r-1#3"
    assert Attempt.objects.count() == 3


@pytest.mark.django_db
def test_a_reported_missed_is_an_event_on_the_run_not_an_attempt(story_tenants: dict[str, Tenant]) -> None:
    integration = _integration()
    key = _key(integration, [story_tenants["acme-foods"]])
    missed = {"event": "skip", "job": "nightly-invoice-export", "tenant": "acme-foods", "scheduled_for": FIRE}

    answer = _alert(_post(key, missed))

    assert answer.outcome == Alert.Outcome.ACCEPTED and answer.attempt is None
    run = answer.run
    assert run is not None and run.status == Run.Status.MISSED
    assert not Attempt.objects.exists()
    event = TimelineEvent.objects.get(run=run)
    assert event.kind == TimelineEvent.Kind.MISSED_REPORTED and event.actor_integration_id == integration.pk
    assert "runner-events reports the fire time 2026-11-28 01:00:00Z missed" in event.summary

    assert _post(key, missed)["outcome"] == "duplicate"  # posted twice, nothing changes
    assert TimelineEvent.objects.count() == 1 and Run.objects.count() == 1


@pytest.mark.django_db
def test_a_reported_missed_under_latest_only_extends_the_target_streak(
    story_job: Job, story_tenants: dict[str, Tenant]
) -> None:
    Job.objects.filter(pk=story_job.pk).update(missed_run_policy=Job.MissedRunPolicy.LATEST_ONLY)
    integration = _integration()
    key = _key(integration, [story_tenants["acme-foods"]])

    answer = _alert(_post(key, {"event": "skip", "job": "nightly-invoice-export", "tenant": "acme-foods",
                                "scheduled_for": FIRE}))  # fmt: skip

    assert answer.outcome == Alert.Outcome.ACCEPTED and answer.run is None
    assert not Run.objects.exists() and not Attempt.objects.exists()
    streak = MissedStreak.objects.get()
    assert streak.slot_count == 1 and streak.closed_at is None
    assert set(TimelineEvent.objects.values_list("kind", flat=True)) == {
        TimelineEvent.Kind.MISSED_STREAK_OPENED,
        TimelineEvent.Kind.MISSED_REPORTED,
    }


@pytest.mark.django_db
def test_every_event_of_an_execution_posted_twice_changes_nothing(story_tenants: dict[str, Tenant]) -> None:
    integration = _integration()
    key = _key(integration, [story_tenants["acme-foods"]])
    bodies = [FAIL, RECEIVED, START]  # out of order on purpose
    for body in bodies:
        _post(key, body)
    counts = (Run.objects.count(), Attempt.objects.count(), TimelineEvent.objects.count())
    states = list(Alert.objects.order_by("id").values_list("outcome", flat=True))
    assert states == ["accepted", "accepted", "accepted"]

    for body in bodies:
        assert _post(key, body)["outcome"] == "duplicate"

    assert (Run.objects.count(), Attempt.objects.count(), TimelineEvent.objects.count()) == counts
    assert Attempt.objects.get().status == Attempt.Status.FAILED


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="advisory locks and concurrent writers need PostgreSQL")
@pytest.mark.parametrize("rounds", [6])
def test_a_failure_and_its_correlating_event_posted_at_once_always_end_placed(
    rounds: int, story_tenants: dict[str, Tenant]
) -> None:
    integration = _integration()
    key = _key(integration, [story_tenants["acme-foods"]])
    paths: list[str] = []
    for round_number in range(rounds):
        run_id = f"race-{round_number}"
        bodies = [{**RECEIVED, "run_id": run_id}, {**FAIL, "run_id": run_id}]
        answers = run_concurrently([partial(_post, key, body, Client()) for body in bodies])

        assert len(answers) == 2
        failure = Alert.objects.get(correlation_key=run_id, kind=Alert.Kind.ATTEMPT)
        answered = next(a for a in answers if a["id"] == str(failure.public_id))
        # the two legitimate orders: the failure found its event, or it waited and the event placed it
        assert answered["outcome"] == "accepted" or answered["reason"].startswith("correlate_by: waiting for")
        paths.append(answered["outcome"])
        assert failure.outcome == Alert.Outcome.ACCEPTED, failure.reason
        assert failure.attempt is not None and failure.attempt.status == Attempt.Status.FAILED
        assert Attempt.objects.filter(execution_id=run_id).count() == 1
    # whichever order each round took, no failure is left waiting
    assert len(paths) == rounds and set(paths) <= {"accepted", "unmatched"}
    assert Alert.objects.filter(outcome=Alert.Outcome.UNMATCHED).count() == 0


@pytest.mark.django_db
def test_the_openlineage_catalogue_entry_places_a_fail_that_arrives_before_its_start(
    story_tenants: dict[str, Tenant],
) -> None:
    entry = catalogue_entry("openlineage-run-events")
    assert entry is not None
    integration = integration_get_or_create(source="custom", name="airflow-openlineage")
    integration.settings = {"mapping": entry.mapping}
    integration.save()
    key = _key(integration, [story_tenants["acme-foods"]])
    start, fail = (sample["body"] for sample in entry.samples)

    waiting = _post(key, fail)
    assert waiting["outcome"] == "unmatched" and waiting["reason"].startswith("correlate_by: waiting for")
    placed = _alert(_post(key, start))
    failed = Alert.objects.select_related("attempt").get(public_id=waiting["id"])

    assert failed.outcome == Alert.Outcome.ACCEPTED and failed.run_id == placed.run_id
    assert failed.attempt is not None and failed.attempt.status == Attempt.Status.FAILED
    assert failed.attempt.error_summary == "invoice API answered 503 after 3 retries"
    run = Run.objects.get(pk=placed.run_id)
    assert (run.window_start.isoformat(), run.window_end.isoformat()) == (
        "2026-11-27T01:00:00+00:00",
        "2026-11-28T01:00:00+00:00",
    )
    # a task-level event (a parent facet, a dotted name) is not a job of its own: no alert
    task = {**start, "job": {"namespace": "airflow-prod", "name": "nightly-invoice-export.export"}}
    task["run"] = {"runId": "task-run", "facets": {"parent": {"run": {"runId": start["run"]["runId"]}}}}
    response = Client().post(
        "/api/v1/alerts/custom/", data=json.dumps(task), content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )  # fmt: skip
    assert response.status_code == 202 and response.json()["alerts"] == []


@pytest.mark.django_db
def test_the_api_refuses_a_mapping_that_makes_an_identity_field_or_correlate_by_optional() -> None:
    integration = _integration("optional-identity")
    api = admin_api()
    optional_id = {"path": "run_id", "optional": True}
    for path, mapping in (
        ("mapping.fields.execution_id", {**MAPPING, "fields": {**MAPPING["fields"], "execution_id": optional_id}}),
        ("mapping.correlate_by", {**MAPPING, "correlate_by": optional_id}),
    ):
        response = api.patch(
            f"/api/v1/integrations/{integration.public_id}/", data={"mapping": mapping}, content_type="application/json"
        )
        assert response.status_code == 400, response.content
        assert "never optional" in response.json()["errors"][path][0]
    integration.refresh_from_db()
    assert integration.settings["mapping"] == MAPPING

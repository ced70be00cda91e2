"""The generic story (runs/demo/alerts/generic/STORY.md), file by file, plus the ingestion rules."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from django.core.management import call_command
from django.test import override_settings

from handover.core.errors import Forbidden
from runs.alerts.models import Alert, AuthFailureCounter, Delivery
from runs.alerts.triage import alert_reprocess
from runs.attempts.models import Attempt, Run, RunnerReport
from runs.catalog.models import Integration
from runs.catalog.services import job_get_or_create
from runs.timeline.models import TimelineEvent
from tests.conftest import fixture_path
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
BERLIN_MIDNIGHT_27 = datetime(2026, 11, 26, 23, 0, tzinfo=UTC)
BERLIN_MIDNIGHT_28 = datetime(2026, 11, 27, 23, 0, tzinfo=UTC)
BERLIN_MIDNIGHT_29 = datetime(2026, 11, 28, 23, 0, tzinfo=UTC)


@pytest.fixture
def generic_key(story_tenants: dict[str, Any], make_key: Any) -> str:
    return make_key("generic", tenants=[story_tenants[s] for s in ("acme-foods", "borealis-retail", "cedar-health")])


def post_file(post_alert: Any, key: str, name: str) -> Any:
    return post_alert("generic", fixture_path("generic", name), key)


def test_first_failure_creates_the_run_and_attempt_one(post_alert: Any, generic_key: str) -> None:
    response = post_file(post_alert, generic_key, "01-first-failure.json")

    assert response.status_code == 202
    body = response.json()
    assert [a["outcome"] for a in body["alerts"]] == ["accepted"]
    run = Run.objects.get()
    assert (run.job.key, run.tenant.slug, run.environment) == ("nightly-invoice-export", "acme-foods", "prod")
    assert (run.window_start, run.window_end) == (BERLIN_MIDNIGHT_27, BERLIN_MIDNIGHT_28)
    assert run.scheduled_for == datetime(2026, 11, 28, 1, 0, tzinfo=UTC)
    assert run.status == Run.Status.FAILED
    assert run.target is not None
    attempt = run.attempts.get()
    assert (attempt.number, attempt.trigger, attempt.status) == (1, "scheduled", "failed")
    assert attempt.started_at == datetime(2026, 11, 28, 1, 3, 11, 482000, tzinfo=UTC)
    assert attempt.ended_at == datetime(2026, 11, 28, 1, 19, 40, tzinfo=UTC)
    assert attempt.correlation_ref == "lg-7f3a9c"
    assert attempt.log_url == "https://logs.example.internal/q/exp-20261128-0200-a1"
    assert attempt.config_version == "export-cfg@41"
    report = RunnerReport.objects.get(attempt=attempt)
    assert len(report.attempted_ids) == 4 and report.completed_ids == ["INV-1001", "INV-1002"]
    event = TimelineEvent.objects.get(run=run)
    assert (event.kind, event.occurred_at, event.actor_kind) == (
        "attempt_failed",
        attempt.ended_at,
        TimelineEvent.ActorKind.INTEGRATION,
    )
    assert body["alerts"][0]["run"] == str(run.public_id)
    assert body["alerts"][0]["attempt"] == str(attempt.public_id)
    assert body["delivery"] == str(Delivery.objects.get().public_id)


def test_retry_then_redelivery_adds_one_attempt_and_no_second_event(post_alert: Any, generic_key: str) -> None:
    post_file(post_alert, generic_key, "01-first-failure.json")
    retry = post_file(post_alert, generic_key, "02-retry-failure.json").json()
    again = post_file(post_alert, generic_key, "03-duplicate-redelivery.json").json()

    run = Run.objects.get()
    assert [(a.number, a.trigger, a.status) for a in run.attempts.order_by("number")] == [
        (1, "scheduled", "failed"),
        (2, "automatic_retry", "failed"),
    ]
    assert retry["alerts"][0]["outcome"] == "accepted"
    assert again["alerts"][0]["outcome"] == "duplicate"
    duplicate = Alert.objects.get(public_id=again["alerts"][0]["id"])
    assert duplicate.duplicate_of.public_id.hex == retry["alerts"][0]["id"].replace("-", "")
    assert duplicate.duplicate_of.repeat_count == 1
    assert TimelineEvent.objects.filter(run=run).count() == 2
    assert Delivery.objects.count() == 3


def test_next_run_ok_is_a_second_run_that_succeeded(post_alert: Any, generic_key: str) -> None:
    post_file(post_alert, generic_key, "01-first-failure.json")
    post_file(post_alert, generic_key, "04-next-run-ok.json")

    second = Run.objects.get(window_start=BERLIN_MIDNIGHT_28)
    assert second.window_end == BERLIN_MIDNIGHT_29
    assert second.status == Run.Status.SUCCEEDED
    assert list(second.attempts.values_list("number", "status")) == [(1, "succeeded")]
    assert Run.objects.get(window_start=BERLIN_MIDNIGHT_27).status == Run.Status.FAILED


def test_batch_of_two_tenants_gives_running_then_succeeded_and_a_staging_timeout(
    post_alert: Any, generic_key: str
) -> None:
    body = post_file(post_alert, generic_key, "05-batch-two-tenants.json").json()

    assert [a["outcome"] for a in body["alerts"]] == ["accepted", "accepted", "accepted"]
    borealis = Run.objects.get(tenant__slug="borealis-retail")
    attempt = borealis.attempts.get()
    assert attempt.status == Attempt.Status.SUCCEEDED
    assert list(borealis.timeline.order_by("occurred_at").values_list("kind", flat=True)) == [
        "attempt_running",
        "attempt_succeeded",
    ]
    cedar = Run.objects.get(tenant__slug="cedar-health")
    assert cedar.environment == "staging" and cedar.target is None
    assert list(cedar.attempts.values_list("status", flat=True)) == ["timed_out"]
    assert cedar.status == Run.Status.FAILED


@pytest.mark.parametrize(
    ("name", "field"), [("91-naive-timestamp.json", "scheduled_for"), ("92-missing-job.json", "job")]
)
def test_format_errors_are_400_naming_the_field_and_stored_rejected(
    post_alert: Any, generic_key: str, name: str, field: str
) -> None:
    response = post_file(post_alert, generic_key, name)

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == 400 and field in problem["errors"]
    assert field in problem["detail"]
    delivery = Delivery.objects.get(public_id=problem["delivery"])
    assert delivery.outcome == Delivery.Outcome.REJECTED
    assert delivery.body == fixture_path("generic", name).read_text()
    assert not delivery.alerts.exists() and not Run.objects.exists()


def test_unknown_job_is_unmatched_then_a_run_after_registering_and_reprocessing(
    post_alert: Any, generic_key: str
) -> None:
    body = post_file(post_alert, generic_key, "93-unknown-job-key.json").json()

    alert = Alert.objects.get(public_id=body["alerts"][0]["id"])
    assert alert.outcome == Alert.Outcome.UNMATCHED
    assert "quarterly-vat-filing" in alert.reason and alert.job_key == "quarterly-vat-filing"
    assert not Run.objects.exists()

    job_get_or_create(key="quarterly-vat-filing", defaults={"schedule": "0 2 * * *", "timezone": "Europe/Berlin"})
    # the service refuses a person who is not staff (issue #15), and changes nothing
    events = TimelineEvent.objects.count()
    with pytest.raises(Forbidden):
        alert_reprocess(alert=alert, actor=UserFactory(is_staff=False))
    alert.refresh_from_db()
    assert alert.outcome == Alert.Outcome.UNMATCHED and alert.run is None
    assert not Run.objects.exists() and TimelineEvent.objects.count() == events
    alert = alert_reprocess(alert=alert, actor=UserFactory(is_staff=True))

    assert alert.outcome == Alert.Outcome.ACCEPTED
    run = Run.objects.get(job__key="quarterly-vat-filing")
    assert list(run.attempts.values_list("status", flat=True)) == ["failed"]
    assert alert.run == run


def test_a_resent_unmatched_alert_is_one_inbox_entry_with_a_repeat_count(post_alert: Any, generic_key: str) -> None:
    post_file(post_alert, generic_key, "93-unknown-job-key.json")
    post_file(post_alert, generic_key, "93-unknown-job-key.json")

    original = Alert.objects.get(duplicate_of__isnull=True)
    assert original.outcome == Alert.Outcome.UNMATCHED and original.repeat_count == 1
    assert Alert.objects.filter(outcome=Alert.Outcome.DUPLICATE).count() == 1


def test_unicode_long_error_is_a_manual_rerun_flagged_as_outside_approval(post_alert: Any, generic_key: str) -> None:
    for name in ("01-first-failure.json", "02-retry-failure.json", "94-unicode-long-error.json"):
        post_file(post_alert, generic_key, name)

    run = Run.objects.get()
    third = run.attempts.get(number=3)
    # reported manual_replay, but no replay dispatched by Handover carries it: recorded manual_rerun
    assert (third.trigger, third.source_number, third.status) == ("manual_rerun", 3, "failed")
    assert len(third.error_summary) == 2000
    assert third.error_summary.startswith("Échec de l'export — client « Müller & Søn »")
    flags = run.timeline.filter(kind="manual_replay_unapproved")
    assert flags.count() == 1 and flags.get().attempt == third


def test_the_whole_story_twice_changes_nothing_the_second_time(post_alert: Any, generic_key: str) -> None:
    names = [p.name for p in sorted(fixture_path("generic", "").glob("*.json"))]
    for name in names:
        post_file(post_alert, generic_key, name)
    counts = (Run.objects.count(), Attempt.objects.count(), TimelineEvent.objects.count())
    second_round = [post_file(post_alert, generic_key, name) for name in names]

    assert (Run.objects.count(), Attempt.objects.count(), TimelineEvent.objects.count()) == counts
    outcomes = [a["outcome"] for r in second_round if r.status_code == 202 for a in r.json()["alerts"]]
    assert "accepted" not in outcomes


# --- authentication and binding ------------------------------------------------------------------


def test_missing_or_wrong_key_is_401_and_nothing_is_stored(post_alert: Any, generic_key: str) -> None:
    body = fixture_path("generic", "01-first-failure.json")
    missing = post_alert("generic", body, None)
    wrong = post_alert("generic", body, "hk_" + "x" * 43)

    assert missing.status_code == wrong.status_code == 401
    assert missing["WWW-Authenticate"].startswith("Bearer")
    assert missing.json()["status"] == 401
    assert not Delivery.objects.exists() and not Alert.objects.exists()
    assert AuthFailureCounter.objects.get(source="generic").count == 2


def test_revoked_key_is_401(post_alert: Any, generic_key: str) -> None:
    from runs.catalog.models import IntegrationKey

    IntegrationKey.objects.update(revoked_at=datetime(2026, 1, 1, tzinfo=UTC))
    assert post_alert("generic", fixture_path("generic", "01-first-failure.json"), generic_key).status_code == 401


def test_key_of_another_source_is_403_and_counted(post_alert: Any, story_tenants: Any, make_key: Any) -> None:
    key = make_key("alertmanager", tenants=[story_tenants["acme-foods"]])

    response = post_alert("generic", fixture_path("generic", "01-first-failure.json"), key)

    assert response.status_code == 403
    assert "alertmanager" in response.json()["detail"]
    assert not Delivery.objects.exists()
    assert Integration.objects.get(source="alertmanager").refused_post_count == 1


def test_unknown_source_is_404(post_alert: Any, generic_key: str) -> None:
    assert post_alert("nagios", b"{}", generic_key).status_code == 404


def test_unknown_and_unbound_tenants_get_the_same_neutral_reason(
    post_alert: Any, story_tenants: Any, make_key: Any
) -> None:
    key = make_key("generic", tenants=[story_tenants["borealis-retail"]])
    document = json.loads(fixture_path("generic", "01-first-failure.json").read_bytes())
    unbound = post_alert("generic", document, key).json()["alerts"][0]
    document["tenant"], document["execution_id"] = "no-such-tenant", "x-2"
    unknown = post_alert("generic", document, key).json()["alerts"][0]

    assert unbound["outcome"] == unknown["outcome"] == "unmatched"
    assert unbound["reason"].replace("acme-foods", "T") == unknown["reason"].replace("no-such-tenant", "T")
    assert not Run.objects.exists()


def test_all_tenants_key_reaches_every_tenant(post_alert: Any, story_tenants: Any, make_key: Any) -> None:
    key = make_key("generic", all_tenants=True)
    assert (
        post_alert("generic", fixture_path("generic", "01-first-failure.json"), key).json()["alerts"][0]["outcome"]
        == "accepted"
    )


def test_tenant_slugs_match_case_insensitively_and_nfc(post_alert: Any, story_tenants: Any, make_key: Any) -> None:
    key = make_key("generic", all_tenants=True)
    document = json.loads(fixture_path("generic", "01-first-failure.json").read_bytes())
    document["tenant"] = "CAFE\u0301-lumière-münchen"  # decomposed é, upper case

    alert = post_alert("generic", document, key).json()["alerts"][0]

    assert alert["outcome"] == "accepted"
    assert Run.objects.get().tenant.slug == "café-lumière-münchen"


# --- bodies ----------------------------------------------------------------------------------------


@override_settings(HANDOVER_MAX_BODY_BYTES=200_000)
def test_oversized_body_is_413_and_keeps_its_first_64_kib(post_alert: Any, generic_key: str) -> None:
    body = b'{"alerts": [' + b" " * 300_000 + b"]}"

    response = post_alert("generic", body, generic_key)

    assert response.status_code == 413
    delivery = Delivery.objects.get()
    assert delivery.outcome == Delivery.Outcome.REJECTED and delivery.is_body_truncated
    assert len(delivery.body.encode()) == 64 * 1024
    assert delivery.size_bytes == len(body)


def test_batch_keeps_valid_items_and_lists_invalid_ones_by_index(post_alert: Any, generic_key: str) -> None:
    document = json.loads(fixture_path("generic", "05-batch-two-tenants.json").read_bytes())
    del document["alerts"][1]["execution_id"]

    response = post_alert("generic", document, generic_key)

    assert response.status_code == 202
    alerts = response.json()["alerts"]
    assert [a["outcome"] for a in alerts] == ["accepted", "rejected", "accepted"]
    assert alerts[1]["reason"].startswith("alerts.1.execution_id")
    assert Attempt.objects.count() == 2


def test_invalid_json_is_400_and_kept(post_alert: Any, generic_key: str) -> None:
    response = post_alert("generic", b'{"schema": "handover.alert/v1", "job": ', generic_key)

    assert response.status_code == 400
    assert Delivery.objects.get().body == '{"schema": "handover.alert/v1", "job": '


def test_secrets_and_personal_data_are_redacted_from_the_stored_body(post_alert: Any, generic_key: str) -> None:
    document = json.loads(fixture_path("generic", "01-first-failure.json").read_bytes())
    document["token"] = "tok_live_abcdefghijklmnop"
    document["error"] = "card 4111 1111 1111 1111 of jane.doe@example.com; Bearer abcdefghijklmnopqrstuvwxyz"
    document["sent_epoch_ms"] = 1795827665742

    post_alert("generic", document, generic_key)

    stored = Delivery.objects.get().body
    for secret in (
        "tok_live_abcdefghijklmnop",
        "4111 1111 1111 1111",
        "jane.doe@example.com",
        "abcdefghijklmnopqrstuvwxyz",
    ):
        assert secret not in stored
    assert "1795827665742" in stored  # epoch milliseconds are not cards
    attempt = Attempt.objects.get()
    assert "jane.doe@example.com" not in attempt.error_summary and "4111" not in attempt.error_summary


def test_a_late_running_report_on_a_failed_attempt_is_kept_as_stale(post_alert: Any, generic_key: str) -> None:
    post_file(post_alert, generic_key, "01-first-failure.json")
    document = json.loads(fixture_path("generic", "01-first-failure.json").read_bytes())
    document["status"] = "running"

    alert = post_alert("generic", document, generic_key).json()["alerts"][0]

    assert alert["outcome"] == "accepted"
    stored = Alert.objects.get(public_id=alert["id"])
    assert stored.is_stale and "stale" in stored.reason
    assert Attempt.objects.get().status == Attempt.Status.FAILED
    assert TimelineEvent.objects.count() == 1


def test_reprocess_command_applies_unmatched_alerts_after_the_job_exists(post_alert: Any, generic_key: str) -> None:
    post_file(post_alert, generic_key, "93-unknown-job-key.json")
    job_get_or_create(key="quarterly-vat-filing", defaults={"schedule": "0 2 * * *", "timezone": "Europe/Berlin"})

    call_command("reprocess_alerts")

    assert Alert.objects.get().outcome == Alert.Outcome.ACCEPTED

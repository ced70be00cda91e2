"""The Kubernetes Job/CronJob parser against every fixture of runs/demo/alerts/kubernetes/STORY.md."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from runs.alerts.parsers import kubernetes
from runs.alerts.parsers.base import AlertKind, FormatError, InvalidItem, ParsedAlert, ParseResult, merged_settings

FIXTURES = Path(__file__).resolve().parents[4] / "runs/demo/alerts/kubernetes"
BERLIN = timezone(timedelta(hours=1))
RECEIVED = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
JOB_1 = "7c4e1a9b-2d5f-4b8e-a3c6-9f0d1e2b3c4d"


def berlin(*args: int) -> datetime:
    return datetime(*args, tzinfo=BERLIN)


def parse_result(body: bytes, **overrides: Any) -> ParseResult:
    settings = merged_settings(kubernetes.DEFAULT_SETTINGS, overrides)
    return kubernetes.parse(body, settings=settings, received_at=RECEIVED)


def parse_body(body: bytes, **overrides: Any) -> ParsedAlert:
    result = parse_result(body, **overrides)
    assert len(result.alerts) == 1
    alert = result.alerts[0]
    assert isinstance(alert, ParsedAlert)
    return alert


def parse_file(name: str, **overrides: Any) -> ParsedAlert:
    return parse_body((FIXTURES / name).read_bytes(), **overrides)


def load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())


def test_a_job_with_one_failed_pod_and_one_running_reports_both_attempts() -> None:
    alert = parse_file("01-job-attempt1-failed-pod-retrying.json")

    assert alert.kind == AlertKind.ATTEMPT
    assert (alert.job_key, alert.tenant, alert.environment) == (
        "nightly-invoice-export",
        "ironbridge-telecom",
        "prod",
    )
    assert alert.scheduled_for == berlin(2026, 11, 28, 2, 0)
    assert alert.window_start is None and alert.window_end is None  # derived from the schedule (day-aligned)
    assert alert.execution_id == f"{JOB_1}#2"
    assert (alert.attempt_number, alert.trigger, alert.status) == (2, "automatic_retry", "running")
    assert alert.started_at is None and alert.ended_at is None
    assert alert.occurred_at is None  # at receipt: the object has no pod times
    assert alert.config_version == "export-cfg@41"
    assert alert.correlation_ref == JOB_1
    assert alert.problems == []

    [first] = alert.related_attempts
    assert first.execution_id == f"{JOB_1}#1"
    assert (first.number, first.trigger, first.status) == (1, "scheduled", "failed")
    assert first.started_at == berlin(2026, 11, 28, 2, 0)
    assert first.ended_at is None


def test_a_job_failed_by_its_backoff_limit_ends_the_newest_pod() -> None:
    alert = parse_file("02-job-failed-backoff-limit.json")

    assert alert.execution_id == f"{JOB_1}#2"
    assert (alert.attempt_number, alert.trigger, alert.status) == (2, "automatic_retry", "failed")
    assert alert.ended_at == berlin(2026, 11, 28, 2, 21, 14)  # the Failed condition, not FailureTarget
    assert alert.occurred_at == berlin(2026, 11, 28, 2, 21, 14)
    assert alert.error_summary == "BackoffLimitExceeded: Job has reached the specified backoff limit"
    assert [(a.execution_id, a.status) for a in alert.related_attempts] == [(f"{JOB_1}#1", "failed")]
    assert alert.problems == []
    assert alert.dedup_key != parse_file("01-job-attempt1-failed-pod-retrying.json").dedup_key


def test_an_interim_failure_target_alone_does_not_end_the_attempt() -> None:
    doc = load("02-job-failed-backoff-limit.json")
    doc["status"]["conditions"] = doc["status"]["conditions"][:1]  # FailureTarget only

    alert = parse_body(json.dumps(doc).encode())

    assert alert.status == "running" and alert.ended_at is None and alert.error_summary == ""
    assert alert.dedup_key != parse_file("02-job-failed-backoff-limit.json").dedup_key


def test_a_watch_event_redelivering_the_same_object_gives_the_same_record_and_key() -> None:
    bare, wrapped = (
        parse_file("02-job-failed-backoff-limit.json"),
        parse_file("03-duplicate-redelivery-watch-event.json"),
    )

    assert wrapped.dedup_key == bare.dedup_key
    assert wrapped.details.pop("event") == "MODIFIED"
    assert wrapped == bare


def test_resource_version_is_not_part_of_a_job_dedup_key() -> None:
    doc = load("02-job-failed-backoff-limit.json")
    doc["metadata"]["resourceVersion"] = "48299999"  # an informer resync

    assert parse_body(json.dumps(doc).encode()).dedup_key == parse_file("02-job-failed-backoff-limit.json").dedup_key


def test_the_next_nights_complete_job_is_a_succeeded_first_attempt() -> None:
    alert = parse_file("04-next-run-ok-job-complete.json")

    assert alert.scheduled_for == berlin(2026, 11, 29, 2, 0)
    assert alert.execution_id == "b8d2f6a0-3c7e-4a19-8e5b-2d4f6a8c0e13#1"
    assert (alert.attempt_number, alert.trigger, alert.status) == (1, "scheduled", "succeeded")
    assert alert.started_at == berlin(2026, 11, 29, 2, 0)
    assert alert.ended_at == berlin(2026, 11, 29, 2, 12, 56)  # completionTime, not SuccessCriteriaMet
    assert alert.related_attempts == []
    assert alert.problems == []


def test_a_cronjob_is_a_definition_carrying_what_the_mechanism_compares() -> None:
    alert = parse_file("05-cronjob.json")

    assert alert.kind == AlertKind.DEFINITION
    assert (alert.job_key, alert.tenant, alert.environment) == (
        "nightly-invoice-export",
        "ironbridge-telecom",
        "prod",
    )
    assert alert.execution_id is None and alert.status is None and alert.related_attempts == []
    assert alert.details["uid"] == "0f6c2b9e-4a7d-4e13-9b58-c1d2e3f4a5b6"
    assert alert.details["schedule"] == "0 2 * * *"
    assert alert.details["timeZone"] == "Europe/Berlin"
    assert alert.details["concurrencyPolicy"] == "Forbid"
    assert alert.details["startingDeadlineSeconds"] == 600
    assert alert.details["lastSuccessfulTime"] == "2026-11-29T01:12:56Z"  # shown, never a success signal
    assert alert.problems == []


def test_a_cronjob_dedup_key_follows_its_resource_version() -> None:
    doc = load("05-cronjob.json")
    doc["metadata"]["resourceVersion"] = "48500000"

    assert parse_body(json.dumps(doc).encode()).dedup_key != parse_file("05-cronjob.json").dedup_key


def test_a_utc_cronjob_with_a_deadline_is_timed_out_and_its_ascii_tenant_is_not_transliterated() -> None:
    alert = parse_file("91-no-timezone-utc-deadline-exceeded.json")

    assert alert.job_key == "rechnungsexport"
    assert alert.tenant == "cafe-lumiere-muenchen"  # the mechanism finds no such tenant
    assert alert.scheduled_for == berlin(2026, 11, 28, 3, 0)
    assert alert.details["name_suffix_time"] == "2026-11-28T02:00:00+00:00"  # 29930520 minutes: the same minute
    assert alert.execution_id == "2e9a4c6f-8b1d-4f37-a0c5-6e8d2b4f1a97#1"
    assert (alert.attempt_number, alert.trigger, alert.status) == (1, "scheduled", "timed_out")
    assert alert.started_at == berlin(2026, 11, 28, 3, 0)
    assert alert.ended_at == berlin(2026, 11, 28, 3, 30, 31)
    assert alert.error_summary == "DeadlineExceeded: Job was active longer than specified deadline"
    assert alert.details["display_name"] == "Nächtlicher Rechnungsexport – Café Lumière"
    assert alert.problems == []


def test_a_tenant_alias_maps_an_ascii_label_to_a_unicode_slug() -> None:
    alias = {"cafe-lumiere-muenchen": "café-lumière-münchen"}

    alert = parse_file("91-no-timezone-utc-deadline-exceeded.json", tenant_aliases=alias)

    assert alert.tenant == "café-lumière-münchen"
    assert alert.details["tenant_label"] == "cafe-lumiere-muenchen"


def test_a_watch_error_event_asks_the_forwarder_to_re_list() -> None:
    alert = parse_file("92-watch-error-event.json")

    assert alert.job_key is None and alert.execution_id is None
    [problem] = alert.problems
    assert "re-list" in problem and "48213377" in problem and "410" in problem
    assert alert.dedup_key.startswith("watch-error:")


def test_a_watch_error_key_is_the_hash_of_the_canonical_body() -> None:
    compact = json.dumps(load("92-watch-error-event.json"), separators=(",", ":")).encode()

    assert parse_body(compact).dedup_key == parse_file("92-watch-error-event.json").dedup_key


def test_a_manual_job_has_no_scheduled_time_and_is_flagged_as_outside_approval() -> None:
    alert = parse_file("93-manual-job-pod-failure-policy.json")

    assert (alert.job_key, alert.tenant, alert.environment) == (
        "nightly-invoice-export",
        "ironbridge-telecom",
        "prod",
    )
    assert alert.scheduled_for is None and alert.window_start is None and alert.window_end is None
    assert alert.execution_id == "5d1f3b7e-9a2c-4e68-b4d0-7f9e1c3a5b82#1"
    assert (alert.attempt_number, alert.trigger, alert.status) == (1, "manual_rerun", "failed")
    assert alert.started_at == berlin(2026, 11, 28, 10, 12, 44)
    assert alert.ended_at == berlin(2026, 11, 28, 10, 13, 30)
    assert alert.error_summary == (
        "PodFailurePolicy: Container export for pod "
        "ironbridge-telecom-prod/nightly-invoice-export-manual-7xk2p-8zq4d"
        " failed with exit code 42 matching FailJob rule at index 0"
    )
    assert alert.details["manual_run_outside_approval"] is True
    assert alert.problems == []  # "no window" is the mechanism's reason


def test_every_story_state_has_its_own_dedup_key() -> None:
    names = sorted(path.name for path in FIXTURES.glob("*.json") if not path.name.startswith("03-"))

    keys = {parse_file(name).dedup_key for name in names}

    assert len(keys) == len(names) == 7


def test_missing_tenant_and_environment_labels_are_problems() -> None:
    doc = load("01-job-attempt1-failed-pod-retrying.json")
    del doc["metadata"]["labels"]["acme.example/tenant"], doc["metadata"]["labels"]["acme.example/env"]

    alert = parse_body(json.dumps(doc).encode())

    assert alert.tenant is None and alert.environment is None
    assert alert.problems == [
        "no tenant: label:acme.example/tenant is not set and the integration has no default_tenant",
        "no environment: label:acme.example/env is not set and the integration has no default_environment",
    ]


def test_a_naive_scheduled_timestamp_is_a_problem() -> None:
    doc = load("01-job-attempt1-failed-pod-retrying.json")
    doc["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"] = "2026-11-28T02:00:00"

    alert = parse_body(json.dumps(doc).encode())

    assert alert.scheduled_for is None
    [problem] = alert.problems
    assert "cronjob-scheduled-timestamp" in problem and "no UTC offset" in problem


def test_a_job_list_gives_one_record_per_item_and_rejects_only_the_broken_one() -> None:
    job = load("04-next-run-ok-job-complete.json")
    del job["kind"]
    body = json.dumps({"kind": "JobList", "items": [job, {"metadata": {}}]}).encode()

    result = parse_result(body)

    good, bad = result.alerts
    assert isinstance(good, ParsedAlert) and good.status == "succeeded"
    assert isinstance(bad, InvalidItem) and bad.field == "items.1.metadata.uid"
    assert bad.dedup_key.startswith("invalid:") and bad.dedup_key == parse_result(body).alerts[1].dedup_key


def test_a_bookmark_event_carries_nothing() -> None:
    body = b'{"type": "BOOKMARK", "object": {"kind": "Job", "metadata": {"resourceVersion": "48300000"}}}'

    result = parse_result(body)

    assert result.alerts == [] and result.notes == {"bookmark": "48300000"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"not json", ""),
        (b'"a string"', ""),
        (b'{"kind": "Pod", "metadata": {"uid": "u"}}', "kind"),
        (b'{"kind": "Job", "metadata": {"name": "x"}}', "metadata.uid"),
        (b'{"type": "MODIFIED", "object": {"kind": "Job", "metadata": {}}}', "object.metadata.uid"),
        (b'{"kind": "Job", "metadata": {"uid": "u"}, "status": {"failed": "two"}}', "status.failed"),
    ],
)
def test_a_body_that_is_no_kubernetes_object_is_a_format_error_naming_the_field(body: bytes, field: str) -> None:
    with pytest.raises(FormatError) as caught:
        parse_result(body)

    assert caught.value.field == field


def test_secret_env_values_are_redacted_by_name_and_config_version_survives() -> None:
    import json

    from runs.alerts.redaction import redact_body

    job = json.loads(FIXTURES.joinpath("01-job-attempt1-failed-pod-retrying.json").read_bytes())
    container = job["spec"]["template"]["spec"]["containers"][0]
    container.setdefault("env", []).append({"name": "LEDGER_API_TOKEN", "value": "s3cr3t-ledger-token-value"})
    stored = redact_body(json.dumps({"type": "MODIFIED", "object": job}).encode(), kubernetes.REDACT_PATHS)

    assert "s3cr3t-ledger-token-value" not in stored
    assert "export-cfg@41" in stored
    reparsed = parse_result(stored.encode()).alerts[0]
    assert reparsed.config_version == "export-cfg@41"

"""The Alertmanager parser against every fixture of ``runs/demo/alerts/alertmanager`` (pure: no database)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from runs.alerts.parsers import alertmanager
from runs.alerts.parsers.base import AlertKind, FormatError, InvalidItem, ParsedAlert, ParseResult, merged_settings

FIXTURES = Path(__file__).resolve().parents[4] / "runs/demo/alerts/alertmanager"
BERLIN = timezone(timedelta(hours=1))
RECEIVED_AT = datetime(2026, 11, 28, 3, 0, tzinfo=UTC)


def berlin(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=BERLIN)


def parse_body(body: bytes, overrides: dict[str, Any] | None = None) -> ParseResult:
    settings = merged_settings(alertmanager.DEFAULT_SETTINGS, overrides)
    return alertmanager.parse(body, settings=settings, received_at=RECEIVED_AT)


def parse_fixture(name: str, overrides: dict[str, Any] | None = None) -> ParseResult:
    return parse_body((FIXTURES / name).read_bytes(), overrides)


def load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_bytes())


def records(result: ParseResult) -> list[ParsedAlert]:
    assert all(isinstance(record, ParsedAlert) for record in result.alerts)
    return [record for record in result.alerts if isinstance(record, ParsedAlert)]


def assert_run_identity(record: ParsedAlert) -> None:
    assert record.job_key == "nightly-invoice-export"
    assert record.tenant == "dunmore-pharmacy"
    assert record.environment == "prod"
    assert record.window_start == berlin(2026, 11, 27, 0, 0)
    assert record.window_end == berlin(2026, 11, 28, 0, 0)
    assert record.scheduled_for == berlin(2026, 11, 28, 2, 0)


def test_first_failure_reports_attempt_one_as_failed_with_its_run_identity() -> None:
    result = parse_fixture("01-first-failure.json")
    [record] = records(result)
    assert record.kind == AlertKind.ATTEMPT
    assert_run_identity(record)
    assert record.execution_id == "exp-20261128-0200-a1"
    assert record.attempt_number == 1
    assert record.trigger == "scheduled"
    assert record.status == "failed"
    assert record.started_at == berlin(2026, 11, 28, 2, 3, 11, 482000)
    assert record.ended_at == berlin(2026, 11, 28, 2, 19, 40)
    assert record.occurred_at == berlin(2026, 11, 28, 2, 19, 40)
    assert record.error_summary == "Timeout waiting for acknowledgement from ledger gateway"
    assert record.correlation_ref == "lg-7f3a9c"
    assert record.log_url == "https://logs.example.internal/q/exp-20261128-0200-a1"
    assert record.problems == []
    assert result.notes == {}
    assert record.summary == "firing: nightly-invoice-export failed for dunmore-pharmacy (prod)"


def test_first_failure_keeps_nanosecond_starts_at_to_microseconds_and_reads_go_zero_ends_at_as_null() -> None:
    [record] = records(parse_fixture("01-first-failure.json"))
    assert record.details["fingerprint"] == "a3f1c09e7b2d4e58"
    assert record.details["starts_at"] == "2026-11-28T01:20:15.118736+00:00"
    assert record.details["ends_at"] is None
    assert record.details["generator_url"].startswith("https://prometheus.ops.dunmore-pharmacy.example/graph?")
    assert record.details["severity"] == "critical"


def test_retry_failure_reads_each_alert_itself_not_the_common_annotations() -> None:
    first, second = records(parse_fixture("02-retry-failure.json"))
    [original] = records(parse_fixture("01-first-failure.json"))
    assert first.dedup_key == original.dedup_key  # the same firing alert again: a duplicate
    assert second.dedup_key != original.dedup_key
    assert second.details["fingerprint"] == "5c8e2b71d09f3a64"
    assert_run_identity(second)
    assert second.execution_id == "exp-20261128-0200-a2"
    assert second.attempt_number == 2
    assert second.trigger == "automatic_retry"
    assert second.status == "failed"
    assert second.started_at == berlin(2026, 11, 28, 2, 29, 40)
    assert second.ended_at == berlin(2026, 11, 28, 2, 31, 2)
    assert second.occurred_at == berlin(2026, 11, 28, 2, 31, 2)
    assert second.error_summary == "Ledger gateway returned 503 Service Unavailable"
    assert second.correlation_ref == "lg-7f3b11"
    assert second.log_url == "https://logs.example.internal/q/exp-20261128-0200-a2"
    assert second.problems == []


def test_duplicate_redelivery_gives_the_same_dedup_keys_as_the_original_post() -> None:
    original = [record.dedup_key for record in records(parse_fixture("02-retry-failure.json"))]
    again = [record.dedup_key for record in records(parse_fixture("03-duplicate-redelivery.json"))]
    assert again == original
    assert len(set(again)) == 2


def test_resolved_alerts_are_resolve_signals_whose_dedup_keys_differ_from_the_firing_ones() -> None:
    firing = records(parse_fixture("02-retry-failure.json"))
    resolved = records(parse_fixture("04-next-run-ok.json"))
    assert [record.kind for record in resolved] == [AlertKind.RESOLVE, AlertKind.RESOLVE]
    assert [record.execution_id for record in resolved] == ["exp-20261128-0200-a1", "exp-20261128-0200-a2"]
    for before, after in zip(firing, resolved, strict=True):
        assert after.dedup_key != before.dedup_key
        assert after.group_ref == before.group_ref
        assert_run_identity(after)
        assert after.status is None  # a resolve never changes an attempt's status
        assert after.trigger is None
        assert after.occurred_at == datetime(2026, 11, 29, 1, 13, 30, 118736, tzinfo=UTC)
        assert after.problems == []


def test_missing_labels_alert_lists_every_missing_convention_and_keeps_the_job_name_as_sent() -> None:
    [record] = records(parse_fixture("91-missing-labels.json"))
    assert record.job_key == "nightly-invoice-export-29930460"  # the Kubernetes suffix is not stripped
    assert record.tenant is None
    assert record.environment is None
    assert record.execution_id is None
    assert record.problems == [
        "no `tenant` label: the tenant is unknown",
        "no `env` label: the environment is unknown",
        "no `execution_id` label: the execution id is unknown",
    ]
    # No window and no scheduled_for: the mechanism reports "no window"; the namespace is not a source.
    assert record.window_start is None and record.scheduled_for is None
    assert record.details["namespace"] == "dunmore-pharmacy-prod"
    assert record.details["generator_url"] == ""
    assert record.log_url == ""
    assert record.details["starts_at"] == "2026-11-28T01:22:30.500000+00:00"


def test_offsets_unicode_truncated_alert_lists_all_problems_and_still_parses_the_rest() -> None:
    result = parse_fixture("92-offsets-unicode-truncated.json")
    [record] = records(result)
    problems = "\n".join(record.problems)
    assert len(record.problems) == 4
    assert "`scheduled_for` annotation: '2026-11-28T02:00:00' has no UTC offset" in problems
    assert "`window_start` annotation: '2026-11-27' is a date, not a timestamp" in problems
    assert "`window_end` annotation is missing" in problems
    assert "`attempt` annotation 'eins' is not an integer" in problems
    assert record.job_key == "nächtlicher-rechnungsexport"
    assert record.tenant == "café-lumière-münchen"
    assert record.execution_id == "exp-20261128-0200-é1"
    assert record.window_start is None and record.window_end is None and record.scheduled_for is None
    assert record.details["starts_at"] == "2026-11-28T01:20:15.118736+00:00"
    description = load("92-offsets-unicode-truncated.json")["alerts"][0]["annotations"]["description"]
    assert len(description) == 3039
    assert record.error_summary == description[:2000]
    assert result.notes == {"truncated_alerts": 7}


def test_truncated_body_is_a_format_error_for_the_body_as_a_whole() -> None:
    with pytest.raises(FormatError) as caught:
        parse_fixture("93-truncated-body.json")
    assert caught.value.field == ""
    assert "not valid JSON" in caught.value.message


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"[]", ""),
        (b'{"version": "4", "alerts": {}}', "alerts"),
        (b'{"version": "1", "alerts": []}', "version"),
        (b'{"version": "4", "alerts": [], "truncatedAlerts": "7"}', "truncatedAlerts"),
    ],
)
def test_a_body_of_the_wrong_shape_is_a_format_error_naming_the_field(body: bytes, field: str) -> None:
    with pytest.raises(FormatError) as caught:
        parse_body(body)
    assert caught.value.field == field


def test_an_invalid_alert_in_a_batch_becomes_an_invalid_item_and_the_others_are_parsed() -> None:
    data = load("02-retry-failure.json")
    del data["alerts"][0]["fingerprint"]
    data["alerts"].append({"status": "pending", "labels": {}, "fingerprint": "x", "startsAt": "2026-11-28T01:00:00Z"})
    result = parse_body(json.dumps(data).encode())
    invalid, valid, wrong_status = result.alerts
    assert isinstance(invalid, InvalidItem) and invalid.field == "alerts.0.fingerprint"
    assert isinstance(valid, ParsedAlert) and valid.execution_id == "exp-20261128-0200-a2"
    assert isinstance(wrong_status, InvalidItem) and wrong_status.field == "alerts.2.status"


def test_integration_settings_replace_the_default_label_names() -> None:
    data = load("01-first-failure.json")
    alert = data["alerts"][0]
    alert["labels"]["client"] = alert["labels"].pop("tenant")
    alert["annotations"]["run_kind"] = "manual_replay"
    overrides = {"tenant_from": "labels.client", "trigger_from": "annotations.run_kind"}
    [record] = records(parse_body(json.dumps(data).encode(), overrides))
    assert record.tenant == "dunmore-pharmacy"
    assert record.trigger == "manual_replay"
    [unconfigured] = records(parse_body(json.dumps(data).encode()))
    assert unconfigured.tenant is None
    assert "no `tenant` label: the tenant is unknown" in unconfigured.problems


def test_defaults_fill_a_missing_tenant_and_environment_without_a_problem() -> None:
    overrides = {"default_tenant": "dunmore-pharmacy", "default_environment": "prod"}
    [record] = records(parse_fixture("91-missing-labels.json", overrides))
    assert record.tenant == "dunmore-pharmacy"
    assert record.environment == "prod"
    assert record.problems == ["no `execution_id` label: the execution id is unknown"]


def test_error_falls_back_to_the_description_and_a_non_http_log_link_is_no_link() -> None:
    data = load("01-first-failure.json")
    annotations = data["alerts"][0]["annotations"]
    del annotations["error"]
    annotations["log_url"] = "javascript:alert(1)"
    [record] = records(parse_body(json.dumps(data).encode()))
    assert record.error_summary == annotations["description"]
    assert record.log_url == ""


def test_a_reversed_window_is_a_problem() -> None:
    data = load("01-first-failure.json")
    annotations = data["alerts"][0]["annotations"]
    annotations["window_start"], annotations["window_end"] = (
        annotations["window_end"],
        annotations["window_start"],
    )
    [record] = records(parse_body(json.dumps(data).encode()))
    assert record.window_start is None
    assert any("is not before window end" in problem for problem in record.problems)


def test_the_dedup_key_ignores_the_group_key_and_the_common_annotations() -> None:
    data = load("01-first-failure.json")
    [original] = records(parse_body(json.dumps(data).encode()))
    data["groupKey"] = '{}:{alertname="Other"}'
    data["commonAnnotations"] = {}
    [changed] = records(parse_body(json.dumps(data).encode()))
    assert changed.dedup_key == original.dedup_key


def test_the_body_carries_no_secret_so_nothing_is_redacted_by_path() -> None:
    assert alertmanager.REDACT_PATHS == ()
    assert alertmanager.SOURCE == "alertmanager"

"""The PagerDuty Events v2 parser against every fixture of ``runs/demo/alerts/pagerduty`` (no database)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from runs.alerts.parsers import pagerduty
from runs.alerts.parsers.base import AlertKind, FormatError, ParsedAlert, ParseResult, dig, merged_settings

FIXTURES = Path(__file__).resolve().parents[4] / "runs/demo/alerts/pagerduty"
BERLIN = timezone(timedelta(hours=1))
RECEIVED_AT = datetime(2026, 11, 28, 3, 0, tzinfo=UTC)
PD_KEY = "harbor-dental/prod/nightly-invoice-export/2026-11-27T00:00:00+01:00"
PLACEHOLDER_KEY = "R0ACMEF00DSPR0DBATCHJ0BS00000001"


def berlin(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=BERLIN)


def parse_body(body: bytes, overrides: dict[str, Any] | None = None) -> ParseResult:
    settings = merged_settings(pagerduty.DEFAULT_SETTINGS, overrides)
    return pagerduty.parse(body, settings=settings, received_at=RECEIVED_AT)


def parse_fixture(name: str, overrides: dict[str, Any] | None = None) -> ParseResult:
    return parse_body((FIXTURES / name).read_bytes(), overrides)


def load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_bytes())


def only_record(result: ParseResult) -> ParsedAlert:
    [record] = result.alerts
    assert isinstance(record, ParsedAlert)
    return record


def assert_run_identity(record: ParsedAlert) -> None:
    assert record.job_key == "nightly-invoice-export"
    assert record.tenant == "harbor-dental"
    assert record.environment == "prod"
    assert record.window_start == berlin(2026, 11, 27, 0, 0)
    assert record.window_end == berlin(2026, 11, 28, 0, 0)
    assert record.scheduled_for == berlin(2026, 11, 28, 2, 0)


def test_first_trigger_reports_attempt_one_failed_and_echoes_the_dedup_key() -> None:
    result = parse_fixture("01-trigger-attempt1.json")
    record = only_record(result)
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
    assert record.details["exception"] == "billing.ledger.AckTimeout"
    assert record.correlation_ref == "lg-7f3a9c"
    assert record.log_url == "https://logs.example.internal/q/exp-20261128-0200-a1"
    assert record.config_version == "export-cfg@41"
    assert record.group_ref == PD_KEY
    assert record.problems == []
    assert result.response == {"dedup_key": PD_KEY}
    assert pagerduty.render_response(delivery_id=None, alerts=[], error=None, response=result.response) == (
        202,
        {"status": "success", "message": "Event processed", "dedup_key": PD_KEY},
    )


def test_second_trigger_with_the_same_pagerduty_key_is_a_different_alert() -> None:
    first = only_record(parse_fixture("01-trigger-attempt1.json"))
    result = parse_fixture("02-trigger-attempt2-same-dedup-key.json")
    second = only_record(result)
    assert second.dedup_key != first.dedup_key  # the execution id keeps the two executions apart
    assert second.group_ref == first.group_ref == PD_KEY
    assert result.response == {"dedup_key": PD_KEY}
    assert_run_identity(second)
    assert second.execution_id == "exp-20261128-0200-a2"
    assert second.attempt_number == 2
    assert second.trigger == "automatic_retry"
    assert second.status == "failed"
    assert second.started_at == berlin(2026, 11, 28, 2, 29, 40)
    assert second.ended_at == berlin(2026, 11, 28, 2, 31, 2)
    assert second.error_summary == "Ledger gateway returned 503 Service Unavailable"
    assert second.details["exception"] == "billing.ledger.GatewayError"
    assert second.correlation_ref == "lg-7f3b11"
    assert second.log_url == "https://logs.example.internal/q/exp-20261128-0200-a2"
    assert second.details["severity"] == "critical"


def test_duplicate_redelivery_has_the_same_dedup_key() -> None:
    second = only_record(parse_fixture("02-trigger-attempt2-same-dedup-key.json"))
    again = only_record(parse_fixture("03-duplicate-redelivery.json"))
    assert again.dedup_key == second.dedup_key


def test_resolve_without_payload_is_a_resolve_signal_found_through_its_pagerduty_key() -> None:
    result = parse_fixture("04-resolve-next-run-ok.json")
    record = only_record(result)
    triggers = [
        only_record(parse_fixture(name)) for name in ("01-trigger-attempt1.json", "03-duplicate-redelivery.json")
    ]
    assert record.kind == AlertKind.RESOLVE
    assert record.group_ref == PD_KEY
    assert record.dedup_key not in {trigger.dedup_key for trigger in triggers}
    assert record.status is None and record.execution_id is None
    assert record.occurred_at is None  # no timestamp: the received time applies
    assert record.problems == []  # attached through the key: no run identity needed
    assert result.response == {"dedup_key": PD_KEY}


def test_trigger_without_dedup_key_gets_a_generated_one_and_is_unmatched() -> None:
    result = parse_fixture("91-trigger-without-dedup-key.json")
    record = only_record(result)
    generated = result.response["dedup_key"]
    assert len(generated) == 32 and int(generated, 16) >= 0
    assert record.group_ref == generated
    assert only_record(parse_fixture("91-trigger-without-dedup-key.json")).dedup_key == record.dedup_key
    assert record.job_key is None  # the summary's "nightly-invoice-export" is free text, never a source
    assert record.tenant is None and record.environment is None and record.execution_id is None
    assert record.problems == [
        "no `payload.component`: the job is unknown",
        "no `payload.group` or `payload.custom_details.tenant`: the tenant is unknown",
        "no `payload.custom_details.env`: the environment is unknown",
        "no `payload.custom_details.execution_id`: the execution id is unknown",
        "`payload.custom_details` is text, not an object: no run detail can be read from it",
    ]
    assert record.details["custom_details"] == "exit code 1 after 988s; see /var/log/batch/nightly-invoice-export.log"
    status, body = pagerduty.render_response(delivery_id=7, alerts=[], error=None, response=result.response)
    assert status == 202 and body["dedup_key"] == generated and body["delivery"] == "7"


def test_acknowledge_is_accepted_with_its_offset_time_and_its_bad_severity_noted() -> None:
    record = only_record(parse_fixture("92-acknowledge-offset-bad-severity.json"))
    assert record.kind == AlertKind.ACKNOWLEDGE
    assert record.group_ref == PD_KEY
    assert record.occurred_at == berlin(2026, 11, 28, 3, 15, 10)
    assert record.occurred_at == datetime(2026, 11, 28, 2, 15, 10, tzinfo=UTC)
    assert record.problems == []
    assert record.status is None
    assert record.summary == "acknowledged by on-call"
    assert record.details["severity"] == "CRITICAL"
    assert any("'CRITICAL'" in note for note in record.details["notes"])


def test_oversized_unicode_trigger_is_an_invalid_event_naming_both_fields() -> None:
    with pytest.raises(FormatError) as caught:
        parse_fixture("93-oversized-unicode.json")
    error = caught.value
    assert set(error.errors) == {"payload.summary", "dedup_key"}
    assert "1719 characters" in error.errors["payload.summary"][0]
    assert "305 characters" in error.errors["dedup_key"][0]
    status, body = pagerduty.render_response(delivery_id=None, alerts=[], error=error)
    assert status == 400
    assert body["status"] == "invalid event"
    assert body["message"] == "Event object is invalid"
    assert len(body["errors"]) == 2
    assert any("'payload.summary' is too long" in message for message in body["errors"])


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"event_action": "escalate"}, "event_action"),
        ({"payload": {"summary": "x", "source": "y", "severity": "CRITICAL"}}, "payload.severity"),
        ({"payload": {"severity": "error"}}, "payload.summary"),
        ({"payload": None}, "payload"),
        ({"event_action": "resolve", "dedup_key": None}, "dedup_key"),
    ],
)
def test_pagerduty_format_violations_are_format_errors_naming_the_field(change: dict[str, Any], field: str) -> None:
    data = load("01-trigger-attempt1.json")
    data.update(change)
    with pytest.raises(FormatError) as caught:
        parse_body(json.dumps(data).encode())
    assert field in caught.value.errors


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]"])
def test_invalid_json_or_a_non_object_is_a_format_error_for_the_whole_body(body: bytes) -> None:
    with pytest.raises(FormatError) as caught:
        parse_body(body)
    assert caught.value.field == ""


def test_credential_is_read_from_the_routing_key() -> None:
    for path in sorted(FIXTURES.glob("*.json")):
        assert pagerduty.credential_from_body(path.read_bytes()) == PLACEHOLDER_KEY
    assert pagerduty.credential_from_body(b"{not json") is None
    assert pagerduty.credential_from_body(b'{"event_action": "trigger"}') is None


@pytest.mark.parametrize(
    "name", ["01-trigger-attempt1.json", "04-resolve-next-run-ok.json", "91-trigger-without-dedup-key.json"]
)
def test_the_routing_key_never_enters_a_dedup_key(name: str) -> None:
    original = parse_fixture(name)
    data = load(name)
    data["routing_key"] = "another-key-00000000000000000000"
    changed = parse_body(json.dumps(data).encode())
    assert only_record(changed).dedup_key == only_record(original).dedup_key
    assert changed.response == original.response


def test_redact_paths_cover_the_routing_key_in_every_fixture() -> None:
    assert "routing_key" in pagerduty.REDACT_PATHS
    for path in sorted(FIXTURES.glob("*.json")):
        data = json.loads(path.read_bytes())
        assert any(dig(data, redact) == PLACEHOLDER_KEY for redact in pagerduty.REDACT_PATHS)


def test_garbled_custom_details_are_all_listed_as_problems() -> None:
    data = load("01-trigger-attempt1.json")
    details = data["payload"]["custom_details"]
    details.update(attempt="zwei", scheduled_for="2026-11-28T02:00:00", trigger="sometimes")
    del details["window_end"]
    record = only_record(parse_body(json.dumps(data).encode()))
    problems = "\n".join(record.problems)
    assert "`payload.custom_details.attempt` 'zwei' is not an integer" in problems
    assert "`payload.custom_details.scheduled_for`: '2026-11-28T02:00:00' has no UTC offset" in problems
    assert "`payload.custom_details.window_end` is missing" in problems
    assert "'sometimes' is not one of" in problems
    assert len(record.problems) == 4


def test_tenant_falls_back_to_custom_details_and_settings_replace_the_conventions() -> None:
    data = load("01-trigger-attempt1.json")
    del data["payload"]["group"]
    data["payload"]["custom_details"]["attempt"] = "2"
    record = only_record(parse_body(json.dumps(data).encode()))
    assert record.tenant == "harbor-dental"
    assert record.attempt_number == 2
    assert record.trigger == "scheduled"  # the payload's own trigger wins over the number rule
    overridden = only_record(parse_body(json.dumps(data).encode(), {"job_from": "payload.custom_details.job"}))
    assert overridden.job_key == "nightly-invoice-export"
    no_link = only_record(parse_body(json.dumps(data).encode(), {"log_link_text": "Runbook"}))
    assert no_link.log_url == "https://runbooks.harbor-dental.example/batch/nightly-invoice-export"


def test_ended_at_falls_back_to_the_event_timestamp() -> None:
    data = load("02-trigger-attempt2-same-dedup-key.json")
    del data["payload"]["custom_details"]["ended_at"]
    record = only_record(parse_body(json.dumps(data).encode()))
    assert record.ended_at == datetime(2026, 11, 28, 1, 31, 2, tzinfo=UTC)
    assert record.occurred_at == record.ended_at


def test_render_response_falls_back_to_the_group_ref_of_the_alerts() -> None:
    status, body = pagerduty.render_response(
        delivery_id="d-1", alerts=[{"id": "a", "outcome": "accepted", "group_ref": PD_KEY}], error=None
    )
    assert status == 202
    assert body == {"status": "success", "message": "Event processed", "dedup_key": PD_KEY, "delivery": "d-1"}

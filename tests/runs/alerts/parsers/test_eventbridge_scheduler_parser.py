"""The EventBridge Scheduler DLQ parser against every fixture of eventbridge-scheduler/STORY.md."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from runs.alerts.parsers import eventbridge_scheduler
from runs.alerts.parsers.base import AlertKind, FormatError, InvalidItem, ParsedAlert, ParseResult, merged_settings

FIXTURES = Path(__file__).resolve().parents[4] / "runs/demo/alerts/eventbridge-scheduler"
BERLIN = timezone(timedelta(hours=1))
RECEIVED = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def berlin(*args: int) -> datetime:
    return datetime(*args, tzinfo=BERLIN)


def parse_result(body: bytes, **overrides: Any) -> ParseResult:
    settings = merged_settings(eventbridge_scheduler.DEFAULT_SETTINGS, overrides)
    return eventbridge_scheduler.parse(body, settings=settings, received_at=RECEIVED)


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


def with_attributes(name: str, **attributes: str | None) -> bytes:
    """A fixture with some message attributes replaced (None removes one)."""
    doc = load(name)
    values = doc["Messages"][0]["MessageAttributes"]
    for key, value in attributes.items():
        if value is None:
            values.pop(key, None)
        else:
            values[key] = {"StringValue": value, "DataType": "String"}
    return json.dumps(doc).encode()


def test_an_exhausted_retries_message_is_the_failed_second_invocation() -> None:
    alert = parse_file("01-exhausted-retries-receive-message.json")

    assert alert.kind == AlertKind.ATTEMPT
    assert alert.dedup_key == "sqs-message:6f2c9e1a-4b7d-4d3e-9a8f-0c5b1e7d2a94"
    assert (alert.job_key, alert.tenant, alert.environment) == (
        "nightly-invoice-export",
        "fjord-freight",
        "prod",
    )
    assert alert.scheduled_for == berlin(2026, 11, 28, 2, 0)
    assert alert.window_start is None and alert.window_end is None  # derived from the schedule, day-aligned
    assert alert.execution_id == "c4e19a7b02d85f36"
    assert (alert.attempt_number, alert.trigger, alert.status) == (2, "automatic_retry", "failed")
    assert alert.scheduled_at == berlin(2026, 11, 28, 2, 0)
    assert alert.started_at is None and alert.ended_at is None
    assert alert.error_summary == (
        "KmsThrottled: The request was denied due to request throttling by AWS KMS for key "
        "arn:aws:kms:eu-central-1:210987654321:key/0b6f3e1a-7c2d-4e9f-a8b5-3d1c6e0f9a27."
    )
    assert alert.occurred_at == berlin(2026, 11, 28, 2, 1, 5, 742000)
    assert alert.details["exhausted_retry_condition"] == "MaximumRetryAttempts"
    assert alert.details["earlier_invocations_failed"] == 1
    assert alert.details["suggested_failure_class"] == "never_started"
    assert alert.details["payload_truncated"] is False
    assert alert.related_attempts == []  # the earlier invocation's id is unknown
    assert alert.problems == []


def test_the_same_message_as_a_lambda_record_parses_to_the_same_record() -> None:
    receive = parse_file("01-exhausted-retries-receive-message.json")
    lambda_record = parse_file("02-same-message-lambda-event-record.json")

    assert lambda_record.dedup_key == receive.dedup_key
    assert lambda_record == receive


def test_a_redelivery_with_a_new_receipt_handle_is_the_same_record() -> None:
    original = parse_file("01-exhausted-retries-receive-message.json")
    redelivered = parse_file("03-duplicate-redelivery.json")

    assert redelivered == original


def test_a_permanent_error_is_a_failed_first_invocation() -> None:
    alert = parse_file("04-next-run-permanent-error.json")

    assert alert.dedup_key == "sqs-message:0d8b4e7f-2a1c-4f96-b3e5-7c9a1d6f0e28"
    assert (alert.job_key, alert.tenant, alert.environment) == (
        "nightly-invoice-export",
        "fjord-freight",
        "prod",
    )
    assert alert.scheduled_for == berlin(2026, 11, 29, 2, 0)
    assert alert.execution_id == "9a7d03e5b1c64f28"
    assert (alert.attempt_number, alert.trigger, alert.status) == (1, "scheduled", "failed")
    assert alert.started_at is None
    assert alert.error_summary == (
        "AWS.SimpleQueueService.NonExistentQueue: The specified queue does not exist for this wsdl version."
    )
    assert alert.occurred_at == berlin(2026, 11, 29, 2, 0, 0, 481000)
    assert "exhausted_retry_condition" not in alert.details
    assert alert.problems == []


def test_a_plain_text_truncated_body_is_never_read_for_identity() -> None:
    alert = parse_file("91-plaintext-truncated-body.json")

    assert (alert.job_key, alert.tenant, alert.environment) == (
        "nightly-invoice-export",
        "fjord-freight",
        "prod",
    )
    # 01:00 Berlin is not a fire time of 0 2 * * *: the mechanism shows that, the parser reports it as sent.
    assert alert.scheduled_for == berlin(2026, 11, 28, 1, 0)
    assert alert.scheduled_at == berlin(2026, 11, 28, 1, 0)
    assert alert.execution_id == "0f3a6c9e2b7d1458"
    assert (alert.attempt_number, alert.trigger, alert.status) == (38, "automatic_retry", "timed_out")
    assert alert.error_summary == "ThrottlingException: Rate exceeded"
    assert alert.occurred_at == berlin(2026, 11, 28, 2, 0, 12, 4000)
    assert alert.details["payload_truncated"] is True
    assert alert.details["body_is_json"] is False
    assert "café" not in json.dumps(alert.details, ensure_ascii=False)  # the body text is not copied
    assert alert.problems == []


def test_an_arn_without_a_group_and_a_missing_scheduled_time_are_problems() -> None:
    alert = parse_file("92-arn-without-group-number-type.json")

    assert alert.dedup_key == "sqs-message:e7c3a1f9-5d2b-4c8e-a6f0-9b1d7e3c5a82"
    assert alert.job_key == "nightly-invoice-export"
    assert alert.tenant is None and alert.environment is None
    assert alert.scheduled_for is None
    assert alert.execution_id == "5b0e7c2a9d1f3e64"  # not the body's c4e19a7b02d85f36
    assert (alert.attempt_number, alert.status) == (3, "failed")  # RETRY_ATTEMPTS "2", DataType Number
    assert alert.error_summary == (
        "AWS.Scheduler.InternalServerError: Unexpected error occurred while processing the request."
        '\n{"requestId":"3c1f8e2a"}'
    )
    assert alert.problems == [
        "no tenant and no environment: SCHEDULE_ARN "
        "'arn:aws:scheduler:eu-central-1:210987654321:schedule/nightly-invoice-export' has no schedule group "
        "(expected <tenant>-<environment>, or a default)",
        "no SCHEDULED_TIME attribute: the scheduled time, and so the window, is unknown",
    ]


def test_an_empty_receive_is_valid_and_carries_no_record() -> None:
    result = parse_result((FIXTURES / "93-empty-receive.json").read_bytes())

    assert result.alerts == []
    assert result.notes == {"empty_receive": True}


def test_every_message_has_its_own_dedup_key() -> None:
    names = ["01-exhausted-retries-receive-message.json", "04-next-run-permanent-error.json"]
    names += ["91-plaintext-truncated-body.json", "92-arn-without-group-number-type.json"]

    assert len({parse_file(name).dedup_key for name in names}) == 4


def test_a_group_without_the_separator_is_a_problem_unless_defaults_are_set() -> None:
    arn = "arn:aws:scheduler:eu-central-1:210987654321:schedule/default/nightly-invoice-export"
    body = with_attributes("04-next-run-permanent-error.json", SCHEDULE_ARN=arn)

    unmatched = parse_body(body)
    defaulted = parse_body(body, default_tenant="fjord-freight", default_environment="prod")

    assert unmatched.problems == [
        "no tenant and no environment: schedule group 'default' has no '-' between tenant and environment "
        "(expected <tenant>-<environment>, or a default)"
    ]
    assert (defaulted.tenant, defaulted.environment, defaulted.problems) == ("fjord-freight", "prod", [])


def test_settings_choose_which_part_of_the_arn_names_the_tenant() -> None:
    alert = parse_file("01-exhausted-retries-receive-message.json", tenant_from="schedule_group")

    assert (alert.tenant, alert.environment, alert.problems) == ("fjord-freight-prod", "prod", [])


def test_an_unknown_setting_is_a_problem_naming_the_setting() -> None:
    alert = parse_file("01-exhausted-retries-receive-message.json", environment_from="schedule_region")

    assert alert.environment is None
    assert alert.problems == [
        "no environment: setting environment_from 'schedule_region' is not one of schedule_name, "
        "schedule_group, group_before_separator, group_after_separator"
    ]


def test_garbled_attributes_are_all_listed_as_problems() -> None:
    body = with_attributes(
        "01-exhausted-retries-receive-message.json",
        RETRY_ATTEMPTS="one",
        SCHEDULED_TIME="2026-11-28 01:00",
        EXECUTION_ID=None,
    )

    alert = parse_body(body)

    assert alert.attempt_number is None and alert.scheduled_for is None and alert.execution_id is None
    assert len(alert.problems) == 3
    assert alert.problems[0] == "RETRY_ATTEMPTS 'one' is not an integer"
    assert alert.problems[1] == "no EXECUTION_ID attribute: the invocation cannot be identified"
    assert alert.problems[2].startswith("SCHEDULED_TIME:")


def test_a_broken_message_in_a_batch_is_rejected_alone() -> None:
    doc = load("01-exhausted-retries-receive-message.json")
    doc["Messages"].insert(0, {"Body": "no id"})

    result = parse_result(json.dumps(doc).encode())

    bad, good = result.alerts
    assert isinstance(bad, InvalidItem) and bad.field == "Messages.0.MessageId"
    assert bad.dedup_key.startswith("invalid:") and bad.dedup_key != good.dedup_key
    assert isinstance(good, ParsedAlert) and good.execution_id == "c4e19a7b02d85f36"


def test_a_lambda_record_from_another_event_source_is_rejected_alone() -> None:
    doc = load("02-same-message-lambda-event-record.json")
    doc["Records"][0]["eventSource"] = "aws:sns"

    [bad] = parse_result(json.dumps(doc).encode()).alerts

    assert isinstance(bad, InvalidItem) and bad.field == "Records.0.eventSource"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"{", ""),
        (b"[]", ""),
        (b'{"Messages": {}}', "Messages"),
        (b'{"Something": []}', "Messages"),
    ],
)
def test_a_body_that_is_no_sqs_response_is_a_format_error_naming_the_field(body: bytes, field: str) -> None:
    with pytest.raises(FormatError) as caught:
        parse_result(body)

    assert caught.value.field == field


def test_receipt_handles_and_identity_attributes_are_never_redacted() -> None:
    paths = " ".join(eventbridge_scheduler.REDACT_PATHS)

    assert "ReceiptHandle" not in paths and "MessageAttributes" not in paths and "MessageId" not in paths
    assert "Credentials.SecretAccessKey" in eventbridge_scheduler.REDACT_PATHS

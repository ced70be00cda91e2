"""The Airflow callback parser against every fixture of its story (runs/demo/alerts/airflow/STORY.md)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from runs.alerts.parsers import airflow
from runs.alerts.parsers.base import AlertKind, FormatError, ParsedAlert, merged_settings

FIXTURES = Path(__file__).resolve().parents[4] / "runs/demo/alerts/airflow"
BERLIN = timezone(timedelta(hours=1))
RECEIVED = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
RUN_1 = "scheduled__2026-11-27T01:00:00+00:00"


def berlin(*args: int) -> datetime:
    return datetime(*args, tzinfo=BERLIN)


def parse_body(body: bytes, **overrides: Any) -> ParsedAlert:
    settings = merged_settings(airflow.DEFAULT_SETTINGS, overrides)
    result = airflow.parse(body, settings=settings, received_at=RECEIVED)
    assert len(result.alerts) == 1
    alert = result.alerts[0]
    assert isinstance(alert, ParsedAlert)
    return alert


def parse_file(name: str, **overrides: Any) -> ParsedAlert:
    return parse_body((FIXTURES / name).read_bytes(), **overrides)


def load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())


def test_the_retry_callback_reports_try_one_failed_and_queues_try_two() -> None:
    alert = parse_file("01-task-retry-callback.json")

    assert alert.kind == AlertKind.ATTEMPT
    assert (alert.job_key, alert.tenant, alert.environment) == (
        "nightly-invoice-export",
        "glenrock-energy",
        "prod",
    )
    assert alert.window_start == datetime(2026, 11, 27, 1, 0, tzinfo=UTC)
    assert alert.window_end == datetime(2026, 11, 28, 1, 0, tzinfo=UTC)
    assert alert.scheduled_for == berlin(2026, 11, 28, 2, 0)
    assert alert.execution_id == f"{RUN_1}/export_invoices/-1/1"
    assert (alert.attempt_number, alert.trigger, alert.status) == (1, "scheduled", "failed")
    assert alert.started_at == berlin(2026, 11, 28, 2, 3, 11, 482000)
    assert alert.ended_at == berlin(2026, 11, 28, 2, 19, 40)
    assert alert.occurred_at == berlin(2026, 11, 28, 2, 19, 40)
    assert alert.error_summary == ("billing.ledger.AckTimeout: Timeout waiting for acknowledgement from ledger gateway")
    assert alert.log_url.startswith("https://airflow.ops.glenrock-energy.example/dags/nightly-invoice-export/")
    assert alert.config_version == "export-cfg@41"
    assert alert.problems == []
    assert alert.details["state"] == "up_for_retry"

    [queued] = alert.related_attempts
    assert queued.execution_id == f"{RUN_1}/export_invoices/-1/2"
    assert (queued.number, queued.trigger, queued.status) == (2, "automatic_retry", "queued")
    assert queued.scheduled_at == berlin(2026, 11, 28, 2, 29, 40)
    assert queued.started_at is None and queued.ended_at is None


def test_the_failure_callback_reports_try_two_failed_on_the_same_run() -> None:
    first, alert = parse_file("01-task-retry-callback.json"), parse_file("02-task-failure-callback.json")

    run_identity = ("job_key", "tenant", "environment", "window_start", "window_end", "scheduled_for")
    assert all(getattr(alert, name) == getattr(first, name) for name in run_identity)
    assert alert.execution_id == f"{RUN_1}/export_invoices/-1/2"
    assert (alert.attempt_number, alert.trigger, alert.status) == (2, "automatic_retry", "failed")
    assert alert.started_at == berlin(2026, 11, 28, 2, 29, 40)
    assert alert.ended_at == berlin(2026, 11, 28, 2, 31, 2)
    assert alert.occurred_at == berlin(2026, 11, 28, 2, 31, 2)
    assert alert.error_summary == "billing.ledger.GatewayError: Ledger gateway returned 503 Service Unavailable"
    assert alert.related_attempts == []
    assert alert.problems == []
    assert alert.dedup_key != first.dedup_key


def test_a_redelivered_callback_parses_to_the_same_record_and_dedup_key() -> None:
    original, redelivered = (
        parse_file("02-task-failure-callback.json"),
        parse_file("03-duplicate-redelivery.json"),
    )

    assert redelivered == original


def test_the_dag_failure_callback_is_a_run_event_without_an_attempt() -> None:
    alert = parse_file("04-dag-run-failure-callback.json")

    assert alert.kind == AlertKind.RUN
    assert (alert.job_key, alert.tenant, alert.environment) == (
        "nightly-invoice-export",
        "glenrock-energy",
        "prod",
    )
    assert (alert.window_start, alert.window_end) == (berlin(2026, 11, 27, 2, 0), berlin(2026, 11, 28, 2, 0))
    assert alert.scheduled_for == berlin(2026, 11, 28, 2, 0)
    # The context's task instance (publish_to_sftp, upstream_failed, try 0) never ran: no attempt for it.
    assert alert.execution_id is None and alert.attempt_number is None and alert.status is None
    assert alert.related_attempts == []
    assert alert.occurred_at == berlin(2026, 11, 28, 2, 31, 3, 448120)
    assert alert.details["reason"] == "task_failure"
    assert alert.details["last_task_instance"]["task_id"] == "publish_to_sftp"
    assert "task_failure" in alert.summary
    assert alert.problems == []


def test_the_dag_success_callback_is_an_attempt_for_the_dag_run() -> None:
    alert = parse_file("05-next-run-success-callback.json")

    assert alert.kind == AlertKind.ATTEMPT
    assert (alert.window_start, alert.window_end) == (berlin(2026, 11, 28, 2, 0), berlin(2026, 11, 29, 2, 0))
    assert alert.scheduled_for == berlin(2026, 11, 29, 2, 0)
    assert alert.execution_id == "scheduled__2026-11-28T01:00:00+00:00"
    assert (alert.attempt_number, alert.trigger, alert.status) == (1, "scheduled", "succeeded")
    # From dag_run, not from the context's last task instance.
    assert alert.started_at == berlin(2026, 11, 29, 2, 0, 4)
    assert alert.ended_at == berlin(2026, 11, 29, 2, 12, 56, 118903)
    assert alert.occurred_at == alert.ended_at
    assert alert.error_summary == ""
    assert alert.problems == []


def test_the_airflow3_manual_listener_takes_tenant_and_window_from_conf() -> None:
    alert = parse_file("91-airflow3-listener-manual-run-null-logical-date.json")

    assert (alert.job_key, alert.tenant, alert.environment) == (
        "nightly-invoice-export",
        "glenrock-energy",
        "prod",
    )
    assert (alert.window_start, alert.window_end) == (berlin(2026, 11, 27, 0, 0), berlin(2026, 11, 28, 0, 0))
    # Only the payload window: the mechanism takes the fire time that closes it (2026-11-28 02:00).
    assert alert.scheduled_for is None
    assert alert.execution_id == "manual__2026-11-28T09:15:22.481516+00:00/export_invoices/-1/1"
    assert (alert.attempt_number, alert.trigger, alert.status) == (1, "manual_rerun", "failed")
    assert alert.scheduled_at == berlin(2026, 11, 28, 10, 15, 22, 481516)
    assert alert.started_at == berlin(2026, 11, 28, 10, 15, 24, 5118)
    assert alert.ended_at == berlin(2026, 11, 28, 10, 16, 2, 338471)
    assert alert.error_summary == "billing.ledger.GatewayError: Ledger gateway returned 503 Service Unavailable"
    assert alert.correlation_ref == "019ac9e2-7b41-7c3a-9e58-2f0d6a1b4c93"
    assert alert.replay_key == ""
    assert alert.details["manual_run_outside_approval"] is True
    assert alert.problems == []


def test_local_offsets_unicode_and_a_long_traceback_are_kept_intact() -> None:
    alert = parse_file("92-local-offsets-unicode-long-exception.json")
    exception = load("92-local-offsets-unicode-long-exception.json")["exception"]

    assert (alert.job_key, alert.tenant, alert.environment) == (
        "nächtlicher_rechnungsexport",
        "café-lumière-münchen",
        "prod",
    )
    # +01:00 in the payload, the same instants as the UTC run id.
    assert alert.window_start == datetime(2026, 11, 27, 1, 0, tzinfo=UTC)
    assert alert.window_end == datetime(2026, 11, 28, 1, 0, tzinfo=UTC)
    assert alert.execution_id == f"{RUN_1}/export_rechnungen/-1/2"
    assert (alert.attempt_number, alert.trigger, alert.status) == (2, "automatic_retry", "failed")
    assert alert.started_at == berlin(2026, 11, 28, 2, 29, 40, 500000)
    assert alert.ended_at == berlin(2026, 11, 28, 2, 31, 2)
    assert len(exception) == 6095
    assert len(alert.error_summary) == 2000
    assert alert.error_summary == f"billing.ledger.GatewayError: {exception}"[:2000]
    assert alert.details["dag_display_name"] == "Nächtlicher Rechnungsexport – Café Lumière München"
    assert alert.problems == []  # the unregistered job is the mechanism's reason


def test_a_mapped_task_instance_is_its_own_attempt() -> None:
    alert = parse_file("93-mapped-task-failure.json")
    unmapped = parse_file("02-task-failure-callback.json")

    assert alert.execution_id == f"{RUN_1}/export_invoices_for_shard/3/2"
    assert (alert.attempt_number, alert.trigger, alert.status) == (2, "automatic_retry", "failed")
    assert alert.started_at == berlin(2026, 11, 28, 2, 29, 55, 120044)
    assert alert.ended_at == berlin(2026, 11, 28, 2, 30, 27, 774310)
    assert alert.error_summary == "KeyError: 'invoice_currency'"
    assert "map_index=3" in alert.log_url
    assert alert.details["rendered_map_index"] == "shard=eu-3"
    assert (alert.window_start, alert.window_end) == (unmapped.window_start, unmapped.window_end)
    assert alert.dedup_key != unmapped.dedup_key


def test_map_index_alone_changes_the_dedup_key() -> None:
    doc = load("93-mapped-task-failure.json")
    other = json.loads(json.dumps(doc))
    other["task_instance"]["map_index"] = 4

    assert parse_body(json.dumps(doc).encode()).dedup_key != parse_body(json.dumps(other).encode()).dedup_key


def test_every_story_state_has_its_own_dedup_key() -> None:
    names = sorted(path.name for path in FIXTURES.glob("*.json") if not path.name.startswith("03-"))

    keys = {parse_file(name).dedup_key for name in names}

    assert len(keys) == len(names) == 7


def test_the_callback_name_is_not_part_of_the_dedup_key() -> None:
    doc = load("02-task-failure-callback.json")
    doc["callback"] = "listener.on_task_instance_failed"

    assert parse_body(json.dumps(doc).encode()).dedup_key == parse_file("02-task-failure-callback.json").dedup_key


def test_the_tag_is_the_last_tenant_fallback_and_settings_can_change_the_order() -> None:
    doc = load("01-task-retry-callback.json")
    doc["params"] = {}
    body = json.dumps(doc).encode()

    assert parse_body(body).tenant == "glenrock-energy"
    assert parse_body(body).environment == "prod"
    assert parse_body(body, tenant_from=["conf.client"], default_tenant="fallback-co").tenant == "fallback-co"


def test_a_missing_tenant_is_a_problem_naming_every_place_looked() -> None:
    doc = load("01-task-retry-callback.json")
    doc["params"], doc["dag_tags"] = {"env": "prod"}, []

    alert = parse_body(json.dumps(doc).encode())

    assert alert.tenant is None
    assert alert.problems == [
        "no tenant: none of params.tenant, conf.tenant, tag:tenant: is set and the integration has no default_tenant"
    ]


def test_garbled_convention_fields_are_all_listed_as_problems() -> None:
    doc = load("91-airflow3-listener-manual-run-null-logical-date.json")
    doc["conf"]["window_start"] = "2026-11-27T00:00:00"  # naive
    doc["conf"]["tenant"] = 42
    doc["task_instance"]["end_date"] = "yesterday"

    alert = parse_body(json.dumps(doc).encode())

    assert alert.window_start is None and alert.window_end is None and alert.ended_at is None
    assert len(alert.problems) == 3
    assert any("conf.window_start" in problem and "no UTC offset" in problem for problem in alert.problems)
    assert any("tenant from conf.tenant is 42" in problem for problem in alert.problems)
    assert any("task_instance.end_date" in problem for problem in alert.problems)


def test_half_a_payload_window_is_a_problem() -> None:
    doc = load("01-task-retry-callback.json")
    doc["conf"] = {"window_start": "2026-11-27T00:00:00+01:00"}

    alert = parse_body(json.dumps(doc).encode())

    assert alert.problems == ["conf.window_start is set but conf.window_end is not: a window needs both ends"]


def test_a_zero_length_airflow3_data_interval_is_no_window_but_keeps_the_scheduled_time() -> None:
    doc = load("01-task-retry-callback.json")
    doc["data_interval_start"] = doc["data_interval_end"] = "2026-11-28T01:00:00+00:00"

    alert = parse_body(json.dumps(doc).encode())

    assert alert.window_start is None and alert.window_end is None
    assert alert.scheduled_for == berlin(2026, 11, 28, 2, 0)
    assert alert.problems == []


def test_a_task_timeout_is_timed_out() -> None:
    doc = load("02-task-failure-callback.json")
    doc["exception_type"] = "airflow.exceptions.AirflowTaskTimeout"

    assert parse_body(json.dumps(doc).encode()).status == "timed_out"


def test_a_log_link_that_is_not_http_is_dropped() -> None:
    doc = load("02-task-failure-callback.json")
    doc["task_instance"]["log_url"] = "javascript:alert(1)"

    assert parse_body(json.dumps(doc).encode()).log_url == ""


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"{not json", ""),
        (b"[]", ""),
        (b'{"run_id": "r", "task_instance": {"task_id": "t", "try_number": 1}}', "dag_id"),
        (b'{"dag_id": "d", "run_id": "r", "task_instance": {"task_id": "t"}}', "task_instance.try_number"),
        (b'{"dag_id": "d", "run_id": "r"}', "task_instance"),
        (b'{"dag_id": "d", "run_id": "r", "callback": "dag.on_failure_callback"}', "dag_run"),
    ],
)
def test_a_body_that_breaks_the_envelope_is_a_format_error_naming_the_field(body: bytes, field: str) -> None:
    with pytest.raises(FormatError) as caught:
        airflow.parse(body, settings=airflow.DEFAULT_SETTINGS, received_at=RECEIVED)

    assert caught.value.field == field


def test_redact_paths_leave_every_identity_field_alone() -> None:
    identity_sources = ["dag_id", "params.tenant", "conf.tenant", "params.env", "conf.env", "run_id"]

    assert not set(identity_sources) & set(airflow.REDACT_PATHS)
    assert "conf.password" in airflow.REDACT_PATHS

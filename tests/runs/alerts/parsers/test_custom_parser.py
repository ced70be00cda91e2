"""The custom source's parser (runs/alerts/parsers/custom/): time parsing, mapping errors, evaluation, dedup keys.

Pure functions: no database. The stories posted through the API are in test_custom_stories.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from runs.alerts.parsers.base import AlertKind, FormatError, TimeFormatError
from runs.alerts.parsers.custom import parser as custom_parser
from runs.alerts.parsers.custom.compiler import mapping_errors
from runs.alerts.parsers.custom.times import parse_time
from runs.alerts.parsers.registry import get_adapter

RECEIVED = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
BASE_MAPPING: dict[str, Any] = {
    "fields": {
        "job_key": "job",
        "tenant": "tenant",
        "environment": "env",
        "scheduled_for": "scheduled",
        "execution_id": "run_id",
        "status": "state",
    },
    "status_map": {"down": "failed", "up": "succeeded"},
}
RECORD = {
    "job": "nightly-invoice-export",
    "tenant": "acme-foods",
    "env": "prod",
    "scheduled": "2026-11-28T02:00:00+01:00",
    "run_id": "r-1",
    "state": "down",
}


def parse(document: Any, mapping: dict[str, Any]) -> list[Any]:
    body = json.dumps(document).encode()
    return custom_parser.parse(body, settings={"mapping": mapping}, received_at=RECEIVED).alerts


def with_fields(**changes: Any) -> dict[str, Any]:
    mapping = json.loads(json.dumps(BASE_MAPPING))
    for name, spec in changes.items():
        if spec is None:
            mapping["fields"].pop(name, None)
        else:
            mapping["fields"][name] = spec
    return mapping


# --- time parsing ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "time_format", "expected"),
    [
        # ISO 8601 with offsets; fractions to nanoseconds are cut (never rounded) to microseconds
        ("2026-11-28T02:00:03.482113201+01:00", "auto", datetime(2026, 11, 28, 1, 0, 3, 482113, tzinfo=UTC)),
        ("2026-11-28T01:00:03.999999999Z", "iso", datetime(2026, 11, 28, 1, 0, 3, 999999, tzinfo=UTC)),
        ("2026-11-28T01:00:03.5z", "auto", datetime(2026, 11, 28, 1, 0, 3, 500000, tzinfo=UTC)),
        ("2026-11-28T01:00:03,25+00:00", "auto", datetime(2026, 11, 28, 1, 0, 3, 250000, tzinfo=UTC)),
        ("2026-11-28 07:30:00-05:00", "auto", datetime(2026, 11, 28, 12, 30, tzinfo=UTC)),
        ("2026-11-28T05:45:00+05:45", "auto", datetime(2026, 11, 28, 0, 0, tzinfo=UTC)),
        # epochs: numbers and digit strings, told apart by magnitude or named
        (1795827600, "auto", datetime(2026, 11, 28, 1, 0, tzinfo=UTC)),
        ("1795827600", "auto", datetime(2026, 11, 28, 1, 0, tzinfo=UTC)),
        (1795827600.25, "auto", datetime(2026, 11, 28, 1, 0, 0, 250000, tzinfo=UTC)),
        (1795827605123, "auto", datetime(2026, 11, 28, 1, 0, 5, 123000, tzinfo=UTC)),
        ("1795827605123", "epoch_ms", datetime(2026, 11, 28, 1, 0, 5, 123000, tzinfo=UTC)),
        (1795827605123456, "auto", datetime(2026, 11, 28, 1, 0, 5, 123456, tzinfo=UTC)),
        (1795827600412345678, "auto", datetime(2026, 11, 28, 1, 0, 0, 412345, tzinfo=UTC)),
        (1795827600412345678, "epoch_ns", datetime(2026, 11, 28, 1, 0, 0, 412345, tzinfo=UTC)),
        (1795827600, "epoch_s", datetime(2026, 11, 28, 1, 0, tzinfo=UTC)),
        (0, "epoch_s", datetime(1970, 1, 1, tzinfo=UTC)),
        # not set
        (None, "auto", None),
        ("", "iso", None),
        ("0001-01-01T00:00:00Z", "auto", None),
    ],
)
def test_parse_time_reads_iso_offsets_fractions_and_epochs(value: Any, time_format: str, expected: Any) -> None:
    assert parse_time(value, time_format=time_format) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # naive wall times and bare dates are read in the configured zone
        ("2026-11-28 02:00:00", datetime(2026, 11, 28, 1, 0, tzinfo=UTC)),
        ("2026-11-28T02:00", datetime(2026, 11, 28, 1, 0, tzinfo=UTC)),
        ("2026-07-28T02:00:00.123456789", datetime(2026, 7, 28, 0, 0, 0, 123456, tzinfo=UTC)),
        ("2026-11-27", datetime(2026, 11, 26, 23, 0, tzinfo=UTC)),
        # DST overlap (2026-10-25 02:00-03:00 happens twice in Berlin): the first occurrence (CEST)
        ("2026-10-25 02:30:00", datetime(2026, 10, 25, 0, 30, tzinfo=UTC)),
        # just before and after the spring gap (2026-03-29 02:00-03:00 does not exist)
        ("2026-03-29 01:59:59", datetime(2026, 3, 29, 0, 59, 59, tzinfo=UTC)),
        ("2026-03-29 03:00:00", datetime(2026, 3, 29, 1, 0, tzinfo=UTC)),
        # an offset wins over the zone
        ("2026-11-28T02:00:00Z", datetime(2026, 11, 28, 2, 0, tzinfo=UTC)),
    ],
)
def test_parse_time_reads_naive_times_in_the_configured_zone(value: str, expected: datetime) -> None:
    assert parse_time(value, timezone="Europe/Berlin") == expected


@pytest.mark.parametrize(
    ("value", "time_format", "zone", "message"),
    [
        ("2026-03-29 02:30:00", "auto", "Europe/Berlin", "does not exist in Europe/Berlin"),
        ("2026-11-28 02:00:00", "auto", None, "no UTC offset"),
        ("2026-11-27", "iso", None, "no UTC offset"),
        ("yesterday at two", "auto", "UTC", "not an ISO 8601 time"),
        ("2026-13-01T00:00:00Z", "iso", None, "not an ISO 8601 time"),
        ("1795827600", "iso", None, "not an ISO 8601 time"),
        ("soon", "epoch_s", None, "not an epoch number"),
        (True, "auto", None, "not a time"),
        (10**30, "epoch_s", None, "out of range"),
        ({"at": 1}, "auto", None, "not a timestamp string"),
    ],
)
def test_parse_time_refuses_what_cannot_be_placed(value: Any, time_format: str, zone: str | None, message: str) -> None:
    with pytest.raises(TimeFormatError, match=message):
        parse_time(value, time_format=time_format, timezone=zone)


# --- mapping errors --------------------------------------------------------------------------------


def test_a_complete_mapping_has_no_error() -> None:
    assert mapping_errors(BASE_MAPPING) == {}


def test_mapping_errors_name_every_fault_by_path() -> None:
    errors = mapping_errors(
        {
            "records": "Events[?",
            "fields": {
                "job_key": "a.[",
                "tenant": "shout(name)",
                "status": {"path": "s", "template": "{{ s }}"},
                "started_at": {"path": "t", "format": "epoch_days"},
                "colour": "c",
                "execution_id": {"template": "no placeholder"},
            },
            "status_map": {"down": "broken"},
            "trigger_map": {"retry": "again"},
            "defaults": {"nope": 1, "environment": ["prod"]},
            "timezone": "Mars/Olympus_Mons",
            "window_rule": "guess",
            "surprise": True,
        }
    )

    assert "not a valid JMESPath expression" in errors["records"][0]
    assert "not a valid JMESPath expression" in errors["fields.job_key"][0]
    assert errors["fields.tenant"] == ["`shout(name)` calls unknown function shout()"]
    assert errors["fields.status"] == ["give exactly one of `path`, `template` or `value`"]
    assert "`format` must be one of" in errors["fields.started_at"][0]
    assert "unknown field" in errors["fields.colour"][0]
    assert "has no {{ placeholder }}" in errors["fields.execution_id"][0]
    assert "'broken' is not one of queued" in errors["status_map.down"][0]
    assert "'again' is not one of scheduled" in errors["trigger_map.retry"][0]
    assert "unknown field" in errors["defaults.nope"][0]
    assert "a default must be a string" in errors["defaults.environment"][0]
    assert "unknown time zone" in errors["timezone"][0]
    assert "must be one of payload_or_schedule" in errors["window_rule"][0]
    assert "unknown key" in errors["surprise"][0]
    assert "environment is required" in errors["fields.environment"][0]
    assert "map scheduled_for" in errors["fields.scheduled_for"][0]


def test_a_mapping_that_is_not_an_object_is_one_error() -> None:
    assert mapping_errors(["job"]) == {"mapping": ["the mapping must be a JSON object"]}


def test_a_constant_must_be_a_scalar_and_a_field_spec_an_expression_or_object() -> None:
    errors = mapping_errors(with_fields(environment={"value": None}, tenant=7, job_key={"path": ""}))

    assert errors["fields.environment"] == ["a `value` must be a string, number or boolean"]
    assert errors["fields.tenant"] == ["give a JMESPath expression, or an object with `path`, `template` or `value`"]
    assert errors["fields.job_key"] == ["an expression must be a non-empty string"]


def test_defaults_stand_in_for_required_fields() -> None:
    mapping = with_fields(tenant=None, environment=None)
    mapping["defaults"] = {"tenant": "acme-foods", "environment": "prod"}

    assert mapping_errors(mapping) == {}
    [alert] = parse({**RECORD, "tenant": None}, mapping)
    assert (alert.tenant, alert.environment, alert.problems) == ("acme-foods", "prod", [])


def test_window_rules_need_what_they_read() -> None:
    assert (
        "window_start and window_end go together"
        in mapping_errors(with_fields(window_start="ws"))["fields.window_end"][0]
    )
    payload = {**BASE_MAPPING, "window_rule": "payload"}
    assert "needs window_start and window_end" in mapping_errors(payload)["window_rule"][0]
    schedule_rule = {**with_fields(scheduled_for=None, window_start="ws", window_end="we"), "window_rule": "schedule"}
    assert "map scheduled_for" in mapping_errors(schedule_rule)["fields.scheduled_for"][0]


# --- evaluation ------------------------------------------------------------------------------------


def test_a_record_maps_to_a_parsed_alert_with_a_status_from_the_value_map() -> None:
    [alert] = parse(RECORD, BASE_MAPPING)

    assert alert.problems == []
    assert (alert.job_key, alert.tenant, alert.environment, alert.execution_id) == (
        "nightly-invoice-export",
        "acme-foods",
        "prod",
        "r-1",
    )
    assert alert.status == "failed" and alert.kind == AlertKind.ATTEMPT
    assert alert.scheduled_for == datetime(2026, 11, 28, 1, 0, tzinfo=UTC)
    assert alert.window_start is None and alert.window_end is None  # the mechanism derives it
    assert alert.summary == "nightly-invoice-export r-1 failed"


def test_a_status_value_with_no_mapping_is_a_problem_never_a_guess() -> None:
    [alert] = parse({**RECORD, "state": "grey"}, BASE_MAPPING)

    assert alert.status is None
    assert alert.problems == [
        "status: the value 'grey' has no mapping: add it to status_map "
        "(to one of queued, running, succeeded, failed, timed_out, cancelled) (found by `state`)"
    ]


def test_value_maps_match_exactly_then_ignoring_case_and_our_own_values_pass() -> None:
    mapping = {**BASE_MAPPING, "status_map": {"DOWN": "failed", "down": "timed_out"}}

    assert parse({**RECORD, "state": "down"}, mapping)[0].status == "timed_out"
    assert parse({**RECORD, "state": "Down"}, mapping)[0].status == "failed"
    assert parse({**RECORD, "state": "Succeeded"}, mapping)[0].status == "succeeded"
    exit_codes = {**BASE_MAPPING, "status_map": {"0": "succeeded", "1": "failed"}}
    assert parse({**RECORD, "state": 1}, exit_codes)[0].status == "failed"


def test_a_field_that_finds_nothing_names_its_expression() -> None:
    [alert] = parse({**RECORD, "run_id": None}, BASE_MAPPING)

    assert alert.problems == ["execution_id: `run_id` found nothing and the mapping has no default"]


def test_an_expression_that_fails_at_evaluation_is_a_problem() -> None:
    mapping = with_fields(execution_id="length(run_id)")

    [alert] = parse({**RECORD, "run_id": 7}, mapping)

    assert len(alert.problems) == 1
    # in plain words, not the library's "In function length(), invalid type for value: ..."
    assert (
        alert.problems[0]
        == "execution_id: `length(run_id)` failed: length() got a number where it needs string or array or object"
    )


def test_a_mapping_with_a_syntax_error_still_parses_and_names_the_error() -> None:
    [alert] = parse(RECORD, with_fields(status="state.["))

    assert alert.problems[0].startswith("status: `state.[` is not a valid JMESPath expression")


def test_values_are_converted_or_refused_per_field() -> None:
    mapping = with_fields(attempt_number="attempt", started_at="started", log_url="log")

    [good] = parse({**RECORD, "attempt": "2", "started": 1795827605123, "log": "https://x.example/1"}, mapping)
    [bad] = parse(
        {**RECORD, "attempt": 0, "started": "tomorrow", "log": "ftp://x.example/1", "run_id": {"a": 1}}, mapping
    )

    assert (good.attempt_number, good.started_at, good.log_url) == (
        2,
        datetime(2026, 11, 28, 1, 0, 5, 123000, tzinfo=UTC),
        "https://x.example/1",
    )
    assert bad.problems == [
        "execution_id: found dict '{\"a\":1}', not text (found by `run_id`)",
        "attempt_number: 0 is not an attempt number (they start at 1) (found by `attempt`)",
        "started_at: 'tomorrow' is not an ISO 8601 time (found by `started`)",
    ]
    assert bad.log_url == "" and bad.details["mapping_warnings"] == [
        "log_url 'ftp://x.example/1' is not an http(s) link: dropped"
    ]


def test_templates_compose_text_and_constants_fill_in() -> None:
    mapping = with_fields(
        execution_id={"template": "{{ job }}#{{ build.number }}"},
        log_url={"template": "https://ci.example/{{ job }}/{{ build.number }}/console"},
        environment={"value": "staging"},
        correlation_ref={"template": "{{ missing }}-x"},
    )

    [alert] = parse({**RECORD, "build": {"number": 812}}, mapping)

    assert alert.execution_id == "nightly-invoice-export#812"
    assert alert.log_url == "https://ci.example/nightly-invoice-export/812/console"
    assert alert.environment == "staging"
    assert alert.correlation_ref == ""  # optional: a placeholder finding nothing leaves it empty
    assert alert.problems == []


def test_extra_string_functions_are_available() -> None:
    mapping = with_fields(
        job_key="split(id, '/periodic-')[0]",
        tenant="lower(trim(owner))",
        execution_id="replace(id, '/', ':')",
        scheduled_for={"path": "split(id, '/periodic-')[1]", "format": "epoch_s"},
    )

    [alert] = parse({**RECORD, "id": "nightly-invoice-export/periodic-1795827600", "owner": " ACME-Foods "}, mapping)

    assert (alert.job_key, alert.tenant, alert.execution_id) == (
        "nightly-invoice-export",
        "acme-foods",
        "nightly-invoice-export:periodic-1795827600",
    )
    assert alert.scheduled_for == datetime(2026, 11, 28, 1, 0, tzinfo=UTC)


def test_triggers_go_through_their_map_and_unmapped_ones_are_problems() -> None:
    mapping = {
        **with_fields(trigger="cause"),
        "trigger_map": {"TimerTrigger": "scheduled", "Naginator": "automatic_retry"},
    }

    assert parse({**RECORD, "cause": "Naginator"}, mapping)[0].trigger == "automatic_retry"
    assert parse({**RECORD, "cause": None}, mapping)[0].trigger is None  # the mechanism decides by number
    [alert] = parse({**RECORD, "cause": "UserIdCause"}, mapping)
    assert alert.problems[0].startswith("trigger: the value 'UserIdCause' has no mapping: add it to trigger_map")


def test_a_payload_window_wins_and_half_a_window_is_a_problem() -> None:
    mapping = with_fields(window_start="ws", window_end="we")

    [alert] = parse({**RECORD, "ws": "2026-11-27T00:00:00+01:00", "we": "2026-11-28T00:00:00+01:00"}, mapping)
    [half] = parse({**RECORD, "ws": "2026-11-27T00:00:00+01:00"}, mapping)
    [backwards] = parse({**RECORD, "ws": "2026-11-28T00:00:00+01:00", "we": "2026-11-27T00:00:00+01:00"}, mapping)

    assert (alert.window_start, alert.window_end) == (
        datetime(2026, 11, 26, 23, 0, tzinfo=UTC),
        datetime(2026, 11, 27, 23, 0, tzinfo=UTC),
    )
    assert half.problems == ["window: window_end found nothing while the other end was found"]
    assert backwards.problems[0].startswith("window: window_end 2026-11-26T23:00:00+00:00 is not after")


def test_no_window_and_no_scheduled_time_is_one_problem_naming_the_expressions() -> None:
    [alert] = parse({**RECORD, "scheduled": None}, BASE_MAPPING)

    assert alert.problems == [
        "window: found neither a window nor a scheduled time in the record (`scheduled` found nothing)"
    ]


def test_the_schedule_rule_ignores_payload_windows() -> None:
    mapping = {**with_fields(window_start="ws", window_end="we"), "window_rule": "schedule"}

    [alert] = parse({**RECORD, "ws": "2026-11-27T00:00:00Z", "we": "2026-11-28T00:00:00Z"}, mapping)

    assert alert.window_start is None and alert.scheduled_for == datetime(2026, 11, 28, 1, 0, tzinfo=UTC)


def test_latest_fire_rule_hands_the_basis_time_to_the_mechanism() -> None:
    mapping = {**BASE_MAPPING, "scheduled_for_rule": "latest_fire_at_or_before"}

    [alert] = parse({**RECORD, "scheduled": "2026-11-28T01:32:00Z"}, mapping)

    assert alert.scheduled_for is None
    assert alert.details == {
        "scheduled_for_rule": "latest_fire_at_or_before_starts_at",
        "starts_at": "2026-11-28T01:32:00+00:00",
    }
    assert alert.problems == []


def test_resolved_and_acknowledged_are_signals_not_statuses() -> None:
    mapping = {**with_fields(group_ref="incident"), "status_map": {"ok": "resolved", "ack": "acknowledged"}}

    [resolved] = parse({**RECORD, "state": "ok", "incident": "INC-1", "run_id": None}, mapping)
    [acked] = parse({**RECORD, "state": "ack", "incident": "INC-1"}, mapping)

    assert (resolved.kind, resolved.status, resolved.group_ref, resolved.problems) == (
        AlertKind.RESOLVE,
        None,
        "INC-1",
        [],
    )
    assert acked.kind == AlertKind.ACKNOWLEDGE


def test_occurred_at_defaults_to_the_end_of_a_terminal_attempt_else_its_start() -> None:
    mapping = with_fields(started_at="s", ended_at="e")
    times = {"s": "2026-11-28T01:00:00Z", "e": "2026-11-28T01:19:00Z"}

    assert parse({**RECORD, **times}, mapping)[0].occurred_at == datetime(2026, 11, 28, 1, 19, tzinfo=UTC)
    running = parse({**RECORD, **times, "state": "running"}, mapping)[0]
    assert running.occurred_at == datetime(2026, 11, 28, 1, 0, tzinfo=UTC)


# --- splitting and dedup keys ----------------------------------------------------------------------


def test_the_splitter_yields_one_record_per_item_in_order() -> None:
    mapping = {**BASE_MAPPING, "records": "items[?kind=='run']"}
    body = {
        "items": [
            {**RECORD, "kind": "run", "run_id": "r-1"},
            {"kind": "heartbeat"},
            {**RECORD, "kind": "run", "run_id": "r-2", "state": "up"},
        ]
    }

    alerts = parse(body, mapping)

    assert [(a.execution_id, a.status) for a in alerts] == [("r-1", "failed"), ("r-2", "succeeded")]


@pytest.mark.parametrize(
    ("records", "problem"),
    [
        ("evnts", "records: `evnts` found nothing"),
        ("items[0].kind", "records: `items[0].kind` found str, not a list of records"),
        ("length(items[0])", "records: `length(items[0])` found int, not a list of records"),
        ("items[", "records: `items[` is not a valid JMESPath expression"),
    ],
)
def test_a_splitter_that_fails_gives_one_unmatched_record_for_the_whole_body(records: str, problem: str) -> None:
    body = {"items": [{**RECORD, "kind": "run"}]}

    alerts = parse(body, {**BASE_MAPPING, "records": records})

    assert len(alerts) == 1 and alerts[0].problems[0].startswith(problem)


def test_an_empty_split_gives_no_alert_and_a_note() -> None:
    result = custom_parser.parse(
        json.dumps({"items": []}).encode(),
        settings={"mapping": {**BASE_MAPPING, "records": "items"}},
        received_at=RECEIVED,
    )

    assert result.alerts == [] and result.notes == {"records_found": 0}


def test_only_invalid_json_or_too_many_records_break_the_format() -> None:
    with pytest.raises(FormatError, match="not valid JSON"):
        custom_parser.parse(b"{nope", settings={"mapping": BASE_MAPPING}, received_at=RECEIVED)
    with pytest.raises(FormatError, match="at most 1000 records"):
        parse({"items": [RECORD] * 1001}, {**BASE_MAPPING, "records": "items"})
    # an empty mapping is not a format error: the record is unmatched with every reason
    [alert] = parse(RECORD, {})
    assert {p.split(":")[0] for p in alert.problems} == {
        "job_key",
        "tenant",
        "environment",
        "execution_id",
        "status",
        "window",
    }


def test_dedup_key_is_the_mapped_identity_plus_status() -> None:
    [failed] = parse(RECORD, BASE_MAPPING)
    [again] = parse({**RECORD, "noise": "a different heartbeat"}, BASE_MAPPING)
    [succeeded] = parse({**RECORD, "state": "up"}, BASE_MAPPING)
    [other] = parse({**RECORD, "run_id": "r-2"}, BASE_MAPPING)

    assert failed.dedup_key == again.dedup_key
    assert len({failed.dedup_key, succeeded.dedup_key, other.dedup_key}) == 3
    assert json.loads(failed.dedup_key)[-1] == "failed"


def test_a_mapped_dedup_key_still_carries_the_status() -> None:
    mapping = with_fields(dedup_key="event_id")

    [firing] = parse({**RECORD, "event_id": "ev-1"}, mapping)
    [resolved] = parse({**RECORD, "event_id": "ev-1", "state": "up"}, mapping)

    assert json.loads(firing.dedup_key) == ["key", "ev-1", "failed"]
    assert firing.dedup_key != resolved.dedup_key


def test_records_with_problems_never_share_a_dedup_key_unless_identical() -> None:
    [one] = parse({**RECORD, "state": "grey", "run_id": "r-1"}, BASE_MAPPING)
    [two] = parse({**RECORD, "state": "grey", "run_id": "r-2"}, BASE_MAPPING)
    [one_again] = parse({**RECORD, "state": "grey", "run_id": "r-1"}, BASE_MAPPING)

    assert one.dedup_key != two.dedup_key and one.dedup_key == one_again.dedup_key
    assert json.loads(one.dedup_key)[0] == "unmapped"


def test_custom_is_a_registered_source() -> None:
    adapter = get_adapter("custom")

    assert adapter is custom_parser and adapter.DEFAULT_SETTINGS["mapping"] == {}

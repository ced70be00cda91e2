"""Mapping language: received_at(), time arithmetic, regex_group, if/coalesce, optional fields, false as text."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from runs.alerts.parsers.custom.compiler import mapping_errors
from runs.alerts.parsers.custom.evaluation import map_document
from runs.alerts.parsers.custom.expressions import MappingError, compile_expression, jmespath_search, receive_time

RECEIVED = datetime(2026, 11, 28, 3, 0, 5, tzinfo=UTC)


def _eval(expression: str, data: Any) -> Any:
    with receive_time(RECEIVED):
        return jmespath_search(compile_expression(expression), data)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("received_at()", "2026-11-28T03:00:05+00:00"),
        ("to_datetime(ms, 'epoch_ms')", "2026-11-28T01:00:00+00:00"),
        ("to_datetime(s, 'epoch_s')", "2026-11-28T01:00:00+00:00"),
        ("to_datetime(iso)", "2026-11-28T01:00:00+00:00"),
        ("sub(to_datetime(ms, 'epoch_ms'), duration_s)", "2026-11-28T00:15:00+00:00"),
        ("add(ds, '1d')", "2026-11-28T00:00:00+00:00"),
        ("add(iso, 'PT1H30M')", "2026-11-28T02:30:00+00:00"),
        ("window_of(ds, 'day')", ["2026-11-27T00:00:00+00:00", "2026-11-28T00:00:00+00:00"]),
        ("window_of(iso, 'month')", ["2026-11-01T00:00:00+00:00", "2026-12-01T00:00:00+00:00"]),
        ("window_of(ds, 'PT6H')[1]", "2026-11-27T06:00:00+00:00"),
        ("split(name, '-')[0]", "acme"),
        ("regex_group(name, '^(acme-foods)-(.+)$', `2`)", "nightly-invoice-export"),
        ("regex_group(name, 'nomatch(.)')", None),
        ("if(ok, 'succeeded', 'failed')", "failed"),
        ("if(`0`, 'zero is true', 'no')", "zero is true"),
        ("coalesce(missing, '', tenant, 'default')", "borealis"),
    ],
)
def test_functions_compute_times_text_and_defaults(expression: str, expected: Any) -> None:
    data = {
        "ms": 1795827600000,
        "s": 1795827600,
        "iso": "2026-11-28T02:00:00+01:00",
        "ds": "2026-11-27",
        "duration_s": 2700,
        "name": "acme-foods-nightly-invoice-export",
        "ok": False,
        "tenant": "borealis",
    }
    assert _eval(expression, data) == expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("to_datetime(name)", "is not an ISO 8601 time"),
        ("to_datetime(ms, 'weeks')", "the format is one of"),
        ("add(ds, 'soon')", "is not a duration"),
        ("regex_group(name, '(')", "is not a regular expression"),
        ("regex_group(name, '(a)', `3`)", "has no group 3"),
    ],
)
def test_functions_fail_in_plain_words(expression: str, message: str) -> None:
    with pytest.raises(MappingError, match=message):
        _eval(expression, {"name": "acme", "ms": 1, "ds": "2026-11-27"})


MAPPING: dict[str, Any] = {
    "fields": {
        "job_key": "regex_group(name, '^[a-z]+-[a-z]+-(.+)$')",
        "tenant": "regex_group(name, '^([a-z]+-[a-z]+)-')",
        "execution_id": "id",
        "status": "if(success, 'ok', 'error')",
        "window_start": "window_of(partition, 'day')[0]",
        "window_end": "window_of(partition, 'day')[1]",
        "ended_at": "to_datetime(finished_ms, 'epoch_ms')",
        "started_at": "sub(to_datetime(finished_ms, 'epoch_ms'), duration_seconds)",
        "occurred_at": "coalesce(reported_at, received_at())",
        "log_url": {"path": "links.logs", "optional": True},
        "attempt_number": {"path": "retry", "optional": True},
        "summary": "to_string(success)",
    },
    "status_map": {"ok": "succeeded", "error": "failed"},
    "defaults": {"environment": "prod"},
}


def _payload(**extra: Any) -> dict[str, Any]:
    return {
        "name": "acme-foods-nightly-invoice-export",
        "id": "exec-77",
        "success": False,
        "partition": "2026-11-27",
        "finished_ms": 1795827600000,
        "duration_seconds": 600,
        "links": {"logs": "https://logs.example/exec-77"},
        **extra,
    }


def test_a_mapping_with_the_new_functions_places_the_record() -> None:
    assert mapping_errors(MAPPING) == {}
    alert = map_document(_payload(), MAPPING, received_at=RECEIVED).records[0].alert

    assert alert.problems == []
    assert (alert.job_key, alert.tenant, alert.status) == ("nightly-invoice-export", "acme-foods", "failed")
    assert (alert.window_start, alert.window_end) == (
        datetime(2026, 11, 27, tzinfo=UTC),
        datetime(2026, 11, 28, tzinfo=UTC),
    )
    assert alert.started_at == datetime(2026, 11, 28, 0, 50, tzinfo=UTC)
    assert alert.occurred_at == RECEIVED  # no reported_at: the receive time
    assert alert.summary == "false"  # false is text, not "not text"


def test_a_bad_optional_field_is_a_warning_not_an_unmatched_alert() -> None:
    record = map_document(
        _payload(retry="twice", links={"logs": ["not", "text"]}), MAPPING, received_at=RECEIVED
    ).records[0]

    assert record.alert.problems == []
    assert record.alert.attempt_number is None and record.alert.log_url == ""
    assert [w.split(" (optional)")[0] for w in record.warnings] == ["attempt_number", "log_url"]
    assert record.alert.details["mapping_warnings"] == record.warnings


def test_the_same_fault_in_a_required_field_leaves_the_alert_unmatched() -> None:
    mapping = {**MAPPING, "fields": {**MAPPING["fields"], "attempt_number": "retry"}}

    alert = map_document(_payload(retry="twice"), mapping, received_at=RECEIVED).records[0].alert

    assert [p.split(":")[0] for p in alert.problems] == ["attempt_number"]


@pytest.mark.parametrize("field", ["job_key", "tenant", "execution_id", "status", "window_start", "scheduled_for"])
def test_identity_fields_are_never_optional(field: str) -> None:
    mapping = {**MAPPING, "fields": {**MAPPING["fields"], field: {"path": "x", "optional": True}}}

    errors = mapping_errors(mapping)

    assert "never optional" in " ".join(errors[f"fields.{field}"])


def test_unmatched_reasons_are_short_name_their_fields_and_speak_plain_words() -> None:
    mapping = {
        "fields": {
            "job_key": "to_datetime(nothing_here) || x",
            "tenant": "t",
            "execution_id": "e",
            "status": "s",
            "scheduled_for": "when",
            "ended_at": "to_datetime(`[1]`)",
            "started_at": "add(when)",
            "attempt_number": "n",
        },
    }
    payload = {"x": "job", "when": "yesterday " * 40, "n": "many"}

    problems = map_document(payload, mapping, received_at=RECEIVED).records[0].alert.problems

    fields = [p.split(":")[0] for p in problems]
    assert fields == [
        "tenant",
        "environment",
        "scheduled_for",
        "execution_id",
        "attempt_number",
        "status",
        "started_at",
        "ended_at",
    ]
    assert all(len(p) <= 160 for p in problems)
    assert problems[2].endswith("…")  # the 400-character time is not repeated whole
    assert "add() takes at least 2 argument(s), not 1" in problems[6]
    text = " ".join(problems)
    assert "In function" not in text and "expected one of" not in text  # the library's raw wording
    ended = next(
        p
        for p in map_document(payload, mapping, received_at=RECEIVED).records[0].fields.values()
        if p.name == "ended_at"
    )
    assert "to_datetime() got an array where it needs string or number or null" in ended.error

"""The Grafana parser against every fixture of ``runs/demo/alerts/grafana`` (pure: no database)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from runs.alerts.parsers import grafana
from runs.alerts.parsers.base import AlertKind, FormatError, InvalidItem, ParsedAlert, ParseResult, merged_settings

FIXTURES = Path(__file__).resolve().parents[4] / "runs/demo/alerts/grafana"
RECEIVED_AT = datetime(2026, 11, 28, 3, 0, tzinfo=UTC)


def parse_body(body: bytes, overrides: dict[str, Any] | None = None) -> ParseResult:
    settings = merged_settings(grafana.DEFAULT_SETTINGS, overrides)
    return grafana.parse(body, settings=settings, received_at=RECEIVED_AT)


def parse_fixture(name: str, overrides: dict[str, Any] | None = None) -> ParseResult:
    return parse_body((FIXTURES / name).read_bytes(), overrides)


def load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_bytes())


def only_record(result: ParseResult) -> ParsedAlert:
    [record] = result.alerts
    assert isinstance(record, ParsedAlert)
    return record


def test_first_failure_reports_attempt_one_with_an_inferred_execution_id() -> None:
    record = only_record(parse_fixture("01-first-failure.json"))
    assert record.kind == AlertKind.ATTEMPT
    assert record.job_key == "nightly-invoice-export"
    assert record.tenant == "elmwood-books"
    assert record.environment == "prod"
    assert record.execution_id == "e41b7c2d90a3f658#1"
    assert record.attempt_number == 1
    assert record.trigger == "scheduled"
    assert record.status == "failed"
    # startsAt is when the alert fired, not when the job ran; the annotations are rule text.
    assert record.started_at is None and record.ended_at is None
    assert record.error_summary == ""
    assert record.occurred_at == datetime(2026, 11, 28, 1, 20, tzinfo=UTC)
    assert record.problems == []
    assert record.details["generator_url"] == (
        "https://grafana.ops.elmwood-books.example/alerting/grafana/fe3k9xq2ab7cwd/view?orgId=1"
    )
    assert record.details["annotations"]["runbook_url"].startswith("https://runbooks.elmwood-books.example/")
    assert record.details["values"] == {"A": 1, "B": 1}


@pytest.mark.parametrize(
    ("template", "execution_id"),
    [
        ("run-{fingerprint}-{attempt}", "run-e41b7c2d90a3f658-1"),
        ("{{{fingerprint}}}#{attempt}", "{e41b7c2d90a3f658}#1"),
    ],
)
def test_the_execution_id_template_fills_its_placeholders(template: str, execution_id: str) -> None:
    record = only_record(parse_fixture("01-first-failure.json", {"execution_id_template": template}))
    assert (record.execution_id, record.problems) == (execution_id, [])


@pytest.mark.parametrize("template", ["{attempt:>999999999}", "{fingerprint!r}", "{attempt.real}", "{job}"])
def test_an_execution_id_template_with_more_than_placeholders_is_a_problem_not_a_padded_id(template: str) -> None:
    # ``str.format`` would have built a gigabyte for the first one, on every post
    record = only_record(parse_fixture("01-first-failure.json", {"execution_id_template": template}))
    assert record.execution_id is None
    assert record.problems == [
        f"setting `execution_id_template` {template!r} cannot be filled in ({KeyError(template[1:-1])!r})"
    ]


def test_first_failure_leaves_window_and_scheduled_time_to_the_mechanism() -> None:
    record = only_record(parse_fixture("01-first-failure.json"))
    assert record.window_start is None and record.window_end is None
    assert record.scheduled_for is None
    assert record.details["scheduled_for_rule"] == "latest_fire_at_or_before_starts_at"
    assert record.details["starts_at"] == "2026-11-28T01:20:00+00:00"
    assert record.details["ends_at"] is None  # Go's zero time: still firing


def test_repeat_notification_with_a_higher_count_is_a_second_attempt_not_a_duplicate() -> None:
    first = only_record(parse_fixture("01-first-failure.json"))
    repeat = only_record(parse_fixture("02-retry-failure-repeat-notification.json"))
    assert repeat.dedup_key != first.dedup_key  # values are part of the key
    assert repeat.group_ref == first.group_ref  # the same firing episode
    assert repeat.execution_id == "e41b7c2d90a3f658#2"
    assert repeat.attempt_number == 2
    assert repeat.trigger == "automatic_retry"
    assert repeat.status == "failed"
    assert repeat.started_at is None and repeat.ended_at is None
    assert repeat.error_summary == ""
    assert repeat.occurred_at is None  # no time for the retry's failure: the received time applies
    assert repeat.problems == []


def test_duplicate_redelivery_has_the_same_dedup_key_as_the_repeat() -> None:
    repeat = only_record(parse_fixture("02-retry-failure-repeat-notification.json"))
    again = only_record(parse_fixture("03-duplicate-redelivery.json"))
    assert again.dedup_key == repeat.dedup_key
    assert again.execution_id == repeat.execution_id


def test_resolved_alert_is_a_resolve_signal_for_the_firing_episode() -> None:
    firing = [only_record(parse_fixture(name)) for name in ("01-first-failure.json", "03-duplicate-redelivery.json")]
    resolved = only_record(parse_fixture("04-next-run-ok.json"))
    assert resolved.kind == AlertKind.RESOLVE
    assert resolved.dedup_key not in {record.dedup_key for record in firing}
    # A=0 names no attempt: the mechanism attaches it to the latest attempt under the episode's reference.
    assert resolved.group_ref == firing[0].group_ref == "e41b7c2d90a3f658@2026-11-28T01:20:00Z"
    assert resolved.execution_id is None and resolved.attempt_number is None
    assert resolved.status is None
    assert resolved.occurred_at == datetime(2026, 11, 29, 1, 13, tzinfo=UTC)
    assert (resolved.job_key, resolved.tenant, resolved.environment) == (
        "nightly-invoice-export",
        "elmwood-books",
        "prod",
    )
    assert resolved.problems == []


def test_datasource_error_is_an_evaluation_problem_never_a_job_failure() -> None:
    record = only_record(parse_fixture("91-datasource-error.json"))
    assert record.problems[:3] == [
        "no `job_name` label: the job is unknown",
        "no `tenant` label: the tenant is unknown",
        "no `env` label: the environment is unknown",
    ]
    assert len(record.problems) == 4
    assert "`DatasourceError`" in record.problems[3] and "never recorded as a job failure" in record.problems[3]
    assert record.status is None and record.execution_id is None and record.attempt_number is None
    assert record.job_key is None  # the rulename names the alert rule, not a job
    assert record.details["evaluation_error"].startswith("[sse.dataQueryError] failed to execute query [A]")
    assert record.details["values"] is None


def test_nodata_alert_with_unicode_and_an_offset_is_parsed_but_unmatched() -> None:
    result = parse_fixture("92-nodata-unicode-offset.json")
    record = only_record(result)
    assert record.tenant == "café-lumière-münchen"
    assert record.problems[:2] == [
        "no `job_name` label: the job is unknown",
        "no `env` label: the environment is unknown",
    ]
    assert "`DatasourceNoData`" in record.problems[2]
    assert len(record.problems) == 3
    assert record.status is None
    assert record.details["starts_at"] == "2026-11-28T01:40:00+00:00"
    assert record.details["org_id"] == 3
    assert record.details["values"] == {}
    assert record.details["grafana_folder"] == "Stapelverarbeitung"
    assert record.details["image_url"].endswith("/Zk3pQ9mV1xR7.png")
    assert record.details["dashboard_url"].startswith("https://")
    assert record.details["panel_url"].endswith("viewPanel=4")
    assert record.summary == "firing: Keine Laufdaten für „nächtlicher-rechnungsexport“ seit 26 h ⏰"


def test_custom_payload_template_is_a_format_error_naming_every_missing_field() -> None:
    with pytest.raises(FormatError) as caught:
        parse_fixture("93-custom-payload-template.json")
    for field in ("version", "status", "alerts[].labels", "alerts[].fingerprint"):
        assert field in caught.value.errors
    assert caught.value.field == "version"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"receiver": "x", "alerts": [', ""),
        (b'"firing"', ""),
        (b'{"version": "4", "status": "firing", "alerts": []}', "version"),
        (b'{"version": "1", "status": "firing", "alerts": null}', "alerts"),
    ],
)
def test_a_body_of_the_wrong_shape_is_a_format_error_naming_the_field(body: bytes, field: str) -> None:
    with pytest.raises(FormatError) as caught:
        parse_body(body)
    assert caught.value.field == field


def test_an_invalid_alert_in_a_batch_becomes_an_invalid_item() -> None:
    data = load("01-first-failure.json")
    broken = dict(data["alerts"][0], values=[1, 2])
    data["alerts"].insert(0, broken)
    first, second = parse_body(json.dumps(data).encode()).alerts
    assert isinstance(first, InvalidItem) and first.field == "alerts.0.values"
    assert isinstance(second, ParsedAlert) and second.execution_id == "e41b7c2d90a3f658#1"


@pytest.mark.parametrize(
    ("values", "number", "problem"),
    [
        ({"A": 2.0}, 2, None),
        ({"A": 1.5}, None, "`values.A` 1.5 is not an integer"),
        ({"B": 1}, None, "no `values.A`: the failed-attempt count"),
        ({"A": 0}, None, "`values.A` 0 counts no failed attempt"),
    ],
)
def test_the_attempt_count_must_be_a_whole_positive_number(
    values: dict[str, float], number: int | None, problem: str | None
) -> None:
    data = load("01-first-failure.json")
    data["alerts"][0]["values"] = values
    record = only_record(parse_body(json.dumps(data).encode()))
    assert record.attempt_number == number
    if problem is None:
        assert record.problems == [] and record.execution_id == f"e41b7c2d90a3f658#{number}"
    else:
        assert record.execution_id is None
        assert any(found.startswith(problem) for found in record.problems)


def test_integration_settings_replace_the_conventions() -> None:
    data = load("01-first-failure.json")
    labels = data["alerts"][0]["labels"]
    labels["customer"] = labels.pop("tenant")
    labels["run_id"] = "exp-20261128-0200-a1"
    labels["window_start"] = "2026-11-27T00:00:00+01:00"
    overrides = {
        "tenant_from": "labels.customer",
        "execution_id_from": "labels.run_id",
        "window_start_from": "labels.window_start",
        "default_environment": "staging",
    }
    del labels["env"]
    record = only_record(parse_body(json.dumps(data).encode(), overrides))
    assert record.tenant == "elmwood-books"
    assert record.environment == "staging"
    assert record.execution_id == "exp-20261128-0200-a1"
    assert record.window_start is None
    assert record.problems == [
        "the window end (no setting names it) is missing: a window needs both its start and its end"
    ]


def test_evaluation_alertnames_come_from_the_settings() -> None:
    record = only_record(parse_fixture("91-datasource-error.json", {"evaluation_alertnames": []}))
    assert not any("DatasourceError" in problem for problem in record.problems)


def test_truncated_alerts_are_noted_for_the_delivery() -> None:
    data = load("01-first-failure.json")
    data["truncatedAlerts"] = 3
    assert parse_body(json.dumps(data).encode()).notes == {"truncated_alerts": 3}
    assert parse_fixture("01-first-failure.json").notes == {}


def test_the_body_carries_no_secret_so_nothing_is_redacted_by_path() -> None:
    assert grafana.REDACT_PATHS == ()
    assert grafana.SOURCE == "grafana"

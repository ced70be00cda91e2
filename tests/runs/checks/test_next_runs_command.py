"""Tests for ``manage.py next_runs``: output format, policies, errors, and TIME_ZONE independence (C13)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from pytest_django import Settings

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).resolve().parents[2] / "data" / "cases.json").read_text(encoding="utf-8")
)


def next_runs(*args: str) -> list[str]:
    """Run the command and return its stdout lines."""
    out = StringIO()
    call_command("next_runs", *args, stdout=out)
    return out.getvalue().splitlines()


def same(got: str, want: str) -> bool:
    """Same instant and same offset (as the acceptance check compares)."""
    g, w = datetime.fromisoformat(got), datetime.fromisoformat(want)
    return g.astimezone(UTC) == w.astimezone(UTC) and g.utcoffset() == w.utcoffset()


def next_run_cases() -> list[Any]:
    params = []
    for case in CASES:
        for part, given in case["input"].items():
            if given.get("type") != "next_run":
                continue
            expected = case["expected"][part]
            value = expected["value"]
            params.append(pytest.param(given, [], value, id=f"{case['id']}.{part}"))
            for option, key in (("--dst-gap", "gap"), ("--dst-overlap", "overlap")):
                for policy in ("next_existing", "skip", "shift", "first", "second", "both"):
                    alternative = expected.get(f"if_dst_policy_{key}_{policy}")
                    if alternative:
                        want = alternative if isinstance(alternative, list) else [alternative]
                        params.append(pytest.param(given, [option, policy], want, id=f"{case['id']}.{part}-{policy}"))
    return params


@pytest.fixture
def london_server(settings: Settings) -> Iterator[None]:
    """Django TIME_ZONE and the process TZ both Europe/London, as on the cronie host in C13."""
    saved = os.environ.get("TZ")
    settings.TIME_ZONE = "Europe/London"
    os.environ["TZ"] = "Europe/London"
    time.tzset()
    yield
    if saved is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = saved
    time.tzset()


@pytest.mark.parametrize(("given", "options", "want"), next_run_cases())
def test_next_runs_prints_the_case_values_one_per_line(
    given: dict[str, Any], options: list[str], want: list[str]
) -> None:
    lines = next_runs(
        given["cron"], "--tz", given["tz"], "--after", given["after"], "--count", str(len(want)), *options
    )

    assert len(lines) == len(want)
    assert all(same(got, w) for got, w in zip(lines, want, strict=True)), lines


def test_next_runs_prints_the_offset_of_the_jobs_zone() -> None:
    lines = next_runs("30 2 * * *", "--tz", "Europe/Berlin", "--after", "2027-03-27T02:30:00+01:00", "--count", "2")

    assert lines == ["2027-03-28T03:00:00+02:00", "2027-03-29T02:30:00+02:00"]


def test_next_runs_with_utc_prints_z_instants() -> None:
    lines = next_runs(
        "30 2 * * *", "--tz", "Europe/Berlin", "--after", "2027-03-27T02:30:00+01:00", "--count", "2", "--utc"
    )

    assert lines == ["2027-03-28T01:00:00Z", "2027-03-29T00:30:00Z"]


def test_next_runs_applies_the_overlap_policy_both() -> None:
    after = "2023-10-28T02:00:00+02:00"

    lines = next_runs("0 2 * * *", "--tz", "Europe/Berlin", "--after", after, "--count", "3", "--dst-overlap", "both")

    assert lines == ["2023-10-29T02:00:00+02:00", "2023-10-29T02:00:00+01:00", "2023-10-30T02:00:00+01:00"]


def test_next_runs_applies_the_gap_policy_shift() -> None:
    lines = next_runs(
        "30 2 * * *", "--tz", "Europe/Berlin", "--after", "2027-03-27T02:30:00+01:00", "--dst-gap", "shift"
    )

    assert lines == ["2027-03-28T03:30:00+02:00"]


def test_next_runs_defaults_after_to_now() -> None:
    lines = next_runs("* * * * *", "--tz", "UTC")

    assert len(lines) == 1
    assert datetime.fromisoformat(lines[0]) > datetime.now(UTC)


@pytest.mark.usefixtures("london_server")
@pytest.mark.parametrize(
    ("cron", "after", "want"),
    [
        (
            "30 1 * * *",
            "2022-10-29T01:30:00+00:00",
            ["2022-10-30T01:30:00+00:00", "2022-10-31T01:30:00+00:00"],
        ),
        ("0 1 * * *", "2022-10-29T23:50:54+00:00", ["2022-10-30T01:00:00+00:00"]),
    ],
    ids=["C13.A", "C13.B"],
)
def test_next_runs_ignore_the_django_and_process_time_zone(cron: str, after: str, want: list[str]) -> None:
    assert time.localtime(1656633600).tm_isdst == 1  # 2022-07-01 is BST: the London fixture is in force

    lines = next_runs(cron, "--tz", "UTC", "--after", after, "--count", str(len(want)))

    assert lines == want


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["61 2 * * *", "--tz", "UTC"], "Invalid minute field '61'"),
        (["0 2 * *", "--tz", "UTC"], "five fields"),
        (["0 2 * * *", "--tz", "Mars/Olympus"], "Unknown time zone 'Mars/Olympus'"),
        (["0 2 * * *", "--tz", "UTC", "--after", "2024-01-01T00:00:00"], "needs a UTC offset"),
        (["0 2 * * *", "--tz", "UTC", "--after", "yesterday"], "not an ISO 8601 time"),
        (["0 2 * * *", "--tz", "UTC", "--count", "0"], "--count must be between 1"),
        (["0 2 * * *", "--tz", "UTC", "--dst-gap", "later"], "invalid choice"),
    ],
    ids=["bad-minute", "four-fields", "bad-zone", "naive-after", "bad-after", "zero-count", "bad-policy"],
)
def test_next_runs_reports_bad_input_as_a_command_error(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        next_runs(*args)

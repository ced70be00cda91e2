"""Tests for runs.checks.schedule: every input of tests/data/cases.json, then hand-written edges.

No Django here (the module is pure); the Django ``TIME_ZONE`` check lives in
test_next_runs_command.py. Instants are compared with their UTC offsets, never as wall times.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim

from runs.checks.schedule.cron import ScheduleError, is_fixed_time, validate_cron, validate_timezone
from runs.checks.schedule.deadlines import check_deadline, is_due, is_overdue, missed_slots
from runs.checks.schedule.fire_times import next_fire_time, next_fire_times, previous_fire_time
from runs.checks.schedule.windows import fire_time_closing_window, processing_window

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).resolve().parents[3] / "data" / "cases.json").read_text(encoding="utf-8")
)
CASE_INPUTS: dict[str, dict[str, Any]] = {
    f"{case['id']}.{part}": given for case in CASES for part, given in case["input"].items()
}
CASE_EXPECTED: dict[str, Any] = {
    f"{case['id']}.{part}": case["expected"].get(part, {}) for case in CASES for part in case["input"]
}
TESTED_TYPES = {
    "next_run",
    "prev_run",
    "window",
    "deadline",
    "is_due",
    "missed_slots",
    # The identity cases run through the app's own functions (ingestion, run identity, the missed-run
    # sweep) in tests/runs/checks/test_identity_cases.py:
    "forbid_timeline",
    "classify_event",
    "dedup",
    "grouping",
    "replay_guard",
    "run_identity",
}


def cases_of(kind: str) -> list[Any]:
    """pytest params (case id, input, expected) for every case input of type ``kind``."""
    return [
        pytest.param(case_id, given, CASE_EXPECTED[case_id], id=case_id)
        for case_id, given in CASE_INPUTS.items()
        if given.get("type") == kind
    ]


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text)


def as_list(value: str | list[str]) -> list[str]:
    return value if isinstance(value, list) else [value]


def utc(value: datetime) -> datetime:
    """Compare instants in UTC: a repeated wall time (02:00 CEST/CET) in a ZoneInfo never equals a
    datetime with another tzinfo, even for the same instant (PEP 495 inter-zone rule)."""
    return value.astimezone(UTC)


def assert_same_instant(got: datetime, want: str) -> None:
    """Same instant AND same UTC offset (the offset is what shows which side of a DST change)."""
    expected = instant(want)
    assert (utc(got), got.utcoffset()) == (utc(expected), expected.utcoffset()), f"{got.isoformat()} != {want}"


def assert_same_utc(got: datetime, want: str) -> None:
    assert utc(got) == utc(instant(want)), f"{utc(got).isoformat()} != {want}"


def hms(text: str) -> timedelta:
    hours, minutes, seconds = (int(part) for part in text.split(":"))
    return timedelta(hours=hours, minutes=minutes, seconds=seconds)


@pytest.fixture
def process_zone() -> Iterator[Callable[[str], None]]:
    """Set the process TZ (what a server's local zone would be); restored afterwards."""
    saved = os.environ.get("TZ")

    def set_zone(name: str) -> None:
        os.environ["TZ"] = name
        time.tzset()

    yield set_zone
    if saved is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = saved
    time.tzset()


# --------------------------------------------------------------------------------------------------
# cases.json, one test per input


def test_every_case_input_type_has_a_test() -> None:
    assert {given["type"] for given in CASE_INPUTS.values()} <= TESTED_TYPES


@pytest.mark.parametrize(("case_id", "given", "expected"), cases_of("next_run"))
def test_next_fire_times_match_the_case(
    case_id: str, given: dict[str, Any], expected: dict[str, Any], process_zone: Callable[[str], None]
) -> None:
    if "server_tz" in given:  # C13: the server's zone must change nothing
        process_zone(given["server_tz"])
    want = as_list(expected["value"])

    got = next_fire_times(given["cron"], given["tz"], instant(given["after"]), len(want))

    assert len(got) == len(want)
    for got_one, want_one in zip(got, want, strict=True):
        assert_same_instant(got_one, want_one)
    for got_one, want_utc in zip(got, as_list(expected["expected_utc"]), strict=True):
        assert_same_utc(got_one, want_utc)


def policy_alternatives() -> list[Any]:
    """(input, policy keyword, expected) for every ``if_dst_policy_<gap|overlap>_<value>`` entry."""
    params = []
    for case_id, given in CASE_INPUTS.items():
        if given.get("type") != "next_run":
            continue
        for key, value in CASE_EXPECTED[case_id].items():
            match = re.fullmatch(r"if_dst_policy_(gap|overlap)_(\w+)", key)
            if match:
                kind, policy = match.groups()
                params.append(
                    pytest.param(given, {f"dst_{kind}": policy}, as_list(value), id=f"{case_id}-{kind}-{policy}")
                )
    return params


@pytest.mark.parametrize(("given", "policy", "want"), policy_alternatives())
def test_next_fire_times_follow_the_documented_alternative_policy(
    given: dict[str, Any], policy: dict[str, str], want: list[str]
) -> None:
    got = next_fire_times(given["cron"], given["tz"], instant(given["after"]), len(want), **policy)

    assert len(got) == len(want)
    for got_one, want_one in zip(got, want, strict=True):
        assert_same_instant(got_one, want_one)


@pytest.mark.parametrize(("case_id", "given", "expected"), cases_of("prev_run"))
def test_previous_fire_time_matches_the_case(case_id: str, given: dict[str, Any], expected: dict[str, Any]) -> None:
    got = previous_fire_time(given["cron"], given["tz"], instant(given["at_or_before"]))

    assert_same_instant(got, expected["value"])
    assert_same_utc(got, expected["expected_utc"])


@pytest.mark.parametrize(("case_id", "given", "expected"), cases_of("window"))
def test_processing_window_matches_the_case(case_id: str, given: dict[str, Any], expected: dict[str, Any]) -> None:
    start, end = processing_window(given["cron"], given["tz"], instant(given["run_slot"]))

    assert_same_utc(start, expected["expected_window_utc"][0])
    assert_same_utc(end, expected["expected_window_utc"][1])
    # Subtract in UTC: two datetimes sharing a ZoneInfo subtract as wall times (24:30 here, not 23:30).
    assert end.astimezone(UTC) - start.astimezone(UTC) == hms(expected["expected_length"])


@pytest.mark.parametrize(("case_id", "given", "expected"), cases_of("deadline"))
def test_check_deadline_matches_the_case(case_id: str, given: dict[str, Any], expected: dict[str, Any]) -> None:
    expected_at = next_fire_time(given["cron"], given["tz"], instant(given["last_ping"]))

    down_at = check_deadline(expected_at, hms(given["grace"]).total_seconds())

    assert_same_instant(down_at, expected["value"]["down_at"])
    assert_same_utc(down_at, expected["value"]["down_at_utc"])


@pytest.mark.parametrize(("case_id", "given", "expected"), cases_of("is_due"))
def test_is_due_matches_the_case(case_id: str, given: dict[str, Any], expected: dict[str, Any]) -> None:
    due = is_due(given["cron"], given["tz"], instant(given["last_run"]), instant(given["now"]))

    assert due is expected["value"]["is_due"]


@pytest.mark.parametrize(("case_id", "given", "expected"), cases_of("missed_slots"))
def test_missed_slots_match_the_case(case_id: str, given: dict[str, Any], expected: dict[str, Any]) -> None:
    now = instant(given["now"])
    args = (given["cron"], given["tz"], instant(given["last_scheduled"]), now)
    deadline = given["starting_deadline_seconds"]

    latest = missed_slots(*args, policy="latest_only", starting_deadline_seconds=deadline)
    every = missed_slots(*args, policy="catch_up_all", starting_deadline_seconds=deadline)

    value = expected["value"]
    assert set(value) <= {
        "missed_slot_count",
        "first_missed",
        "last_missed",
        "policy_latest_only",
        "policy_all",
        "stall_detection",
        "slots_considered_by_k8s",
        "run_for_slot",
    }, "a new expected key needs an assertion"
    assert latest.first_missed is not None
    assert latest.first_missed >= instant(given["scheduler_down_from"])
    if "missed_slot_count" in value:
        assert latest.missed_slot_count == value["missed_slot_count"]
    if "first_missed" in value:
        assert_same_utc(latest.first_missed, value["first_missed"])
    if "last_missed" in value:
        assert latest.last_missed is not None
        assert_same_utc(latest.last_missed, value["last_missed"])
    if "policy_latest_only" in value:
        policy = value["policy_latest_only"]
        assert len(latest.to_run) == policy["runs_expected"]
        assert_same_utc(latest.to_run[-1], policy["run_for_slot"])
        assert len(latest.skipped) == policy["slots_marked_skipped"]
    if "policy_all" in value:
        assert len(every.to_run) == value["policy_all"]["runs_expected"]
    if "stall_detection" in value:
        # "... arrives by 10:22:00Z + grace": the next slot after now is the stall reference.
        stall = re.search(r"(\d\d):(\d\d):(\d\d)Z", value["stall_detection"])
        assert stall, "the stall note names the time of the next slot"
        hour, minute, second = (int(part) for part in stall.groups())
        assert latest.next_slot == now.replace(hour=hour, minute=minute, second=second)
    if "slots_considered_by_k8s" in value:
        assert len(latest.considered) == len(value["slots_considered_by_k8s"])
        for got_one, want_one in zip(latest.considered, value["slots_considered_by_k8s"], strict=True):
            assert_same_utc(got_one, want_one)
    if "run_for_slot" in value:  # the Kubernetes v2 controller starts only the latest slot
        assert len(latest.to_run) == 1
        assert_same_utc(latest.to_run[0], value["run_for_slot"])


def test_results_do_not_depend_on_the_process_time_zone(process_zone: Callable[[str], None]) -> None:
    # C13: cronie applied its local-time DST suppression to a CRON_TZ=UTC job on a Europe/London host.
    inputs = [given for given in CASE_INPUTS.values() if given["type"] == "next_run"]

    def compute() -> list[list[tuple[datetime, timedelta | None]]]:
        return [
            [(t, t.utcoffset()) for t in next_fire_times(g["cron"], g["tz"], instant(g["after"]), 3)] for g in inputs
        ]

    process_zone("UTC")
    reference = compute()
    for zone in ("Europe/London", "America/Los_Angeles", "Pacific/Apia", "Australia/Lord_Howe"):
        process_zone(zone)
        assert compute() == reference, zone


# --------------------------------------------------------------------------------------------------
# Hand-written edges


def test_check_deadline_adds_real_seconds_across_a_dst_change() -> None:
    # 01:30 CET + 1 h of real time is 03:30 CEST; wall-clock arithmetic would give 02:30, which never exists.
    due = instant("2027-03-28T01:30:00+01:00").astimezone(ZoneInfo("Europe/Berlin"))

    assert_same_instant(check_deadline(due, 3600), "2027-03-28T03:30:00+02:00")


@pytest.mark.parametrize(
    ("offset_seconds", "overdue"), [(-1, False), (0, True), (1, True)], ids=["minus-1s", "at", "plus-1s"]
)
def test_is_overdue_turns_true_at_the_deadline_second(offset_seconds: int, overdue: bool) -> None:
    due = next_fire_time("0 7 * * *", "America/New_York", instant("2024-03-09T07:00:00-05:00"))
    deadline = instant("2024-03-10T11:30:00Z")

    assert is_overdue(due, 1800, deadline + timedelta(seconds=offset_seconds)) is overdue


def test_check_deadline_refuses_a_negative_grace() -> None:
    with pytest.raises(ScheduleError, match="grace_seconds"):
        check_deadline(instant("2024-03-10T11:00:00Z"), -1)


def test_day_31_skips_short_months() -> None:
    got = next_fire_times("0 0 31 * *", "UTC", instant("2024-01-31T00:00:00Z"), 3)

    assert [t.date() for t in got] == [date(2024, 3, 31), date(2024, 5, 31), date(2024, 7, 31)]


def test_last_day_of_month_follows_leap_years() -> None:
    got = next_fire_times("0 0 L 2 *", "UTC", instant("2023-01-01T00:00:00Z"), 3)

    assert [t.date() for t in got] == [date(2023, 2, 28), date(2024, 2, 29), date(2025, 2, 28)]


def test_last_weekday_of_month_avoids_the_weekend() -> None:
    # 2024-08-31 is a Saturday: LW is Friday the 30th.
    assert next_fire_time("0 0 LW * *", "UTC", instant("2024-08-01T00:00:00Z")).date() == date(2024, 8, 30)


def test_leap_day_job_skips_the_century_year_that_is_not_leap() -> None:
    assert_same_instant(
        next_fire_time("0 9 29 2 *", "UTC", instant("2096-02-29T09:00:00Z")), "2104-02-29T09:00:00+00:00"
    )
    assert_same_instant(
        previous_fire_time("0 9 29 2 *", "UTC", instant("2103-12-31T00:00:00Z")), "2096-02-29T09:00:00+00:00"
    )


def test_overlap_policy_both_runs_a_fixed_time_slot_at_each_occurrence() -> None:
    got = next_fire_times("0 2 * * *", "Europe/Berlin", instant("2023-10-28T02:00:00+02:00"), 3, dst_overlap="both")

    for got_one, want in zip(
        got,
        ["2023-10-29T02:00:00+02:00", "2023-10-29T02:00:00+01:00", "2023-10-30T02:00:00+01:00"],
        strict=True,
    ):
        assert_same_instant(got_one, want)


def test_overlap_policy_both_keeps_instants_in_order() -> None:
    got = next_fire_times("0,30 2 * * *", "Europe/Berlin", instant("2023-10-29T00:00:00+02:00"), 4, dst_overlap="both")

    assert [t.astimezone(UTC).strftime("%H:%M") for t in got] == ["00:00", "00:30", "01:00", "01:30"]


def test_gap_policy_shift_moves_the_slot_by_the_gap_length() -> None:
    assert_same_instant(
        next_fire_time("30 2 * * *", "Europe/Berlin", instant("2027-03-27T12:00:00+01:00"), dst_gap="shift"),
        "2027-03-28T03:30:00+02:00",
    )


def test_gap_policy_shift_merges_a_shifted_slot_with_the_real_one() -> None:
    # 02:00 and 02:30 shift onto 03:00 and 03:30, which are slots anyway: each instant fires once, in order.
    got = next_fire_times("0,30 2,3 * * *", "Europe/Berlin", instant("2027-03-28T00:00:00+01:00"), 3, dst_gap="shift")

    assert [t.isoformat() for t in got] == [
        "2027-03-28T03:00:00+02:00",
        "2027-03-28T03:30:00+02:00",
        "2027-03-29T02:00:00+02:00",
    ]


def test_gap_policy_next_existing_runs_several_gap_slots_once() -> None:
    got = next_fire_times("0,30 2 * * *", "Europe/Berlin", instant("2027-03-28T00:00:00+01:00"), 2)

    assert [t.isoformat() for t in got] == ["2027-03-28T03:00:00+02:00", "2027-03-29T02:00:00+02:00"]


def test_gap_policy_next_existing_handles_a_half_hour_dst_change() -> None:
    # Australia/Lord_Howe moves from 02:00 +10:30 to 02:30 +11:00.
    assert_same_instant(
        next_fire_time("15 2 * * *", "Australia/Lord_Howe", instant("2024-10-05T12:00:00+10:30")),
        "2024-10-06T02:30:00+11:00",
    )


def test_wildcard_entry_drops_the_slot_the_clock_skips() -> None:
    got = next_fire_times("30 * * * *", "Europe/Berlin", instant("2027-03-28T01:00:00+01:00"), 2)

    assert [t.isoformat() for t in got] == ["2027-03-28T01:30:00+01:00", "2027-03-28T03:30:00+02:00"]


def test_wildcard_entry_ignores_the_dst_policy() -> None:
    got = next_fire_times(
        "0 * * * *", "America/Los_Angeles", instant("2026-11-01T00:30:00-07:00"), 2, dst_overlap="first"
    )

    assert [t.isoformat() for t in got] == ["2026-11-01T01:00:00-07:00", "2026-11-01T01:00:00-08:00"]


def test_next_fire_time_after_the_second_pass_of_a_repeated_hour_is_not_in_the_past() -> None:
    # cronsim itself answers 02:45 CEST (00:45Z) here, before `after` (01:30Z).
    assert_same_instant(
        next_fire_time("45 2 * * *", "Europe/Berlin", instant("2023-10-29T02:30:00+01:00")),
        "2023-10-30T02:45:00+01:00",
    )


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/Los_Angeles", "Australia/Lord_Howe", "UTC"])
@pytest.mark.parametrize("cron", ["30 2 * * *", "0 2 * * *", "0,30 2,3 * * *", "0 * * * *", "*/20 1-3 * * *"])
def test_default_policy_agrees_with_cronsim(zone: str, cron: str) -> None:
    # Debian semantics as cronsim implements them, over a year of transitions.
    start = datetime(2023, 1, 1, tzinfo=ZoneInfo(zone))
    native = CronSim(cron, start)
    want = [next(native) for _ in range(400 if cron.startswith(("0 *", "*/")) else 120)]

    got = next_fire_times(cron, zone, start, len(want))

    assert [(t.astimezone(UTC), t.utcoffset()) for t in got] == [(t.astimezone(UTC), t.utcoffset()) for t in want]


def test_previous_fire_time_in_a_gap_follows_the_gap_policy() -> None:
    at = instant("2027-03-28T01:30:00Z")

    assert_same_instant(previous_fire_time("30 2 * * *", "Europe/Berlin", at), "2027-03-28T03:00:00+02:00")
    assert_same_instant(
        previous_fire_time("30 2 * * *", "Europe/Berlin", at, dst_gap="skip"), "2027-03-27T02:30:00+01:00"
    )


def test_previous_fire_time_counts_the_slot_at_the_instant_itself() -> None:
    at = instant("2024-11-03T05:00:00Z")

    assert utc(previous_fire_time("0 1 * * *", "America/New_York", at)) == at


def test_processing_window_aligned_to_day_floors_both_ends() -> None:
    start, end = processing_window("0 2 * * *", "Europe/Berlin", instant("2026-11-28T02:00:00+01:00"), alignment="day")

    assert_same_instant(start, "2026-11-27T00:00:00+01:00")
    assert_same_instant(end, "2026-11-28T00:00:00+01:00")


def test_processing_window_aligned_to_hour_inside_the_repeated_hour() -> None:
    # 02:30 CET (second pass) and 02:30 CEST floor to the two different 02:00s.
    start, end = processing_window(
        "30 * * * *", "Europe/Berlin", instant("2023-10-29T02:30:00+01:00"), alignment="hour"
    )

    assert_same_instant(start, "2023-10-29T02:00:00+02:00")
    assert_same_instant(end, "2023-10-29T02:00:00+01:00")


def test_processing_window_aligned_to_month() -> None:
    start, end = processing_window(
        "0 3 1 * *", "Europe/Berlin", instant("2024-04-01T03:00:00+02:00"), alignment="month"
    )

    assert_same_instant(start, "2024-03-01T00:00:00+01:00")
    assert_same_instant(end, "2024-04-01T00:00:00+02:00")


def test_processing_window_floors_to_the_first_instant_of_a_day_without_midnight() -> None:
    # America/Santiago jumped from 2024-09-08 00:00 -04:00 to 01:00 -03:00.
    start, end = processing_window(
        "0 12 * * *", "America/Santiago", instant("2024-09-08T12:00:00-03:00"), alignment="day"
    )

    assert_same_instant(start, "2024-09-07T00:00:00-04:00")
    assert_same_instant(end, "2024-09-08T01:00:00-03:00")


def test_processing_window_refuses_an_alignment_coarser_than_the_schedule() -> None:
    with pytest.raises(ScheduleError, match="empty window"):
        processing_window("0 * * * *", "UTC", instant("2024-05-01T05:00:00Z"), alignment="day")


def test_fire_time_closing_window_includes_the_window_end_itself() -> None:
    end = instant("2024-08-01T00:00:00Z")

    assert fire_time_closing_window("0 0 1 * *", "UTC", end) == end
    assert_same_instant(
        fire_time_closing_window("0 2 * * *", "Europe/Berlin", instant("2026-11-28T00:00:00+01:00")),
        "2026-11-28T02:00:00+01:00",
    )


def test_missed_slots_expire_after_keeps_only_fresh_slots() -> None:
    result = missed_slots(
        "*/10 * * * *",
        "UTC",
        instant("2026-11-02T08:00:00Z"),
        instant("2026-11-02T09:00:00Z"),
        policy="expire_after",
        expire_after_seconds=1200,
    )

    assert [t.strftime("%H:%M") for t in result.to_run] == ["08:40", "08:50", "09:00"]
    assert [t.strftime("%H:%M") for t in result.skipped] == ["08:10", "08:20", "08:30"]
    assert result.next_slot is not None
    assert_same_instant(result.next_slot, "2026-11-02T09:10:00+00:00")


def test_missed_slots_expire_after_needs_a_duration() -> None:
    with pytest.raises(ScheduleError, match="expire_after_seconds"):
        missed_slots(
            "* * * * *",
            "UTC",
            instant("2026-11-02T08:00:00Z"),
            instant("2026-11-02T09:00:00Z"),
            policy="expire_after",
        )


def test_missed_slots_follow_the_wall_clock_through_a_repeated_hour() -> None:
    # Hourly in Los Angeles from 00:00 PDT to 03:00 PST: 01:00 PDT, 01:00 PST, 02:00, 03:00.
    result = missed_slots(
        "0 * * * *", "America/Los_Angeles", instant("2026-11-01T07:00:00Z"), instant("2026-11-01T11:00:00Z")
    )

    assert result.missed_slot_count == 4


@pytest.mark.parametrize(
    ("cron", "message"),
    [
        ("61 2 * * *", "Invalid minute field '61'"),
        ("0 2 * * 8", "Invalid day-of-week field '8'"),
        ("0 0 30 2 *", "no listed month has that day"),
        ("0 2 * *", "five fields"),
        ("0 0 2 * * *", "five fields"),
        ("@daily", "Macros"),
        ("", "required"),
    ],
)
def test_validate_cron_names_what_is_wrong(cron: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=re.escape(message)):
        validate_cron(cron)


def test_validate_cron_accepts_the_cronsim_extensions() -> None:
    for cron in ("0 0 L * *", "0 0 LW * *", "0 0 * * 5L", "0 0 * * 1#2", "0 9 * * MON-FRI", "0 0 31,L * *"):
        validate_cron(cron)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("Mars/Olympus", "Unknown time zone"),
        ("europe/berlin", "Did you mean 'Europe/Berlin'"),
        ("localtime", "IANA"),
    ],
)
def test_validate_timezone_refuses_unknown_and_server_dependent_zones(name: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=re.escape(message)):
        validate_timezone(name)


def test_is_fixed_time_follows_the_first_character_of_minute_and_hour() -> None:
    assert is_fixed_time("30 2 * * *")
    assert is_fixed_time("0-59 9 * * *")
    assert not is_fixed_time("* 9 * * *")
    assert not is_fixed_time("0 */2 * * *")


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ScheduleError, match="aware"):
        next_fire_times("0 2 * * *", "UTC", datetime(2024, 1, 1))


def test_unknown_policies_are_refused() -> None:
    with pytest.raises(ScheduleError, match="next_existing, skip, shift"):
        next_fire_times("0 2 * * *", "UTC", instant("2024-01-01T00:00:00Z"), dst_gap="later")


def test_count_zero_gives_nothing_and_negative_counts_are_refused() -> None:
    after = instant("2024-01-01T00:00:00Z")

    assert next_fire_times("0 2 * * *", "UTC", after, 0) == []
    with pytest.raises(ScheduleError, match="count"):
        next_fire_times("0 2 * * *", "UTC", after, -1)


# Found by comparing next_fire_times with cronsim on 6,000 random expressions around the DST transitions
# of 17 zones (2026-12-03): every difference was one of these shapes, where cronsim (v2) answers against
# the rules in force (Debian cron's, docs/slots.md): a transition that is not a whole hour (Lord Howe
# moves 30 minutes, Chatham at 02:45), a transition at midnight (Tehran, Cairo, Santiago), and an
# instant before ``after`` in a repeated hour. Each expected value was worked out by hand.
@pytest.mark.parametrize(
    ("cron", "zone", "after", "expected"),
    [
        # Lord Howe springs forward 02:00 -> 02:30: a wildcard-hour job keeps 02:33, which exists
        ("33 * * * 0", "Australia/Lord_Howe", "2020-10-04T01:40:00+10:30", "2020-10-04T02:33:00+11:00"),
        # ... and a job every minute from 04:00 starts at 04:00, not 04:30
        ("* 4-11 * * *", "Australia/Lord_Howe", "2023-09-30T15:43:59+10:30", "2023-10-01T04:00:00+11:00"),
        # Chatham springs forward 02:45 -> 03:45: a wildcard-minute job in hour 3 runs from 03:45 that day
        ("* 3 * * *", "Pacific/Chatham", "2022-09-24T15:42:00+12:45", "2022-09-25T03:45:00+13:45"),
        ("*/12 3 * * *", "Pacific/Chatham", "2022-09-24T23:37:00+12:45", "2022-09-25T03:48:00+13:45"),
        # Tehran's 2020 spring-forward at midnight (00:00 -> 01:00): a wildcard slot at 00:00 is dropped
        ("*/29 */2 */2 * *", "Asia/Tehran", "2020-03-20T08:12:00+03:30", "2020-03-21T02:00:00+04:30"),
        # Cairo's last-Friday-of-April midnight jump: hour 1 exists (01:00 EEST) and runs
        ("* 1,2,3 26-26 * *", "Africa/Cairo", "2030-04-25T21:33:00+02:00", "2030-04-26T01:00:00+03:00"),
        # after the second pass of a repeated hour: the next fire is not its first pass, already gone
        ("54 0-3 * * *", "America/Los_Angeles", "2020-11-01T01:45:30-08:00", "2020-11-01T02:54:00-08:00"),
        ("56 0-3 * * *", "Australia/Lord_Howe", "2026-04-05T01:46:30+10:30", "2026-04-05T02:56:00+10:30"),
        ("58,28,11 1 * * *", "America/St_Johns", "2020-11-01T01:26:59-03:30", "2020-11-02T01:11:00-03:30"),
    ],
)
def test_next_fire_time_where_cronsim_answers_against_the_rules(
    cron: str, zone: str, after: str, expected: str
) -> None:
    got = next_fire_times(cron, zone, datetime.fromisoformat(after), 1)[0]

    assert got == datetime.fromisoformat(expected) and got.utcoffset() == datetime.fromisoformat(expected).utcoffset()
    assert got > datetime.fromisoformat(after)

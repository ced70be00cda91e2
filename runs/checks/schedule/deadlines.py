"""Deadlines and due checks (fire time + grace, in real seconds), and the slots missed after an
outage with what the missed-run policy runs of them (C07, C08)."""

from __future__ import annotations

import zoneinfo
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from runs.checks.schedule.cron import (
    DstGapPolicy,
    DstOverlapPolicy,
    MissedRunPolicy,
    policy_coerce,
    schedule_prepare,
    seconds_coerce,
    utc_coerce,
)
from runs.checks.schedule.dst import fire_times_after
from runs.checks.schedule.fire_times import next_fire_times


def check_deadline(next_fire: datetime, grace_seconds: float) -> datetime:
    """Return the instant a run expected at ``next_fire`` is overdue: ``next_fire + grace`` (rule 4).

    The grace is real elapsed seconds, added in UTC: ``aware + timedelta`` on a ZoneInfo datetime
    adds wall-clock time, which is an hour off across a DST change. Returned in ``next_fire``'s zone
    (C07.B: 09:35 PDT + 30 min -> 10:05 PDT, Healthchecks ``get_grace_start`` + ``grace``).
    Raises ScheduleError for a naive ``next_fire`` or a negative grace.
    """
    grace = seconds_coerce("grace_seconds", grace_seconds)
    assert grace is not None
    return (utc_coerce("next_fire", next_fire) + timedelta(seconds=grace)).astimezone(next_fire.tzinfo)


def is_overdue(next_fire: datetime, grace_seconds: float, now: datetime) -> bool:
    """Return True when ``now`` is at or past ``check_deadline(next_fire, grace_seconds)``.

    At the deadline itself the run is overdue (Healthchecks ``get_status``: ``now >= grace_end`` ->
    down). Raises ScheduleError for naive datetimes or a negative grace.
    """
    return utc_coerce("now", now) >= check_deadline(next_fire, grace_seconds).astimezone(UTC)


def is_due(
    cron: str,
    tz: str | zoneinfo.ZoneInfo,
    last_run: datetime,
    now: datetime,
    *,
    dst_gap: DstGapPolicy | str = DstGapPolicy.NEXT_EXISTING,
    dst_overlap: DstOverlapPolicy | str = DstOverlapPolicy.FIRST,
) -> bool:
    """Return True when a slot falls in ``(last_run, now]``, i.e. a run is due at ``now``.

    Compares real instants, not local wall hours: an hourly job that ran at 01:00 PDT is due again at
    01:00 PST one real hour later (C03.B, Celery #10107). Raises ScheduleError for bad input.
    """
    found = next_fire_times(cron, tz, last_run, 1, dst_gap=dst_gap, dst_overlap=dst_overlap)
    return bool(found) and found[0].astimezone(UTC) <= utc_coerce("now", now)


@dataclass(frozen=True)
class MissedSlots:
    """The slots after ``last_scheduled`` that came due by ``now``, and what the executor will do.

    All datetimes are in the job's zone. ``slots``: every slot in ``(last_scheduled, now]``.
    ``considered``: those not too late under a starting deadline. ``to_run``: the slots a run is
    expected for under the missed-run policy. ``skipped``: every other slot (one grouped "skipped
    while scheduler down" record, not one page each). ``next_slot``: the first slot after ``now``;
    if no run arrives by ``check_deadline(next_slot, grace)`` the schedule has stalled (C08.A).
    """

    slots: tuple[datetime, ...]
    considered: tuple[datetime, ...]
    to_run: tuple[datetime, ...]
    skipped: tuple[datetime, ...]
    next_slot: datetime | None

    @property
    def missed_slot_count(self) -> int:
        return len(self.slots)

    @property
    def first_missed(self) -> datetime | None:
        return self.slots[0] if self.slots else None

    @property
    def last_missed(self) -> datetime | None:
        return self.slots[-1] if self.slots else None


def missed_slots(
    cron: str,
    tz: str | zoneinfo.ZoneInfo,
    last_scheduled: datetime,
    now: datetime,
    *,
    policy: MissedRunPolicy | str = MissedRunPolicy.CATCH_UP_ALL,
    expire_after_seconds: float | None = None,
    starting_deadline_seconds: float | None = None,
    dst_gap: DstGapPolicy | str = DstGapPolicy.NEXT_EXISTING,
    dst_overlap: DstOverlapPolicy | str = DstOverlapPolicy.FIRST,
) -> MissedSlots:
    """Return the slots in ``(last_scheduled, now]`` and which of them should get a run.

    ``starting_deadline_seconds`` (Kubernetes ``startingDeadlineSeconds``): a slot is too late when
    ``slot + deadline < now`` and is not considered at all (C08.B: 200 s at 10:21:30 leaves 10:19,
    10:20, 10:21). ``policy``: ``catch_up_all`` runs every considered slot; ``latest_only`` only the
    most recent (Kubernetes v2 controller, Airflow catchup=False; C08.A: 1 run for 10:21, 112
    skipped); ``expire_after`` runs those with ``slot + expire_after_seconds >= now``. There is no cap
    on the backlog: the old Kubernetes controller stopped for good after 100 missed slots (C08).

    Raises ScheduleError for bad input, or ``expire_after`` without ``expire_after_seconds``.
    """
    cron, zone, gap, overlap = schedule_prepare(cron, tz, dst_gap, dst_overlap)
    chosen = policy_coerce(MissedRunPolicy, policy, "missed-run policy")
    start, end = utc_coerce("last_scheduled", last_scheduled), utc_coerce("now", now)
    deadline = seconds_coerce("starting_deadline_seconds", starting_deadline_seconds, allow_none=True)
    expire = seconds_coerce(
        "expire_after_seconds", expire_after_seconds, allow_none=chosen is not MissedRunPolicy.EXPIRE_AFTER
    )

    slots: list[datetime] = []
    next_slot: datetime | None = None
    for instant in fire_times_after(cron, zone, start, gap, overlap):
        if instant > end:
            next_slot = instant
            break
        slots.append(instant)
    considered = [s for s in slots if deadline is None or s + timedelta(seconds=deadline) >= end]
    if chosen is MissedRunPolicy.LATEST_ONLY:
        to_run = considered[-1:]
    elif chosen is MissedRunPolicy.EXPIRE_AFTER:
        assert expire is not None
        to_run = [s for s in considered if s + timedelta(seconds=expire) >= end]
    else:
        to_run = considered
    run_set = set(to_run)

    def local(values: Iterable[datetime]) -> tuple[datetime, ...]:
        return tuple(v.astimezone(zone) for v in values)

    return MissedSlots(
        slots=local(slots),
        considered=local(considered),
        to_run=local(to_run),
        skipped=local(s for s in slots if s not in run_set),
        next_slot=next_slot.astimezone(zone) if next_slot else None,
    )

"""Schedule arithmetic: fire times, processing windows, deadlines, missed slots and run identity keys.

A package split by sub-domain; everything public is re-exported here (``from runs.schedule import ...``):

- ``cron``: errors, DST/missed-run/window policies, validation and coercion of cron, zone and instants;
- ``dst``: wall-clock slots mapped to real instants under the DST policies (the heart of rule 3);
- ``fire_times``: next and previous fire times;
- ``windows``: processing windows and the fire time that closes one;
- ``deadlines``: check deadlines, due and overdue tests, missed slots after an outage;
- ``overlaps``: a Forbid-concurrency executor simulated, run-started events attributed to their slot;
- ``identity``: run, trigger and alert-instance identity keys, alert and executor event folding.

Pure functions: no ORM, no Django settings, no dependence on the server's or Django's ``TIME_ZONE``
(cases README rule 4, case C13). Instants go in as aware datetimes (any offset) and come out as
aware datetimes in the job's IANA zone, so the UTC offset is visible; callers convert to UTC.

Semantics are those of ``tests/data/cases-README.md`` ("Reference semantics"):

- rule 1: the cron dialect is Debian/Vixie cron as implemented by healthchecks' ``cronsim``
  (five fields; the ``L``, ``LW``, ``5L`` and ``1#2`` extensions are accepted);
- rule 2: day-of-month and day-of-week are OR-ed unless one of them starts with ``*`` (C05);
- rule 3: DST. *Fixed-time* entries (minute and hour fields do not start with ``*``) follow the
  job's DST policy (``DstGapPolicy`` x ``DstOverlapPolicy``, default = Debian cron: a slot in a
  spring-forward gap runs once at the first instant after the gap, a repeated slot runs at its first
  occurrence; C01, C02). *Wildcard* entries follow the wall clock: gap slots are dropped, repeated
  slots run twice (C03);
- rule 4: the next slot is computed on the local calendar of the job's zone, never "last + 24 h" (C04).

How: cronsim enumerates the *wall-clock* slots (naive local datetimes, a pure calendar walk), and
``dst`` maps every wall slot to real instants itself. We do not use cronsim's own time-zone
handling because it only implements the default policy and, for an ``after`` in the second pass of
a repeated hour, returns a fixed-time slot from the first pass that is *earlier* than ``after``
(``CronSim("45 2 * * *", 02:30 CET on 2023-10-29)`` gives 02:45 CEST = 00:45Z < 01:30Z).

DST traps used throughout: two aware datetimes that share a ``ZoneInfo`` compare and subtract as
*wall-clock* values, ignoring ``fold`` (02:00 CEST == 02:00 CET), and ``+ timedelta`` adds wall time;
and a repeated wall time never equals a datetime in another tzinfo, even for the same instant (PEP 495).
So every comparison and every ``+ timedelta`` here happens on UTC datetimes, and we convert to the
job's zone only on the way out. Callers comparing results should do the same (``.astimezone(UTC)``).
"""

from __future__ import annotations

from runs.schedule.cron import (
    DstGapPolicy,
    DstOverlapPolicy,
    MissedRunPolicy,
    ScheduleError,
    WindowAlignment,
    is_fixed_time,
    validate_cron,
    validate_timezone,
)
from runs.schedule.deadlines import MissedSlots, check_deadline, is_due, is_overdue, missed_slots
from runs.schedule.fire_times import next_fire_time, next_fire_times, previous_fire_time
from runs.schedule.identity import (
    AlertFold,
    AlertInstanceKey,
    IdentityError,
    ReplayGuard,
    RunIdentity,
    alert_instance_key,
    fold_alert_deliveries,
    replay_guard,
    run_identity,
    trigger_key,
)
from runs.schedule.overlaps import EventClassification, ForbidRun, ForbidTimeline, classify_event, forbid_timeline
from runs.schedule.windows import fire_time_closing_window, processing_window

__all__ = [
    "AlertFold",
    "AlertInstanceKey",
    "DstGapPolicy",
    "DstOverlapPolicy",
    "EventClassification",
    "ForbidRun",
    "ForbidTimeline",
    "IdentityError",
    "MissedRunPolicy",
    "MissedSlots",
    "ReplayGuard",
    "RunIdentity",
    "ScheduleError",
    "WindowAlignment",
    "alert_instance_key",
    "check_deadline",
    "classify_event",
    "fire_time_closing_window",
    "fold_alert_deliveries",
    "forbid_timeline",
    "is_due",
    "is_fixed_time",
    "is_overdue",
    "missed_slots",
    "next_fire_time",
    "next_fire_times",
    "previous_fire_time",
    "processing_window",
    "replay_guard",
    "run_identity",
    "trigger_key",
    "validate_cron",
    "validate_timezone",
]

"""What one report says about one attempt (``AttemptDetails``), and the groups of its fields each step of
the attempt services reads: the columns a new attempt takes, what a status move writes, what fills in a gap,
what counts as a changed detail."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runs.attempts.models import Attempt

# What the source says the attempt did, in the order the API shows them (``AttemptSerializer``).
DESCRIPTION_FIELDS = (
    "scheduled_at",
    "started_at",
    "ended_at",
    "error_summary",
    "correlation_ref",
    "log_url",
    "config_version",
)
# Where the attempt sits against its run's slot (decided by placement, not told by the source).
SLOT_FIELDS = (
    "slot_offset_seconds",
    "slot_tolerance_seconds",
    "is_slot_late",
    "is_slot_inferred",
    "slot_hint",
)
# What a status move writes when the report gives it: a move never re-dates the schedule.
MOVE_FIELDS = tuple(name for name in DESCRIPTION_FIELDS if name != "scheduled_at")
# Details a later report of the same status may change, each recorded as an ``attempt_details_changed``
# event; the words name them in the event's summary, in this order.
CHANGEABLE_FIELDS = {"error_summary": "error", "ended_at": "end time", "log_url": "log link"}


@dataclass(frozen=True)
class AttemptDetails:
    """What one report (an alert's record, one of its related attempts, or the job runner's report on a
    replay) says about one attempt of a run.

    - ``execution_id``: the source's id of the execution (the attempt's identity within its run).
    - ``status``: an ``Attempt.Status`` value (queued, running, succeeded, failed, timed_out, ...).
    - ``source_number``: the source's own attempt number (1-based), None when it gives none or an
      out-of-range one; Handover numbers its attempts itself (``Attempt.number``).
    - ``trigger``: an ``Attempt.Trigger`` value, None when the source gives none (then decided under
      the run's row lock: ``runs.attempts.services.trigger_decide``).
    - ``scheduled_at``, ``started_at``, ``ended_at``: aware datetimes in UTC, None when not reported.
    - ``error_summary``, ``correlation_ref``, ``log_url`` (an http(s) link, never cut), ``config_version``,
      ``replay_key``: text, "" when not reported; redacted and fitted to their columns by the caller.
    - ``slot_offset_seconds`` (seconds from the slot, signed), ``slot_tolerance_seconds`` (seconds),
      ``is_slot_late``, ``is_slot_inferred``, ``slot_hint``: where placement put the attempt.

    Frozen: a report is a fact as received; derive a changed copy with ``dataclasses.replace``.
    """

    execution_id: str
    status: str
    source_number: int | None = None
    trigger: str | None = None
    scheduled_at: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    error_summary: str = ""
    correlation_ref: str = ""
    log_url: str = ""
    config_version: str = ""
    replay_key: str = ""
    slot_offset_seconds: int | None = None
    slot_tolerance_seconds: int | None = None
    is_slot_late: bool = False
    is_slot_inferred: bool = False
    slot_hint: str = ""

    def as_model_fields(self) -> dict[str, Any]:
        """The ``Attempt`` columns a new attempt takes from this report: identity, status, description,
        replay key and slot facts (``correlation_ref`` cut to 300 characters, ``slot_hint`` to 200). The
        trigger is left out: the caller decides it against the slot's earlier executions."""
        values: dict[str, Any] = {
            "execution_id": self.execution_id,
            "source_number": self.source_number,
            "status": self.status,
        }
        values.update({name: getattr(self, name) for name in DESCRIPTION_FIELDS})
        values["replay_key"] = self.replay_key
        values.update({name: getattr(self, name) for name in SLOT_FIELDS})
        values["correlation_ref"] = self.correlation_ref[:300]
        values["slot_hint"] = self.slot_hint[:200]
        return values

    def move_fields(self) -> dict[str, Any]:
        """What a status move writes on the attempt: the reported (non-empty) values of ``MOVE_FIELDS``."""
        return {name: getattr(self, name) for name in MOVE_FIELDS if getattr(self, name)}

    def missing_on(self, attempt: Attempt) -> dict[str, Any]:
        """The reported description values the attempt does not have yet (a later alert often knows the
        end time); nothing it already has."""
        return {
            name: getattr(self, name)
            for name in DESCRIPTION_FIELDS
            if getattr(self, name) and not getattr(attempt, name)
        }

    def changed_fields(self, attempt: Attempt, *, include_missing: bool = False) -> dict[str, Any]:
        """The ``CHANGEABLE_FIELDS`` this report gives with another value than the attempt's, in that
        order. ``include_missing``: a detail the attempt lacks counts as a change too."""
        return {
            name: getattr(self, name)
            for name in CHANGEABLE_FIELDS
            if getattr(self, name)
            and (include_missing or getattr(attempt, name))
            and getattr(self, name) != getattr(attempt, name)
        }

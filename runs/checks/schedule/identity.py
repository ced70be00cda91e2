"""Identity keys (cases rule 5): runs, triggers and Alertmanager alert instances; deliveries and
executor events folded by those keys. Dedup is by identity, never by a time window (C10, C11, C12)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple

from runs.checks.schedule.cron import ScheduleError, utc_coerce


class IdentityError(ValueError):
    """An event that carries no usable identity (no fingerprint, no run id and no slot, ...)."""


class RunIdentity(NamedTuple):
    """A logical run: (job, tenant, environment, window_start, window_end), window in UTC."""

    job: str
    tenant: str
    environment: str
    window_start: datetime
    window_end: datetime


def run_identity(
    *, job: str, tenant: str, environment: str, window_start: datetime, window_end: datetime
) -> RunIdentity:
    """Return the identity of a logical run; the trigger kind is an attribute, not part of it.

    A manual run for June and the scheduled run for July both "dated" 2024-07-01 are two runs (C12.A,
    Airflow #41208). Raises IdentityError for a naive, empty or reversed window.
    """
    try:
        start, end = utc_coerce("window_start", window_start), utc_coerce("window_end", window_end)
    except ScheduleError as exc:
        raise IdentityError(str(exc)) from exc
    if start >= end:
        raise IdentityError(f"A window must end after it starts; got [{start.isoformat()}, {end.isoformat()}).")
    return RunIdentity(job, tenant, environment, start, end)


def trigger_key(
    *, job: str, tenant: str, environment: str, run_id: str | None = None, slot: datetime | None = None
) -> tuple[str, ...]:
    """Return the dedup key of a trigger: its explicit run id, else (job, tenant, environment, slot).

    Run ids are scoped to the job (Airflow's ``scheduled__<date>`` repeats across DAGs). Two triggers
    0.5 s apart with different run ids are two runs; the same run id twice is one (C12.B, Airflow
    #28486). A receipt timestamp is never a key: without run id and slot, IdentityError.
    """
    if run_id:
        return (job, "run_id", run_id)
    if slot is None:
        raise IdentityError("A trigger needs a run id or the slot it is for; a receipt time is not an identity.")
    try:
        at = utc_coerce("slot", slot)
    except ScheduleError as exc:
        raise IdentityError(str(exc)) from exc
    return (job, tenant, environment, "slot", at.isoformat())


class AlertInstanceKey(NamedTuple):
    """An alert instance: Alertmanager fingerprint + ``startsAt`` (as a UTC instant)."""

    fingerprint: str
    starts_at: datetime


def _parse_instant(name: str, value: object) -> datetime:
    if not isinstance(value, str):
        raise IdentityError(f"{name} must be an ISO 8601 string; got {value!r}.")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise IdentityError(f"{name} is not an ISO 8601 time: {value!r}.") from None
    if parsed.tzinfo is None:
        raise IdentityError(f"{name} has no UTC offset: {value!r}.")
    return parsed.astimezone(UTC)


def alert_instance_key(alert: Mapping[str, object]) -> AlertInstanceKey:
    """Return (fingerprint, startsAt) for one Alertmanager alert (C10).

    Fingerprint alone is wrong (a resolved alert that fires again keeps it, with a new startsAt);
    groupKey alone is wrong (one group carries many alerts). Raises IdentityError when either is
    missing or malformed.
    """
    fingerprint = alert.get("fingerprint")
    if not isinstance(fingerprint, str) or not fingerprint:
        raise IdentityError("An alert needs a non-empty 'fingerprint'.")
    return AlertInstanceKey(fingerprint, _parse_instant("startsAt", alert.get("startsAt")))


@dataclass(frozen=True)
class AlertFold:
    """Alert instances after folding deliveries in.

    ``instances``: status (``firing``/``resolved``) per instance, known ones included.
    ``new_instance_keys``: instances first seen in these deliveries (one notification each).
    ``duplicate_count``: alerts that repeated a known instance (HA peer, resend, repeat_interval) or
    arrived stale for a resolved one.
    """

    deliveries_recorded: int
    instances: Mapping[AlertInstanceKey, str]
    new_instance_keys: tuple[AlertInstanceKey, ...]
    duplicate_count: int

    @property
    def open_count(self) -> int:
        return sum(1 for status in self.instances.values() if status == "firing")


def fold_alert_deliveries(
    deliveries: Iterable[Mapping[str, object]], *, known: Mapping[AlertInstanceKey, str] | None = None
) -> AlertFold:
    """Fan out each delivery's ``alerts[]`` and dedupe per alert instance (C10.A/B/C).

    Every delivery is recorded; an alert opens an instance the first time its key is seen; a
    ``resolved`` alert closes it; resolved is terminal (a stale ``firing`` does not reopen it - a real
    re-fire has a new startsAt). Two HA peers 40 s apart and a repeat after 4 h collapse alike.
    Raises IdentityError for an alert without fingerprint or startsAt.
    """
    instances: dict[AlertInstanceKey, str] = dict(known or {})
    new: list[AlertInstanceKey] = []
    deliveries_recorded = duplicates = 0
    for delivery in deliveries:
        deliveries_recorded += 1
        alerts = delivery.get("alerts", [])
        if not isinstance(alerts, list):
            raise IdentityError("A delivery's 'alerts' must be a list.")
        for alert in alerts:
            key = alert_instance_key(alert)
            status = "resolved" if alert.get("status") == "resolved" else "firing"
            previous = instances.get(key)
            if previous is None:
                new.append(key)
                instances[key] = status
            elif previous == "firing" and status == "resolved":
                instances[key] = status
            else:
                duplicates += 1
    return AlertFold(deliveries_recorded, instances, tuple(new), duplicates)


@dataclass(frozen=True)
class ReplayGuard:
    """Executor events folded by attempt key (the executor's task id; C11).

    ``attempts_recorded``: distinct keys. ``side_effects_applied``: keys whose first ``succeeded``
    claimed the side effect. ``duplicate_deliveries``: further ``succeeded`` events for a claimed key
    (suppressed, reported as duplicate delivery, not a second attempt). ``redelivery_gaps_seconds``:
    seconds between repeated ``received`` events for one key (a broker visibility timeout).
    """

    attempts_recorded: int
    side_effects_applied: int
    duplicate_deliveries: int
    redelivery_gaps_seconds: tuple[float, ...]


def replay_guard(events: Iterable[Mapping[str, object]]) -> ReplayGuard:
    """Fold ``{"t", "event", "task_id"}`` events: one attempt and one side effect per task id (C11).

    The side effect is claimed on the key before it runs, so the second ``succeeded`` of a task
    redelivered after the Redis visibility timeout is a duplicate delivery (Celery #2481). Raises
    IdentityError for an event without task id or time.
    """
    seen: set[str] = set()
    claimed: set[str] = set()
    last_received: dict[str, datetime] = {}
    gaps: list[float] = []
    duplicates = 0
    for event in events:
        task_id = event.get("task_id")
        if not isinstance(task_id, str) or not task_id:
            raise IdentityError("An executor event needs a 'task_id'.")
        at = _parse_instant("t", event.get("t"))
        seen.add(task_id)
        if event.get("event") == "received":
            if task_id in last_received:
                gaps.append((at - last_received[task_id]).total_seconds())
            last_received[task_id] = at
        elif event.get("event") == "succeeded":
            if task_id in claimed:
                duplicates += 1
            else:
                claimed.add(task_id)
    return ReplayGuard(len(seen), len(claimed), duplicates, tuple(gaps))

"""Next-run checks whose slot the job's policy skipped: under ``latest_only`` or an overlap policy that
skips, a slot with no run is folded into a missed streak, so it is not "the next normal run"; the check
moves to the slot that ran (docs/slots.md, "Missed streaks and next-run checks")."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from runs.attempts.models import Run
from runs.catalog.models import Job
from runs.checks.events import check_event_record, local_text, utc_text
from runs.checks.facts import checks_with_next_run
from runs.checks.models import MissedStreak, NextRunCheck
from runs.checks.schedule.cron import ScheduleError
from runs.checks.schedule.deadlines import check_deadline
from runs.checks.slot_placement import SCHEDULE_STARTED, next_slot_after, slot_schedule, slot_window
from runs.timeline.models import TimelineEvent

# The jobs whose missed slots are a streak rather than a ``missed`` run each (``streak_applies``).
STREAK_POLICY = Q(target__job__missed_run_policy=Job.MissedRunPolicy.LATEST_ONLY) | Q(
    target__job__overlap_policy=Job.OverlapPolicy.SKIP
)


@dataclass
class SkippedSlots:
    """What one pass did: ``moved`` checks (each with a timeline event) and the ids of checks ``held``
    (their slot was skipped and no later slot has run yet: they wait instead of failing)."""

    moved: int = 0
    held: set[int] = field(default_factory=set)


def next_run_checks_move_off_skipped(*, now: datetime | None = None) -> SkippedSlots:
    """Move scheduled checks off slots skipped by policy onto the slot that ran; hold the others.

    Candidates: scheduled checks without evidence whose fire time has come, of a job under
    ``latest_only`` or overlap ``skip``, with no run for their slot (one query). Each one moves to
    the earliest later slot (up to ``now``) whose run has a schedule-started attempt
    (``next_run_check_move``). Without such a run yet, a check is held (not failed at its deadline)
    while its target's open missed streak covers its slot, or until the deadline of the slot after
    its own; after that it is judged as usual. Returns ``SkippedSlots``.
    """
    now = now or timezone.now()
    result = SkippedSlots()
    rows = list(
        checks_with_next_run(
            NextRunCheck.objects.filter(
                status=NextRunCheck.Status.SCHEDULED, evidence_attempt__isnull=True, expected_at__lte=now
            ).filter(STREAK_POLICY)
        )
        .select_related("target__job", "target__tenant", "recovered_run")
        .order_by("expected_at", "pk")
    )
    for check in rows:
        if getattr(check, "found_run_id", None) is not None:  # its slot has a run: judged as usual
            continue
        target = check.target
        ran = (
            Run.objects.filter(
                job_id=target.job_id,
                tenant_id=target.tenant_id,
                environment=target.environment,
                scheduled_for__gt=check.expected_at,
                scheduled_for__lte=now,
                attempts__trigger__in=SCHEDULE_STARTED,
            )
            .order_by("scheduled_for")
            .values_list("scheduled_for", flat=True)
            .first()
        )
        if ran is not None:
            if next_run_check_move(check=check, slot=ran, now=now):
                result.moved += 1
            continue
        if MissedStreak.objects.filter(
            target=target, closed_at__isnull=True, first_slot_at__lte=check.expected_at
        ).exists():
            result.held.add(check.pk)
            continue
        schedule = slot_schedule(job=target.job, target=target)
        try:
            following = next_slot_after(schedule, check.expected_at)
        except ScheduleError:
            continue
        if now < following + timedelta(seconds=schedule.grace_seconds):
            result.held.add(check.pk)
    return result


def next_run_check_move(*, check: NextRunCheck, slot: datetime, now: datetime) -> bool:
    """Move ``check`` to ``slot`` (UTC, the slot that ran): its fire time, deadline and window, with a
    ``next_run_check_moved`` timeline event naming both slots and the policy.

    Guarded on the check still being scheduled for its old slot; a check that already exists for
    ``slot`` (one check serves every requester) leaves this one where it is. Returns whether it moved.
    """
    target = check.target
    job = target.job
    schedule = slot_schedule(job=job, target=target)
    try:
        window_start, window_end = slot_window(job=job, target=target, slot=slot)
    except ScheduleError:
        return False
    deadline = check_deadline(slot, schedule.grace_seconds)
    old = check.expected_at
    if NextRunCheck.objects.filter(target=target, expected_at=slot).exists():
        return False
    try:
        with transaction.atomic():
            updated = NextRunCheck.objects.filter(
                pk=check.pk, status=NextRunCheck.Status.SCHEDULED, expected_at=old
            ).update(
                expected_at=slot,
                deadline_at=deadline,
                window_start=window_start,
                window_end=window_end,
                updated_at=timezone.now(),
            )
            if not updated:
                return False
            check.expected_at, check.deadline_at = slot, deadline
            check.window_start, check.window_end = window_start, window_end
            policy = (
                f"missed runs {job.missed_run_policy}"
                if job.missed_run_policy == Job.MissedRunPolicy.LATEST_ONLY
                else f"overlap {job.overlap_policy}"
            )
            check_event_record(
                check,
                kind=TimelineEvent.Kind.NEXT_RUN_CHECK_MOVED,
                summary=f"Next-run check moved: the slot {local_text(old, schedule.timezone)} ({utc_text(old)}) "
                f"was skipped under the policy '{policy}', so it is not the next normal run; the check now "
                f"follows the slot that ran, {local_text(slot, schedule.timezone)} ({utc_text(slot)}), "
                f"deadline {utc_text(deadline)}",
                occurred_at=now,
                data={"from_slot": old.isoformat(), "to_slot": slot.isoformat(), "policy": policy},
            )
    except IntegrityError:  # a concurrent request created the check for that slot first
        return False
    return True

"""Overlap: an attempt starts while an earlier run of the same job, tenant and environment is
still running (called by the attempt service)."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from runs.attempts.models import Attempt
from runs.catalog.models import Job
from runs.checks.events import utc_text
from runs.timeline.models import TimelineEvent
from runs.timeline.services import timeline_event_record

OVERLAP_PERMITTED = {Job.OverlapPolicy.ALLOW, Job.OverlapPolicy.REPLACE}
OVERLAP_WORDS = {
    Job.OverlapPolicy.ALLOW: "allows overlapping runs",
    Job.OverlapPolicy.REPLACE: "replaces the running run (it should be stopped now)",
    Job.OverlapPolicy.SKIP: "skips a run while another is running: this start is a breach",
    Job.OverlapPolicy.QUEUE: "queues a run until the running one ends: this start is a breach",
}


def attempt_overlap_record(*, attempt: Attempt, occurred_at: datetime | None = None) -> list[TimelineEvent]:
    """Record an overlap when ``attempt`` starts while an earlier run of its job, tenant and environment runs.

    Called by the attempt service when an attempt becomes ``running``. For each earlier run (by
    window) with a running attempt, one event goes on each timeline (``overlap_detected``, or
    ``overlap_breach`` when the job's overlap policy ``skip`` or ``queue`` forbids it), naming the
    other run and whether the policy permits it. Returns the events (none without overlap).
    Must run inside the attempt's transaction.
    """
    run = attempt.run
    active = list(
        Attempt.objects.filter(
            run__job_id=run.job_id,
            run__tenant_id=run.tenant_id,
            run__environment=run.environment,
            run__window_start__lt=run.window_start,
            status=Attempt.Status.RUNNING,
        )
        .exclude(run_id=run.pk)
        .select_related("run")
        .order_by("run__window_start", "number", "id")
    )
    if not active:
        return []
    job = run.job
    policy = Job.OverlapPolicy(job.overlap_policy)
    permitted = policy in OVERLAP_PERMITTED
    kind = TimelineEvent.Kind.OVERLAP_DETECTED if permitted else TimelineEvent.Kind.OVERLAP_BREACH
    at = occurred_at or attempt.started_at or timezone.now()
    events: list[TimelineEvent] = []
    seen: set[int] = set()
    for other in active:
        if other.run_id in seen:
            continue
        seen.add(other.run_id)
        data = {
            "policy": policy.value,
            "is_permitted": permitted,
            "is_breach": not permitted,
            "started_run": str(run.public_id),
            "started_attempt": str(attempt.public_id),
            "active_run": str(other.run.public_id),
            "active_attempt": str(other.public_id),
        }
        verdict = f"overlap policy '{policy.value}' {OVERLAP_WORDS[policy]}"
        events.append(
            timeline_event_record(
                job=job,
                tenant=run.tenant,
                run=run,
                attempt=attempt,
                kind=kind,
                summary=f"Attempt {attempt.number} started while attempt {other.number} of the run for "
                f"{utc_text(other.run.window_start)}–{utc_text(other.run.window_end)} is still running; {verdict}",
                occurred_at=at,
                data=data,
            )
        )
        events.append(
            timeline_event_record(
                job=job,
                tenant=run.tenant,
                run=other.run,
                attempt=other,
                kind=kind,
                summary=f"While attempt {other.number} was still running, attempt {attempt.number} of the run for "
                f"{utc_text(run.window_start)}–{utc_text(run.window_end)} started; {verdict}",
                occurred_at=at,
                data=data,
            )
        )
    return events

"""Pausing and resuming a job: a job-level state that blocks replays and shows wherever the job appears."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from handover.core.errors import DomainError, Forbidden
from runs.catalog.models import Job
from runs.permissions import may_pause_job
from runs.timeline.models import TimelineEvent
from runs.timeline.services import timeline_event_record


def job_pause(*, job: Job, actor: AbstractBaseUser, reason: str) -> Job:
    """Pause ``job``: record the reason, who and when, and write a job-level ``job_paused`` timeline event.

    The UPDATE is guarded on the job not being paused, so pausing a paused job changes nothing and
    returns it as it is (the first pause, its reason and actor stay). ``reason`` is required
    (``DomainError``, 400). While paused, no replay is dispatched (rule 3 in docs/architecture.md) and the
    missed-run sweep skips the job's targets. Returns the job with the pause fields set.
    """
    if not may_pause_job(user=actor, job=job):
        raise Forbidden("Only the job's technical owners and admins pause or resume the whole job.")
    reason = (reason or "").strip()
    if not reason:
        raise DomainError("Say why the job is paused.", errors={"reason": ["This field is required."]})
    now = timezone.now()
    with transaction.atomic():
        updated = Job.objects.filter(pk=job.pk, paused_at__isnull=True).update(
            paused_at=now, paused_by=actor, pause_reason=reason[:2000], updated_at=now
        )
        if updated:
            timeline_event_record(
                job=job,
                kind=TimelineEvent.Kind.JOB_PAUSED,
                summary=f"Job {job.key} paused by {actor.get_username()}: {reason}",
                occurred_at=now,
                actor=actor,
                data={"reason": reason},
            )
    job.refresh_from_db(fields=["paused_at", "paused_by", "pause_reason", "updated_at"])
    return job


def job_resume(*, job: Job, actor: AbstractBaseUser, note: str = "") -> Job:
    """Resume a paused ``job``: clear the pause and write a job-level ``job_resumed`` timeline event.

    Guarded on the job being paused: resuming a running job changes nothing and returns it.
    ``note`` (optional) goes into the event. Returns the job with the pause fields cleared.
    """
    if not may_pause_job(user=actor, job=job):
        raise Forbidden("Only the job's technical owners and admins pause or resume the whole job.")
    note = (note or "").strip()
    now = timezone.now()
    with transaction.atomic():
        previous = Job.objects.filter(pk=job.pk).values("paused_at", "pause_reason").first() or {}
        updated = Job.objects.filter(pk=job.pk, paused_at__isnull=False).update(
            paused_at=None, paused_by=None, pause_reason="", updated_at=now
        )
        if updated:
            timeline_event_record(
                job=job,
                kind=TimelineEvent.Kind.JOB_RESUMED,
                summary=f"Job {job.key} resumed by {actor.get_username()}" + (f": {note}" if note else ""),
                occurred_at=now,
                actor=actor,
                data={
                    "note": note,
                    "paused_reason": previous.get("pause_reason", ""),
                    "paused_at": previous["paused_at"].isoformat() if previous.get("paused_at") else None,
                },
            )
    job.refresh_from_db(fields=["paused_at", "paused_by", "pause_reason", "updated_at"])
    return job

"""Pausing and resuming a job or one target of it (docs/architecture.md "Roles and permissions").

A job-wide pause (every tenant it runs for) is its technical owners' or an admin's
(``may_pause_job``); support pauses a target, its tenant's part of the job (``may_pause_target``).
While either is paused no replay of the target's runs is dispatched (rule 3) and the missed-run
sweep skips the target; fire times before the resume are never counted missed. Every refusal
comes from here: NotFound (404) for what the person may not see, Forbidden (403) for what they
may see but not pause.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from handover.core.errors import DomainError, Forbidden, NotFound
from handover.core.people import Person
from runs.catalog.models import Job, JobTarget
from runs.catalog.selectors import job_list_visible
from runs.permissions import may_pause_job, may_pause_target, may_read_target
from runs.timeline.models import TimelineEvent
from runs.timeline.services import timeline_event_record


def job_pause(*, job: Job, actor: Person, reason: str) -> Job:
    """Pause ``job``: record the reason, who and when, and write a job-level ``job_paused`` timeline event.

    The UPDATE is guarded on the job not being paused, so pausing a paused job changes nothing and
    returns it as it is (the first pause, its reason and actor stay). ``reason`` is required
    (``DomainError``, 400). While paused, no replay is dispatched (rule 3 in docs/architecture.md) and the
    missed-run sweep skips the job's targets. Returns the job with the pause fields set.
    """
    _require_pause_job(actor=actor, job=job)
    reason = _reason(reason, what="the job")
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


def _require_pause_job(*, actor: Person, job: Job) -> None:
    """Refuse unless ``actor`` may pause ``job`` as a whole: NotFound if they may not see it, else Forbidden."""
    if may_pause_job(user=actor, job=job):
        return
    if not job_list_visible(user=actor).filter(pk=job.pk).exists():
        raise NotFound("No such job.")
    raise Forbidden("Only the job's technical owners and admins pause or resume the whole job.")


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _reason(reason: str, *, what: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise DomainError(f"Say why {what} is paused.", errors={"reason": ["This field is required."]})
    return reason[:2000]


def job_resume(*, job: Job, actor: Person, note: str = "") -> Job:
    """Resume a paused ``job``: clear the pause and write a job-level ``job_resumed`` timeline event.

    Guarded on the job being paused: resuming a running job changes nothing and returns it.
    ``note`` (optional) goes into the event. Returns the job with the pause fields cleared.
    """
    _require_pause_job(actor=actor, job=job)
    note = (note or "").strip()
    now = timezone.now()
    with transaction.atomic():
        previous: Mapping[str, Any] = Job.objects.filter(pk=job.pk).values("paused_at", "pause_reason").first() or {}
        updated = Job.objects.filter(pk=job.pk, paused_at__isnull=False).update(
            paused_at=None, paused_by=None, pause_reason="", resumed_at=now, updated_at=now
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
                    "paused_at": _iso(previous.get("paused_at")),
                },
            )
    job.refresh_from_db(fields=["paused_at", "paused_by", "pause_reason", "updated_at"])
    return job


# --- a target: its tenant's part of the job ----------------------------------------------------------

TARGET_PAUSE_FIELDS = ["paused_at", "paused_by", "pause_reason", "resumed_at", "updated_at"]


def _require_pause_target(*, actor: Person, target: JobTarget) -> None:
    """Refuse unless ``actor`` may pause ``target``: NotFound if they may not see it, else Forbidden."""
    if may_pause_target(user=actor, target=target):
        return
    if not may_read_target(user=actor, target=target):
        raise NotFound("No such target.")
    raise Forbidden("Only support on this tenant, the job's technical owners and admins pause or resume a target.")


def _target_words(target: JobTarget) -> str:
    return f"{target.job.key} for {target.tenant.slug} ({target.environment})"


def target_pause(*, target: JobTarget, actor: Person, reason: str) -> JobTarget:
    """Pause ``target`` (its tenant's part of the job): record the reason, who and when, and write a
    ``target_paused`` event on the job's timeline for the target's tenant.

    Who: support on the target's tenant, the job's technical owners, admins (``may_pause_target``);
    NotFound (404) for a target the actor may not see, Forbidden (403) for one they may only read.
    ``reason`` is required (DomainError, 400). Guarded on the target not being paused: pausing a
    paused target changes nothing (the first pause, its reason and actor stay). While paused, no
    replay of its runs is dispatched and the missed-run sweep skips it. Returns the target reloaded.
    """
    _require_pause_target(actor=actor, target=target)
    reason = _reason(reason, what="the target")
    now = timezone.now()
    with transaction.atomic():
        updated = JobTarget.objects.filter(pk=target.pk, paused_at__isnull=True).update(
            paused_at=now, paused_by=actor, pause_reason=reason, updated_at=now
        )
        if updated:
            timeline_event_record(
                job=target.job,
                tenant=target.tenant,
                kind=TimelineEvent.Kind.TARGET_PAUSED,
                summary=f"{_target_words(target)} paused by {actor.get_username()}: {reason}",
                occurred_at=now,
                actor=actor,
                data={"target": str(target.public_id), "environment": target.environment, "reason": reason},
            )
    target.refresh_from_db(fields=TARGET_PAUSE_FIELDS)
    return target


def target_resume(*, target: JobTarget, actor: Person, note: str = "") -> JobTarget:
    """Resume a paused ``target``: clear the pause, set ``resumed_at`` (fire times before it are never
    counted missed) and write a ``target_resumed`` event on the job's timeline for its tenant.

    Who and errors as ``target_pause``. Guarded on the target being paused: resuming a target that
    is not paused changes nothing. ``note`` (optional) goes into the event. Returns the target reloaded.
    """
    _require_pause_target(actor=actor, target=target)
    note = (note or "").strip()[:2000]
    now = timezone.now()
    with transaction.atomic():
        previous: Mapping[str, Any] = (
            JobTarget.objects.filter(pk=target.pk).values("paused_at", "pause_reason").first() or {}
        )
        updated = JobTarget.objects.filter(pk=target.pk, paused_at__isnull=False).update(
            paused_at=None, paused_by=None, pause_reason="", resumed_at=now, updated_at=now
        )
        if updated:
            timeline_event_record(
                job=target.job,
                tenant=target.tenant,
                kind=TimelineEvent.Kind.TARGET_RESUMED,
                summary=f"{_target_words(target)} resumed by {actor.get_username()}" + (f": {note}" if note else ""),
                occurred_at=now,
                actor=actor,
                data={
                    "target": str(target.public_id),
                    "environment": target.environment,
                    "note": note,
                    "paused_reason": previous.get("pause_reason", ""),
                    "paused_at": _iso(previous.get("paused_at")),
                },
            )
    target.refresh_from_db(fields=TARGET_PAUSE_FIELDS)
    return target

"""Jobs and targets a person may see or act on, and a target's outages under its missed-run policy."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from django.db.models import Count, F, Prefetch, Q, QuerySet

from runs.attempts.models import Attempt, Run
from runs.catalog.models import Integration, Job, JobTarget, RunnerCredential, SideEffect
from runs.checks.schedule.cron import ScheduleError
from runs.checks.schedule.deadlines import missed_slots
from runs.permissions import User, is_admin, job_list_owned, tenant_list_visible


def target_list_visible(*, user: User, job: Job | None = None) -> QuerySet[JobTarget]:
    """Active and inactive targets ``user`` may see (optionally of one job), with job and tenant joined."""
    targets = JobTarget.objects.all()
    if not is_admin(user):
        tenants = tenant_list_visible(user=user).values("pk")
        jobs = job_list_owned(user=user).values("pk")
        targets = targets.filter(Q(tenant__in=tenants) | Q(job__in=jobs))
    if job is not None:
        targets = targets.filter(job=job)
    return targets.select_related("job", "tenant").order_by("job__key", "tenant__slug_key", "environment")


def target_get(*, user: User, public_id: UUID | str) -> JobTarget | None:
    """One target ``user`` may see, with job, tenant and who paused it joined (None when missing or not visible)."""
    return target_list_visible(user=user).select_related("paused_by").filter(public_id=public_id).first()


def job_list_visible(*, user: User) -> QuerySet[Job]:
    """Jobs ``user`` owns technically, or that run for a tenant they hold a role on."""
    if not user.is_authenticated:
        return Job.objects.none()
    if is_admin(user):
        return Job.objects.order_by("key")
    tenants = tenant_list_visible(user=user).values("pk")
    jobs = job_list_owned(user=user).values("pk")
    return (
        Job.objects.filter(
            Q(pk__in=jobs)
            | Q(pk__in=JobTarget.objects.filter(tenant__in=tenants).values("job_id"))
            | Q(pk__in=Run.objects.filter(tenant__in=tenants).values("job_id"))
        )
        .annotate(target_count=Count("targets", distinct=True))
        .order_by("key")
    )


def job_get(*, user: User, public_id: UUID | str) -> Job | None:
    """One job ``user`` may see (None when missing or not visible)."""
    return job_list_visible(user=user).filter(public_id=public_id).first()


@dataclass(frozen=True)
class Outage:
    """Consecutive fire times of a target that did not run on time, and what the missed-run policy did.

    All instants UTC. ``covered``: slots a catch-up (or late) run reported on; ``awaiting``: missed
    slots the policy says a catch-up run will cover; ``omitted``: missed slots the policy leaves out
    (nobody will run them); ``policy`` names the job's missed-run policy.
    """

    slots: tuple[datetime, ...]
    covered: tuple[datetime, ...]
    awaiting: tuple[datetime, ...]
    omitted: tuple[datetime, ...]
    policy: str


def target_outage_list(*, target: JobTarget, now: datetime, days: int = 30, limit: int = 5) -> list[Outage]:
    """The target's outages of the last ``days``, newest first: runs ``missed`` or only run by catch-up.

    For each outage, the job's missed-run policy (``missed_slots``) is applied from the
    last run before it to the moment the scheduler came back (the first catch-up start, else the
    next on-time run, else ``now``), which splits the still-missed slots into awaiting catch-up and
    omitted. Queries: two (runs, their attempts).
    """
    job = target.job
    runs = list(
        Run.objects.filter(
            job_id=target.job_id,
            tenant_id=target.tenant_id,
            environment=target.environment,
            scheduled_for__gte=now - timedelta(days=days),
            scheduled_for__lte=now,
        )
        .prefetch_related(Prefetch("attempts", queryset=Attempt.objects.order_by("number", "id")))
        .order_by("scheduled_for", "id")
    )
    groups: list[tuple[Run | None, list[Run], Run | None]] = []
    before: Run | None = None
    current: list[Run] = []
    for run in runs:
        attempts = list(run.attempts.all())
        late = bool(attempts) and all(a.trigger == Attempt.Trigger.CATCH_UP for a in attempts)
        if run.status == Run.Status.MISSED or late:
            if not current:
                group_before = before
            current.append(run)
            continue
        if current:
            groups.append((group_before, current, run))
            current = []
        before = run
    if current:
        groups.append((group_before, current, None))

    cron = target.schedule_override or job.schedule
    zone = target.timezone_override or job.timezone
    policies: dict[str, Any] = {
        "dst_gap": target.dst_gap_override or job.dst_gap_policy,
        "dst_overlap": target.dst_overlap_override or job.dst_overlap_policy,
    }
    outages: list[Outage] = []
    for group_before, group, after in reversed(groups[-limit:]):
        slots = [r.scheduled_for for r in group if r.scheduled_for]
        catch_up_starts = [
            a.started_at or a.created_at
            for r in group
            for a in r.attempts.all()
            if a.trigger == Attempt.Trigger.CATCH_UP
        ]
        back_at = min(catch_up_starts) if catch_up_starts else (after.scheduled_for if after else now)
        last = group_before.scheduled_for if group_before and group_before.scheduled_for else None
        try:
            plan = missed_slots(
                cron,
                zone,
                last or (slots[0] - timedelta(seconds=1)),
                back_at or now,
                policy=job.missed_run_policy,
                expire_after_seconds=job.missed_run_expire_after_seconds,
                **policies,
            )
            to_run = {s.astimezone(UTC) for s in plan.to_run}
        except ScheduleError:
            to_run = set(slots)
        reported = {r.scheduled_for for r in group if list(r.attempts.all())}
        missing = [s for s in slots if s not in reported]
        outages.append(
            Outage(
                slots=tuple(slots),
                covered=tuple(s for s in slots if s in reported),
                awaiting=tuple(s for s in missing if s in to_run),
                omitted=tuple(s for s in missing if s not in to_run),
                policy=job.missed_run_policy,
            )
        )
    return outages


# least safe first: a job's repeat safety is that of its least safe side effect
REPEAT_SAFETY_ORDER = (
    SideEffect.RepeatSafety.UNKNOWN,
    SideEffect.RepeatSafety.NOT_IDEMPOTENT,
    SideEffect.RepeatSafety.IDEMPOTENT_WITH_KEY,
    SideEffect.RepeatSafety.IDEMPOTENT,
)


def job_repeat_safety(side_effects: list[SideEffect]) -> str:
    """The least safe repeat safety of ``side_effects``; ``unknown`` when the job lists none."""
    if not side_effects:
        return SideEffect.RepeatSafety.UNKNOWN
    return min((s.repeat_safety for s in side_effects), key=REPEAT_SAFETY_ORDER.index)


def runner_credential_list(*, job: Job) -> QuerySet[RunnerCredential]:
    """``job``'s runner credentials, unrevoked first, newest first, with their creator loaded."""
    return (
        RunnerCredential.objects.filter(job=job)
        .select_related("created_by", "job")
        .order_by(F("revoked_at").desc(nulls_first=True), "-created_at", "-id")
    )


def job_list(*, user: User, search: str | None = None, paused: bool | None = None) -> QuerySet[Job]:
    """Jobs ``user`` may see (``job_list_visible``), ordered by key, with the pausing person joined.

    ``search``: the key or the name starts with it, ignoring case. ``paused``: True keeps paused jobs,
    False the others, None both.
    """
    jobs = job_list_visible(user=user).select_related("paused_by")
    if search:
        jobs = jobs.filter(Q(key__istartswith=search) | Q(name__istartswith=search))
    if paused is not None:
        jobs = jobs.filter(paused_at__isnull=not paused)
    return jobs


def integration_edit_values(integration: Integration) -> dict[str, Any]:
    """What the API's writes of an integration can change, for its ``ETag``
    (``handover.core.edits.edit_etag``): ``name``, ``is_active`` and the whole ``settings`` (free JSON: the
    mapping, transport, conventions and security all live there). Reads the row only (no query)."""
    return {"name": integration.name, "is_active": integration.is_active, "settings": integration.settings}

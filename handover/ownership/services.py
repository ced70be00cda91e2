"""Writing ownership and sending the reminder ladder of aged work (docs/ownership.md).

``job_ownership_set`` / ``target_ownership_set`` name a job's (or a target's) owning team and
escalation owner, each with an ``ownership_changed`` timeline event. ``aged_work_escalate`` (the beat
task's body) finds aged items whose next ladder step is due and sends each step once: the
``AgedWorkEscalation`` row is inserted unless its (kind, subject, since, step) is taken, and only the
inserting transaction writes the ``aged_work_escalated`` timeline event and the notifications.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from guardian.shortcuts import get_users_with_perms

from handover.core.edits import edit_merge, edit_precondition
from handover.core.errors import DomainError, Forbidden, NotFound
from handover.core.people import Person
from handover.core.rows import row_insert_unless_conflict
from handover.handovers.models import Handover
from handover.handovers.selectors import handover_visibility_filter
from handover.notifications.models import Notification, Team
from handover.notifications.services import notify
from handover.ownership.models import AgedWorkEscalation, JobOwnership, TargetOwnership
from handover.ownership.selectors import AgedItem, aged_work_list
from handover.templatetags.handover_tags import seconds_in_words
from runs.attempts.models import Run
from runs.catalog.models import Job, JobTarget, Tenant
from runs.checks.models import NextRunCheck
from runs.permissions import (
    TECHNICAL_OWNER_CODENAME,
    may_manage_job_ownership,
    may_read_target,
    run_visibility_filter,
)
from runs.timeline.models import TimelineEvent
from runs.timeline.services import timeline_event_record

logger = logging.getLogger(__name__)


def _require_manage(*, actor: Person, job: Job) -> None:
    if not may_manage_job_ownership(user=actor, job=job):
        raise Forbidden("Only the job's technical owners and admins name its owning team and escalation owner.")


def _check_person(person: Person | None) -> None:
    if person is not None and not person.is_active:
        raise DomainError(
            "The escalation owner must be an active person.",
            errors={"escalation_owner": ["The escalation owner must be an active person."]},
        )


def _words(team: Team | None, person: Person | None) -> str:
    return f"team {team.name if team else '(none)'}, escalation owner {person.get_username() if person else '(none)'}"


def ownership_values(row: JobOwnership | TargetOwnership | None) -> dict[str, str | None]:
    """A job's or target's own owners as an ownership form's base (``handover.core.edits``): ``team`` (its
    public id) and ``escalation_owner`` (the username), None where unset or there is no row. Also what the
    ownership's ``ETag`` is computed from (``edit_etag``), in the API's answer and under the row's lock."""
    if row is None:
        return {"team": None, "escalation_owner": None}
    return {
        "team": str(row.team.public_id) if row.team is not None else None,
        "escalation_owner": row.escalation_owner.get_username() if row.escalation_owner is not None else None,
    }


def _owners_merge(
    row: JobOwnership | TargetOwnership | None,
    team: Team | None,
    escalation_owner: Person | None,
    based_on: Mapping[str, str | None] | None,
    what: str,
) -> tuple[Team | None, Person | None]:
    """The team and escalation owner to store on ``row`` (locked), leaving what someone else set meanwhile
    and this person left as shown (``edit_merge``; raises ``EditedMeanwhile`` when both changed one)."""
    posted = {
        "team": str(team.public_id) if team is not None else None,
        "escalation_owner": escalation_owner.get_username() if escalation_owner is not None else None,
    }
    kept = edit_merge(
        posted=posted,
        based_on=based_on,
        current=ownership_values(row),
        labels={"team": "the owning team", "escalation_owner": "the escalation owner"},
        what=what,
    )
    return (
        team if "team" in kept or row is None else row.team,
        escalation_owner if "escalation_owner" in kept or row is None else row.escalation_owner,
    )


def job_ownership_set(
    *,
    actor: Person,
    job: Job,
    team: Team | None,
    escalation_owner: Person | None,
    at: datetime | None = None,
    based_on: Mapping[str, str | None] | None = None,
    if_match: str | None = None,
) -> JobOwnership:
    """Name ``job``'s owning team and escalation owner (None clears either); returns the row.

    ``at`` (UTC; default now) is when it was set (the demo passes fixed dates). ``based_on``: the owners
    the form showed (``ownership_values``): one left as shown keeps what someone else set meanwhile,
    one both changed raises ``EditedMeanwhile`` (409, ``handover.core.edits``); None sets both.
    ``if_match``: the API's ``If-Match`` header (None: none), compared with the ``ETag`` of the job's own
    owners (``ownership_values``) under the lock: any change since refuses the write with PreconditionFailed
    (412), nothing written (``edit_precondition``). Raises Forbidden (403) unless ``actor`` is an admin or a
    technical owner of the job (``may_manage_job_ownership``), and DomainError for an inactive escalation
    owner. Side effects: the JobOwnership row and, when something changed, one ``ownership_changed`` event
    on the job's timeline.
    """
    _require_manage(actor=actor, job=job)
    _check_person(escalation_owner)
    at = at or timezone.now()
    with transaction.atomic():
        # the job's row first: with no ownership row yet there is nothing else to lock, and two first writes
        # (each checking If-Match against "nothing set") would both pass
        Job.objects.select_for_update().filter(pk=job.pk).values_list("pk").first()
        row = JobOwnership.objects.select_for_update().filter(job=job).first()
        edit_precondition(if_match=if_match, current=ownership_values(row), what=f"the ownership of job {job.key}")
        team, escalation_owner = _owners_merge(row, team, escalation_owner, based_on, f"job {job.key}")
        before = (row.team_id, row.escalation_owner_id) if row is not None else (None, None)
        after = (team.pk if team else None, escalation_owner.pk if escalation_owner else None)
        if row is None:
            row = JobOwnership(job=job)
        elif before == after:
            return row
        row.team, row.escalation_owner_id, row.set_by_id, row.set_at = team, after[1], actor.pk, at
        row.save()
        timeline_event_record(
            job=job,
            kind=TimelineEvent.Kind.OWNERSHIP_CHANGED,
            summary=f"Job ownership set: {_words(team, escalation_owner)}",
            occurred_at=at,
            actor=actor,
            data={"team": team.name if team else None, "escalation_owner": after[1]},
        )
    return row


def target_ownership_set(
    *,
    actor: Person,
    target: JobTarget,
    team: Team | None,
    escalation_owner: Person | None,
    at: datetime | None = None,
    based_on: Mapping[str, str | None] | None = None,
    if_match: str | None = None,
) -> TargetOwnership:
    """Name ``target``'s own owning team and escalation owner (None falls back to the job's); returns the row.

    Same rules, ``based_on``, ``if_match`` (against the target's own owners) and errors as
    ``job_ownership_set`` (the target's job decides who may; a target the actor may not see raises
    NotFound). Side effects: the TargetOwnership row and, when something changed, one ``ownership_changed``
    event on the job's timeline with the target's tenant.
    """
    if not may_read_target(user=actor, target=target):
        raise NotFound("No such target.")
    _require_manage(actor=actor, job=target.job)
    _check_person(escalation_owner)
    at = at or timezone.now()
    with transaction.atomic():
        # the target's row first, as the job's in ``job_ownership_set``: a first write has no row to lock
        JobTarget.objects.select_for_update().filter(pk=target.pk).values_list("pk").first()
        row = TargetOwnership.objects.select_for_update().filter(target=target).first()
        where = f"{target.tenant.slug} · {target.environment}"
        edit_precondition(if_match=if_match, current=ownership_values(row), what=f"the ownership of {where}")
        team, escalation_owner = _owners_merge(row, team, escalation_owner, based_on, where)
        before = (row.team_id, row.escalation_owner_id) if row is not None else (None, None)
        after = (team.pk if team else None, escalation_owner.pk if escalation_owner else None)
        if row is None:
            row = TargetOwnership(target=target)
        elif before == after:
            return row
        row.team, row.escalation_owner_id, row.set_by_id, row.set_at = team, after[1], actor.pk, at
        row.save()
        timeline_event_record(
            job=target.job,
            tenant=target.tenant,
            kind=TimelineEvent.Kind.OWNERSHIP_CHANGED,
            summary=f"Ownership of {target.tenant.slug} · {target.environment} set: {_words(team, escalation_owner)}",
            occurred_at=at,
            actor=actor,
            data={"team": team.name if team else None, "escalation_owner": after[1], "target": str(target.public_id)},
        )
    return row


# --- the reminder ladder --------------------------------------------------------------------------


def ladder_steps() -> list[int]:
    """The ladder's ages in seconds, ascending (``HANDOVER_AGED_REMINDER_STEPS_SECONDS``)."""
    return sorted(int(s) for s in settings.HANDOVER_AGED_REMINDER_STEPS_SECONDS)


def ladder_step_due(*, age_seconds: int) -> int:
    """The highest ladder step (1-based) an item of this age has reached; 0 before the first."""
    return sum(1 for step in ladder_steps() if age_seconds >= step)


@dataclass
class SweepResult:
    """What one sweep did: ``aged`` items seen, ``sent`` steps written now, ``taken`` steps another
    sweep had already written."""

    aged: int = 0
    sent: int = 0
    taken: int = 0


def _may_see(person: Person, item: AgedItem) -> bool:
    """Whether ``person`` sees the item itself (a team grants no permission: a member who does not see a
    tenant's run is not told about it). Queries: one, or the guardian checks."""
    if item.kind == AgedWorkEscalation.Kind.STALLED_HANDOVER:
        return Handover.objects.filter(handover_visibility_filter(user=person), public_id=item.subject).exists()
    if item.kind == AgedWorkEscalation.Kind.OVERDUE_CHECK:
        return NextRunCheck.objects.filter(
            run_visibility_filter(user=person, prefix="target__"), public_id=item.subject
        ).exists()
    return item.run_id is not None and Run.objects.filter(run_visibility_filter(user=person), pk=item.run_id).exists()


def _recipients(item: AgedItem) -> list[Person]:
    """The owning team's members and the escalation owner who may see the item; with none of them, the
    job's technical owners."""
    people: list[Person] = []
    if item.owner.team is not None:
        people += list(item.owner.team.members.filter(is_active=True).order_by("pk"))
    if item.owner.escalation_owner is not None:
        people.append(item.owner.escalation_owner)
    people = [person for person in people if _may_see(person, item)]
    if not people:
        owners = cast(
            "QuerySet[Any]",  # guardian answers a list only when asked for attached permissions
            get_users_with_perms(
                item.job, only_with_perms_in=[TECHNICAL_OWNER_CODENAME], with_superusers=False, with_group_users=True
            ),
        )
        people = list(owners.filter(is_active=True).order_by("pk"))
    return people


def aged_item_escalate(*, item: AgedItem, step: int, now: datetime) -> bool:
    """Send ladder step ``step`` (1-based) for ``item`` unless it was sent; True when this call sent it.

    One transaction: the AgedWorkEscalation row (inserted unless its unique key is taken: then
    nothing else happens), one ``aged_work_escalated`` timeline event on the item's run (or its job)
    with the age and the owner, and a notification (event ``aged_work``) to the owning team's members
    and the escalation owner who may see the item -- or, with none of them, to the job's technical
    owners (delivered after
    commit through their channels: in-app, e-mail, chat/push, the team's chat targets included).
    """
    steps = ladder_steps()
    step_seconds = steps[step - 1]
    with transaction.atomic():
        row = AgedWorkEscalation(
            kind=item.kind,
            subject=item.subject,
            since=item.since,
            step=step,
            step_seconds=step_seconds,
            job=item.job,
            team=item.owner.team,
            escalation_owner_id=item.owner.escalation_owner.pk if item.owner.escalation_owner else None,
            sent_at=now,
        )
        if not row_insert_unless_conflict(row):
            return False
        people = _recipients(item)
        owner_words = item.owner.words
        told_whom = owner_words if owner_words != "no owner" else "no owner named: the job's technical owners"
        summary = (
            f"Aged work escalated (reminder {step} of {len(steps)}): {item.kind_label.lower()}, "
            f"{item.age_words} old — {told_whom}"
        )
        run = Run.objects.select_related("tenant").filter(pk=item.run_id).first() if item.run_id else None
        tenant = run.tenant if run is not None else None
        if tenant is None and item.tenant_id is not None:
            tenant = Tenant.objects.filter(pk=item.tenant_id).first()
        timeline_event_record(
            job=item.job,
            tenant=tenant,
            run=run,
            kind=TimelineEvent.Kind.AGED_WORK_ESCALATED,
            summary=summary,
            occurred_at=now,
            data={
                "kind": item.kind,
                "subject": str(item.subject),
                "step": step,
                "age_seconds": item.age_seconds,
                "team": item.owner.team.name if item.owner.team else None,
                "escalation_owner": item.owner.escalation_owner.get_username() if item.owner.escalation_owner else None,
            },
        )
        told = notify(
            event=Notification.Event.AGED_WORK,
            recipients=people,
            dedup_key=f"aged:{item.kind}:{item.subject}:{item.since.isoformat()}:{step}",
            subject=f"Aged {seconds_in_words(step_seconds)}: {item.kind_label.lower()} — {item.title}",
            body=f"{item.detail}. Aged since {item.since:%Y-%m-%d %H:%M}Z ({item.age_words}). Owner: {owner_words}.",
            link=item.url,
        )
        AgedWorkEscalation.objects.filter(pk=row.pk).update(told_count=len(told))
    return True


def aged_work_escalate(*, now: datetime | None = None) -> SweepResult:
    """Beat tick: send each aged item's highest due ladder step that was not sent yet; overlap-safe.

    An item past several steps at once (the beat was down) gets only the highest: one reminder, not
    a burst. Returns the counts. Side effects: per step sent, what ``aged_item_escalate`` writes.
    """
    now = now or timezone.now()
    result = SweepResult()
    for item in aged_work_list(now=now):
        result.aged += 1
        step = ladder_step_due(age_seconds=item.age_seconds)
        if step == 0 or step <= item.last_step:
            continue
        if aged_item_escalate(item=item, step=step, now=now):
            result.sent += 1
        else:
            result.taken += 1
    if result.sent:
        logger.info("aged work: %s reminder(s) sent, %s already sent by another sweep", result.sent, result.taken)
    return result

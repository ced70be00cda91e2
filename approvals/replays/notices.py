"""Who is told about a replay's events, and what: the replay side of the notifications subsystem.

Called by ``replay_event_record`` inside the change's transaction for every replay event; events
that concern nobody (a claim, a rescope) tell nobody. Recipients: the eligible approvers who have
not decided (approval needed); the requester and the approvers who decided (approved, rejected,
completed, failed); plus the job's technical owners when a dispatch happens or lapses.
"""

from __future__ import annotations

from django.urls import reverse

from approvals.replays.models import Approval, ReplayRequest
from handover.core.people import Person
from handover.core.time_format import window_text
from handover.notifications.services import notify
from handover.notifications.told import Told
from runs.permissions import approvers_eligible
from runs.timeline.models import TimelineEvent

EVENT_FOR_KIND: dict[str, str] = {
    TimelineEvent.Kind.REPLAY_REQUESTED: "approval_needed",
    TimelineEvent.Kind.REPLAY_APPROVED: "replay_approved",
    TimelineEvent.Kind.REPLAY_REJECTED: "replay_rejected",
    TimelineEvent.Kind.REPLAY_DISPATCHED: "replay_dispatched",
    TimelineEvent.Kind.REPLAY_DISPATCH_UNKNOWN: "dispatch_lapsed",
    TimelineEvent.Kind.REPLAY_COMPLETED: "replay_completed",
    TimelineEvent.Kind.REPLAY_FAILED: "replay_failed",
}


def replay_approvers_waiting(*, request: ReplayRequest) -> list[Person]:
    """The eligible approvers of each approval kind nobody has given yet, who have not decided (requester excluded)."""
    live = list(Approval.objects.filter(request=request, voided_at__isnull=True).values_list("kind", "actor_id"))
    decided_kinds = {k for k, _ in live}
    decided_people = {a for _, a in live}
    found: dict[int, Person] = {}
    for kind in Approval.Kind:
        if kind.value in decided_kinds:
            continue
        for user in approvers_eligible(run=request.run, kind=kind, exclude=request.requested_by):
            if user.pk not in decided_people:
                found[user.pk] = user
    return list(found.values())


def _deciders(request: ReplayRequest) -> list[Person]:
    return [a.actor for a in Approval.objects.filter(request=request).select_related("actor").order_by("pk")]


def _technical_owners(request: ReplayRequest) -> list[Person]:
    # the job's technical owners, held explicitly (runs.permissions: the technical approvers of its runs)
    return list(approvers_eligible(run=request.run, kind=Approval.Kind.TECHNICAL).order_by("pk"))


def replay_notices_send(*, request: ReplayRequest, kind: str, summary: str, reminder: str = "") -> list[Told]:
    """Tell the people concerned about the replay event ``kind`` (a timeline kind); returns who was told how.

    ``reminder`` (a stamp such as the reminder's time) makes a reminder a new notification of its own.
    Call inside the change's transaction.
    """
    event = EVENT_FOR_KIND.get(kind)
    if event is None:
        return []
    run = request.run
    if event == "approval_needed":
        people = replay_approvers_waiting(request=request)
    else:
        people = [request.requested_by, *_deciders(request)]
        if event in ("replay_dispatched", "dispatch_lapsed"):
            people += _technical_owners(request)
    subjects = {
        "approval_needed": "Replay waiting for your approval",
        "replay_approved": "Replay approved",
        "replay_rejected": "Replay rejected",
        "replay_dispatched": "Replay dispatched to the job's runner",
        "dispatch_lapsed": "Replay dispatch lapsed: a person decides",
        "replay_completed": "Replay completed",
        "replay_failed": "Replay failed",
    }
    subject = f"{subjects[event]}: {run.job.key} · {run.tenant.slug} · {request.item_count} item(s)"
    body = (
        f"{summary}\n\nRun: {run.job.key} for {run.tenant.slug} ({run.environment}), window "
        f"{window_text(run.window_start, run.window_end, run.job.timezone)}. Reason: {request.reason}"
    )
    return notify(
        event=event,
        recipients=people,
        dedup_key=f"replay:{request.public_id}" + (f":reminder:{reminder}" if reminder else ""),
        subject=subject,
        body=body,
        link=reverse("approvals:replay-detail", kwargs={"id": request.public_id}),
        job_key=run.job.key,
        tenant_slug=run.tenant.slug,
    )

"""Telling people about a handover, through the notifications subsystem (``handover.notifications``).

``handover_notifications_create`` tells the escalation owner, inside the caller's transaction: a
handover handed over to them (``handed_over``) or reopened while they own it (``escalation``), on
the channels they chose (in-app, e-mail, chat/push through Apprise). Once per handover, reason and
person (a unique constraint); delivery happens after commit.
"""

from __future__ import annotations

from django.urls import reverse

from handover.core.people import Person
from handover.handovers.models import Handover
from handover.notifications.services import notify
from handover.notifications.told import Told


def handover_message(handover: Handover) -> str:
    """The plain text announcing ``handover``: status and its three sections (redacted by ``notify``)."""
    owner = handover.escalation_owner.get_username() if handover.escalation_owner is not None else "nobody yet"
    lines = [f"Escalation owner: {owner}.", f"Status: {handover.get_status_display()}"]
    if handover.status == Handover.Status.RECOVERING and handover.reopen_reason:
        lines.append(f"Reopened: {handover.reopen_reason}")
    lines += [
        "",
        "What is safe to do next:",
        handover.next_action or "—",
        "",
        "What definitely happened:",
        handover.definitely_happened or "—",
        "",
        "What may have happened:",
        handover.may_have_happened or "—",
    ]
    if handover.business_impact:
        lines += ["", "Business impact:", handover.business_impact]
    if handover.deadlines:
        lines += ["", "Deadlines:", handover.deadlines]
    return "\n".join(lines)


def handover_notifications_create(*, handover: Handover, reason: str, recipient: Person | None) -> list[Told]:
    """Tell ``recipient`` (the escalation owner) about ``handover``; returns who was told how.

    ``reason``: ``handed_over`` (event ``handed_over``) or ``reopened_<n>`` (event ``escalation``, once
    per reopening). Must run inside the transaction of the change it announces.
    """
    if recipient is None:
        return []
    event = "handed_over" if reason == "handed_over" else "escalation"
    subject = (
        f"Handed over to you: {handover.title}" if event == "handed_over" else f"Reopened, you own it: {handover.title}"
    )
    tenants = {link.run.tenant.slug for link in handover.links.select_related("run__tenant")}
    return notify(
        event=event,
        recipients=[recipient],
        dedup_key=f"handover:{handover.public_id}:{reason}",
        subject=subject,
        body=handover_message(handover),
        link=reverse("handover:handover-detail", kwargs={"id": handover.public_id}),
        job_key=handover.job.key,
        tenant_slug=tenants.pop() if len(tenants) == 1 else "",
    )

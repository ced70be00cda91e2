"""What every channel shares: the outcome type, the two error kinds and the message text."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.urls import reverse

from handover.handovers.models import Handover
from runs.alerts.redaction import redact_text


@dataclass(frozen=True)
class Delivered:
    """What the channel answered: an HTTP status and at most 4 KiB of body (empty for e-mail)."""

    status: int | None = None
    body: str = ""


class TransientError(Exception):
    """Worth retrying: a timeout, a connection error, a 5xx answer, an SMTP hiccup."""


class PermanentError(Exception):
    """Not worth retrying: a 4xx answer, a refused address, a target that is not allowed."""


def handover_url(handover: Handover) -> str:
    """The absolute link to the handover page (``HANDOVER_BASE_URL`` + the page's path)."""
    path = reverse("handover:handover-detail", kwargs={"id": handover.public_id})
    return settings.HANDOVER_BASE_URL.rstrip("/") + path


def handover_message(handover: Handover) -> tuple[str, str]:
    """Subject and plain text announcing ``handover`` to its escalation owner.

    Uses only the handover's own fields and its job (already loaded); free text is redacted again
    (rule 8 in docs/architecture.md), and nothing beyond names and the handover's sections is included.
    """
    owner = handover.escalation_owner.get_username() if handover.escalation_owner_id else "nobody yet"
    subject = f"[Handover] {handover.title}"
    lines = [
        f"You are the escalation owner of this handover ({owner}).",
        f"Status: {handover.get_status_display()}",
        f"Open it: {handover_url(handover)}",
    ]
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
    return subject, redact_text("\n".join(lines))

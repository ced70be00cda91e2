"""Who was told about an event and how, in words a page can show (never "told" when nobody could be)."""

from __future__ import annotations

from dataclasses import dataclass, field

from handover.notifications.events import CHANNEL_WORDS
from handover.notifications.models import Notification


@dataclass
class Told:
    """Who was told about an event and how: ``channels`` reached (or queued), ``missing`` the reasons
    a selected channel cannot deliver (shown, never hidden)."""

    username: str
    channels: list[str] = field(default_factory=list)
    queued: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def words(self) -> str:
        """``bea (in-app, e-mail)`` or ``bea (in-app; e-mail not deliverable: no verified address)``."""
        parts = [CHANNEL_WORDS[c] for c in self.channels] + [f"{CHANNEL_WORDS[c]} being sent" for c in self.queued]
        text = ", ".join(parts) or "no channel"
        if self.missing:
            text += "; " + "; ".join(self.missing)
        return f"{self.username} ({text})"


def told_sentence(told: list[Told], *, nobody: str) -> str:
    """One sentence for a page: who is told how, or ``nobody`` when no one could be."""
    reached = [t for t in told if t.channels or t.queued]
    if not reached:
        extra = " " + "; ".join(t.words() for t in told) if told else ""
        return nobody + extra
    return "Told: " + "; ".join(t.words() for t in told) + "."


def told_for(*, event: str, dedup_key: str) -> list[Told]:
    """Who was notified of ``event`` about ``dedup_key``, read back from the rows (in-app and each delivery)."""
    told: list[Told] = []
    rows = (
        Notification.objects.filter(event=event, dedup_key=dedup_key)
        .select_related("recipient")
        .prefetch_related("deliveries")
        .order_by("pk")
    )
    for row in rows:
        entry = Told(username=row.recipient.get_username())
        if row.in_app:
            entry.channels.append("in_app")
        for delivery in row.deliveries.all():
            if delivery.status == "undeliverable":
                entry.missing.append(f"{CHANNEL_WORDS[delivery.channel]} not deliverable: {delivery.error}")
            elif delivery.status == "failed":
                entry.missing.append(f"{CHANNEL_WORDS[delivery.channel]} failed: {delivery.error}")
            elif delivery.status == "sent" and delivery.channel not in entry.channels:
                entry.channels.append(delivery.channel)
            elif delivery.status in ("pending", "held") and delivery.channel not in entry.queued:
                entry.queued.append(delivery.channel)
        told.append(entry)
    return told

"""The notification catalogue: events, channels and each event's default channels.

A person's ``NotificationPreference`` rows override these defaults per event and channel. In-app is
on for every event by default; e-mail and chat for the events that ask a person to act.
"""

from __future__ import annotations

from handover.notifications.models import Notification, NotificationPreference

EVENTS = [(value, label) for value, label in Notification.Event.choices]
CHANNELS = [(value, label) for value, label in NotificationPreference.Channel.choices]
CHANNEL_WORDS = {"in_app": "in-app", "email": "e-mail", "chat": "chat/push"}

ACT_ON = frozenset(
    {"approval_needed", "dispatch_lapsed", "check_failed", "handed_over", "escalation", "replay_failed", "aged_work"}
)


def channel_default(event: str, channel: str) -> bool:
    """Whether ``channel`` is on for ``event`` when the person has not chosen (in-app: always)."""
    if channel == "in_app":
        return True
    return event in ACT_ON

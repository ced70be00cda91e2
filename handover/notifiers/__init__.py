"""Notification channels, one module per channel (STYLE.md §1), and the registry mapping a kind to its module.

Each channel module has ``send(*, notification, handover) -> Delivered`` and raises
``TransientError`` (retry later) or ``PermanentError`` (record and stop).
"""

from __future__ import annotations

from types import ModuleType

from handover.notifiers import chat, email
from handover.notifiers.base import Delivered, PermanentError, TransientError, handover_message

CHANNELS: dict[str, ModuleType] = {"email": email, "chat": chat}


def channel_for(kind: str) -> ModuleType:
    """The module sending notifications of ``kind`` (``email``, ``chat``); KeyError for an unknown kind."""
    return CHANNELS[kind]


__all__ = ["CHANNELS", "Delivered", "PermanentError", "TransientError", "channel_for", "handover_message"]

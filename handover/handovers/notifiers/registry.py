"""The channel registry: channel kind -> the module that sends it."""

from __future__ import annotations

from types import ModuleType

from handover.handovers.notifiers import chat, email
from handover.handovers.notifiers.base import Delivered, PermanentError, TransientError, handover_message

CHANNELS: dict[str, ModuleType] = {"email": email, "chat": chat}


def channel_for(kind: str) -> ModuleType:
    """The module sending notifications of ``kind`` (``email``, ``chat``); KeyError for an unknown kind."""
    return CHANNELS[kind]


__all__ = ["CHANNELS", "Delivered", "PermanentError", "TransientError", "channel_for", "handover_message"]

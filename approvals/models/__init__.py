"""The approvals app's models, gathered for Django's registry (they live in ``approvals/replays/models.py``)."""

from __future__ import annotations

from approvals.replays.models import (
    Approval,
    Dispatch,
    ReplayRequest,
    ReplayRequestItem,
    ReplayWebhook,
    WebhookDelivery,
)

__all__ = ["ReplayRequest", "ReplayRequestItem", "Approval", "Dispatch", "WebhookDelivery", "ReplayWebhook"]

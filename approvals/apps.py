from __future__ import annotations

from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    """Replay requests, approvals, dispatches and webhook deliveries."""

    name = "approvals"
    default_auto_field = "django.db.models.BigAutoField"

from __future__ import annotations

from django.apps import AppConfig


class HandoverConfig(AppConfig):
    """The handover app: handovers, revisions, residual exceptions, and what all apps share."""

    name = "handover"
    default_auto_field = "django.db.models.BigAutoField"

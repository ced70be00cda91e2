from __future__ import annotations

from django.apps import AppConfig


class RunsConfig(AppConfig):
    """Tenants, jobs, integrations, ingestion, runs, attempts and the timeline."""

    name = "runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The audit trail's receivers: permission rows, group memberships, admin log entries.
        from runs.audit import receivers

        receivers.connect()

"""Admin pages: replay requests, approvals, dispatches and deliveries are read-only (audit records);
a job's replay webhook is set with ``manage.py set_replay_webhook`` so its secret is shown once."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from approvals.replays.models import Approval, Dispatch, ReplayRequest, ReplayWebhook, WebhookDelivery
from runs.admin import ReadOnlyAdmin


@admin.register(ReplayRequest)
class ReplayRequestAdmin(ReadOnlyAdmin):
    list_display = ["public_id", "run", "kind", "status", "item_count", "requested_by", "created_at"]
    list_filter = ["status", "kind"]


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdmin):
    list_display = ["request", "kind", "decision", "actor", "decided_at", "voided_at"]
    list_filter = ["kind", "decision"]


@admin.register(Dispatch)
class DispatchAdmin(ReadOnlyAdmin):
    list_display = ["idempotency_key", "request", "channel", "status", "lease_expires_at", "attempt"]
    list_filter = ["status", "channel"]
    exclude = ["payload"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    list_display = ["dispatch", "number", "status", "response_status", "started_at"]
    list_filter = ["status"]


@admin.register(ReplayWebhook)
class ReplayWebhookAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Admins may switch a webhook off; setting the URL goes through the command (the secret is shown once)."""

    list_display = ["job", "url", "is_active", "created_by", "updated_at"]
    readonly_fields = ["job", "url", "created_by"]
    fields = ["job", "url", "is_active", "created_by"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

"""Admin for handovers: status fields, revisions and notifications are read-only (history is never edited)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from handover.accounts.models import ApiTokenUse
from handover.handovers.models import Handover, HandoverNotification, HandoverRevision, HandoverRun, ResidualException


class ReadOnlyInline(admin.TabularInline):  # type: ignore[type-arg]
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class HandoverRunInline(ReadOnlyInline):
    model = HandoverRun
    fields = ["run", "attempt", "is_open", "next_run_check"]
    readonly_fields = fields


class HandoverRevisionInline(ReadOnlyInline):
    model = HandoverRevision
    fields = ["section", "is_generated", "created_by", "created_at", "text"]
    readonly_fields = fields


@admin.register(Handover)
class HandoverAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["title", "status", "escalation_owner", "created_at"]
    list_filter = ["status"]
    search_fields = ["title"]
    readonly_fields = [
        "public_id",
        "job",
        "status",
        "status_changed_at",
        "generated_sections",
        "created_by",
        "handed_over_at",
        "handed_over_by",
        "verifying_at",
        "resolved_at",
        "closed_at",
        "closed_by",
        "reopened_at",
        "reopened_by",
        "reopen_reason",
        "reopen_count",
    ]
    inlines = [HandoverRunInline, HandoverRevisionInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # handovers are drafted from a run, pre-filled from its evidence

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # edits go through the service, which keeps revisions and timeline events

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ResidualException)
class ResidualExceptionAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["description", "handover", "owner", "due_date"]
    readonly_fields = ["public_id", "handover", "run", "description", "owner", "due_date", "created_by", "work_items"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(HandoverNotification)
class HandoverNotificationAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["handover", "channel", "reason", "recipient", "status", "attempt_count", "sent_at"]
    list_filter = ["channel", "status"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ApiTokenUse)
class ApiTokenUseAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Personal API tokens by last use (read-only; revoke a token on knox's "Auth tokens" page)."""

    list_display = ["token_key", "owner", "created", "expiry", "last_used_at"]
    list_select_related = ["token__user"]
    ordering = ["-last_used_at"]

    @admin.display(description="token prefix")
    def token_key(self, obj: ApiTokenUse) -> str:
        return obj.token.token_key

    @admin.display(description="owner")
    def owner(self, obj: ApiTokenUse) -> str:
        return str(obj.token.user.get_username())

    @admin.display(description="created")
    def created(self, obj: ApiTokenUse) -> Any:
        return obj.token.created

    @admin.display(description="expires")
    def expiry(self, obj: ApiTokenUse) -> Any:
        return obj.token.expiry

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

"""Admin for handovers: status fields, revisions and notifications are read-only (history is never edited);
teams with their chat/push targets (checked, stored encrypted)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from handover.accounts.models import ApiTokenUse
from handover.handovers.models import Handover, HandoverNotification, HandoverRevision, HandoverRun, ResidualException
from handover.notifications.apprise_targets import TargetNotAllowed, target_check, url_encrypt
from handover.notifications.models import AppriseTarget, Notification, Team


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
    readonly_fields = ["run", "attempt", "is_open", "next_run_check"]


class HandoverRevisionInline(ReadOnlyInline):
    model = HandoverRevision
    fields = ["section", "is_generated", "created_by", "created_at", "text"]
    readonly_fields = ["section", "is_generated", "created_by", "created_at", "text"]


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
        return str(obj.token.token_key)

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


class TeamTargetForm(forms.ModelForm):  # type: ignore[type-arg]
    """A team's chat/push target: the URL is checked (allow-list, no internal address), then stored encrypted."""

    url = forms.CharField(max_length=2000, label="Apprise URL", help_text="stored encrypted, shown masked")

    class Meta:
        model = AppriseTarget
        fields = ["label"]

    def clean_url(self) -> str:
        url = str(self.cleaned_data["url"])
        try:
            target_check(url)
        except TargetNotAllowed as exc:
            raise forms.ValidationError(str(exc)) from exc
        return url


class TeamTargetInline(admin.TabularInline):  # type: ignore[type-arg]
    """Adding a target encrypts it; an existing target shows masked and can be removed, not edited."""

    model = AppriseTarget
    form = TeamTargetForm
    fk_name = "team"
    extra = 1
    fields = ["url", "label", "url_masked"]
    readonly_fields = ["url_masked"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return True


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Teams: members and chat/push targets (a team grants no permission)."""

    list_display = ["name"]
    filter_horizontal = ["members"]
    inlines = [TeamTargetInline]

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        for inline_form in formset.forms:
            if inline_form.cleaned_data.get("DELETE") or "url" not in inline_form.cleaned_data:
                continue
            url = inline_form.cleaned_data["url"]
            inline_form.instance.team = form.instance
            inline_form.instance.url_encrypted = url_encrypt(url)
            checked = target_check(url, resolve=False)
            inline_form.instance.url_masked = checked.masked
            inline_form.instance.scheme = checked.scheme
            inline_form.instance.host = checked.host
        super().save_formset(request, form, formset, change)


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Notifications and their deliveries: read-only records of who was told how."""

    list_display = ["created_at", "recipient", "event", "subject", "read_at"]
    list_filter = ["event"]
    readonly_fields = [f.name for f in Notification._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

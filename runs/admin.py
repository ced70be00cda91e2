"""Admin pages. History, status fields and the timeline are read-only: state changes go through services."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.forms.fields import InvalidJSONInput, JSONString
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from guardian.admin import GuardedModelAdmin

from handover.core.errors import DomainError
from handover.core.people import signed_in
from runs.alerts.models import Alert, Delivery
from runs.alerts.parsers.base import JsonLoadError, document_unstorable_characters, load_json, unstorable_characters
from runs.alerts.triage import alert_reprocess
from runs.attempts.models import Attempt, Run, RunnerReport
from runs.attempts.services import attempt_abandon
from runs.catalog.models import Integration, IntegrationKey, Job, JobTarget, RunnerCredential, SideEffect, Tenant
from runs.catalog.settings_checks import integration_settings_messages
from runs.checks.models import NextRunCheck
from runs.timeline.models import TimelineEvent


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Everything visible, nothing editable, nothing deletable (audit records)."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Tenant)
class TenantAdmin(GuardedModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    readonly_fields = ["public_id", "slug_key"]


class SideEffectInline(admin.TabularInline):  # type: ignore[type-arg]
    model = SideEffect
    extra = 0


@admin.register(Job)
class JobAdmin(GuardedModelAdmin):
    list_display = ["key", "schedule", "timezone", "window_alignment", "paused_at"]
    search_fields = ["key", "name"]
    readonly_fields = ["public_id", "paused_at", "paused_by", "pause_reason", "resumed_at"]
    inlines = [SideEffectInline]


@admin.register(JobTarget)
class JobTargetAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["job", "tenant", "environment", "reports_successes", "is_active", "paused_at"]
    list_filter = ["environment", "is_active"]
    # a target's pause changes only through runs/catalog/pause.py (its timeline event, its rule)
    readonly_fields = ["public_id", "paused_at", "paused_by", "pause_reason", "resumed_at"]


class SettingsJsonField(forms.JSONField):
    """The integration's raw settings JSON, read as a post's body is (``load_json``): invalid JSON,
    ``NaN``/``Infinity``, nesting deeper than ``MAX_JSON_DEPTH`` and texts a database cannot hold (NUL,
    lone surrogates) are form errors, never a server error; empty or ``null`` is no settings (``{}``:
    the column holds no SQL NULL)."""

    def to_python(self, value: Any) -> Any:
        """The settings typed, as JSON; raises ``ValidationError`` for what Handover does not store."""
        if self.disabled or isinstance(value, list | dict | int | float):
            return value
        if value in self.empty_values:
            return {}
        try:
            document = load_json(value)
        except JsonLoadError as exc:
            raise forms.ValidationError(f"Not JSON Handover stores: {exc}.", code="invalid") from None
        if document is None:
            return {}
        unstorable = document_unstorable_characters(document)
        if unstorable:
            raise forms.ValidationError(
                f"Holds characters a database cannot store ({', '.join(unstorable)}).", code="invalid"
            )
        return JSONString(document) if isinstance(document, str) else document

    def bound_data(self, data: Any, initial: Any) -> Any:
        """The typed text again when the form is shown with its errors (however deep it nests)."""
        try:
            return super().bound_data(data, initial)
        except (RecursionError, ValueError):
            return InvalidJSONInput(data)

    def prepare_value(self, value: Any) -> str:
        """The settings as JSON text; a lone surrogate stored by other means is written as its escape."""
        if isinstance(value, InvalidJSONInput):
            return value
        text = super().prepare_value(value)
        return json.dumps(value, cls=self.encoder) if unstorable_characters(text) else text


class IntegrationAdminForm(forms.ModelForm):  # type: ignore[type-arg]
    """The admin's integration form: its raw settings JSON gets the checks of the product's editors
    (``integration_settings_messages``: the shapes the source's adapter reads, the transport, the security
    settings and a custom integration's mapping). A wrong value would otherwise leave every alert of the integration
    unmatched, or be read as a default without a word."""

    # no Meta: the admin builds the form's model and fields from IntegrationAdmin (modelform_factory)
    settings = SettingsJsonField(required=False)

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        messages = integration_settings_messages(
            source=str(cleaned.get("source") or ""), settings=cleaned.get("settings")
        )
        if messages:
            self.add_error("settings", messages)
        return cleaned


@admin.register(Integration)
class IntegrationAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    form = IntegrationAdminForm
    list_display = ["name", "source", "is_active", "refused_post_count"]
    readonly_fields = ["public_id", "refused_post_count"]


@admin.register(IntegrationKey)
class IntegrationKeyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["prefix", "integration", "label", "all_tenants", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "secret_hash", "last_used_at", "created_by", "public_id"]
    filter_horizontal = ["tenants"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # keys are issued by `create_integration_key` so the secret is shown once


@admin.register(RunnerCredential)
class RunnerCredentialAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["prefix", "job", "label", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "secret_hash", "last_used_at", "created_by", "public_id"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdmin):
    list_display = ["received_at", "integration", "outcome", "size_bytes", "response_status"]
    list_filter = ["outcome", "integration"]


@admin.register(Alert)
class AlertAdmin(ReadOnlyAdmin):
    list_display = [
        "created_at",
        "source",
        "outcome",
        "job_key",
        "tenant_slug",
        "execution_id",
        "repeat_count",
    ]
    list_filter = ["outcome", "source"]
    search_fields = ["job_key", "execution_id", "tenant_slug"]
    actions = ["reprocess"]

    @admin.action(description="Reprocess the selected unmatched alerts")
    def reprocess(self, request: HttpRequest, queryset: QuerySet[Alert]) -> None:
        done = 0
        for alert in queryset.filter(outcome=Alert.Outcome.UNMATCHED, duplicate_of__isnull=True):
            try:
                alert_reprocess(alert=alert, actor=signed_in(request.user))
                done += 1
            except DomainError as exc:
                self.message_user(request, f"{alert.public_id}: {exc.detail}", messages.WARNING)
        self.message_user(request, f"Reprocessed {done} alert(s).")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ["job", "tenant", "environment", "window_start", "window_end", "status"]
    list_filter = ["status", "environment"]


@admin.register(Attempt)
class AttemptAdmin(ReadOnlyAdmin):
    list_display = ["run", "number", "execution_id", "trigger", "status", "started_at", "ended_at"]
    list_filter = ["status", "trigger"]
    actions = ["abandon"]

    @admin.action(description="Abandon the selected attempts (they will never report)")
    def abandon(self, request: HttpRequest, queryset: QuerySet[Attempt]) -> HttpResponse | None:
        """Ask for the reason on an intermediate page, then ``attempt_abandon`` each selected attempt;
        the service refuses what the person may not do and attempts that ended (reported per attempt)."""
        reason = (request.POST.get("reason") or "").strip()
        if "apply" not in request.POST or not reason:
            return render(
                request,
                "runs/attempts/admin_abandon.html",
                {
                    **self.admin_site.each_context(request),
                    "title": "Abandon attempts",
                    "attempts": queryset.select_related("run__job", "run__tenant"),
                    "missing_reason": "apply" in request.POST,
                    "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
                    "opts": self.model._meta,
                },
            )
        done = 0
        for attempt in queryset.select_related("run__job", "run__tenant"):
            try:
                attempt_abandon(attempt=attempt, actor=signed_in(request.user), reason=reason)
                done += 1
            except DomainError as exc:
                self.message_user(request, f"Attempt {attempt.number} of {attempt.run}: {exc.detail}", messages.WARNING)
        self.message_user(request, f"Abandoned {done} attempt(s).")
        return None


@admin.register(RunnerReport)
class RunnerReportAdmin(ReadOnlyAdmin):
    list_display = ["attempt", "reported_at"]


@admin.register(TimelineEvent)
class TimelineEventAdmin(ReadOnlyAdmin):
    list_display = ["occurred_at", "job", "tenant", "kind", "actor_kind", "summary"]
    list_filter = ["kind", "actor_kind"]


@admin.register(NextRunCheck)
class NextRunCheckAdmin(ReadOnlyAdmin):
    """Read-only: checks change through their services (sweep, waive, confirm), never by hand."""

    list_display = ["target", "expected_at", "deadline_at", "status", "failure_reason", "duplicate_check"]
    list_filter = ["status", "failure_reason", "duplicate_check"]
    list_select_related = ["target__job", "target__tenant"]

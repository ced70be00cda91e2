"""API shapes of the handover app. ``id`` is always the public UUID; people are named by username."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from rest_framework import serializers

from handover.core.fields import NUL, TextField
from handover.handovers.models import Handover, HandoverNotification, HandoverRevision, HandoverRun, ResidualException
from runs.checks.models import NextRunCheck

USERNAME_MAX_LENGTH = 150  # django.contrib.auth's username column
SECTIONS = Handover.Section.values
SECTION_CHOICES = Handover.Section.choices


def _username(user: Any) -> str | None:
    return user.get_username() if user is not None else None


class UsernameField(serializers.SlugRelatedField):  # type: ignore[type-arg]
    """An active person, by username (a value that cannot be one is a field error, never a database error)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(slug_field="username", queryset=get_user_model().objects.filter(is_active=True), **kwargs)

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str) or NUL in data or len(data) > USERNAME_MAX_LENGTH:
            self.fail("does_not_exist", slug_name=self.slug_field, value=str(data).replace(NUL, "\\x00")[:160])
        return super().to_internal_value(data)


class NextRunCheckBriefSerializer(serializers.ModelSerializer[NextRunCheck]):
    id = serializers.UUIDField(source="public_id", read_only=True)
    waiver_owner = serializers.CharField(source="waiver_owner.username", read_only=True, allow_null=True, default=None)
    # plain text here: the check's own API owns its status enum
    status = serializers.CharField(read_only=True, help_text="scheduled, passed, failed or waived")

    class Meta:
        model = NextRunCheck
        fields = ["id", "status", "expected_at", "deadline_at", "waiver_owner", "waiver_checkpoint", "result_summary"]
        read_only_fields = fields


class HandoverRunSerializer(serializers.ModelSerializer[HandoverRun]):
    run = serializers.UUIDField(source="run.public_id", read_only=True)
    tenant = serializers.CharField(source="run.tenant.slug", read_only=True)
    environment = serializers.CharField(source="run.environment", read_only=True)
    window_start = serializers.DateTimeField(source="run.window_start", read_only=True)
    window_end = serializers.DateTimeField(source="run.window_end", read_only=True)
    scheduled_for = serializers.DateTimeField(source="run.scheduled_for", read_only=True, allow_null=True)
    run_status = serializers.CharField(source="run.status", read_only=True)
    attempt = serializers.UUIDField(source="attempt.public_id", read_only=True, allow_null=True, default=None)
    execution_id = serializers.CharField(source="attempt.execution_id", read_only=True, allow_null=True, default=None)
    attempt_started_at = serializers.DateTimeField(
        source="attempt.started_at", read_only=True, allow_null=True, default=None
    )
    next_run_check = NextRunCheckBriefSerializer(read_only=True, allow_null=True)

    class Meta:
        model = HandoverRun
        fields = [
            "run",
            "tenant",
            "environment",
            "window_start",
            "window_end",
            "scheduled_for",
            "run_status",
            "attempt",
            "execution_id",
            "attempt_started_at",
            "is_open",
            "next_run_check",
        ]
        read_only_fields = fields


class ResidualExceptionSerializer(serializers.ModelSerializer[ResidualException]):
    id = serializers.UUIDField(source="public_id", read_only=True)
    run = serializers.UUIDField(source="run.public_id", read_only=True, allow_null=True, default=None)
    owner = serializers.CharField(source="owner.username", read_only=True, allow_null=True, default=None)
    created_by = serializers.CharField(source="created_by.username", read_only=True)
    record_ids = serializers.SerializerMethodField()

    class Meta:
        model = ResidualException
        fields = [
            "id",
            "version",
            "run",
            "description",
            "record_ids",
            "owner",
            "due_date",
            "created_by",
            "created_at",
        ]
        read_only_fields = fields

    def get_record_ids(self, exception: ResidualException) -> list[str]:
        return [item.record_id for item in exception.work_items.all()]  # prefetched by handover_get


class HandoverListSerializer(serializers.ModelSerializer[Handover]):
    id = serializers.UUIDField(source="public_id", read_only=True)
    job = serializers.CharField(source="job.key", read_only=True)
    is_job_paused = serializers.SerializerMethodField()
    escalation_owner = serializers.CharField(
        source="escalation_owner.username", read_only=True, allow_null=True, default=None
    )
    customer_update_owner = serializers.CharField(
        source="customer_update_owner.username", read_only=True, allow_null=True, default=None
    )
    tenants = serializers.SerializerMethodField()
    run_count = serializers.SerializerMethodField()

    class Meta:
        model = Handover
        fields = [
            "id",
            "version",
            "title",
            "job",
            "is_job_paused",
            "status",
            "tenants",
            "run_count",
            "escalation_owner",
            "customer_update_owner",
            "created_at",
            "status_changed_at",
        ]
        read_only_fields = fields

    def get_is_job_paused(self, handover: Handover) -> bool:
        return handover.job.paused_at is not None

    def get_tenants(self, handover: Handover) -> list[str]:
        return list(dict.fromkeys(link.run.tenant.slug for link in handover.links.all()))

    def get_run_count(self, handover: Handover) -> int:
        return len(handover.links.all())


class ClosingConditionSerializer(serializers.Serializer[dict[str, Any]]):
    key = serializers.CharField(read_only=True)
    title = serializers.CharField(read_only=True)
    is_met = serializers.BooleanField(read_only=True)
    missing = serializers.ListField(child=serializers.CharField(), read_only=True)


class HandoverNotificationSerializer(serializers.ModelSerializer[HandoverNotification]):
    recipient = serializers.CharField(source="recipient.username", read_only=True, allow_null=True, default=None)

    class Meta:
        model = HandoverNotification
        fields = ["channel", "reason", "recipient", "status", "attempt_count", "sent_at", "failed_at", "error"]
        read_only_fields = fields


class HandoverDetailSerializer(HandoverListSerializer):
    job_pause = serializers.SerializerMethodField()
    runs = HandoverRunSerializer(source="links", many=True, read_only=True)
    residual_exceptions = ResidualExceptionSerializer(many=True, read_only=True)
    generated_sections = serializers.ListField(child=serializers.ChoiceField(choices=SECTION_CHOICES), read_only=True)
    created_by = serializers.CharField(source="created_by.username", read_only=True)
    handed_over_by = serializers.CharField(
        source="handed_over_by.username", read_only=True, allow_null=True, default=None
    )
    closed_by = serializers.CharField(source="closed_by.username", read_only=True, allow_null=True, default=None)
    reopened_by = serializers.CharField(source="reopened_by.username", read_only=True, allow_null=True, default=None)
    closing_conditions = serializers.SerializerMethodField()
    redacted_sections = serializers.SerializerMethodField(
        help_text="sections and fields of this write whose text lost what looked like a secret (stored as "
        "‹redacted:…›); empty on reads"
    )
    notifications = HandoverNotificationSerializer(many=True, read_only=True)
    generated_evidence = serializers.JSONField(
        read_only=True,
        help_text="the evidence the generated text came from, per run: ledger_version, status, attempt_count, "
        "latest_attempt, counts",
    )
    generated_stale = serializers.SerializerMethodField(
        help_text="what changed in the evidence since the generated text was written; empty when it is current"
    )

    class Meta(HandoverListSerializer.Meta):
        fields = [
            *HandoverListSerializer.Meta.fields,
            "job_pause",
            "runs",
            *SECTIONS,
            "generated_sections",
            "generated_evidence",
            "generated_stale",
            "defect_ref",
            "is_supportability_defect",
            "supportability_ticket",
            "residual_exceptions",
            "closing_conditions",
            "redacted_sections",
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
            "notifications",
        ]
        read_only_fields = fields

    def get_generated_stale(self, handover: Handover) -> list[str]:
        staleness = self.context.get("staleness")
        return list(staleness.changes) if staleness is not None else []

    def get_job_pause(self, handover: Handover) -> dict[str, Any] | None:
        job = handover.job
        if job.paused_at is None:
            return None
        return {"paused_at": job.paused_at, "paused_by": _username(job.paused_by), "reason": job.pause_reason}

    def get_redacted_sections(self, handover: Handover) -> list[str]:
        return list(self.context.get("redacted_sections") or [])

    def get_closing_conditions(self, handover: Handover) -> list[dict[str, Any]]:
        conditions = self.context.get("closing_conditions") or []
        return [ClosingConditionSerializer(c).data for c in conditions]


class HandoverRevisionSerializer(serializers.ModelSerializer[HandoverRevision]):
    created_by = serializers.CharField(source="created_by.username", read_only=True, allow_null=True, default=None)

    class Meta:
        model = HandoverRevision
        fields = ["section", "text", "is_generated", "created_by", "created_at"]
        read_only_fields = fields


# --- input -----------------------------------------------------------------------------------------


class HandoverCreateInputSerializer(serializers.Serializer[dict[str, Any]]):
    runs = serializers.ListField(
        child=serializers.UUIDField(), min_length=1, max_length=50, help_text="public ids of runs of one job"
    )


class HandoverUpdateInputSerializer(serializers.Serializer[dict[str, Any]]):
    """Any subset of the sections and fields; ``confirm`` accepts generated sections unchanged.

    ``version`` names the version the edit is based on (or send ``If-Match``); one of them is required.
    """

    version = serializers.IntegerField(
        required=False, min_value=1, help_text="the version you edited (the detail's `version` / ETag)"
    )
    expected_output = TextField(required=False, allow_blank=True, max_length=20000)
    definitely_happened = TextField(required=False, allow_blank=True, max_length=20000)
    may_have_happened = TextField(required=False, allow_blank=True, max_length=20000)
    next_action = TextField(required=False, allow_blank=True, max_length=20000)
    affected = TextField(required=False, allow_blank=True, max_length=20000)
    business_impact = TextField(required=False, allow_blank=True, max_length=20000)
    deadlines = TextField(required=False, allow_blank=True, max_length=20000)
    recent_changes = TextField(required=False, allow_blank=True, max_length=20000)
    confirm = serializers.ListField(child=serializers.ChoiceField(choices=SECTION_CHOICES), required=False)
    escalation_owner = UsernameField(required=False, allow_null=True)
    customer_update_owner = UsernameField(required=False, allow_null=True)
    defect_ref = TextField(required=False, allow_blank=True, max_length=500)
    is_supportability_defect = serializers.BooleanField(required=False)
    supportability_ticket = TextField(required=False, allow_blank=True, max_length=500)


class HandoverReopenInputSerializer(serializers.Serializer[dict[str, Any]]):
    reason = TextField(max_length=2000)


class ResidualExceptionCreateInputSerializer(serializers.Serializer[dict[str, Any]]):
    description = TextField(max_length=5000)
    record_ids = serializers.ListField(child=TextField(max_length=300), required=False, max_length=10000, default=list)
    run = serializers.UUIDField(required=False, allow_null=True, help_text="limit the record ids to this run")
    owner = UsernameField(required=False, allow_null=True)
    due_date = serializers.DateField(required=False, allow_null=True)


class ResidualExceptionUpdateInputSerializer(serializers.Serializer[dict[str, Any]]):
    version = serializers.IntegerField(
        required=False, min_value=1, help_text="the exception's version you changed (or send If-Match)"
    )
    owner = UsernameField(allow_null=True)
    due_date = serializers.DateField(allow_null=True)
    description = TextField(required=False, max_length=5000)

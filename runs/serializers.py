"""API shapes of the runs app. ``id`` is always the public UUID; times are ISO 8601 UTC."""

from __future__ import annotations

from rest_framework import serializers

from runs.models.core import Alert, Attempt, Run, RunnerReport, TimelineEvent


class RunnerReportSerializer(serializers.ModelSerializer[RunnerReport]):
    class Meta:
        model = RunnerReport
        fields = ["attempted_ids", "completed_ids", "failed_ids", "reported_at"]
        read_only_fields = fields


class AttemptSerializer(serializers.ModelSerializer[Attempt]):
    id = serializers.UUIDField(source="public_id", read_only=True)
    runner_reports = RunnerReportSerializer(many=True, read_only=True)

    class Meta:
        model = Attempt
        fields = [
            "id",
            "execution_id",
            "number",
            "trigger",
            "status",
            "scheduled_at",
            "started_at",
            "ended_at",
            "error_summary",
            "correlation_ref",
            "log_url",
            "config_version",
            "runner_reports",
        ]
        read_only_fields = fields


class TimelineEventSerializer(serializers.ModelSerializer[TimelineEvent]):
    id = serializers.UUIDField(source="public_id", read_only=True)
    attempt = serializers.UUIDField(source="attempt.public_id", read_only=True, allow_null=True, default=None)
    actor = serializers.SerializerMethodField()

    class Meta:
        model = TimelineEvent
        fields = [
            "id",
            "kind",
            "occurred_at",
            "recorded_at",
            "actor_kind",
            "actor",
            "summary",
            "attempt",
            "data",
        ]
        read_only_fields = fields

    def get_actor(self, event: TimelineEvent) -> str:
        if event.actor_user_id:
            return event.actor_user.get_username()
        if event.actor_integration_id:
            return event.actor_integration.name
        return "system"


class RunListSerializer(serializers.ModelSerializer[Run]):
    id = serializers.UUIDField(source="public_id", read_only=True)
    job = serializers.CharField(source="job.key", read_only=True)
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    attempt_count = serializers.IntegerField(read_only=True)
    has_target = serializers.SerializerMethodField()

    class Meta:
        model = Run
        fields = [
            "id",
            "job",
            "tenant",
            "environment",
            "window_start",
            "window_end",
            "scheduled_for",
            "status",
            "attempt_count",
            "has_target",
            "eligible_count",
            "attempted_count",
            "completed_count",
            "skipped_count",
            "rejected_count",
            "unresolved_count",
            "possible_duplicate_count",
        ]
        read_only_fields = fields

    def get_has_target(self, run: Run) -> bool:
        return run.target_id is not None


class RunDetailSerializer(RunListSerializer):
    attempts = AttemptSerializer(many=True, read_only=True)
    timeline = TimelineEventSerializer(many=True, read_only=True)
    attempt_count = serializers.SerializerMethodField()

    class Meta(RunListSerializer.Meta):
        fields = [*RunListSerializer.Meta.fields, "attempts", "timeline"]
        read_only_fields = fields

    def get_attempt_count(self, run: Run) -> int:
        return len(run.attempts.all())


class AlertSerializer(serializers.ModelSerializer[Alert]):
    id = serializers.UUIDField(source="public_id", read_only=True)
    delivery = serializers.UUIDField(source="delivery.public_id", read_only=True)
    run = serializers.UUIDField(source="run.public_id", read_only=True, allow_null=True, default=None)
    attempt = serializers.UUIDField(source="attempt.public_id", read_only=True, allow_null=True, default=None)
    duplicate_of = serializers.SerializerMethodField()

    class Meta:
        model = Alert
        fields = [
            "id",
            "delivery",
            "index",
            "source",
            "kind",
            "outcome",
            "reason",
            "is_stale",
            "dedup_key",
            "duplicate_of",
            "repeat_count",
            "job_key",
            "tenant_slug",
            "environment",
            "execution_id",
            "summary",
            "fields",
            "run",
            "attempt",
            "created_at",
            "outcome_at",
        ]
        read_only_fields = fields

    def get_duplicate_of(self, alert: Alert) -> str | None:
        return str(alert.duplicate_of.public_id) if alert.duplicate_of_id else None


class IngestAlertResultSerializer(serializers.Serializer[dict[str, object]]):
    id = serializers.UUIDField()
    outcome = serializers.ChoiceField(choices=Alert.Outcome.choices)
    reason = serializers.CharField()
    run = serializers.UUIDField(allow_null=True)
    attempt = serializers.UUIDField(allow_null=True)


class IngestResponseSerializer(serializers.Serializer[dict[str, object]]):
    delivery = serializers.UUIDField()
    alerts = IngestAlertResultSerializer(many=True)


class ProblemSerializer(serializers.Serializer[dict[str, object]]):
    """RFC 9457 problem details."""

    type = serializers.CharField()
    title = serializers.CharField()
    status = serializers.IntegerField()
    detail = serializers.CharField()
    errors = serializers.DictField(child=serializers.ListField(child=serializers.CharField()), required=False)
    delivery = serializers.UUIDField(required=False)

"""API shapes of alerts and of the ingestion endpoint's answer."""

from __future__ import annotations

from rest_framework import serializers

from runs.alerts.models import Alert


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
            "mend_notes",
            "run",
            "attempt",
            "created_at",
            "outcome_at",
        ]
        read_only_fields = fields

    def get_duplicate_of(self, alert: Alert) -> str | None:
        return str(alert.duplicate_of.public_id) if alert.duplicate_of is not None else None


class IngestAlertResultSerializer(serializers.Serializer[dict[str, object]]):
    id = serializers.UUIDField()
    outcome = serializers.ChoiceField(choices=Alert.Outcome.choices)
    reason = serializers.CharField()
    run = serializers.UUIDField(allow_null=True)
    attempt = serializers.UUIDField(allow_null=True)


class IngestResponseSerializer(serializers.Serializer[dict[str, object]]):
    delivery = serializers.UUIDField()
    alerts = IngestAlertResultSerializer(many=True)

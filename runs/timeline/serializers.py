"""API shape of a timeline event. Times are ISO 8601 UTC."""

from __future__ import annotations

from rest_framework import serializers

from runs.timeline.models import TimelineEvent


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
        if event.actor_user is not None:
            return event.actor_user.get_username()
        if event.actor_integration is not None:
            return event.actor_integration.name
        return "system"

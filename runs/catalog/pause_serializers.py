"""API shapes of a job's pause."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from runs.catalog.models import Job


class JobPauseSerializer(serializers.ModelSerializer[Job]):
    id = serializers.UUIDField(source="public_id", read_only=True)
    is_paused = serializers.SerializerMethodField()
    paused_by = serializers.CharField(source="paused_by.username", read_only=True, allow_null=True, default=None)

    class Meta:
        model = Job
        fields = ["id", "key", "is_paused", "paused_at", "paused_by", "pause_reason"]
        read_only_fields = fields

    def get_is_paused(self, job: Job) -> bool:
        return job.paused_at is not None


class JobPauseInputSerializer(serializers.Serializer[dict[str, Any]]):
    reason = serializers.CharField(max_length=2000)


class JobResumeInputSerializer(serializers.Serializer[dict[str, Any]]):
    note = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")

"""API shapes of a job's pause."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from handover.core.fields import TextField
from runs.catalog.models import Job, JobTarget


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
    reason = TextField(max_length=2000)


class JobResumeInputSerializer(serializers.Serializer[dict[str, Any]]):
    note = TextField(required=False, allow_blank=True, max_length=2000, default="")


class TargetPauseSerializer(serializers.ModelSerializer[JobTarget]):
    """A target's pause: its job, tenant and environment, whether it is paused, since when, by whom, why."""

    id = serializers.UUIDField(source="public_id", read_only=True)
    job = serializers.CharField(source="job.key", read_only=True)
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    is_paused = serializers.SerializerMethodField()
    paused_by = serializers.CharField(source="paused_by.username", read_only=True, allow_null=True, default=None)

    class Meta:
        model = JobTarget
        fields = [
            "id",
            "job",
            "tenant",
            "environment",
            "is_paused",
            "paused_at",
            "paused_by",
            "pause_reason",
            "resumed_at",
        ]
        read_only_fields = fields

    def get_is_paused(self, target: JobTarget) -> bool:
        return target.paused_at is not None

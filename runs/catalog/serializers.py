"""API shapes of a job: its schedule, what a good run produces and whether it is paused."""

from __future__ import annotations

from rest_framework import serializers

from runs.catalog.models import Job


class JobSerializer(serializers.ModelSerializer[Job]):
    """A job as the jobs list and detail answer it. Durations are whole seconds (``*_seconds``)."""

    id = serializers.UUIDField(source="public_id", read_only=True)
    url = serializers.HyperlinkedIdentityField(
        view_name="runs-api:job-detail", lookup_field="public_id", lookup_url_kwarg="id", read_only=True
    )
    is_paused = serializers.SerializerMethodField()
    paused_by = serializers.CharField(source="paused_by.username", read_only=True, allow_null=True, default=None)

    class Meta:
        model = Job
        fields = [
            "id",
            "url",
            "key",
            "name",
            "schedule",
            "timezone",
            "grace_seconds",
            "missed_run_policy",
            "overlap_policy",
            "expected_output",
            "verification",
            "is_paused",
            "paused_at",
            "paused_by",
            "pause_reason",
        ]
        read_only_fields = fields

    def get_is_paused(self, job: Job) -> bool:
        """Whether the job is paused (a pause time is set)."""
        return job.paused_at is not None

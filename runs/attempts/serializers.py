"""API shapes of runs, attempts and runner reports. ``id`` is always the public UUID; times are ISO 8601 UTC."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from handover.core.fields import HttpUrlOrNullField, TextField
from runs.attempts.business_state import run_business_state
from runs.attempts.details import DESCRIPTION_FIELDS, SLOT_FIELDS
from runs.attempts.models import Attempt, Run, RunnerReport
from runs.timeline.serializers import TimelineEventSerializer


class RunnerReportSerializer(serializers.ModelSerializer[RunnerReport]):
    class Meta:
        model = RunnerReport
        fields = ["attempted_ids", "completed_ids", "failed_ids", "reported_at"]
        read_only_fields = fields


class AttemptSerializer(serializers.ModelSerializer[Attempt]):
    id = serializers.UUIDField(source="public_id", read_only=True)
    runner_reports = RunnerReportSerializer(many=True, read_only=True)
    duplicate_trigger = serializers.BooleanField(source="is_duplicate_trigger", read_only=True)
    duplicate_explained_by: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    log_url = HttpUrlOrNullField(help_text="the (restricted) log link: an http(s) URL, or null when there is none")
    replay_request = serializers.UUIDField(
        source="replay_dispatch.request.public_id",
        read_only=True,
        allow_null=True,
        default=None,
        help_text="the replay request this attempt was dispatched from (trigger manual_replay); null otherwise",
    )

    class Meta:
        model = Attempt
        fields = [
            "id",
            "execution_id",
            "number",
            "source_number",
            "trigger",
            "replay_request",
            "is_trigger_inferred",
            "duplicate_trigger",
            "duplicate_explained_at",
            "duplicate_explained_by",
            "duplicate_explanation",
            "duplicate_evidence_ref",
            "status",
            *DESCRIPTION_FIELDS,
            *SLOT_FIELDS,
            "runner_reports",
        ]
        read_only_fields = fields


class DuplicateTriggerExplainInputSerializer(serializers.Serializer[dict[str, str]]):
    """Why a second trigger of the slot happened, and where the evidence is."""

    reason = TextField(max_length=2000)
    evidence_ref = TextField(max_length=300, help_text="a ticket, a log link, the scheduler's audit entry")


class AttemptAbandonInputSerializer(serializers.Serializer[dict[str, object]]):
    """Why the attempt will never report (a person's decision; required)."""

    reason = TextField(max_length=2000)


class AttemptReplaceSlotInputSerializer(serializers.Serializer[dict[str, object]]):
    """The slot (a fire time of the target's schedule, ISO 8601 with an offset) and why the attempt belongs there."""

    slot = serializers.DateTimeField()
    reason = TextField(max_length=2000)


class RunListSerializer(serializers.ModelSerializer[Run]):
    id = serializers.UUIDField(source="public_id", read_only=True)
    job = serializers.CharField(source="job.key", read_only=True)
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    attempt_count = serializers.IntegerField(read_only=True)
    has_target = serializers.SerializerMethodField()
    business_state = serializers.SerializerMethodField(
        help_text="what people see first: ok, attention (succeeded but something needs a person) or the status"
    )
    business_state_reasons = serializers.SerializerMethodField(
        help_text=(
            "codes: unresolved:N, possible_duplicates:N, duplicate_trigger, refire, conflicting_report, "
            "handover:<status>"
        )
    )

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
            "business_state",
            "business_state_reasons",
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

    def get_business_state(self, run: Run) -> str:
        return run_business_state(run).state  # from the selector's annotations: no query

    def get_business_state_reasons(self, run: Run) -> list[str]:
        return list(run_business_state(run).reasons)


class RunDetailSerializer(RunListSerializer):
    attempts = AttemptSerializer(many=True, read_only=True)
    timeline = TimelineEventSerializer(many=True, read_only=True)
    attempt_count = serializers.SerializerMethodField()  # type: ignore[assignment]  # the detail counts what it lists (DRF lets a subclass redeclare a field)

    class Meta(RunListSerializer.Meta):
        fields = [*RunListSerializer.Meta.fields, "attempts", "timeline"]
        read_only_fields = fields

    def get_attempt_count(self, run: Run) -> int:
        return len(run.attempts.all())

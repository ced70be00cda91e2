"""API shapes of the recurrence figures and the supportability report. Durations are integer seconds in
``*_seconds`` fields (null without a sample); days are local dates; ``id`` is always a public UUID."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class _SecondsField(serializers.IntegerField):
    """A duration kept as float seconds, answered as whole seconds (null stays null)."""

    def to_representation(self, value: Any) -> int:
        return int(value)


class RecurrencePeriodSerializer(serializers.Serializer[Any]):
    """The period read: ``[since, until)`` in UTC, ``days`` local days ending with ``last_day``."""

    days = serializers.IntegerField(read_only=True)
    since = serializers.DateTimeField(read_only=True)
    until = serializers.DateTimeField(read_only=True)
    last_day = serializers.DateField(read_only=True)


class RecurrenceJobSerializer(serializers.Serializer[Any]):
    """A job: its public id, key and name."""

    id = serializers.UUIDField(source="public_id", read_only=True)
    key = serializers.CharField(read_only=True)
    name = serializers.CharField(read_only=True)


class RecurrenceTrendPointSerializer(serializers.Serializer[Any]):
    """One bucket of a trend: the local days ``start``..``end`` (inclusive), failures and runs in them."""

    start = serializers.DateField(read_only=True)
    end = serializers.DateField(read_only=True)
    failures = serializers.IntegerField(read_only=True)
    runs = serializers.IntegerField(read_only=True)


class RecurrenceTeamSerializer(serializers.Serializer[Any]):
    """A team: its public id and name."""

    id = serializers.UUIDField(source="public_id", read_only=True)
    name = serializers.CharField(read_only=True)


class RecurrenceOwningSerializer(serializers.Serializer[Any]):
    """A job's owning team and escalation owner (docs/ownership.md); each null when not named."""

    team = RecurrenceTeamSerializer(read_only=True, allow_null=True)
    escalation_owner = serializers.SerializerMethodField()

    def get_escalation_owner(self, owner: Any) -> str | None:
        """The escalation owner's username, or None."""
        person = owner.escalation_owner
        return None if person is None else str(person.get_username())


class RecurrenceFiguresSerializer(serializers.Serializer[Any]):
    """The recurrence figures of a set of failed runs (formulas: docs/recurrence.md)."""

    failures = serializers.IntegerField(read_only=True)
    runs_affected = serializers.IntegerField(read_only=True)
    handovers = serializers.IntegerField(read_only=True)
    owner_explained = serializers.IntegerField(
        read_only=True, help_text="handovers marked as needing the technical owner to explain (supportability defect)"
    )
    replays = serializers.IntegerField(read_only=True, help_text="replay requests made for the failed runs")
    duplicates = serializers.IntegerField(read_only=True)
    days_open = serializers.FloatField(read_only=True)
    unrecovered = serializers.IntegerField(read_only=True)
    to_handover_median_seconds = _SecondsField(source="to_handover_median", read_only=True, allow_null=True)
    to_handover_p90_seconds = _SecondsField(source="to_handover_p90", read_only=True, allow_null=True)
    to_approved_replay_median_seconds = _SecondsField(
        source="to_approved_replay_median", read_only=True, allow_null=True
    )
    to_approved_replay_p90_seconds = _SecondsField(source="to_approved_replay_p90", read_only=True, allow_null=True)
    to_recovery_median_seconds = _SecondsField(source="to_recovery_median", read_only=True, allow_null=True)
    to_recovery_p90_seconds = _SecondsField(source="to_recovery_p90", read_only=True, allow_null=True)
    score = serializers.FloatField(read_only=True, help_text="the cost to the support desk (docs/recurrence.md)")


class RecurrenceGroupSerializer(serializers.Serializer[Any]):
    """The figures of one tenant and failure class of a job."""

    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    failure_class = serializers.CharField(source="class_code", read_only=True)
    figures = RecurrenceFiguresSerializer(read_only=True)


class RecurrenceJobRowSerializer(serializers.Serializer[Any]):
    """One job's row of the ranking."""

    job = RecurrenceJobSerializer(read_only=True)
    technical_owners = serializers.ListField(child=serializers.CharField(), source="owners", read_only=True)
    ownership = RecurrenceOwningSerializer(
        read_only=True, help_text="the job's owning team and escalation owner (docs/ownership.md)"
    )
    figures = RecurrenceFiguresSerializer(read_only=True)
    groups = RecurrenceGroupSerializer(many=True, read_only=True)
    trend = RecurrenceTrendPointSerializer(many=True, read_only=True)


class RecurrenceReportSerializer(serializers.Serializer[Any]):
    """The ranking of jobs by cost to the support desk, highest first, and the trend of all of them."""

    period = RecurrencePeriodSerializer(read_only=True)
    jobs = RecurrenceJobRowSerializer(many=True, read_only=True)
    trend = RecurrenceTrendPointSerializer(many=True, read_only=True)


class SupportabilityMissingSerializer(serializers.Serializer[Any]):
    """Alerts that lacked each field (the codes of ``MISSING_FIELDS``)."""

    run_reference = serializers.IntegerField(read_only=True)
    window = serializers.IntegerField(read_only=True)
    execution_id = serializers.IntegerField(read_only=True)
    business_impact = serializers.IntegerField(read_only=True)


class SupportabilitySourceSerializer(serializers.Serializer[Any]):
    """One source's alerts of a job and what they lacked."""

    # a field named like DRF's ``Field.source`` attribute: the API's word for the integration kind
    source = serializers.CharField(read_only=True)  # type: ignore[assignment]
    alerts = serializers.IntegerField(read_only=True)
    missing = SupportabilityMissingSerializer(read_only=True)


class SupportabilityHandoverSerializer(serializers.Serializer[Any]):
    """A handover that needed the technical owner to explain what happened."""

    id = serializers.UUIDField(source="public_id", read_only=True)
    title = serializers.CharField(read_only=True)
    ticket = serializers.CharField(read_only=True)


class SupportabilityJobRowSerializer(serializers.Serializer[Any]):
    """One job's row of the supportability ranking."""

    job = RecurrenceJobSerializer(read_only=True)
    technical_owners = serializers.ListField(child=serializers.CharField(), source="owners", read_only=True)
    ownership = RecurrenceOwningSerializer(
        read_only=True, help_text="the job's owning team and escalation owner (docs/ownership.md)"
    )
    score = serializers.FloatField(read_only=True)
    alerts = serializers.IntegerField(read_only=True)
    missing = SupportabilityMissingSerializer(read_only=True)
    sources = SupportabilitySourceSerializer(many=True, read_only=True)
    handovers = serializers.IntegerField(read_only=True)
    owner_explained = SupportabilityHandoverSerializer(many=True, read_only=True)


class SupportabilityReportSerializer(serializers.Serializer[Any]):
    """Jobs ranked by what their alerts lacked and how often their owner had to explain, highest first."""

    period = RecurrencePeriodSerializer(read_only=True)
    jobs = SupportabilityJobRowSerializer(many=True, read_only=True)

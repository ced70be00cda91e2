"""API shapes of the approvals app. ``id`` is always the public UUID; times are ISO 8601 UTC."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django.http import HttpRequest
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from approvals.replays.dispatch import runner_urls
from approvals.replays.models import Approval, Dispatch, ReplayRequest, ReplayRequestItem, WebhookDelivery
from approvals.replays.requests import RECOVERY_DECISIONS
from handover.core.fields import BoundedDateTimeField, HttpUrlField, TextField
from runs.attempts.models import Attempt


class CheckSerializer(serializers.Serializer[dict[str, Any]]):
    """One precondition as last evaluated: its code, the rule it enforces, and why it passed or failed."""

    code = serializers.CharField()
    rule = serializers.CharField()
    ok = serializers.BooleanField()
    blocking = serializers.BooleanField()
    detail = serializers.CharField()


class EligibleApproversSerializer(serializers.Serializer[dict[str, Any]]):
    """Usernames who may give each approval (the requester excluded), as listed at creation.

    The stored JSON is read defensively: the column defaults to ``{}`` (a request written by the admin,
    a factory or an older version), so a missing kind, or anything but a list of names, is an empty list.
    """

    KINDS = ("business", "technical")

    business = serializers.ListField(child=serializers.CharField())
    technical = serializers.ListField(child=serializers.CharField())

    def to_representation(self, instance: Any) -> dict[str, Any]:
        stored = instance if isinstance(instance, Mapping) else {}
        names = {kind: stored.get(kind) for kind in self.KINDS}
        return super().to_representation(
            {
                kind: [str(name) for name in value] if isinstance(value, list | tuple) else []
                for kind, value in names.items()
            }
        )


class SideEffectSerializer(serializers.Serializer[dict[str, Any]]):
    """A side effect of the job that a replay repeats, with its repeat safety."""

    description = serializers.CharField()
    repeat_safety = serializers.CharField()
    evidence = serializers.CharField()


class ApprovalSerializer(serializers.ModelSerializer[Approval]):
    id = serializers.UUIDField(source="public_id", read_only=True)
    actor = serializers.CharField(source="actor.get_username", read_only=True)

    class Meta:
        model = Approval
        fields = [
            "id",
            "kind",
            "decision",
            "comment",
            "actor",
            "decided_at",
            "scope_fingerprint",
            "accepts_unknown_repeat_safety",
            "acceptance_reason",
            "voided_at",
            "void_reason",
        ]
        read_only_fields = fields


class WebhookDeliverySerializer(serializers.ModelSerializer[WebhookDelivery]):
    class Meta:
        model = WebhookDelivery
        fields = [
            "number",
            "url",
            "timestamp",
            "status",
            "is_transient",
            "started_at",
            "finished_at",
            "response_status",
            "response_body",
            "error",
        ]
        read_only_fields = fields


class DispatchSerializer(serializers.ModelSerializer[Dispatch]):
    id = serializers.UUIDField(source="public_id", read_only=True)
    claimed_by = serializers.CharField(source="claimed_by.prefix", read_only=True, allow_null=True, default=None)
    attempt = serializers.UUIDField(source="attempt.public_id", read_only=True, allow_null=True, default=None)
    webhook_deliveries = WebhookDeliverySerializer(many=True, read_only=True)

    class Meta:
        model = Dispatch
        fields = [
            "id",
            "idempotency_key",
            "channel",
            "status",
            "created_at",
            "lease_expires_at",
            "claimed_at",
            "claimed_by",
            "delivered_at",
            "started_at",
            "finished_at",
            "unknown_at",
            "unknown_reason",
            "attempt",
            "delivery_count",
            "webhook_deliveries",
        ]
        read_only_fields = fields


class ReplayRequestListSerializer(serializers.ModelSerializer[ReplayRequest]):
    id = serializers.UUIDField(source="public_id", read_only=True)
    run = serializers.UUIDField(source="run.public_id", read_only=True)
    job = serializers.CharField(source="run.job.key", read_only=True)
    tenant = serializers.CharField(source="run.tenant.slug", read_only=True)
    environment = serializers.CharField(source="run.environment", read_only=True)
    requested_by = serializers.CharField(source="requested_by.get_username", read_only=True)

    class Meta:
        model = ReplayRequest
        fields = [
            "id",
            "run",
            "job",
            "tenant",
            "environment",
            "kind",
            "status",
            "item_count",
            "reason",
            "requested_by",
            "created_at",
            "expires_at",
            "approved_at",
            "dispatched_at",
            "closed_at",
        ]
        read_only_fields = fields


class LedgerDisclosureSerializer(serializers.Serializer[dict[str, str]]):
    """One ledger fact the approvers must see: an item weakened from completed or a duplicate explained."""

    kind = serializers.ChoiceField(choices=["weakened", "explained"])
    record_id = serializers.CharField()
    to = serializers.CharField()
    by = serializers.CharField(help_text="who weakened or explained it")
    at = serializers.DateTimeField()
    why = serializers.CharField()
    reference = serializers.CharField(allow_blank=True)

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields = super().get_fields()
        fields["from"] = serializers.CharField()  # a keyword in Python
        return fields


class ReplayRequestDetailSerializer(ReplayRequestListSerializer):
    """A request with everything its page shows: scope facts, checks, approvals, dispatch and deliveries.

    ``side_effects``, ``repeat_safety`` and ``scope_sample`` come from the view's context (read by
    selectors beforehand); a method field never queries.
    """

    checks = CheckSerializer(many=True, read_only=True)
    eligible_approvers = EligibleApproversSerializer(read_only=True)
    approvals = ApprovalSerializer(many=True, read_only=True)
    dispatch = serializers.SerializerMethodField()
    handover = serializers.UUIDField(source="handover.public_id", read_only=True, allow_null=True, default=None)
    closed_by = serializers.CharField(source="closed_by.get_username", read_only=True, allow_null=True, default=None)
    side_effects = serializers.SerializerMethodField()
    repeat_safety = serializers.SerializerMethodField()
    scope_sample = serializers.SerializerMethodField()
    ledger_disclosures = LedgerDisclosureSerializer(
        many=True,
        read_only=True,
        help_text="items weakened from completed and possible duplicates explained, with who and why; bound into "
        "scope_fingerprint",
    )

    class Meta(ReplayRequestListSerializer.Meta):
        fields = [
            *ReplayRequestListSerializer.Meta.fields,
            "fix_reference",
            "scope_fingerprint",
            "scope_revision",
            "scope_sample",
            "ledger_disclosures",
            "checks",
            "checked_at",
            "eligible_approvers",
            "approvals",
            "side_effects",
            "repeat_safety",
            "dispatch",
            "handover",
            "closed_by",
            "close_reason",
        ]
        read_only_fields = fields

    @extend_schema_field(DispatchSerializer(allow_null=True))
    def get_dispatch(self, request: ReplayRequest) -> dict[str, Any] | None:
        dispatches = list(request.dispatches.all())
        return dict(DispatchSerializer(dispatches[0]).data) if dispatches else None

    @extend_schema_field(SideEffectSerializer(many=True))
    def get_side_effects(self, request: ReplayRequest) -> list[dict[str, Any]]:
        return [
            {"description": e.description, "repeat_safety": e.repeat_safety, "evidence": e.evidence}
            for e in self.context.get("side_effects", [])
        ]

    @extend_schema_field(serializers.CharField())
    def get_repeat_safety(self, request: ReplayRequest) -> str:
        return str(self.context.get("repeat_safety", ""))

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_scope_sample(self, request: ReplayRequest) -> list[str]:
        return [item.record_id for item in self.context.get("scope_sample", [])]


class ReplayRequestItemSerializer(serializers.ModelSerializer[ReplayRequestItem]):
    outcome = serializers.CharField(source="work_item.outcome", read_only=True)

    class Meta:
        model = ReplayRequestItem
        fields = ["record_id", "outcome_at_request", "outcome", "is_open"]
        read_only_fields = fields


# --- input -------------------------------------------------------------------------------------------


class ReplayRequestCreateInputSerializer(serializers.Serializer[dict[str, Any]]):
    run = serializers.UUIDField(help_text="the run's id")
    kind = serializers.ChoiceField(choices=ReplayRequest.Kind.choices)
    record_ids = serializers.ListField(child=TextField(max_length=300), required=False, default=list, max_length=5000)
    all = serializers.BooleanField(
        required=False,
        default=False,
        help_text="every item of the kind (absent, or rejected); implied for a whole batch",
    )
    fix_reference = TextField(required=False, allow_blank=True, default="", max_length=500)
    reason = TextField(max_length=4000)


class ReplayRequestRescopeInputSerializer(serializers.Serializer[dict[str, Any]]):
    record_ids = serializers.ListField(child=TextField(max_length=300), required=False, default=list, max_length=5000)
    all = serializers.BooleanField(required=False, default=False)
    fix_reference = TextField(required=False, allow_blank=True, max_length=500)
    note = TextField(required=False, allow_blank=True, default="", max_length=2000)


class ReplayRequestApproveInputSerializer(serializers.Serializer[dict[str, Any]]):
    kind = serializers.ChoiceField(choices=Approval.Kind.choices)
    scope_fingerprint = TextField(max_length=64, help_text="the fingerprint of the scope you reviewed")
    comment = TextField(required=False, allow_blank=True, default="", max_length=4000)
    password = TextField(
        required=False,
        allow_blank=True,
        default="",
        write_only=True,
        style={"input_type": "password"},
        help_text="your password, unless you re-entered it in the last five minutes (reauthenticate)",
    )
    accepts_unknown_repeat_safety = serializers.BooleanField(required=False, default=False)
    acceptance_reason = TextField(required=False, allow_blank=True, default="", max_length=4000)


class ReplayRequestRejectInputSerializer(serializers.Serializer[dict[str, Any]]):
    kind = serializers.ChoiceField(choices=Approval.Kind.choices)
    scope_fingerprint = TextField(max_length=64)
    comment = TextField(max_length=4000)
    password = TextField(
        required=False, allow_blank=True, default="", write_only=True, style={"input_type": "password"}
    )


class ReauthenticateInputSerializer(serializers.Serializer[dict[str, Any]]):
    password = TextField(write_only=True, style={"input_type": "password"})


class ReauthenticateSerializer(serializers.Serializer[dict[str, Any]]):
    reauthenticated_at = serializers.DateTimeField()
    valid_until = serializers.DateTimeField()


class ReasonInputSerializer(serializers.Serializer[dict[str, Any]]):
    reason = TextField(max_length=2000)


class SettleInputSerializer(serializers.Serializer[dict[str, Any]]):
    outcome = serializers.ChoiceField(choices=[("failed", "Failed"), ("completed", "Completed")])
    reason = TextField(max_length=2000)


class RecoveryDecisionInputSerializer(serializers.Serializer[dict[str, Any]]):
    run = serializers.UUIDField()
    decision = serializers.ChoiceField(choices=list(RECOVERY_DECISIONS.items()))
    reference = TextField(required=False, allow_blank=True, default="", max_length=300)
    note = TextField(required=False, allow_blank=True, default="", max_length=2000)


# --- the runner's side --------------------------------------------------------------------------------


class ReplayPayloadRunSerializer(serializers.Serializer[dict[str, Any]]):
    id = serializers.UUIDField()
    job = serializers.CharField()
    tenant = serializers.CharField()
    environment = serializers.CharField()
    window_start = serializers.DateTimeField()
    window_end = serializers.DateTimeField()


class ReplayPayloadSerializer(serializers.Serializer[dict[str, Any]]):
    """What the runner replays: the same document the webhook carries."""

    type = serializers.CharField()
    replay_request = serializers.UUIDField()
    dispatch = serializers.UUIDField()
    idempotency_key = serializers.CharField()
    channel = serializers.CharField()
    kind = serializers.CharField()
    fix_reference = serializers.CharField()
    run = ReplayPayloadRunSerializer()
    record_ids = serializers.ListField(child=serializers.CharField())
    claim_url = serializers.URLField()
    report_url = serializers.URLField()


class ClaimSerializer(serializers.Serializer[dict[str, Any]]):
    """The lease: the dispatch, its key, until when the attempt must be reported started, and the replay."""

    dispatch = serializers.UUIDField()
    status = serializers.CharField()
    idempotency_key = serializers.CharField()
    lease_expires_at = serializers.DateTimeField()
    claimed_now = serializers.BooleanField(help_text="false when this credential had claimed it already")
    replay = ReplayPayloadSerializer()

    @staticmethod
    def shape(dispatch: Dispatch, claimed_now: bool, http_request: HttpRequest | None = None) -> dict[str, Any]:
        """The answer's data; ``claim_url``/``report_url`` are rebuilt from ``http_request`` when given."""
        replay = json.loads(dispatch.payload)
        replay.update(runner_urls(request=dispatch.request, http_request=http_request))
        return {
            "dispatch": dispatch.public_id,
            "status": dispatch.status,
            "idempotency_key": dispatch.idempotency_key,
            "lease_expires_at": dispatch.lease_expires_at,
            "claimed_now": claimed_now,
            "replay": replay,
        }


class ClaimableSerializer(serializers.Serializer[dict[str, Any]]):
    id = serializers.UUIDField()
    run = serializers.UUIDField()
    status = serializers.CharField()
    item_count = serializers.IntegerField()
    approved_at = serializers.DateTimeField()


class ReplayRunnerReportInputSerializer(serializers.Serializer[dict[str, Any]]):
    idempotency_key = TextField(max_length=100)
    execution_id = TextField(max_length=300)
    status = serializers.ChoiceField(
        choices=[(s, s) for s in (Attempt.Status.RUNNING, Attempt.Status.SUCCEEDED, Attempt.Status.FAILED, "timed_out")]
    )
    started_at = BoundedDateTimeField(required=False, allow_null=True, default=None)
    ended_at = BoundedDateTimeField(required=False, allow_null=True, default=None)
    error_summary = TextField(required=False, allow_blank=True, default="", max_length=2000)
    log_url = HttpUrlField(required=False, allow_blank=True, default="", max_length=2000)


class ReplayRunnerReportSerializer(serializers.Serializer[dict[str, Any]]):
    dispatch = serializers.UUIDField()
    dispatch_status = serializers.CharField()
    replay_status = serializers.CharField()
    attempt = serializers.UUIDField(allow_null=True)
    attempt_status = serializers.CharField(allow_null=True)

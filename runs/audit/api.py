"""``/api/v1/audit-events/``: the audit trail, for admins (all) and auditors (their tenants')."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, permissions, serializers, viewsets

from handover.core.serializers import ProblemSerializer
from runs.audit.models import AuditEvent
from runs.audit.selectors import audit_event_list, audit_is_readable


class CanReadAudit(permissions.BasePermission):
    """Admins and auditors of some tenant; others get 403 (the trail is not an object to hide)."""

    def has_permission(self, request: Any, view: Any) -> bool:
        return audit_is_readable(user=request.user)


class AuditEventSerializer(serializers.ModelSerializer[AuditEvent]):
    id = serializers.UUIDField(source="public_id", read_only=True)
    actor = serializers.CharField(source="actor_name", read_only=True, help_text="username; empty for the system")
    tenants = serializers.SlugRelatedField(slug_field="slug", many=True, read_only=True)
    job = serializers.SlugRelatedField(slug_field="key", read_only=True, allow_null=True)

    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "occurred_at",
            "actor",
            "action",
            "summary",
            "tenants",
            "is_all_tenants",
            "job",
            "object_type",
            "object_ref",
            "data",
        ]
        read_only_fields = fields


@extend_schema_view(
    list=extend_schema(
        summary="List audit events (admins; auditors see their tenants')",
        tags=["audit"],
        parameters=[OpenApiParameter("action", str, enum=AuditEvent.Action.values)],
        responses={
            200: AuditEventSerializer(many=True),
            401: OpenApiResponse(ProblemSerializer),
            403: OpenApiResponse(ProblemSerializer, description="neither an admin nor an auditor"),
        },
    ),
)
class AuditEventViewSet(mixins.ListModelMixin, viewsets.GenericViewSet[AuditEvent]):
    """Role grants, key changes, admin edits and retention purges, newest first."""

    serializer_class = AuditEventSerializer
    permission_classes = [permissions.IsAuthenticated, CanReadAudit]

    def get_queryset(self) -> QuerySet[AuditEvent]:
        action = self.request.query_params.get("action")
        return audit_event_list(user=self.request.user, action=action if action in AuditEvent.Action.values else None)

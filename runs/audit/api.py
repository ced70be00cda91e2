"""``/api/v1/audit-events/``: the audit trail, for admins (all) and auditors (their tenants')."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, permissions, serializers, viewsets

from handover.core.filters import StrictQueryMixin
from handover.core.serializers import ProblemSerializer
from runs.audit.filters import AuditEventFilterSet
from runs.audit.models import AuditEvent
from runs.audit.selectors import audit_event_list, audit_is_readable
from runs.catalog.models import Job, Tenant


class CanReadAudit(permissions.BasePermission):
    """Admins and auditors of some tenant; others get 403 (the trail is not an object to hide)."""

    def has_permission(self, request: Any, view: Any) -> bool:
        return audit_is_readable(user=request.user)


class AuditEventSerializer(serializers.ModelSerializer[AuditEvent]):
    id = serializers.UUIDField(source="public_id", read_only=True)
    actor = serializers.CharField(source="actor_name", read_only=True, help_text="username; empty for the system")
    tenants: serializers.SlugRelatedField[Tenant] = serializers.SlugRelatedField(
        slug_field="slug", many=True, read_only=True
    )
    job: serializers.SlugRelatedField[Job] = serializers.SlugRelatedField(
        slug_field="key", read_only=True, allow_null=True
    )

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
        responses={
            200: AuditEventSerializer(many=True),
            401: OpenApiResponse(ProblemSerializer),
            403: OpenApiResponse(ProblemSerializer, description="neither an admin nor an auditor"),
        },
    ),
)
class AuditEventViewSet(StrictQueryMixin, mixins.ListModelMixin, viewsets.GenericViewSet[AuditEvent]):
    """Role grants, key changes, admin edits and retention purges, newest first."""

    queryset = AuditEvent.objects.none()  # for the schema only; get_queryset scopes to the caller
    filterset_class = AuditEventFilterSet
    serializer_class = AuditEventSerializer
    permission_classes = [permissions.IsAuthenticated, CanReadAudit]

    def get_queryset(self) -> QuerySet[AuditEvent]:
        return audit_event_list(user=self.request.user, **self.query_filters)

"""``/api/v1/audit-events/``: the audit trail, for admins (all) and auditors (their tenants')."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, permissions, serializers, viewsets
from rest_framework.request import Request

from handover.core.filters import StrictQueryMixin
from handover.core.serializers import ProblemSerializer
from runs.audit.filters import AuditEventFilterSet
from runs.audit.models import AuditEvent
from runs.audit.selectors import audit_event_list, audit_require_reader
from runs.catalog.models import Job, Tenant


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
    permission_classes = [permissions.IsAuthenticated]

    def check_permissions(self, request: Request) -> None:
        """Anonymous callers get 401; then the selector's refusal (403 for anyone neither an admin nor an
        auditor), before the query string is read, so a refused caller learns nothing from a 400."""
        super().check_permissions(request)
        audit_require_reader(user=request.user)

    def get_queryset(self) -> QuerySet[AuditEvent]:
        return audit_event_list(user=self.request.user, **self.query_filters)

"""``/api/v1/integrations/``: integrations with their settings in force, keys (prefixes only) and recent deliveries.

Admins only (staff): integrations are site configuration, not tenant data.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet
from django.http import Http404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, permissions, serializers, viewsets

from runs.ingest import get_adapter
from runs.ingest.base import merged_settings
from runs.models import Integration, IntegrationKey
from runs.selectors import delivery_list_recent, integration_list


class IsAdmin(permissions.BasePermission):
    """Staff only; others get 403 (the list of integrations is not tenant data to hide)."""

    def has_permission(self, request: Any, view: Any) -> bool:
        return bool(request.user and request.user.is_authenticated and request.user.is_staff)


class IntegrationKeySerializer(serializers.ModelSerializer[IntegrationKey]):
    id = serializers.UUIDField(source="public_id", read_only=True)
    tenants = serializers.SlugRelatedField(slug_field="slug", many=True, read_only=True)

    class Meta:
        model = IntegrationKey
        fields = ["id", "prefix", "label", "all_tenants", "tenants", "created_at", "last_used_at", "revoked_at"]
        read_only_fields = fields


class IntegrationSerializer(serializers.ModelSerializer[Integration]):
    id = serializers.UUIDField(source="public_id", read_only=True)
    keys = IntegrationKeySerializer(many=True, read_only=True)
    settings_in_force = serializers.SerializerMethodField()
    endpoint = serializers.SerializerMethodField()

    class Meta:
        model = Integration
        fields = [
            "id",
            "name",
            "source",
            "is_active",
            "settings",
            "settings_in_force",
            "endpoint",
            "keys",
            "refused_post_count",
            "created_at",
        ]
        read_only_fields = fields

    def get_settings_in_force(self, integration: Integration) -> dict[str, Any]:
        adapter = get_adapter(integration.source)
        return merged_settings(adapter.DEFAULT_SETTINGS, integration.settings) if adapter else integration.settings

    def get_endpoint(self, integration: Integration) -> str:
        return f"/api/v1/alerts/{integration.source}/"


class DeliverySummarySerializer(serializers.Serializer[Any]):
    id = serializers.UUIDField(source="public_id")
    received_at = serializers.DateTimeField()
    outcome = serializers.CharField()
    size_bytes = serializers.IntegerField()
    alert_count = serializers.IntegerField()
    response_status = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField()


class IntegrationDetailSerializer(IntegrationSerializer):
    recent_deliveries = serializers.SerializerMethodField()

    class Meta(IntegrationSerializer.Meta):
        fields = [*IntegrationSerializer.Meta.fields, "recent_deliveries"]
        read_only_fields = fields

    @extend_schema(responses=DeliverySummarySerializer(many=True))  # type: ignore[misc]
    def get_recent_deliveries(self, integration: Integration) -> list[dict[str, Any]]:
        return DeliverySummarySerializer(delivery_list_recent(integration=integration), many=True).data  # type: ignore[return-value]


@extend_schema_view(
    list=extend_schema(summary="List integrations (admins)", tags=["integrations"]),
    retrieve=extend_schema(summary="One integration with recent deliveries (admins)", tags=["integrations"]),
)
class IntegrationViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Integration]):
    """Integrations, their keys (prefix and last use; never the secret) and recent deliveries."""

    permission_classes = [IsAdmin]
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    lookup_value_converter = "uuid"

    def get_queryset(self) -> QuerySet[Integration]:
        keys = IntegrationKey.objects.prefetch_related("tenants").order_by("-created_at")
        return integration_list(user=self.request.user).prefetch_related(Prefetch("keys", queryset=keys))

    def get_object(self) -> Integration:
        integration = self.get_queryset().filter(public_id=self.kwargs["id"]).first()
        if integration is None:
            raise Http404
        return integration

    def get_serializer_class(self) -> type[serializers.BaseSerializer[Integration]]:
        return IntegrationDetailSerializer if self.action == "retrieve" else IntegrationSerializer

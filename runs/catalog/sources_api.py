"""``/api/v1/sources/``: each ingestion address's guide, integrations, refused requests and recent deliveries.

Admins only (staff), like ``/api/v1/integrations/``: sources are site configuration. The answer of
``GET /api/v1/sources/<source>/`` is the source page's (``runs.catalog.sources.source_overview``).
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import permissions, serializers, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from handover.core.filters import StrictQueryMixin
from handover.core.serializers import ProblemSerializer
from runs.alerts.refusals import refused_request_summary_by_source
from runs.catalog.integrations_api import RefusedRequestSerializer
from runs.catalog.sources import source_guide, source_integration_counts, source_list, source_overview


class SourceGuideSerializer(serializers.Serializer[Any]):
    path = serializers.CharField(help_text="the guide's file in the repository, e.g. docs/integrations/alertmanager.md")
    title = serializers.CharField(help_text="the guide's title; empty when the file is not deployed")
    summary = serializers.CharField(help_text="the guide's first paragraph (else the adapter's first docstring line)")


class SourceSerializer(serializers.Serializer[Any]):
    # a field named like Field.source (DRF's metaclass moves it into the declared fields)
    source = serializers.SlugField(help_text="the address's slug: POST /api/v1/alerts/<source>/")  # type: ignore[assignment]
    endpoint = serializers.CharField()
    guide = SourceGuideSerializer()
    integration_count = serializers.IntegerField()
    refused_count = serializers.IntegerField(help_text="requests refused at the address, last 30 days")


class SourceIntegrationSerializer(serializers.Serializer[Any]):
    id = serializers.UUIDField(source="public_id")
    name = serializers.CharField()
    is_active = serializers.BooleanField()
    key_count = serializers.IntegerField(help_text="active keys")
    delivery_count = serializers.IntegerField()
    refused_post_count = serializers.IntegerField()


class SourceDeliverySerializer(serializers.Serializer[Any]):
    id = serializers.UUIDField(source="public_id")
    integration = serializers.UUIDField(source="integration.public_id")
    integration_name = serializers.CharField(source="integration.name")
    received_at = serializers.DateTimeField()
    outcome = serializers.CharField()
    reason = serializers.CharField()
    response_status = serializers.IntegerField(allow_null=True)
    alert_count = serializers.IntegerField()
    accepted_count = serializers.IntegerField()
    duplicate_count = serializers.IntegerField()
    unmatched_count = serializers.IntegerField()
    rejected_count = serializers.IntegerField()


class SourceDetailSerializer(serializers.Serializer[Any]):
    source = serializers.SlugField()  # type: ignore[assignment]
    endpoint = serializers.CharField()
    can_sign = serializers.BooleanField(
        help_text="whether its senders can sign: signatures cannot be required otherwise"
    )
    guide = SourceGuideSerializer()
    default_conventions = serializers.DictField(
        help_text="where the adapter reads each field unless an integration says otherwise (empty for custom)"
    )
    integrations = SourceIntegrationSerializer(many=True)
    refused_requests = RefusedRequestSerializer(many=True, source="refused")
    refused_count = serializers.IntegerField(source="refused_total")
    refused_keep_days = serializers.IntegerField()
    recent_deliveries = SourceDeliverySerializer(many=True, source="deliveries")


@extend_schema_view(
    list=extend_schema(summary="Sources (admins): each address with its guide, integrations and refusals"),
    retrieve=extend_schema(
        summary="One source (admins): guide, conventions, integrations, refused requests, recent deliveries",
        responses={200: SourceDetailSerializer, 404: OpenApiResponse(ProblemSerializer, description="no such source")},
    ),
)
class SourceViewSet(StrictQueryMixin, viewsets.ViewSet):
    """Ingestion addresses (one per adapter); read only."""

    permission_classes = [permissions.IsAdminUser]  # the staff area: 401 anonymous, 403 others
    lookup_field = "source"
    lookup_value_converter = "slug"

    @extend_schema(responses=SourceSerializer(many=True))
    def list(self, request: Request) -> Response:
        counts = source_integration_counts(user=request.user)
        refused = {row.source: row.count for row in refused_request_summary_by_source()}
        rows = [
            {
                "source": source,
                "endpoint": f"/api/v1/alerts/{source}/",
                "guide": source_guide(source),
                "integration_count": counts.get(source, 0),
                "refused_count": refused.get(source, 0),
            }
            for source in source_list(user=request.user)
        ]
        return Response(SourceSerializer(rows, many=True).data)

    def retrieve(self, request: Request, source: str) -> Response:
        overview = source_overview(user=request.user, source=source)
        if overview is None:
            raise Http404
        return Response(SourceDetailSerializer(overview).data)

"""``/api/v1/alerts/``: every parsed alert with its outcome and reason; reprocessing of unmatched ones."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from handover.core.filters import StrictQueryMixin
from handover.core.people import signed_in
from handover.core.serializers import ProblemSerializer
from runs.alerts.filters import AlertFilterSet
from runs.alerts.models import Alert
from runs.alerts.selectors import alert_get, alert_list, alert_list_counted
from runs.alerts.serializers import AlertSerializer
from runs.alerts.triage import alert_reprocess


@extend_schema_view(
    list=extend_schema(summary="List alerts", tags=["alerts"]),
    retrieve=extend_schema(summary="One alert", tags=["alerts"]),
)
class AlertViewSet(StrictQueryMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Alert]):
    """Alerts the caller may see, newest first."""

    queryset = Alert.objects.none()  # for the schema only; get_queryset scopes to the caller
    filterset_class = AlertFilterSet
    serializer_class = AlertSerializer
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    lookup_value_converter = "uuid"

    def get_queryset(self) -> QuerySet[Alert]:
        return alert_list(user=self.request.user, **self.query_filters)

    def list(self, request: Request, *args: object, **kwargs: object) -> Response:
        """A page of the caller's alerts, counted per visibility branch (``alert_list_counted``)."""
        alerts = alert_list_counted(user=request.user, **self.query_filters)
        page = self.paginate_queryset(alerts)  # type: ignore[arg-type]  # pages like a queryset (slices, count)
        if page is None:
            return Response(self.get_serializer(list(alerts), many=True).data)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    def get_object(self) -> Alert:
        alert = alert_get(user=self.request.user, public_id=self.kwargs["id"])
        if alert is None:
            raise Http404
        return alert

    @extend_schema(
        summary="Reprocess an unmatched alert",
        description="Parse the stored body again and apply it (after registering the job or fixing the mapping).",
        tags=["alerts"],
        request=None,
        responses={
            200: AlertSerializer,
            403: OpenApiResponse(ProblemSerializer),
            404: OpenApiResponse(ProblemSerializer),
            409: OpenApiResponse(ProblemSerializer, description="not unmatched or pending"),
        },
    )
    @action(detail=True, methods=["post"])
    def reprocess(self, request: Request, id: str) -> Response:
        alert = self.get_object()
        alert = alert_reprocess(alert=alert, actor=signed_in(request.user))
        return Response(AlertSerializer(alert_get(user=request.user, public_id=alert.public_id)).data)

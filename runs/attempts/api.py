"""``/api/v1/runs/``: logical runs with their attempts and timeline."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, viewsets
from rest_framework.serializers import BaseSerializer

from handover.core.filters import StrictQueryMixin
from runs.attempts.filters import RunFilterSet
from runs.attempts.models import Run
from runs.attempts.selectors import run_get, run_list
from runs.attempts.serializers import RunDetailSerializer, RunListSerializer


@extend_schema_view(
    list=extend_schema(summary="List runs", tags=["runs"]),
    retrieve=extend_schema(summary="One run with its attempts and timeline", tags=["runs"]),
)
class RunViewSet(StrictQueryMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Run]):
    """Runs the caller may see; newest window first. A run the caller may not see answers 404."""

    queryset = Run.objects.none()  # for the schema only; get_queryset scopes to the caller
    filterset_class = RunFilterSet
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    lookup_value_converter = "uuid"

    def get_queryset(self) -> QuerySet[Run]:
        return run_list(user=self.request.user, **self.query_filters)

    def get_object(self) -> Run:
        run = run_get(user=self.request.user, public_id=self.kwargs["id"])
        if run is None:
            raise Http404
        return run

    def get_serializer_class(self) -> type[BaseSerializer[Run]]:
        return RunDetailSerializer if self.action == "retrieve" else RunListSerializer

"""``/api/v1/jobs/``: the jobs a person may see, read-only (pause and resume are actions of their own)."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_view
from rest_framework import mixins, viewsets

from handover.core.filters import StrictQueryMixin
from runs.catalog.filters import JobFilterSet
from runs.catalog.models import Job
from runs.catalog.selectors import job_list
from runs.catalog.serializers import JobSerializer

JOB_EXAMPLE = OpenApiExample(
    "A nightly export",
    value={
        "id": "0b6f3c1e-5d0a-4c55-9a52-3e1f6f1d2a77",
        "url": "http://localhost:8000/api/v1/jobs/0b6f3c1e-5d0a-4c55-9a52-3e1f6f1d2a77/",
        "key": "nightly-invoice-export",
        "name": "Nightly invoice export",
        "schedule": "0 1 * * *",
        "timezone": "Europe/Berlin",
        "grace_seconds": 1800,
        "missed_run_policy": "catch_up_all",
        "overlap_policy": "allow",
        "expected_output": "One invoice per billable order, delivered to the ledger gateway.",
        "verification": "Query the ledger gateway's export for the window.",
        "is_paused": False,
        "paused_at": None,
        "paused_by": None,
        "pause_reason": "",
    },
    response_only=True,
)


@extend_schema_view(
    list=extend_schema(summary="List jobs", tags=["jobs"]),
    retrieve=extend_schema(summary="One job", tags=["jobs"], examples=[JOB_EXAMPLE]),
)
class JobViewSet(StrictQueryMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Job]):
    """Jobs the caller may see, by key; a job the caller may not see answers 404 (``job_list_visible``)."""

    queryset = Job.objects.none()  # for the schema only; get_queryset scopes to the caller
    serializer_class = JobSerializer
    filterset_class = JobFilterSet
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    lookup_value_converter = "uuid"

    def get_queryset(self) -> QuerySet[Job]:
        return job_list(user=self.request.user, **self.query_filters)

    def get_object(self) -> Job:
        job = job_list(user=self.request.user).filter(public_id=self.kwargs["id"]).first()
        if job is None:
            raise Http404
        return job

"""``/api/v1/recurrence/`` and ``/api/v1/supportability/``: the recurrence figures and the supportability report.

Read-only, for every signed-in person: each counts only the runs the caller may see (support, business
owners and auditors: their tenants; technical owners: their jobs; admins: all), so a person with no
role reads an empty report. Formulas: docs/recurrence.md.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.recurrence.filters import RecurrenceFilterSet, SupportabilityFilterSet, tenants_named
from approvals.recurrence.selectors import recurrence_report
from approvals.recurrence.serializers import RecurrenceReportSerializer, SupportabilityReportSerializer
from approvals.recurrence.supportability import supportability_report
from handover.core.filters import StrictQueryMixin
from handover.core.serializers import ProblemSerializer
from runs.attempts.failures import PERIOD_DAYS, Period, period_ending

TAG = ["recurrence"]
PROBLEMS = {
    400: OpenApiResponse(ProblemSerializer, description="an unknown or invalid query parameter"),
    401: OpenApiResponse(ProblemSerializer, description="not signed in"),
}

PERIOD_PARAMETERS = [
    OpenApiParameter(
        "days",
        OpenApiTypes.STR,
        OpenApiParameter.QUERY,
        enum=[str(d) for d in PERIOD_DAYS],
        description="the period in days (default 30)",
    ),
    OpenApiParameter(
        "until",
        OpenApiTypes.DATE,
        OpenApiParameter.QUERY,
        description="the period's last day in the caller's zone (default today)",
    ),
    OpenApiParameter(
        "tenant",
        OpenApiTypes.STR,
        OpenApiParameter.QUERY,
        description="only this tenant (slug); one you may not see counts nothing",
    ),
]
JOB_PARAMETER = OpenApiParameter("job", OpenApiTypes.UUID, OpenApiParameter.QUERY, description="only this job (its id)")


def _period(filters: dict[str, Any]) -> Period:
    return period_ending(days=int(filters.get("days", 30)), last_day=filters.get("until"))


class RecurrenceView(StrictQueryMixin, APIView):
    """``GET /api/v1/recurrence/``: jobs ranked by cost to the support desk, with figures by tenant and class."""

    permission_classes = [IsAuthenticated]
    filterset_class = RecurrenceFilterSet

    @extend_schema(
        summary="Recurrence figures: jobs ranked by cost to the support desk",
        description="Per job, and per tenant and failure class within it: failures, runs affected, handovers, "
        "replays, duplicates, time from failure to handover, approved replay and recovery (median and 90th "
        "percentile, seconds), days open, and the cost score; failures per day (per week over 90 days). Only "
        "runs the caller may see count. Formulas: docs/recurrence.md.",
        tags=TAG,
        parameters=[*PERIOD_PARAMETERS, JOB_PARAMETER],
        responses={200: RecurrenceReportSerializer, **PROBLEMS},
    )
    def get(self, request: Request) -> Response:
        filters = self.query_filters
        report = recurrence_report(
            user=request.user,
            period=_period(filters),
            tenants=tenants_named(filters.get("tenant")),
            job_public_id=filters.get("job"),
        )
        return Response(RecurrenceReportSerializer(report).data)


class SupportabilityView(StrictQueryMixin, APIView):
    """``GET /api/v1/supportability/``: jobs ranked by what their alerts lacked and how often the owner explained."""

    permission_classes = [IsAuthenticated]
    filterset_class = SupportabilityFilterSet

    @extend_schema(
        summary="Supportability report: what the alerts lacked, per job and source",
        description="Per job: accepted alerts reporting a failure on runs the caller may see that lacked a run "
        "reference, a window, an execution id or a business-impact statement, by source; handovers, and those "
        "that needed the technical owner to explain what happened. Formulas: docs/recurrence.md.",
        tags=TAG,
        parameters=PERIOD_PARAMETERS,
        responses={200: SupportabilityReportSerializer, **PROBLEMS},
    )
    def get(self, request: Request) -> Response:
        filters = self.query_filters
        report = supportability_report(
            user=request.user, period=_period(filters), tenants=tenants_named(filters.get("tenant"))
        )
        return Response(SupportabilityReportSerializer(report).data)

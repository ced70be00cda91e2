"""``/api/v1/jobs/<id>/pause/`` and ``/resume/``: support or the technical owner pauses a job (reason, actor).

A job the caller may not see answers 404; one they may see but not pause answers 403.
"""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from handover.core.filters import StrictQueryMixin
from handover.core.serializers import ProblemSerializer
from runs.catalog.models import Job
from runs.catalog.pause import job_pause, job_resume
from runs.catalog.pause_serializers import JobPauseInputSerializer, JobPauseSerializer, JobResumeInputSerializer
from runs.catalog.selectors import job_get
from runs.permissions import may_pause_job

PROBLEMS = {
    400: OpenApiResponse(ProblemSerializer),
    403: OpenApiResponse(ProblemSerializer, description="not a technical owner of the job (nor an admin)"),
    404: OpenApiResponse(ProblemSerializer, description="no such job, or not visible to the caller"),
}


def _job_for_pause(request: Request, id: str) -> Job:
    job = job_get(user=request.user, public_id=id)
    if job is None:
        raise Http404("No such job.")
    if not may_pause_job(user=request.user, job=job):
        raise PermissionDenied("Only the job's technical owners and admins pause the whole job.")
    return job


class JobPauseView(StrictQueryMixin, APIView):
    """Pause a job: replays are blocked and the pause shows wherever the job appears."""

    @extend_schema(
        summary="Pause a job",
        description="Idempotent: pausing a paused job keeps the first pause. Written on the job's timeline.",
        tags=["jobs"],
        request=JobPauseInputSerializer,
        responses={200: JobPauseSerializer, **PROBLEMS},
    )
    def post(self, request: Request, id: str) -> Response:
        job = _job_for_pause(request, id)
        data = JobPauseInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        job = job_pause(job=job, actor=request.user, reason=data.validated_data["reason"])
        return Response(JobPauseSerializer(Job.objects.select_related("paused_by").get(pk=job.pk)).data)


class JobResumeView(StrictQueryMixin, APIView):
    """Resume a paused job."""

    @extend_schema(
        summary="Resume a paused job",
        description="Idempotent: resuming a job that is not paused changes nothing.",
        tags=["jobs"],
        request=JobResumeInputSerializer,
        responses={200: JobPauseSerializer, **PROBLEMS},
    )
    def post(self, request: Request, id: str) -> Response:
        job = _job_for_pause(request, id)
        data = JobResumeInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        job = job_resume(job=job, actor=request.user, note=data.validated_data.get("note", ""))
        return Response(JobPauseSerializer(Job.objects.select_related("paused_by").get(pk=job.pk)).data)

"""``/api/v1/jobs/<id>/pause/`` and ``/resume/`` (the whole job: its technical owners and admins), and
``/api/v1/targets/<id>/pause/`` and ``/resume/`` (one tenant's part of the job: support on the tenant too).

What the caller may not see answers 404; what they may see but not pause answers 403. The refusals
come from the services (runs/catalog/pause.py); these views only look the object up.
"""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from handover.core.filters import StrictQueryMixin
from handover.core.people import signed_in
from handover.core.serializers import ProblemSerializer
from runs.catalog.models import Job, JobTarget
from runs.catalog.pause import job_pause, job_resume, target_pause, target_resume
from runs.catalog.pause_serializers import (
    JobPauseInputSerializer,
    JobPauseSerializer,
    JobResumeInputSerializer,
    TargetPauseSerializer,
)
from runs.catalog.selectors import job_get, target_get

PROBLEMS = {
    400: OpenApiResponse(ProblemSerializer),
    403: OpenApiResponse(ProblemSerializer, description="not a technical owner of the job (nor an admin)"),
    404: OpenApiResponse(ProblemSerializer, description="no such job, or not visible to the caller"),
}


TARGET_PROBLEMS = {
    400: OpenApiResponse(ProblemSerializer),
    403: OpenApiResponse(
        ProblemSerializer, description="neither support on the target's tenant nor a technical owner of the job"
    ),
    404: OpenApiResponse(ProblemSerializer, description="no such target, or not visible to the caller"),
}


def _job_for_pause(request: Request, id: str) -> Job:
    job = job_get(user=request.user, public_id=id)
    if job is None:
        raise Http404("No such job.")
    return job


def _target(request: Request, id: str) -> JobTarget:
    target = target_get(user=request.user, public_id=id)
    if target is None:
        raise Http404("No such target.")
    return target


def _target_body(target: JobTarget) -> Response:
    return Response(
        TargetPauseSerializer(JobTarget.objects.select_related("job", "tenant", "paused_by").get(pk=target.pk)).data
    )


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
        # the service refuses who may not pause (403) before it asks for the reason (400)
        reason = data.validated_data["reason"] if data.is_valid() else ""
        job = job_pause(job=job, actor=signed_in(request.user), reason=reason)
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
        job = job_resume(job=job, actor=signed_in(request.user), note=data.validated_data.get("note", ""))
        return Response(JobPauseSerializer(Job.objects.select_related("paused_by").get(pk=job.pk)).data)


class TargetPauseView(StrictQueryMixin, APIView):
    """Pause one target of a job (its tenant's part): its replays are blocked and no run of it is counted missed."""

    @extend_schema(
        summary="Pause a target (one tenant's part of a job)",
        description="Idempotent: pausing a paused target keeps the first pause. Written on the job's timeline "
        "for the target's tenant. Support on the tenant, the job's technical owners and admins.",
        tags=["jobs"],
        request=JobPauseInputSerializer,
        responses={200: TargetPauseSerializer, **TARGET_PROBLEMS},
    )
    def post(self, request: Request, id: str) -> Response:
        target = _target(request, id)
        data = JobPauseInputSerializer(data=request.data)
        reason = data.validated_data["reason"] if data.is_valid() else ""  # refusal (403) before the reason (400)
        return _target_body(target_pause(target=target, actor=signed_in(request.user), reason=reason))


class TargetResumeView(StrictQueryMixin, APIView):
    """Resume a paused target."""

    @extend_schema(
        summary="Resume a paused target",
        description="Idempotent: resuming a target that is not paused changes nothing. Fire times before the "
        "resume are never counted missed.",
        tags=["jobs"],
        request=JobResumeInputSerializer,
        responses={200: TargetPauseSerializer, **TARGET_PROBLEMS},
    )
    def post(self, request: Request, id: str) -> Response:
        target = _target(request, id)
        data = JobResumeInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        note = data.validated_data.get("note", "")
        return _target_body(target_resume(target=target, actor=signed_in(request.user), note=note))

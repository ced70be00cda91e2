"""``/api/v1/jobs/<id>/pause/`` and ``/resume/`` (the whole job: its technical owners and admins), and
``/api/v1/targets/<id>/pause/`` and ``/resume/`` (one tenant's part of the job: support on the tenant too).

What the caller may not see answers 404; what they may see but not pause answers 403. The refusals
come from the services (runs/catalog/pause.py); these views only look the object up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from handover.core.filters import StrictQueryMixin
from handover.core.people import Person, signed_in
from handover.core.serializers import ProblemSerializer, validated_body
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


@dataclass(frozen=True)
class PauseSubject:
    """What a pause or resume view acts on: a job, or a target (one tenant's part of a job).

    ``get(user, public_id)``: the object if the caller may see it, else None (answered 404 with
    ``not_found``); ``pause(obj, actor, reason)`` and ``resume(obj, actor, note)``: the services (they
    raise the 403 and 400 refusals, runs/catalog/pause.py); ``body(obj)``: the answer's data, the object
    reloaded with what its serializer shows."""

    get: Callable[[Any, str], Any]
    not_found: str
    pause: Callable[[Any, Person, str], Any]
    resume: Callable[[Any, Person, str], Any]
    body: Callable[[Any], Any]


JOB = PauseSubject(
    get=lambda user, id: job_get(user=user, public_id=id),
    not_found="No such job.",
    pause=lambda job, actor, reason: job_pause(job=job, actor=actor, reason=reason),
    resume=lambda job, actor, note: job_resume(job=job, actor=actor, note=note),
    body=lambda job: JobPauseSerializer(Job.objects.select_related("paused_by").get(pk=job.pk)).data,
)
TARGET = PauseSubject(
    get=lambda user, id: target_get(user=user, public_id=id),
    not_found="No such target.",
    pause=lambda target, actor, reason: target_pause(target=target, actor=actor, reason=reason),
    resume=lambda target, actor, note: target_resume(target=target, actor=actor, note=note),
    body=lambda target: (
        TargetPauseSerializer(JobTarget.objects.select_related("job", "tenant", "paused_by").get(pk=target.pk)).data
    ),
)


def _visible(request: Request, id: str, subject: PauseSubject) -> Any:
    found = subject.get(request.user, id)
    if found is None:
        raise Http404(subject.not_found)
    return found


def pause_answer(request: Request, id: str, subject: PauseSubject) -> Response:
    """Pause the ``subject`` object with public id ``id``: 404 when the caller may not see it; the
    service refuses who may not pause (403) before it asks for the reason (400). Answers the object."""
    found = _visible(request, id, subject)
    data = JobPauseInputSerializer(data=request.data)
    reason = data.validated_data["reason"] if data.is_valid() else ""
    return Response(subject.body(subject.pause(found, signed_in(request.user), reason)))


def resume_answer(request: Request, id: str, subject: PauseSubject) -> Response:
    """Resume the ``subject`` object with public id ``id``: 404 when the caller may not see it, 400 for a
    malformed body, then the service's refusals (403). Answers the object."""
    found = _visible(request, id, subject)
    note = validated_body(request, JobResumeInputSerializer).get("note", "")
    return Response(subject.body(subject.resume(found, signed_in(request.user), note)))


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
        return pause_answer(request, id, JOB)


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
        return resume_answer(request, id, JOB)


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
        return pause_answer(request, id, TARGET)


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
        return resume_answer(request, id, TARGET)

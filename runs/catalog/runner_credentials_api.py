"""``/api/v1/jobs/<id>/runner-credentials/``: a job's runner credentials -- list, issue (shown once), revoke.

For an admin or the job's technical owner (docs/architecture.md "Roles and permissions"): a job the
caller may not see answers 404; one they see but may not manage answers 403. The secret is in the
answer to the POST only (``Cache-Control: no-store``); only its SHA-256 and prefix are stored.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from handover.core.fields import TextField
from handover.core.filters import StrictQueryMixin
from handover.core.links import absolute_url
from handover.core.parsers import JSONParser
from handover.core.people import signed_in
from handover.core.serializers import ProblemSerializer
from runs.catalog.models import Job, RunnerCredential
from runs.catalog.selectors import job_get, runner_credential_list
from runs.catalog.services import runner_credential_create, runner_credential_require_manager, runner_credential_revoke

TAG = ["jobs"]
PROBLEMS = {
    403: OpenApiResponse(ProblemSerializer, description="neither an admin nor a technical owner of the job"),
    404: OpenApiResponse(ProblemSerializer, description="no such job, or not visible to the caller"),
}
PREFIX = OpenApiParameter("prefix", str, OpenApiParameter.PATH, description="the credential's prefix (rc_…)")


class RunnerCredentialSerializer(serializers.ModelSerializer[RunnerCredential]):
    """A runner credential as listed: never its secret or hash."""

    id = serializers.UUIDField(source="public_id", read_only=True)
    job = serializers.CharField(source="job.key", read_only=True)
    created_by = serializers.SerializerMethodField()

    class Meta:
        model = RunnerCredential
        fields = ["id", "job", "prefix", "label", "created_at", "created_by", "last_used_at", "revoked_at"]
        read_only_fields = fields

    def get_created_by(self, obj: RunnerCredential) -> str | None:
        """The username of the person who issued it (null: the system or a management command)."""
        return obj.created_by.get_username() if obj.created_by is not None else None


class RunnerCredentialIssuedSerializer(RunnerCredentialSerializer):
    """The answer to an issue: the row, the secret (this once) and the runner endpoints' absolute URLs."""

    credential = serializers.CharField(help_text="the secret: send it as 'Authorization: Bearer <credential>'")
    claimable_url = serializers.URLField()

    class Meta(RunnerCredentialSerializer.Meta):
        fields = [*RunnerCredentialSerializer.Meta.fields, "credential", "claimable_url"]
        read_only_fields = fields


class RunnerCredentialInputSerializer(serializers.Serializer[Any]):
    # a DRF field named like Field.label: the stubs' base attribute, not ours
    label = TextField(  # type: ignore[assignment]
        max_length=100, required=False, allow_blank=True, default=""
    )


def _job_for_credentials(request: Request, id: str) -> Job:
    job = job_get(user=request.user, public_id=id)
    if job is None:
        raise Http404("No such job.")
    runner_credential_require_manager(actor=signed_in(request.user), job=job)  # before the body is read
    return job


class RunnerCredentialListView(StrictQueryMixin, APIView):
    """``GET``/``POST /api/v1/jobs/<id>/runner-credentials/``."""

    parser_classes = [JSONParser]

    @extend_schema(
        summary="List a job's runner credentials (prefix, created, creator, last use, revoked)",
        tags=TAG,
        responses={200: RunnerCredentialSerializer(many=True), **PROBLEMS},
    )
    def get(self, request: Request, id: str) -> Response:
        job = _job_for_credentials(request, id)
        return Response(RunnerCredentialSerializer(runner_credential_list(job=job), many=True).data)

    @extend_schema(
        summary="Issue a runner credential for a job (the secret is in this answer only)",
        description="The job's runner sends it as `Authorization: Bearer <credential>` to "
        "`GET /api/v1/replays/claimable/`, `POST /api/v1/replays/{id}/claim/` and "
        "`POST /api/v1/replays/{id}/runner-report/`. Only a hash is stored. Audited.",
        tags=TAG,
        request=RunnerCredentialInputSerializer,
        responses={201: RunnerCredentialIssuedSerializer, 400: OpenApiResponse(ProblemSerializer), **PROBLEMS},
    )
    def post(self, request: Request, id: str) -> Response:
        job = _job_for_credentials(request, id)
        data = RunnerCredentialInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        record, secret = runner_credential_create(
            job=job,
            created_by=request.user,  # type: ignore[arg-type]
            label=data.validated_data["label"],
        )
        row = runner_credential_list(job=job).get(pk=record.pk)
        body = dict(
            RunnerCredentialSerializer(row).data,
            credential=secret,
            claimable_url=absolute_url(reverse("approvals-api:replay-claimable"), request._request),
        )
        response = Response(body, status=status.HTTP_201_CREATED)
        response["Cache-Control"] = "no-store"
        return response


class RunnerCredentialDetailView(StrictQueryMixin, APIView):
    """``DELETE /api/v1/jobs/<id>/runner-credentials/<prefix>/``: revoke."""

    @extend_schema(
        summary="Revoke a job's runner credential (its claims and reports answer 401 from now on)",
        description="Idempotent: revoking a revoked credential changes nothing. Audited.",
        tags=TAG,
        parameters=[PREFIX],
        responses={200: RunnerCredentialSerializer, **PROBLEMS},
    )
    def delete(self, request: Request, id: str, prefix: str) -> Response:
        job = _job_for_credentials(request, id)
        credential = runner_credential_list(job=job).filter(prefix=prefix).first()
        if credential is None:
            raise Http404("No such runner credential of this job.")
        credential = runner_credential_revoke(credential=credential, actor=request.user)  # type: ignore[arg-type]
        return Response(RunnerCredentialSerializer(credential).data)

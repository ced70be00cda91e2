"""The job runner's side of ``/api/v1/replays/``: list what it may claim, claim, report the attempt.

Authenticated by the job's runner credential (``Authorization: Bearer rc_…``; 32 random bytes,
stored as SHA-256, compared in constant time by ``runs.catalog.authentication``), never by a person's
session or token. A credential is scoped to its job: another job's requests answer 404.
"""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.replays.dispatch import dispatch_claim, dispatch_runner_report
from approvals.replays.models import ReplayRequest
from approvals.replays.selectors import runner_claimable
from approvals.replays.serializers import (
    ClaimableSerializer,
    ClaimSerializer,
    ReplayRunnerReportInputSerializer,
    ReplayRunnerReportSerializer,
)
from handover.core.errors import NotFound, problem, problem_response
from handover.core.filters import StrictQueryMixin
from handover.core.parsers import JSONParser
from handover.core.serializers import ProblemSerializer
from runs.attempts.details import AttemptDetails
from runs.catalog.authentication import bearer_from_request, runner_credential_authenticate
from runs.catalog.models import RunnerCredential
from runs.catalog.services import runner_credential_record_use

TAG = ["replays (runner)"]
UNAUTHENTICATED = OpenApiResponse(ProblemSerializer, description="no valid runner credential")
NOT_FOUND = OpenApiResponse(ProblemSerializer, description="no such replay request for this runner's job")
REFUSED = OpenApiResponse(
    ProblemSerializer, description="held by a rule, leased to another credential, or not claimable in its state"
)


class _RunnerView(StrictQueryMixin, APIView):
    """Base: no session or token authentication; the view checks the runner credential itself."""

    # authenticated by the runner credential alone: no session, CSRF or messages (handover.core.middleware)
    integration_endpoint = True
    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    parser_classes = [JSONParser]

    def _credential(self, request: Request) -> RunnerCredential | None:
        credential = runner_credential_authenticate(bearer_from_request(request._request))
        if credential is not None:
            runner_credential_record_use(credential=credential)
        return credential

    @staticmethod
    def _unauthenticated() -> Response:
        response = problem_response(
            problem(401, "Not authenticated", "Send the job's runner credential as 'Authorization: Bearer <key>'.")
        )
        response["WWW-Authenticate"] = 'Bearer realm="handover-runner"'
        return response

    @staticmethod
    def _request_for(credential: RunnerCredential, id: str) -> ReplayRequest:
        replay = (
            ReplayRequest.objects.select_related("run__job", "run__tenant")
            .filter(public_id=id, run__job_id=credential.job_id)
            .first()
        )
        if replay is None:
            raise NotFound("No such replay request for this runner.")
        return replay


class ReplayClaimableView(_RunnerView):
    """``GET /api/v1/replays/claimable/``: requests of the credential's job waiting for a runner."""

    @extend_schema(
        summary="Replays this runner may claim (approved, or dispatched and not leased yet)",
        tags=TAG,
        responses={200: ClaimableSerializer(many=True), 401: UNAUTHENTICATED},
    )
    def get(self, request: Request) -> Response:
        credential = self._credential(request)
        if credential is None:
            return self._unauthenticated()
        rows: QuerySet[ReplayRequest] = runner_claimable(credential=credential)[:100]
        data = [
            {
                "id": r.public_id,
                "run": r.run.public_id,
                "status": r.status,
                "item_count": r.item_count,
                "approved_at": r.approved_at,
            }
            for r in rows
        ]
        return Response(ClaimableSerializer(data, many=True).data)  # type: ignore[arg-type]  # many=True takes a list; the stubs type one instance


class ReplayClaimView(_RunnerView):
    """``POST /api/v1/replays/<id>/claim/``: the runner takes the replay (a lease); idempotent."""

    @extend_schema(
        summary="Claim a replay: the dispatch, its idempotency key and the scope (a second claim returns the same)",
        description="Dispatches an approved request first (once). The claim is a lease: report the attempt as "
        "started before ``lease_expires_at``, or the dispatch becomes unknown for a person to decide.",
        tags=TAG,
        request=None,
        responses={200: ClaimSerializer, 401: UNAUTHENTICATED, 404: NOT_FOUND, 409: REFUSED},
    )
    def post(self, request: Request, id: str) -> Response:
        credential = self._credential(request)
        if credential is None:
            return self._unauthenticated()
        replay = self._request_for(credential, id)
        dispatch, claimed_now = dispatch_claim(request=replay, credential=credential)
        return Response(ClaimSerializer(ClaimSerializer.shape(dispatch, claimed_now, request._request)).data)


class ReplayRunnerReportView(_RunnerView):
    """``POST /api/v1/replays/<id>/runner-report/``: the replay's attempt started, succeeded or failed."""

    @extend_schema(
        summary="Report the replay's attempt (running, succeeded, failed, timed_out) with the replay's key",
        description="Creates or moves the run's attempt as a manual replay, linked to this replay only with the "
        "job's runner credential and the request's idempotency key (rule 7). A success completes the request "
        "once the ledger confirms the scope; a failure fails it and releases its items.",
        tags=TAG,
        request=ReplayRunnerReportInputSerializer,
        responses={
            200: ReplayRunnerReportSerializer,
            400: OpenApiResponse(ProblemSerializer, description="invalid input"),
            401: UNAUTHENTICATED,
            403: OpenApiResponse(ProblemSerializer, description="not this replay's idempotency key (rule 7)"),
            404: NOT_FOUND,
            409: OpenApiResponse(ProblemSerializer, description="not dispatched, or another attempt's execution id"),
        },
    )
    def post(self, request: Request, id: str) -> Response:
        credential = self._credential(request)
        if credential is None:
            return self._unauthenticated()
        replay = self._request_for(credential, id)
        data = ReplayRunnerReportInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        dispatch = dispatch_runner_report(
            request=replay,
            credential=credential,
            idempotency_key=values["idempotency_key"],
            report=AttemptDetails(
                execution_id=values["execution_id"],
                status=values["status"],
                started_at=values["started_at"],
                ended_at=values["ended_at"],
                error_summary=values["error_summary"],
                log_url=values["log_url"],
            ),
        )
        replay.refresh_from_db(fields=["status"])
        attempt = dispatch.attempt
        return Response(
            ReplayRunnerReportSerializer(
                {
                    "dispatch": dispatch.public_id,
                    "dispatch_status": dispatch.status,
                    "replay_status": replay.status,
                    "attempt": attempt.public_id if attempt is not None else None,
                    "attempt_status": attempt.status if attempt is not None else None,
                }
            ).data
        )

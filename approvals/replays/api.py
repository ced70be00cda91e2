"""``/api/v1/replays/``: replay requests for people -- request, approve or reject, re-scope, cancel,
dispatch, settle; the "waiting for me" queue; the password re-entry; other recovery decisions.

Visibility follows the run (a request on a run the caller may not see answers 404); every rule
lives in the slice's services (``requests``, ``decisions``, ``dispatch``) and its refusals come back
as problem details naming the rule
(403 for who may not, 409 for what the rules or the state refuse). Transitions are POST actions
named after the verb; each returns the updated request.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from approvals.replays.decisions import (
    approver_reauthenticate,
    approver_reauthentication,
    reauth_credential_ref,
    replay_request_approve,
    replay_request_reject,
)
from approvals.replays.dispatch import replay_request_dispatch
from approvals.replays.filters import ReplayRequestFilterSet
from approvals.replays.models import ReplayRequest
from approvals.replays.requests import (
    replay_request_cancel,
    replay_request_create,
    replay_request_rescope,
    replay_request_settle,
    run_recovery_decision_record,
)
from approvals.replays.rules import side_effects
from approvals.replays.selectors import (
    replay_request_get,
    replay_request_items,
    replay_request_list,
    replay_request_queue,
)
from approvals.replays.serializers import (
    ReasonInputSerializer,
    ReauthenticateInputSerializer,
    ReauthenticateSerializer,
    RecoveryDecisionInputSerializer,
    ReplayRequestApproveInputSerializer,
    ReplayRequestCreateInputSerializer,
    ReplayRequestDetailSerializer,
    ReplayRequestItemSerializer,
    ReplayRequestListSerializer,
    ReplayRequestRejectInputSerializer,
    ReplayRequestRescopeInputSerializer,
    SettleInputSerializer,
)
from handover.core.filters import StrictQueryMixin
from handover.core.openapi import rate_limited
from handover.core.parsers import JSONParser
from handover.core.serializers import ProblemSerializer
from runs.attempts.models import Run
from runs.ledger.selectors import run_get_for_ledger
from runs.timeline.serializers import TimelineEventSerializer

TAG = ["replays"]
SCOPE_SAMPLE = 20


def _problem(description: str) -> OpenApiResponse:
    return OpenApiResponse(ProblemSerializer, description=description)


NOT_FOUND = _problem("no such replay request, or its run is not visible to the caller")
FORBIDDEN = _problem("the caller may see the request but not take this action (names the rule)")
REFUSED = _problem("refused by the replay rules or the request's state (``errors`` names each rule)")
INVALID = _problem("invalid input")


@extend_schema_view(
    list=extend_schema(summary="List replay requests", tags=TAG),
)
class ReplayRequestViewSet(StrictQueryMixin, mixins.ListModelMixin, viewsets.GenericViewSet[ReplayRequest]):
    """Replay requests on runs the caller may see, newest first."""

    queryset = ReplayRequest.objects.none()  # for the schema only; get_queryset scopes to the caller
    filterset_class = ReplayRequestFilterSet
    paginated_actions = frozenset({"queue", "items"})
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    lookup_value_converter = "uuid"
    parser_classes = [JSONParser]  # JSON only: no form or multipart bodies

    def get_queryset(self) -> QuerySet[ReplayRequest]:
        filters = self.query_filters
        run = None
        if "run" in filters:
            run = Run.objects.filter(public_id=filters["run"]).first()
            if run is None:
                return ReplayRequest.objects.none()
        return replay_request_list(
            user=self.request.user, status=filters.get("status"), run=run, open_only=bool(filters.get("open"))
        )

    def get_serializer_class(self) -> type[BaseSerializer[ReplayRequest]]:
        return ReplayRequestListSerializer

    def get_object(self) -> ReplayRequest:
        request = replay_request_get(user=self.request.user, public_id=self.kwargs["id"])
        if request is None:
            raise Http404
        return request

    def _detail(self, replay: ReplayRequest, status_code: int = status.HTTP_200_OK) -> Response:
        fresh = replay_request_get(user=self.request.user, public_id=replay.public_id)
        if fresh is None:
            raise Http404
        effects, repeat_safety = side_effects(run=fresh.run)
        context = {
            "side_effects": effects,
            "repeat_safety": repeat_safety,
            "scope_sample": list(replay_request_items(request=fresh, limit=SCOPE_SAMPLE)),
        }
        return Response(ReplayRequestDetailSerializer(fresh, context=context).data, status=status_code)

    @extend_schema(
        summary="Request a replay of part of a run",
        description="Absent items (listed, or all), rejected items after the fix (with its reference), or a "
        "whole batch the evidence shows never committed. Every precondition is checked and the eligible "
        "approvers of each kind are listed; a refusal names each rule and is recorded on the run's timeline.",
        tags=TAG,
        request=ReplayRequestCreateInputSerializer,
        responses={
            201: ReplayRequestDetailSerializer,
            400: INVALID,
            403: FORBIDDEN,
            404: _problem("no such run, or not visible to the caller"),
            409: REFUSED,
        },
    )
    def create(self, request: Request) -> Response:
        data = ReplayRequestCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        run = run_get_for_ledger(user=request.user, public_id=values["run"])
        if run is None:
            raise Http404("No such run.")
        replay = replay_request_create(
            actor=request.user,  # type: ignore[arg-type]
            run=run,
            kind=values["kind"],
            reason=values["reason"],
            record_ids=values["record_ids"],
            all_items=values["all"],
            fix_reference=values["fix_reference"],
        )
        return self._detail(replay, status.HTTP_201_CREATED)

    @extend_schema(
        summary="One replay request: scope, checks, approvals, side effects, dispatch and delivery log",
        tags=TAG,
        responses={200: ReplayRequestDetailSerializer, 404: NOT_FOUND},
    )
    def retrieve(self, request: Request, id: str) -> Response:
        return self._detail(self.get_object())

    @extend_schema(
        summary="The request's scope: every item with its outcome then and now",
        tags=TAG,
        responses={200: ReplayRequestItemSerializer(many=True), 404: NOT_FOUND},
    )
    @action(detail=True, methods=["get"])
    def items(self, request: Request, id: str) -> Response:
        replay = self.get_object()
        page = self.paginate_queryset(replay_request_items(request=replay))  # type: ignore[arg-type]  # a sub-list of the viewset's model
        return self.get_paginated_response(ReplayRequestItemSerializer(page, many=True).data)

    @extend_schema(
        summary="Give the business or technical approval",
        description="Bound to the scope you reviewed (``scope_fingerprint``); needs your password, given here or "
        "through ``reauthenticate`` in the last five minutes. Refused (each refusal names the rule) for the "
        "requester, a person without the role on this tenant or job, the same person for both kinds, a changed "
        "scope, an expired request, or a failed precondition. The technical approval of a job whose repeat "
        "safety is unknown must accept it explicitly with a reason. The second approval dispatches the replay.",
        tags=TAG,
        request=ReplayRequestApproveInputSerializer,
        responses={200: ReplayRequestDetailSerializer, 400: INVALID, 403: FORBIDDEN, 404: NOT_FOUND, 409: REFUSED},
    )
    @rate_limited("too many wrong passwords (the password given with the decision)")
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, id: str) -> Response:
        values, decision = self._decision(ReplayRequestApproveInputSerializer)
        replay = replay_request_approve(
            **decision,
            accepts_unknown_repeat_safety=values["accepts_unknown_repeat_safety"],
            acceptance_reason=values["acceptance_reason"],
        )
        return self._detail(replay)

    @extend_schema(
        summary="Refuse the business or technical approval (rejects the request)",
        tags=TAG,
        request=ReplayRequestRejectInputSerializer,
        responses={200: ReplayRequestDetailSerializer, 400: INVALID, 403: FORBIDDEN, 404: NOT_FOUND, 409: REFUSED},
    )
    @rate_limited("too many wrong passwords (the password given with the decision)")
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, id: str) -> Response:
        _, decision = self._decision(ReplayRequestRejectInputSerializer)
        return self._detail(replay_request_reject(**decision))

    def _decision(self, serializer: type[BaseSerializer[Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The validated input of an approve or reject, and the arguments both services take.

        Those are the request (404 when not visible), the actor, the approval kind, the scope the
        person reviewed, when they re-entered their password (checked here) and their comment.
        """
        replay = self.get_object()
        data = serializer(data=self.request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        decision = {
            "request": replay,
            "actor": self.request.user,
            "kind": values["kind"],
            "scope_fingerprint": values["scope_fingerprint"],
            "reauthenticated_at": self._reauthenticated_at(values["password"]),
            "comment": values["comment"],
        }
        return values, decision

    def _reauthenticated_at(self, password: str) -> Any:
        return approver_reauthentication(
            user=self.request.user,  # type: ignore[arg-type]
            credential_ref=reauth_credential_ref(self.request),
            password=password,
        )

    @extend_schema(
        summary="Change the scope (voids every approval; an approved request returns to pending)",
        tags=TAG,
        request=ReplayRequestRescopeInputSerializer,
        responses={200: ReplayRequestDetailSerializer, 400: INVALID, 403: FORBIDDEN, 404: NOT_FOUND, 409: REFUSED},
    )
    @action(detail=True, methods=["post"])
    def scope(self, request: Request, id: str) -> Response:
        replay = self.get_object()
        data = ReplayRequestRescopeInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        replay = replay_request_rescope(
            request=replay,
            actor=request.user,  # type: ignore[arg-type]
            record_ids=values["record_ids"],
            all_items=values["all"],
            fix_reference=values.get("fix_reference"),
            note=values["note"],
        )
        return self._detail(replay)

    @extend_schema(
        summary="Cancel (before it is dispatched)",
        tags=TAG,
        request=ReasonInputSerializer,
        responses={200: ReplayRequestDetailSerializer, 400: INVALID, 403: FORBIDDEN, 404: NOT_FOUND, 409: REFUSED},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, id: str) -> Response:
        replay = self.get_object()
        data = ReasonInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        replay = replay_request_cancel(
            request=replay,
            actor=request.user,  # type: ignore[arg-type]
            reason=data.validated_data["reason"],
        )
        return self._detail(replay)

    @extend_schema(
        summary="Dispatch an approved request now (once; a held dispatch says which rule holds it)",
        description="Idempotent: a dispatched request returns its one dispatch. The sweep also tries every "
        "minute, so this is only needed to hurry it after a blocking attempt finished.",
        tags=TAG,
        request=None,
        responses={200: ReplayRequestDetailSerializer, 403: FORBIDDEN, 404: NOT_FOUND, 409: REFUSED},
    )
    @action(detail=True, methods=["post"], url_path="dispatch", url_name="dispatch")
    def dispatch_now(self, request: Request, id: str) -> Response:
        replay = self.get_object()
        replay_request_dispatch(request=replay, actor=request.user)  # type: ignore[arg-type]
        return self._detail(replay)

    @extend_schema(
        summary="Settle a dispatch that is unknown (or succeeded without the ledger's confirmation)",
        description="``failed`` releases the items (a re-send is a new request with new approvals); "
        "``completed`` only when the ledger confirms every item in scope.",
        tags=TAG,
        request=SettleInputSerializer,
        responses={200: ReplayRequestDetailSerializer, 400: INVALID, 403: FORBIDDEN, 404: NOT_FOUND, 409: REFUSED},
    )
    @action(detail=True, methods=["post"])
    def settle(self, request: Request, id: str) -> Response:
        replay = self.get_object()
        data = SettleInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        replay = replay_request_settle(
            request=replay,
            actor=request.user,  # type: ignore[arg-type]
            outcome=data.validated_data["outcome"],
            reason=data.validated_data["reason"],
        )
        return self._detail(replay)

    @extend_schema(
        summary="Waiting for me: pending requests the caller may approve and nobody decided for that kind",
        tags=TAG,
        responses={200: ReplayRequestListSerializer(many=True)},
    )
    @action(detail=False, methods=["get"])
    def queue(self, request: Request) -> Response:
        page = self.paginate_queryset(replay_request_queue(user=request.user))
        return self.get_paginated_response(ReplayRequestListSerializer(page, many=True).data)

    @extend_schema(
        summary="Re-enter your password before approving or rejecting (valid five minutes)",
        description="Counts for the session or API token it is sent with. Too many wrong passwords answer 429.",
        tags=TAG,
        request=ReauthenticateInputSerializer,
        responses={
            200: ReauthenticateSerializer,
            400: INVALID,
            403: _problem("the password is not correct"),
            429: _problem("too many wrong passwords"),
        },
    )
    @action(detail=False, methods=["post"])
    def reauthenticate(self, request: Request) -> Response:
        data = ReauthenticateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        at = approver_reauthenticate(
            user=request.user,  # type: ignore[arg-type]
            password=data.validated_data["password"],
            credential_ref=reauth_credential_ref(request),
        )
        until = at + timedelta(seconds=settings.HANDOVER_REPLAY_REAUTH_SECONDS)
        return Response(ReauthenticateSerializer({"reauthenticated_at": at, "valid_until": until}).data)

    @extend_schema(
        summary="Record another recovery route on the run's timeline (no dispatch)",
        description="``wait_for_retry`` (name the retry in ``reference``) or ``dependency_corrected`` "
        "(say what in ``note``).",
        tags=TAG,
        request=RecoveryDecisionInputSerializer,
        responses={
            201: TimelineEventSerializer,
            400: INVALID,
            403: FORBIDDEN,
            404: _problem("no such run, or not visible to the caller"),
        },
    )
    @action(detail=False, methods=["post"], url_path="recovery-decisions")
    def recovery_decisions(self, request: Request) -> Response:
        data = RecoveryDecisionInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        run = run_get_for_ledger(user=request.user, public_id=values["run"])
        if run is None:
            raise Http404("No such run.")
        event = run_recovery_decision_record(
            run=run,
            actor=request.user,  # type: ignore[arg-type]
            decision=values["decision"],
            reference=values["reference"],
            note=values["note"],
        )
        return Response(TimelineEventSerializer(event).data, status=status.HTTP_201_CREATED)

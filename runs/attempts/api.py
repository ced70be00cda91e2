"""``/api/v1/runs/``: logical runs with their attempts and timeline."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from handover.core.filters import StrictQueryMixin
from handover.core.serializers import ProblemSerializer, validated_body
from runs.attempts.corrections import (
    attempt_correction_require,
    attempt_duplicate_trigger_explain,
    attempt_replace_slot,
)
from runs.attempts.filters import RunFilterSet
from runs.attempts.models import Attempt, Run
from runs.attempts.selectors import run_get, run_list
from runs.attempts.serializers import (
    AttemptAbandonInputSerializer,
    AttemptReplaceSlotInputSerializer,
    AttemptSerializer,
    DuplicateTriggerExplainInputSerializer,
    RunDetailSerializer,
    RunListSerializer,
)
from runs.attempts.services import attempt_abandon


def _problem(description: str) -> OpenApiResponse:
    return OpenApiResponse(ProblemSerializer, description=description)


CORRECTION_PROBLEMS = {
    400: _problem("invalid input: a reason and an evidence reference are required"),
    401: _problem("not authenticated"),
    403: _problem("may read this run but not correct its attempts"),
    404: _problem("no such run or attempt, or not visible to the caller"),
}


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

    def _attempt(self, attempt_id: UUID) -> Attempt:
        """The run's attempt the caller corrects: 404 when not visible, 403 when only readable (before the body)."""
        run = self.get_object()
        attempt_correction_require(actor=self.request.user, run=run)  # type: ignore[arg-type]  # signed in: the view's permission refuses anonymous users
        attempts = Attempt.objects.select_related("run__job", "run__tenant")
        attempt = attempts.filter(run=run, public_id=attempt_id).first()
        if attempt is None:
            raise Http404
        return attempt

    def _correct(
        self, attempt_id: UUID, input_class: type[BaseSerializer[Any]], write: Callable[..., Attempt]
    ) -> Response:
        """One correction of the run's attempt ``attempt_id``: the attempt (``_attempt``: 404, then 403
        before the body is read), the body checked by ``input_class`` (400), ``write(attempt=, actor=,
        **body)`` (the service; its refusals carry their own status, 409), answering the attempt (200)."""
        attempt = self._attempt(attempt_id)
        values = validated_body(self.request, input_class)
        attempt = write(attempt=attempt, actor=self.request.user, **values)
        return Response(AttemptSerializer(attempt).data)

    @extend_schema(
        summary="Explain an attempt's duplicate trigger",
        description="Support on the tenant or the job's technical owner records why a second scheduled start "
        "of the slot happened, with a reference to the evidence. Until then no replay of the run is approved "
        "or dispatched and its next-run check does not pass.",
        tags=["runs"],
        request=DuplicateTriggerExplainInputSerializer,
        responses={
            200: AttemptSerializer,
            **CORRECTION_PROBLEMS,
            409: _problem("the attempt is not a duplicate trigger, or it is already explained"),
        },
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="attempts/<uuid:attempt_id>/explain-duplicate",
        url_name="attempt-explain-duplicate",
    )
    def explain_duplicate(self, request: Request, id: UUID, attempt_id: UUID) -> Response:
        return self._correct(attempt_id, DuplicateTriggerExplainInputSerializer, attempt_duplicate_trigger_explain)

    @extend_schema(
        summary="Abandon an attempt that will never report",
        description="Support on the tenant or the job's technical owner decides that a queued or running attempt "
        "will never report (its worker is gone): it becomes `abandoned` with the reason, the run's status follows "
        "(`failed` when it was the latest attempt) and the timeline records who and why. Answers the attempt.",
        tags=["runs"],
        request=AttemptAbandonInputSerializer,
        responses={
            200: AttemptSerializer,
            **CORRECTION_PROBLEMS,
            409: _problem("the attempt has ended already, or no reason was given"),
        },
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="attempts/<uuid:attempt_id>/abandon",
        url_name="attempt-abandon",
    )
    def abandon(self, request: Request, id: UUID, attempt_id: UUID) -> Response:
        return self._correct(attempt_id, AttemptAbandonInputSerializer, attempt_abandon)

    @extend_schema(
        summary="Re-place a flagged attempt on another slot",
        description="An attempt flagged late, slot inferred or with a hint moves to the run of another fire time "
        "of its target's schedule (created if needed), while no ledger load or replay request refers to its run. "
        "Both runs' statuses are refreshed; both timelines record the move. Answers the attempt.",
        tags=["runs"],
        request=AttemptReplaceSlotInputSerializer,
        responses={
            200: AttemptSerializer,
            **CORRECTION_PROBLEMS,
            409: _problem(
                "the attempt is not flagged or already on that slot, a load or replay refers to the run, "
                "or the other run already has this execution"
            ),
        },
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="attempts/<uuid:attempt_id>/replace-slot",
        url_name="attempt-replace-slot",
    )
    def replace_slot(self, request: Request, id: UUID, attempt_id: UUID) -> Response:
        return self._correct(attempt_id, AttemptReplaceSlotInputSerializer, attempt_replace_slot)

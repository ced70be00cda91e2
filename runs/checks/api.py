"""``/api/v1/checks/``: next-run checks — list, create by hand, waive, confirm.

Anyone who can see a target sees its checks; support on the tenant or the job's technical owner
may create, waive and confirm them (others get 403; a check they cannot see answers 404).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.http import Http404
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from handover.core.fields import BlankAsNullChoiceField, BoundedDateTimeField, TextField
from handover.core.filters import StrictQueryMixin
from handover.core.people import Person, signed_in
from handover.core.serializers import ProblemSerializer
from runs.attempts.selectors import run_get
from runs.catalog.models import JobTarget
from runs.catalog.selectors import target_list_visible
from runs.checks.decisions import next_run_check_confirm, next_run_check_require_actor, next_run_check_waive
from runs.checks.filters import NextRunCheckFilterSet
from runs.checks.models import NextRunCheck
from runs.checks.scheduling import next_run_check_schedule
from runs.checks.selectors import check_get, check_list


class NextRunCheckSerializer(serializers.ModelSerializer[NextRunCheck]):
    """A check with its evidence. Times are UTC; people by username."""

    id = serializers.UUIDField(source="public_id", read_only=True)
    target = serializers.UUIDField(source="target.public_id", read_only=True)
    job = serializers.CharField(source="target.job.key", read_only=True)
    tenant = serializers.CharField(source="target.tenant.slug", read_only=True)
    environment = serializers.CharField(source="target.environment", read_only=True)
    recovered_run = serializers.UUIDField(
        source="recovered_run.public_id", read_only=True, allow_null=True, default=None
    )
    next_run = serializers.UUIDField(source="next_run.public_id", read_only=True, allow_null=True, default=None)
    evidence_attempt = serializers.UUIDField(
        source="evidence_attempt.public_id", read_only=True, allow_null=True, default=None
    )
    late_success_attempt = serializers.UUIDField(
        source="late_success_attempt.public_id", read_only=True, allow_null=True, default=None
    )
    is_awaiting_confirmation = serializers.BooleanField(read_only=True)
    failure_reason = BlankAsNullChoiceField(
        choices=NextRunCheck.FailureReason.choices, help_text="why the check failed; null unless failed"
    )
    created_by: serializers.SlugRelatedField[Person] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    confirmed_by: serializers.SlugRelatedField[Person] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    waived_by: serializers.SlugRelatedField[Person] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    waiver_owner: serializers.SlugRelatedField[Person] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )

    class Meta:
        model = NextRunCheck
        fields = [
            "id",
            "target",
            "job",
            "tenant",
            "environment",
            "status",
            "expected_at",
            "deadline_at",
            "window_start",
            "window_end",
            "requested_by_kind",
            "requested_by_ref",
            "created_by",
            "created_at",
            "recovered_run",
            "next_run",
            "evidence_attempt",
            "evidence_at",
            "late_success_attempt",
            "late_success_at",
            "duplicate_check",
            "possible_duplicate_count",
            "is_awaiting_confirmation",
            "failure_reason",
            "result_summary",
            "passed_at",
            "failed_at",
            "confirmed_at",
            "confirmed_by",
            "confirmation_note",
            "waived_at",
            "waived_by",
            "waiver_owner",
            "waiver_checkpoint",
            "waiver_reason",
        ]
        read_only_fields = fields


class NextRunCheckCreateInputSerializer(serializers.Serializer[dict[str, Any]]):
    """Name the target, or the failed run being recovered (its target is used); ``after`` defaults to now."""

    target = serializers.UUIDField(required=False, help_text="job target public id")
    run = serializers.UUIDField(required=False, help_text="the failed run being recovered")
    after = BoundedDateTimeField(
        required=False, help_text="the check expects the first fire time after this (1970 up to 2200)"
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs.get("target") and not attrs.get("run"):
            raise ValidationError({"target": ["Give a target or a run."]})
        return attrs


class NextRunCheckWaiveInputSerializer(serializers.Serializer[dict[str, Any]]):
    checkpoint = serializers.DateField(help_text="the date the owner looks again (today or later)")
    reason = TextField(max_length=2000)
    owner = TextField(max_length=150, help_text="username of the named owner")


class NextRunCheckConfirmInputSerializer(serializers.Serializer[dict[str, Any]]):
    note = TextField(max_length=2000, help_text="how duplicates were checked without a ledger")


PROBLEM = OpenApiResponse(ProblemSerializer)
READ_ERRORS = {401: PROBLEM, 403: PROBLEM}


@extend_schema_view(
    list=extend_schema(
        summary="List next-run checks",
        tags=["checks"],
        responses={200: NextRunCheckSerializer(many=True), 400: PROBLEM, **READ_ERRORS},
    ),
    retrieve=extend_schema(
        summary="One next-run check",
        tags=["checks"],
        responses={200: NextRunCheckSerializer, **READ_ERRORS, 404: PROBLEM},
    ),
)
class NextRunCheckViewSet(
    StrictQueryMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet[NextRunCheck],
):
    """Next-run checks of the targets the caller may see, earliest deadline first."""

    queryset = NextRunCheck.objects.none()  # for the schema only; get_queryset scopes to the caller
    filterset_class = NextRunCheckFilterSet
    serializer_class = NextRunCheckSerializer
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    lookup_value_converter = "uuid"

    def get_queryset(self) -> QuerySet[NextRunCheck]:
        return check_list(user=self.request.user, **self.query_filters)

    def get_object(self) -> NextRunCheck:
        check = check_get(user=self.request.user, public_id=self.kwargs["id"])
        if check is None:
            raise Http404
        return check

    def _respond(self, check: NextRunCheck, code: int = status.HTTP_200_OK) -> Response:
        fresh = check_get(user=self.request.user, public_id=check.public_id)
        return Response(NextRunCheckSerializer(fresh).data, status=code)

    def _authorise(self, target: JobTarget) -> None:
        """The services' refusal (``next_run_check_require_actor``), asked before the body is read."""
        next_run_check_require_actor(actor=signed_in(self.request.user), target=target)

    @extend_schema(
        summary="Create a next-run check by hand",
        description="Expect the target's first fire time after `after` (default now). Naming a run checks its "
        "recovery too (a queued retry of it fails the check). An existing check for the same fire time is "
        "returned with 200.",
        tags=["checks"],
        request=NextRunCheckCreateInputSerializer,
        responses={
            201: NextRunCheckSerializer,
            200: OpenApiResponse(NextRunCheckSerializer, description="the check for that fire time existed"),
            400: PROBLEM,
            **READ_ERRORS,
        },
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = NextRunCheckCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        run = None
        if values.get("run"):
            run = run_get(user=request.user, public_id=values["run"])
            if run is None:
                raise ValidationError({"run": ["No such run."]})
            if run.target is None:
                raise ValidationError({"run": ["No job target expects this run: name a target instead."]})
            target = run.target
        else:
            named = target_list_visible(user=request.user).filter(public_id=values["target"]).first()
            if named is None:
                raise ValidationError({"target": ["No such target."]})
            target = named
        check, created = next_run_check_schedule(
            target=target, after=values.get("after") or timezone.now(), recovered_run=run, actor=signed_in(request.user)
        )
        return self._respond(check, status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(
        summary="Waive a scheduled check",
        description="For a next run far away: a checkpoint date (today or later), a reason and a named owner "
        "who can see the target. A waiver is never a pass; only a scheduled check can be waived.",
        tags=["checks"],
        request=NextRunCheckWaiveInputSerializer,
        responses={
            200: NextRunCheckSerializer,
            400: PROBLEM,
            **READ_ERRORS,
            404: PROBLEM,
            409: OpenApiResponse(ProblemSerializer, description="the check is not scheduled"),
        },
    )
    @action(detail=True, methods=["post"])
    def waive(self, request: Request, id: str) -> Response:
        check = self.get_object()
        self._authorise(check.target)
        data = NextRunCheckWaiveInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        owner = get_user_model().objects.filter(username=values["owner"]).first()
        check = next_run_check_waive(
            check=check,
            actor=signed_in(request.user),
            owner=owner,
            checkpoint=values["checkpoint"],
            reason=values["reason"],
        )
        return self._respond(check)

    @extend_schema(
        summary="Confirm duplicates were checked without a ledger",
        description="A next run with no ledger passes only with a person's confirmation. The facts are read "
        "again: the check passes, or fails when a stale retry is queued or a ledger now shows duplicates.",
        tags=["checks"],
        request=NextRunCheckConfirmInputSerializer,
        responses={
            200: NextRunCheckSerializer,
            400: PROBLEM,
            **READ_ERRORS,
            404: PROBLEM,
            409: OpenApiResponse(ProblemSerializer, description="nothing awaits confirmation"),
        },
    )
    @action(detail=True, methods=["post"])
    def confirm(self, request: Request, id: str) -> Response:
        check = self.get_object()
        self._authorise(check.target)
        data = NextRunCheckConfirmInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        check = next_run_check_confirm(check=check, actor=signed_in(request.user), note=data.validated_data["note"])
        return self._respond(check)

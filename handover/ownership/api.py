"""``/api/v1/aged-work/`` (aged items the caller may see, with age and owner) and
``/api/v1/jobs/<id>/ownership/`` (a job's owning team and escalation owner, and its targets' overrides).

docs/ownership.md. A job the caller may not see answers 404; changing ownership without being an admin
or the job's technical owner answers 403 (``runs.permissions.may_manage_job_ownership``).
"""

from __future__ import annotations

from typing import Any, cast

from django.contrib.auth import get_user_model
from django.http import Http404
from django.utils import timezone
from django_filters import ChoiceFilter, UUIDFilter
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from handover.core.edits import edit_etag
from handover.core.errors import DomainError
from handover.core.fields import TextField
from handover.core.filters import StrictBooleanFilter, StrictFilterSet, StrictQueryMixin
from handover.core.links import absolute_url
from handover.core.parsers import JSONParser
from handover.core.people import Person
from handover.core.serializers import ProblemSerializer, etag_parameters, precondition_failed_response
from handover.notifications.models import Team
from handover.ownership.models import AgedWorkEscalation, JobOwnership, TargetOwnership
from handover.ownership.selectors import (
    AgedItem,
    aged_work_for_person,
    aged_work_for_team,
    aged_work_list,
    job_ownership_get,
    target_ownership_map,
    team_list_assignable,
    team_list_visible,
)
from handover.ownership.services import job_ownership_set, ownership_values, target_ownership_set
from runs.catalog.models import Job, JobTarget
from runs.catalog.selectors import job_get, target_list_visible
from runs.permissions import may_read_target

TAG = ["ownership"]
PROBLEMS = {
    400: OpenApiResponse(ProblemSerializer),
    403: OpenApiResponse(ProblemSerializer, description="not a technical owner of the job (nor an admin)"),
    404: OpenApiResponse(ProblemSerializer, description="no such job or target, or not visible to the caller"),
}
VERSIONED = (
    "With `If-Match` (the `ETag` of the {what}'s ownership as last read), a change made since (to its own team or "
    "escalation owner) answers 412 and saves nothing; the answer carries the new `ETag`."
)


class TeamBriefSerializer(serializers.Serializer[Any]):
    """A team by public id and name."""

    id = serializers.UUIDField(source="public_id", help_text="the team's public id")
    name = serializers.CharField()


class AgedItemSerializer(serializers.Serializer[Any]):
    """One aged item: its kind, what it is about, since when (UTC) and how old, who owns it."""

    kind = serializers.ChoiceField(choices=AgedWorkEscalation.Kind.choices)
    kind_label = serializers.CharField()
    subject = serializers.UUIDField(help_text="public id of the run, handover or next-run check")
    title = serializers.CharField()
    detail = serializers.CharField()
    url = serializers.SerializerMethodField()
    since = serializers.DateTimeField(help_text="when it started to age (UTC)")
    age_seconds = serializers.IntegerField()
    age_words = serializers.CharField(help_text='"3 days 2 hours"')
    job = serializers.CharField(source="job.key", help_text="job key")
    team = TeamBriefSerializer(source="owner.team", allow_null=True, help_text="owning team; null: none named")
    escalation_owner = serializers.SerializerMethodField()
    owner = serializers.CharField(source="owner.words", help_text='the owner in words, "no owner" when none')
    last_step = serializers.IntegerField(help_text="the highest reminder step sent so far (0: none)")

    def get_url(self, obj: AgedItem) -> str:
        """The item's page, absolute."""
        request = self.context.get("request")
        return absolute_url(obj.url, getattr(request, "_request", None))

    def get_escalation_owner(self, obj: AgedItem) -> str | None:
        """The escalation owner's username, or null."""
        person = obj.owner.escalation_owner
        return person.get_username() if person is not None else None


class AgedWorkFilterSet(StrictFilterSet):
    """Aged work by owning team, kind, or the caller's own."""

    team = UUIDFilter(help_text="owning team's public id (a team the caller may not see: nothing listed)")
    kind = ChoiceFilter(choices=AgedWorkEscalation.Kind.choices, help_text="kind of aged item")
    mine = StrictBooleanFilter(
        help_text="true: only items whose escalation owner is the caller or whose team they are in"
    )


class AgedWorkViewSet(StrictQueryMixin, viewsets.GenericViewSet[Any]):
    """Aged work the caller may see: failed runs with no handover, stalled handovers, unresolved ledgers,
    overdue next-run checks, each past its age, oldest first."""

    serializer_class = AgedItemSerializer
    filterset_class = AgedWorkFilterSet
    # the items are computed (``aged_work_list``), not a queryset; this only names a model for the schema
    queryset = AgedWorkEscalation.objects.none()
    parser_classes = [JSONParser]

    @extend_schema(summary="List aged work, oldest first, with owner and age", tags=TAG)
    def list(self, request: Request) -> Response:
        filters = self.query_filters
        kind = filters.get("kind")
        items = aged_work_list(now=timezone.now(), user=request.user, kinds=[kind] if kind else None)
        if filters.get("team") is not None:
            team = team_list_visible(user=request.user).filter(public_id=filters["team"]).first()
            items = aged_work_for_team(team=team, items=items) if team is not None else []
        if filters.get("mine"):
            items = aged_work_for_person(user=request.user, items=items)
        page = self.paginate_queryset(items)  # type: ignore[arg-type]  # a list pages like a queryset
        return self.get_paginated_response(AgedItemSerializer(page, many=True, context={"request": request}).data)


# --- ownership ------------------------------------------------------------------------------------


class OwnershipSerializer(serializers.Serializer[Any]):
    """An owning team and escalation owner, as set (either may be null)."""

    team = TeamBriefSerializer(allow_null=True)
    escalation_owner = serializers.CharField(allow_null=True, help_text="username")
    set_by = serializers.CharField(allow_null=True, help_text="username")
    set_at = serializers.DateTimeField(allow_null=True)


class TargetOwnershipSerializer(OwnershipSerializer):
    """A target's own owners (null fields fall back to the job's), with the target's tenant and environment."""

    target = serializers.UUIDField(help_text="the target's public id")
    tenant = serializers.CharField(help_text="tenant slug")
    environment = serializers.CharField()


class JobOwnershipSerializer(OwnershipSerializer):
    """A job's ownership, and each target's own (null fields fall back to the job's)."""

    job = serializers.CharField(help_text="job key")
    targets = TargetOwnershipSerializer(many=True)


class OwnershipInputSerializer(serializers.Serializer[Any]):
    """Fields left out keep their value; null clears."""

    team = serializers.UUIDField(required=False, allow_null=True, help_text="a team's public id; null: none")
    escalation_owner = TextField(
        required=False, allow_null=True, max_length=150, help_text="an active person's username; null: none"
    )


def _ownership_dict(row: JobOwnership | TargetOwnership | None) -> dict[str, Any]:
    if row is None:
        return {"team": None, "escalation_owner": None, "set_by": None, "set_at": None}
    return {
        "team": row.team,
        "escalation_owner": row.escalation_owner.get_username() if row.escalation_owner else None,
        "set_by": row.set_by.get_username() if row.set_by else None,
        "set_at": row.set_at,
    }


def _job_payload(request: Request, job: Job, row: JobOwnership | None = None) -> dict[str, Any]:
    """The job's ownership answer; ``row``: the job's own ownership when already read."""
    overrides = target_ownership_map(job=job)
    targets = target_list_visible(user=request.user, job=job)  # another client's target is not shown
    return {
        "job": job.key,
        **_ownership_dict(row if row is not None else job_ownership_get(job=job)),
        "targets": [
            {
                "target": t.public_id,
                "tenant": t.tenant.slug,
                "environment": t.environment,
                **_ownership_dict(overrides.get(t.pk)),
            }
            for t in targets
        ],
    }


def _resolve(
    data: dict[str, Any], row: JobOwnership | TargetOwnership | None, user: Person
) -> tuple[Team | None, Any, dict[str, str | None]]:
    """The team and person the input names, fields left out keeping the row's, and the base of the fields
    left out (``ownership_values``: what someone else sets meanwhile stays, ``handover.core.edits``). A
    team is one ``user`` may name (``team_list_assignable``, as the page offers) or the row's own: another
    client's team is not found, as one that does not exist. Raises DomainError."""
    team = row.team if row is not None else None
    person: Person | None = row.escalation_owner if row is not None else None
    if "team" in data:
        team = None
        if data["team"] is not None:
            keeping = row.team_id if row is not None else None
            team = team_list_assignable(user=user, keeping=keeping).filter(public_id=data["team"]).first()
            if team is None:
                raise DomainError("No such team.", errors={"team": ["No such team."]})
    if "escalation_owner" in data:
        person = None
        if data["escalation_owner"] is not None:
            person = get_user_model().objects.filter(username=data["escalation_owner"], is_active=True).first()
            if person is None:
                raise DomainError("No such active person.", errors={"escalation_owner": ["No such active person."]})
    base = {name: value for name, value in ownership_values(row).items() if name not in data}
    return team, person, base


def _person(request: Request) -> Person:
    """The authenticated caller (the API's default permission refuses anonymous requests)."""
    return cast(Person, request.user)


def _visible_job(request: Request, id: str) -> Job:
    job = job_get(user=request.user, public_id=id)
    if job is None:
        raise Http404("No such job.")
    return job


def _visible_target(request: Request, id: str, target_id: str) -> tuple[Job, JobTarget]:
    """The job and its target the path names, both visible to the caller (Http404 otherwise)."""
    job = _visible_job(request, id)
    target = JobTarget.objects.select_related("job", "tenant").filter(job=job, public_id=target_id).first()
    if target is None or not may_read_target(user=request.user, target=target):
        raise Http404("No such target.")
    return job, target


def _etag(row: JobOwnership | TargetOwnership | None) -> dict[str, str]:
    """The ``ETag`` header of a job's or target's own ownership (``ownership_values``, the write's rule)."""
    return {"ETag": edit_etag(ownership_values(row))}


def _job_answer(request: Request, job: Job) -> Response:
    """The job's ownership with the ``ETag`` of its own owners, read once for both."""
    row = job_ownership_get(job=job)
    payload = _job_payload(request, job, row)
    return Response(JobOwnershipSerializer(payload).data, headers=_etag(row))


class JobOwnershipView(StrictQueryMixin, APIView):
    """A job's owning team and escalation owner (and its targets' own)."""

    parser_classes = [JSONParser]

    @extend_schema(
        summary="Show a job's ownership",
        description="The `ETag` is that of the job's own team and escalation owner (a target's has its own).",
        tags=TAG,
        parameters=etag_parameters("the job's ownership", write=False),
        responses={200: JobOwnershipSerializer, **PROBLEMS},
    )
    def get(self, request: Request, id: str) -> Response:
        return _job_answer(request, _visible_job(request, id))

    @extend_schema(
        summary="Set a job's owning team and escalation owner",
        description="Admins and the job's technical owners. Written on the job's timeline (ownership_changed). "
        + VERSIONED.format(what="job"),
        tags=TAG,
        request=OwnershipInputSerializer,
        parameters=etag_parameters("the job's ownership", write=True),
        responses={200: JobOwnershipSerializer, **PROBLEMS, 412: precondition_failed_response("the job's ownership")},
    )
    def patch(self, request: Request, id: str) -> Response:
        job = _visible_job(request, id)
        data = OwnershipInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        team, person, base = _resolve(data.validated_data, job_ownership_get(job=job), _person(request))
        job_ownership_set(
            actor=_person(request),
            job=job,
            team=team,
            escalation_owner=person,
            based_on=base,
            if_match=request.headers.get("If-Match"),
        )
        return _job_answer(request, job)


class TargetOwnershipView(StrictQueryMixin, APIView):
    """A target's own owning team and escalation owner (null fields fall back to the job's)."""

    parser_classes = [JSONParser]

    @extend_schema(
        summary="Show a target's own ownership",
        description="Null fields fall back to the job's. The `ETag` is that of the target's own team and escalation "
        "owner.",
        tags=TAG,
        parameters=etag_parameters("the target's ownership", write=False),
        responses={200: TargetOwnershipSerializer, **PROBLEMS},
    )
    def get(self, request: Request, id: str, target_id: str) -> Response:
        job, target = _visible_target(request, id, target_id)
        row = target_ownership_map(job=job).get(target.pk)
        payload = {
            "target": target.public_id,
            "tenant": target.tenant.slug,
            "environment": target.environment,
            **_ownership_dict(row),
        }
        return Response(TargetOwnershipSerializer(payload).data, headers=_etag(row))

    @extend_schema(
        summary="Set a target's owning team and escalation owner",
        description="Admins and the job's technical owners. Written on the job's timeline (ownership_changed). "
        "Answers the job's ownership, with the `ETag` of the target's. " + VERSIONED.format(what="target"),
        tags=TAG,
        request=OwnershipInputSerializer,
        parameters=etag_parameters("the target's ownership", write=True),
        responses={
            200: JobOwnershipSerializer,
            **PROBLEMS,
            412: precondition_failed_response("the target's ownership"),
        },
    )
    def patch(self, request: Request, id: str, target_id: str) -> Response:
        job, target = _visible_target(request, id, target_id)
        data = OwnershipInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        team, person, base = _resolve(
            data.validated_data, target_ownership_map(job=job).get(target.pk), _person(request)
        )
        target_ownership_set(
            actor=_person(request),
            target=target,
            team=team,
            escalation_owner=person,
            based_on=base,
            if_match=request.headers.get("If-Match"),
        )
        payload = _job_payload(request, job)
        row = target_ownership_map(job=job).get(target.pk)
        return Response(JobOwnershipSerializer(payload).data, headers=_etag(row))

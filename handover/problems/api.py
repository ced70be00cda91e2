"""``/api/v1/problems/``: problems (the systemic cause behind handovers), their transitions, links and export.

Visibility comes from ``problem_get`` / ``problem_list`` (a problem the caller may not see answers
404); writes are refused by the services (403: auditors, business owners, support of another
tenant), whose guards run before the body of a change to a problem is read, so a reader learns
nothing from a 400 (creating reads the body first: a handover the caller may not see answers 404).
docs/problems.md describes the states, the clean-run rule and who sees what.
"""

from __future__ import annotations

from typing import Any, cast

from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from handover.core.edits import edit_etag
from handover.core.filters import StrictQueryMixin
from handover.core.people import Person
from handover.core.serializers import ProblemSerializer, etag_parameters, precondition_failed_response
from handover.handovers.api import MarkdownRenderer
from handover.handovers.models import Handover
from handover.handovers.selectors import handover_list
from handover.problems.export import problem_markdown
from handover.problems.filters import ProblemFilterSet
from handover.problems.models import Problem
from handover.problems.selectors import problem_get, problem_list, problem_summaries, problem_view
from handover.problems.serializers import (
    ProblemCreateInputSerializer,
    ProblemLinkInputSerializer,
    ProblemRecordDetailSerializer,
    ProblemRecordListSerializer,
    ProblemTransitionInputSerializer,
    ProblemUpdateInputSerializer,
)
from handover.problems.services import (
    may_write_problem,
    problem_create,
    problem_edit_values,
    problem_link_handover,
    problem_require_writer,
    problem_transition,
    problem_unlink_handover,
    problem_update,
)

TAG = ["problems"]
NOT_FOUND = OpenApiResponse(ProblemSerializer, description="no such problem, or not visible to the caller")
FORBIDDEN = OpenApiResponse(ProblemSerializer, description="the caller may read but not change this problem")
WRITE_PROBLEMS = {
    400: OpenApiResponse(ProblemSerializer, description="invalid fields (problem details with `errors`)"),
    403: FORBIDDEN,
    404: NOT_FOUND,
    409: OpenApiResponse(ProblemSerializer, description="not allowed in the current status (or the rule unmet)"),
}


def _visible_handovers(request: Request, ids: list[Any]) -> list[Handover]:
    """The handovers ``ids`` names, each visible to the caller (Http404 naming none otherwise)."""
    ids = list(dict.fromkeys(ids))
    found = list(handover_list(user=request.user).filter(public_id__in=ids))
    if len(found) != len(ids):
        raise Http404("No such handover.")
    return found


@extend_schema_view(list=extend_schema(summary="List problems", tags=TAG))
class ProblemViewSet(StrictQueryMixin, mixins.ListModelMixin, viewsets.GenericViewSet[Problem]):
    """Problems the caller may see, newest first, with counts of what the caller sees of each."""

    # JSON bodies only: a form-encoded empty field would read as null where the schema asks for a value
    parser_classes = [JSONParser]

    queryset = Problem.objects.none()  # for the schema only; get_queryset scopes to the caller
    filterset_class = ProblemFilterSet
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    lookup_value_converter = "uuid"

    def get_queryset(self) -> QuerySet[Problem]:
        f = self.query_filters
        return problem_list(
            user=self.request.user,
            status=f.get("status"),
            team=f.get("team"),
            job=f.get("job"),
            tenant=f.get("tenant"),
            title=f.get("q"),
        )

    def get_serializer_class(self) -> type[BaseSerializer[Problem]]:
        return ProblemRecordListSerializer

    def get_serializer(self, *args: Any, **kwargs: Any) -> BaseSerializer[Problem]:
        if args and isinstance(args[0], list):  # a page of the list: the caller's counts, two queries
            kwargs.setdefault("context", self.get_serializer_context())
            kwargs["context"]["summaries"] = problem_summaries(user=self.request.user, problems=args[0])
        return super().get_serializer(*args, **kwargs)

    def _person(self) -> Person:
        """The signed-in caller (the API's default permission admits authenticated people only)."""
        return cast(Person, self.request.user)

    def get_object(self) -> Problem:
        problem = problem_get(user=self.request.user, public_id=self.kwargs["id"])
        if problem is None:
            raise Http404("No such problem.")
        return problem

    def _detail(self, problem: Problem, status_code: int = status.HTTP_200_OK) -> Response:
        fresh = problem_get(user=self.request.user, public_id=problem.public_id) or problem
        context = {"may_write": may_write_problem(user=self._person(), problem=fresh)}
        view = problem_view(user=self.request.user, problem=fresh)
        data = ProblemRecordDetailSerializer(view, context=context).data
        return Response(data, status=status_code, headers={"ETag": edit_etag(problem_edit_values(fresh))})

    @extend_schema(
        summary="Open a problem, optionally linked to handovers at once",
        tags=TAG,
        request=ProblemCreateInputSerializer,
        responses={201: ProblemRecordDetailSerializer, **WRITE_PROBLEMS},
    )
    def create(self, request: Request) -> Response:
        data = ProblemCreateInputSerializer(data=request.data, context={"request": request})
        data.is_valid(raise_exception=True)
        values = data.validated_data
        problem = problem_create(
            actor=self._person(),
            title=values["title"],
            defect_ref=values["defect_ref"],
            description=values["description"],
            owning_team=values.get("owning_team"),
            clean_runs_required=values.get("clean_runs_required"),
            handovers=_visible_handovers(request, values.get("handovers", [])),
        )
        return self._detail(problem, status.HTTP_201_CREATED)

    @extend_schema(
        summary="One problem: linked handovers and runs the caller may see, clean runs per target, history",
        tags=TAG,
        parameters=etag_parameters("the problem", write=False),
        responses={200: ProblemRecordDetailSerializer, 404: NOT_FOUND},
    )
    def retrieve(self, request: Request, id: str) -> Response:
        return self._detail(self.get_object())

    @extend_schema(
        summary="Edit the title, defect reference, description, owning team or clean runs required",
        description="Fields left out keep their value. With `If-Match` (the detail's `ETag`), an edit of a problem "
        "changed since (any of these fields) answers 412 and saves nothing; the answer carries the new `ETag`.",
        tags=TAG,
        request=ProblemUpdateInputSerializer,
        parameters=etag_parameters("the problem", write=True),
        responses={
            200: ProblemRecordDetailSerializer,
            **WRITE_PROBLEMS,
            412: precondition_failed_response("the problem"),
        },
    )
    def partial_update(self, request: Request, id: str) -> Response:
        problem = self.get_object()
        problem_require_writer(self._person(), problem=problem)  # before the body is read
        data = ProblemUpdateInputSerializer(data=request.data, context={"request": request, "problem": problem})
        data.is_valid(raise_exception=True)
        problem = problem_update(
            problem=problem, actor=self._person(), if_match=request.headers.get("If-Match"), **data.validated_data
        )
        return self._detail(problem)

    @extend_schema(
        summary="Move the problem: start_fix, deploy_fix, verify, close or reopen",
        description="`verify` is refused (409) until every linked target has `clean_runs_required` clean runs "
        "since the fix was deployed; `reopen`, and `close` from anything but `verified`, need a `reason` "
        "(400 without). An illegal move answers 409 and changes nothing (see docs/problems.md).",
        tags=TAG,
        request=ProblemTransitionInputSerializer,
        responses={200: ProblemRecordDetailSerializer, **WRITE_PROBLEMS},
    )
    @action(detail=True, methods=["post"])
    def transition(self, request: Request, id: str) -> Response:
        problem = self.get_object()
        problem_require_writer(self._person(), problem=problem)  # before the body is read
        data = ProblemTransitionInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        moved = problem_transition(
            problem=problem, action=values["action"], actor=self._person(), reason=values["reason"]
        )
        return self._detail(moved.obj)

    @extend_schema(
        summary="Link a handover to the problem (linking twice changes nothing)",
        tags=TAG,
        request=ProblemLinkInputSerializer,
        responses={200: ProblemRecordDetailSerializer, **WRITE_PROBLEMS},
    )
    @action(detail=True, methods=["post"])
    def handovers(self, request: Request, id: str) -> Response:
        problem = self.get_object()
        problem_require_writer(self._person(), problem=problem)  # before the body is read
        data = ProblemLinkInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        (handover,) = _visible_handovers(request, [data.validated_data["handover"]])
        problem_link_handover(problem=problem, handover=handover, actor=self._person())
        return self._detail(problem)

    @extend_schema(
        summary="Unlink a handover from the problem",
        tags=TAG,
        request=None,
        responses={200: ProblemRecordDetailSerializer, **WRITE_PROBLEMS},
    )
    @action(
        detail=True,
        methods=["delete"],
        url_path="handovers/<uuid:handover_id>",
        url_name="handover-detail",
    )
    def unlink(self, request: Request, id: str, handover_id: str) -> Response:
        problem = self.get_object()
        (handover,) = _visible_handovers(request, [handover_id])
        problem_unlink_handover(problem=problem, handover=handover, actor=self._person())
        return self._detail(problem)

    @extend_schema(
        summary="The problem as Markdown, for pasting into a ticket (what the caller may see)",
        tags=TAG,
        responses={(200, "text/markdown"): OpenApiTypes.STR, 404: NOT_FOUND},
    )
    @action(detail=True, methods=["get"], renderer_classes=[MarkdownRenderer])
    def markdown(self, request: Request, id: str) -> Response:
        problem = self.get_object()
        text = problem_markdown(view=problem_view(user=request.user, problem=problem))
        filename = f"problem-{problem.public_id}.md"
        return Response(text, headers={"Content-Disposition": f'inline; filename="{filename}"'})

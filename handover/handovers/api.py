"""``/api/v1/handovers/``: the handover record, its transitions, history, residual exceptions and Markdown export.

Visibility comes from ``handover_get`` / ``handover_list`` (a handover the caller may not see answers
404); writes need ``may_act_on_runs`` on its runs (403 otherwise: auditors, business owners). Transitions are
POST actions named after the verb; each returns the updated handover.
"""

from __future__ import annotations

import json
from typing import Any

from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from handover.core.filters import StrictQueryMixin
from handover.core.people import signed_in
from handover.core.serializers import ProblemSerializer
from handover.handovers.closing import handover_closing_conditions
from handover.handovers.export import handover_markdown
from handover.handovers.filters import HandoverFilterSet, HandoverRevisionFilterSet
from handover.handovers.models import Handover, ResidualException
from handover.handovers.selectors import (
    handover_generated_staleness,
    handover_get,
    handover_list,
    handover_revision_list,
)
from handover.handovers.serializers import (
    HandoverCreateInputSerializer,
    HandoverDetailSerializer,
    HandoverListSerializer,
    HandoverReopenInputSerializer,
    HandoverRevisionSerializer,
    HandoverUpdateInputSerializer,
    ResidualExceptionCreateInputSerializer,
    ResidualExceptionSerializer,
    ResidualExceptionUpdateInputSerializer,
)
from handover.handovers.services import (
    EDITABLE_FIELDS,
    handover_close,
    handover_create,
    handover_hand_over,
    handover_refresh_generated,
    handover_reopen,
    handover_require_writer,
    handover_start_recovery,
    handover_update,
    handover_verify,
    residual_exception_create,
    residual_exception_update,
)
from handover.handovers.versions import PreconditionRequired, etag, if_match_version
from runs.attempts.models import Run
from runs.permissions import run_visibility_filter

TAG = ["handovers"]
PROBLEMS = {
    403: OpenApiResponse(ProblemSerializer, description="the caller may read but not change this handover"),
    404: OpenApiResponse(ProblemSerializer, description="no such handover, or not visible to the caller"),
}
TRANSITION_PROBLEMS = {
    **PROBLEMS,
    409: OpenApiResponse(ProblemSerializer, description="not allowed in the current status (or conditions unmet)"),
}


class MarkdownRenderer(BaseRenderer):
    """``text/markdown`` for the export; an error body (a dict) is written as JSON."""

    media_type = "text/markdown"
    format = "md"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if isinstance(data, str):
            return data.encode(self.charset)
        return json.dumps(data).encode(self.charset)


def _base_version(request: Request, body_version: int | None, *, what: str) -> tuple[int, bool]:
    """The version an API edit is based on and whether it came from ``If-Match`` alone.

    The body's ``version`` wins over ``If-Match``. Raises PreconditionRequired (428) when neither is given.
    """
    header = if_match_version(request.headers.get("If-Match"))
    if body_version is not None:
        return body_version, False
    if header is not None:
        return header, True
    raise PreconditionRequired(
        f"Name the {what} version you edited: `version` in the body or an If-Match header (the ETag of its detail)."
    )


@extend_schema_view(
    list=extend_schema(summary="List handovers", tags=TAG),
)
class HandoverViewSet(StrictQueryMixin, mixins.ListModelMixin, viewsets.GenericViewSet[Handover]):
    """Handovers the caller may see, newest first."""

    queryset = Handover.objects.none()  # for the schema only; get_queryset scopes to the caller
    filterset_class = HandoverFilterSet
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    lookup_value_converter = "uuid"

    def get_queryset(self) -> QuerySet[Handover]:
        filters = self.query_filters
        return handover_list(
            user=self.request.user,
            status=filters.get("status"),
            escalation_owner=signed_in(self.request.user) if filters.get("mine") else None,
            is_open=filters.get("open"),
        )

    def get_serializer_class(self) -> type[BaseSerializer[Handover]]:
        return HandoverListSerializer

    def get_object(self) -> Handover:
        handover = handover_get(user=self.request.user, public_id=self.kwargs["id"])
        if handover is None:
            raise Http404
        return handover

    def _writable(self) -> Handover:
        handover = self.get_object()
        handover_require_writer(signed_in(self.request.user), handover=handover)  # before the body is read
        return handover

    def _detail(self, handover: Handover, status_code: int = status.HTTP_200_OK, *, reload: bool = True) -> Response:
        """The detail shape; ``reload`` reads the handover again with everything prefetched (after a write)."""
        redacted = getattr(handover, "redacted_sections", [])  # set by the write: what lost a secret
        if reload:
            fresh = handover_get(user=self.request.user, public_id=handover.public_id)
            assert fresh is not None
            handover = fresh
        conditions = handover_closing_conditions(handover=handover)
        context = {
            "closing_conditions": conditions,
            "redacted_sections": redacted,
            "staleness": handover_generated_staleness(handover=handover),
        }
        data = HandoverDetailSerializer(handover, context=context).data
        return Response(data, status=status_code, headers={"ETag": etag(handover.version)})

    @extend_schema(
        summary="Draft a handover for failed runs of one job",
        description="Pre-filled from the evidence (timeline, attempts, ledger); generated text is marked "
        "until a person confirms it.",
        tags=TAG,
        request=HandoverCreateInputSerializer,
        responses={
            201: HandoverDetailSerializer,
            400: OpenApiResponse(ProblemSerializer),
            403: PROBLEMS[403],
            404: OpenApiResponse(ProblemSerializer, description="a run does not exist or is not visible"),
            409: OpenApiResponse(ProblemSerializer, description="a run already has an open handover"),
        },
    )
    def create(self, request: Request) -> Response:
        data = HandoverCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        ids = list(dict.fromkeys(data.validated_data["runs"]))
        runs = list(Run.objects.filter(run_visibility_filter(user=request.user), public_id__in=ids))
        if len(runs) != len(ids):
            raise Http404("No such run.")
        handover = handover_create(actor=signed_in(request.user), runs=runs)
        return self._detail(handover, status.HTTP_201_CREATED)

    @extend_schema(
        summary="One handover with its runs, sections, residual exceptions and closing conditions",
        tags=TAG,
        responses={200: HandoverDetailSerializer, 404: PROBLEMS[404]},
    )
    def retrieve(self, request: Request, id: str) -> Response:
        return self._detail(self.get_object(), reload=False)

    @extend_schema(
        summary="Edit sections and fields; confirm generated sections",
        description="Every changed section keeps its previous text as a revision; the edit goes on the "
        'runs\' timelines. Name the version you edited: `version` in the body, or `If-Match: "<version>"` '
        "(the detail's `ETag`). A stale body `version` answers 409 `edit-conflict` with `current_version` and "
        "the `current` texts, nothing saved; a stale `If-Match` alone answers 412; neither answers 428. Every "
        "write raises `version` (see docs/api-changes.md).",
        tags=TAG,
        request=HandoverUpdateInputSerializer,
        responses={
            200: HandoverDetailSerializer,
            400: OpenApiResponse(ProblemSerializer),
            **TRANSITION_PROBLEMS,
            409: OpenApiResponse(
                ProblemSerializer, description="edited meanwhile (`edit-conflict`), or the handover is closed"
            ),
            412: OpenApiResponse(ProblemSerializer, description="If-Match names a version that is not current"),
            428: OpenApiResponse(ProblemSerializer, description="neither `version` nor If-Match given"),
        },
    )
    def partial_update(self, request: Request, id: str) -> Response:
        handover = self._writable()
        data = HandoverUpdateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        base, via_if_match = _base_version(request, values.get("version"), what="handover")
        handover = handover_update(
            handover=handover,
            actor=signed_in(request.user),
            sections={k: v for k, v in values.items() if k in Handover.Section.values},
            confirm=values.get("confirm", []),
            fields={k: v for k, v in values.items() if k in EDITABLE_FIELDS},
            base_version=base,
            via_if_match=via_if_match,
        )
        return self._detail(handover)

    def _act(self, verb: Any, **kwargs: Any) -> Response:
        handover = self._writable()
        return self._detail(verb(handover=handover, actor=signed_in(self.request.user), **kwargs))

    @extend_schema(
        summary="Hand over (needs an escalation owner, who is notified)",
        tags=TAG,
        request=None,
        responses={200: HandoverDetailSerializer, **TRANSITION_PROBLEMS},
    )
    @action(detail=True, methods=["post"], url_path="hand-over")
    def hand_over(self, request: Request, id: str) -> Response:
        return self._act(handover_hand_over)

    @extend_schema(
        summary="Start recovery",
        tags=TAG,
        request=None,
        responses={200: HandoverDetailSerializer, **TRANSITION_PROBLEMS},
    )
    @action(detail=True, methods=["post"], url_path="start-recovery")
    def start_recovery(self, request: Request, id: str) -> Response:
        return self._act(handover_start_recovery)

    @extend_schema(
        summary="Move to verifying (schedules each run's next-run check)",
        tags=TAG,
        request=None,
        responses={200: HandoverDetailSerializer, 400: OpenApiResponse(ProblemSerializer), **TRANSITION_PROBLEMS},
    )
    @action(detail=True, methods=["post"])
    def verify(self, request: Request, id: str) -> Response:
        return self._act(handover_verify)

    @extend_schema(
        summary="Close (refused with the list of what is missing)",
        tags=TAG,
        request=None,
        responses={200: HandoverDetailSerializer, **TRANSITION_PROBLEMS},
    )
    @action(detail=True, methods=["post"])
    def close(self, request: Request, id: str) -> Response:
        return self._act(handover_close)

    @extend_schema(
        summary="Reopen (back to recovering)",
        tags=TAG,
        request=HandoverReopenInputSerializer,
        responses={200: HandoverDetailSerializer, 400: OpenApiResponse(ProblemSerializer), **TRANSITION_PROBLEMS},
    )
    @action(detail=True, methods=["post"])
    def reopen(self, request: Request, id: str) -> Response:
        handover = self._writable()
        data = HandoverReopenInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        moved = handover_reopen(handover=handover, actor=signed_in(request.user), reason=data.validated_data["reason"])
        return self._detail(moved)

    @extend_schema(
        summary="Generate the still-generated sections again from the current evidence",
        tags=TAG,
        request=None,
        responses={200: HandoverDetailSerializer, **TRANSITION_PROBLEMS},
    )
    @action(detail=True, methods=["post"])
    def refresh(self, request: Request, id: str) -> Response:
        return self._act(handover_refresh_generated)

    @extend_schema(
        summary="Every earlier text of the sections (history of edits)",
        tags=TAG,
        responses={200: HandoverRevisionSerializer(many=True), 404: PROBLEMS[404]},
    )
    @action(detail=True, methods=["get"], pagination_class=None, filterset_class=HandoverRevisionFilterSet)
    def revisions(self, request: Request, id: str) -> Response:
        handover = self.get_object()
        revisions = handover_revision_list(handover=handover, section=self.query_filters.get("section"))
        return Response(HandoverRevisionSerializer(revisions, many=True).data)

    @extend_schema(
        summary="The handover as Markdown, for pasting into a ticket",
        tags=TAG,
        responses={(200, "text/markdown"): OpenApiTypes.STR, 404: PROBLEMS[404]},
    )
    @action(detail=True, methods=["get"], renderer_classes=[MarkdownRenderer])
    def markdown(self, request: Request, id: str) -> Response:
        handover = self.get_object()
        text = handover_markdown(handover=handover, conditions=handover_closing_conditions(handover=handover))
        filename = f"handover-{handover.public_id}.md"
        return Response(text, headers={"Content-Disposition": f'inline; filename="{filename}"'})

    @extend_schema(
        summary="Record a residual exception (what is knowingly left over)",
        tags=TAG,
        request=ResidualExceptionCreateInputSerializer,
        responses={201: ResidualExceptionSerializer, 400: OpenApiResponse(ProblemSerializer), **TRANSITION_PROBLEMS},
    )
    @action(detail=True, methods=["post"], url_path="residual-exceptions")
    def residual_exceptions(self, request: Request, id: str) -> Response:
        handover = self._writable()
        data = ResidualExceptionCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        run = None
        if values.get("run"):
            run = next((link.run for link in handover.links.all() if link.run.public_id == values["run"]), None)
            if run is None:
                raise Http404("No such run in this handover.")
        exception = residual_exception_create(
            handover=handover,
            actor=signed_in(request.user),
            description=values["description"],
            record_ids=values.get("record_ids", []),
            run=run,
            owner=values.get("owner"),
            due_date=values.get("due_date"),
        )
        fresh = handover_get(user=request.user, public_id=handover.public_id)
        assert fresh is not None
        shown = next(e for e in fresh.residual_exceptions.all() if e.pk == exception.pk)
        return Response(ResidualExceptionSerializer(shown).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Name the owner and due date of a residual exception",
        description="Versioned like the handover: name the exception's `version` in the body or in If-Match "
        "(409 `edit-conflict` with the current values for a stale body version, 412 for a stale If-Match, 428 "
        "for neither).",
        tags=TAG,
        request=ResidualExceptionUpdateInputSerializer,
        responses={
            200: ResidualExceptionSerializer,
            400: OpenApiResponse(ProblemSerializer),
            **TRANSITION_PROBLEMS,
            409: OpenApiResponse(ProblemSerializer, description="changed meanwhile, or the handover is closed"),
            412: OpenApiResponse(ProblemSerializer, description="If-Match names a version that is not current"),
            428: OpenApiResponse(ProblemSerializer, description="neither `version` nor If-Match given"),
        },
    )
    @action(
        detail=True,
        methods=["patch"],
        url_path="residual-exceptions/<uuid:exception_id>",
        url_name="residual-exception-detail",
    )
    def residual_exception(self, request: Request, id: str, exception_id: str) -> Response:
        handover = self._writable()
        exception: ResidualException | None = next(
            (e for e in handover.residual_exceptions.all() if e.public_id == exception_id), None
        )
        if exception is None:
            raise Http404("No such residual exception.")
        data = ResidualExceptionUpdateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        base, via_if_match = _base_version(request, values.get("version"), what="residual exception")
        residual_exception_update(
            exception=exception,
            actor=signed_in(request.user),
            owner=values.get("owner"),
            due_date=values.get("due_date"),
            description=values.get("description"),
            base_version=base,
            via_if_match=via_if_match,
        )
        fresh = handover_get(user=request.user, public_id=handover.public_id)
        assert fresh is not None
        shown = next(e for e in fresh.residual_exceptions.all() if e.pk == exception.pk)
        return Response(ResidualExceptionSerializer(shown).data, headers={"ETag": etag(shown.version)})

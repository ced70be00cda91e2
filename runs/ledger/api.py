"""``/api/v1/runs/<id>/items/…`` and ``/api/v1/items/``: a run's work ledger.

Anyone who can see a run reads its ledger (items paged by key, change history, loads, totals);
support on the run's tenant, the job's technical owners and admins load files, change and verify
items and confirm the failure class (auditors and business owners get 403; a run the caller may
not see answers 404). Errors are problem details; a bad file's problem names its ``line`` and
``column``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, ClassVar

from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field, extend_schema_view
from rest_framework import generics, serializers, status
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from handover.core.errors import problem, problem_response
from handover.core.fields import BlankAsNullChoiceField, TextField
from handover.core.filters import StrictQueryMixin
from handover.core.pagination import DefaultPagination, page_number_read
from handover.core.parsers import FormParser, MultiPartParser
from handover.core.people import Person
from handover.core.serializers import ProblemSerializer, validated_body
from runs.attempts.models import Run
from runs.ledger.common import run_ledger_require_writer
from runs.ledger.confirmations import LedgerVersionConflict, work_item_load_confirm, work_item_load_discard
from runs.ledger.failure_class import run_failure_class_confirm
from runs.ledger.files import LedgerInputError
from runs.ledger.filters import WorkItemChangeFilterSet, WorkItemFilterSet, WorkItemSearchFilterSet
from runs.ledger.items import work_item_change, work_item_duplicate_explain, work_item_verify
from runs.ledger.loads import (
    ID_COLUMN_OPTIONS,
    OPTION_NAMES,
    LoadFile,
    work_item_load_retry,
    work_item_loads_create,
)
from runs.ledger.models import WorkItem, WorkItemChange, WorkItemLoad
from runs.ledger.selectors import (
    run_get_for_ledger,
    work_item_change_list,
    work_item_list,
    work_item_load_get,
    work_item_load_list,
    work_item_load_progress,
    work_item_search,
)

PROBLEM_MEDIA_TYPE = "application/problem+json"


def _problem(status_code: int, description: str) -> dict[Any, OpenApiResponse]:
    """An error response documented with the media type it is served with (RFC 9457)."""
    return {(status_code, PROBLEM_MEDIA_TYPE): OpenApiResponse(ProblemSerializer, description=description)}


PROBLEMS = {
    **_problem(401, "not authenticated"),
    **_problem(400, "invalid input; a bad file names its line and column"),
    **_problem(403, "may read this run but not change its ledger"),
    **_problem(404, "no such run, or not visible to the caller"),
}
READ_PROBLEMS = {
    **_problem(400, "an invalid or unknown query parameter"),
    **_problem(401, "not authenticated"),
    **_problem(404, "no such run (or page), or not visible to the caller"),
}


# --- pagination -----------------------------------------------------------------------------------


class _StrictPageSize:
    """``page_size`` must be a whole number of 1 or more (the schema says so); above the cap it is capped."""

    page_size: int
    page_size_query_param = "page_size"
    max_page_size = 200

    def get_page_size(self, request: Request) -> int | None:
        size = page_number_read(request, self.page_size_query_param)
        return self.page_size if size is None else min(size, self.max_page_size)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters: list[dict[str, Any]] = super().get_schema_operation_parameters(view)  # type: ignore[misc]
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1}
        return parameters


class WorkItemCursorPagination(_StrictPageSize, CursorPagination):
    """Keyset pages over a run's items by record id: no offsets, so page 10,000 costs what page 1 does."""

    ordering = "record_id"
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


class WorkItemChangeCursorPagination(_StrictPageSize, CursorPagination):
    """Keyset pages over the change history, newest first."""

    ordering = "-id"
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


class WorkItemPagePagination(DefaultPagination):
    """The default page-number pages (search results, loads)."""


# --- serializers ----------------------------------------------------------------------------------


class WorkItemSerializer(serializers.ModelSerializer[WorkItem]):
    """One work item with its facts and the evidence for its outcome; people by username."""

    is_eligible = serializers.BooleanField(read_only=True)
    runner_status = BlankAsNullChoiceField(
        choices=WorkItem.RunnerStatus.choices, help_text="what the runner reported; null when it reported nothing"
    )
    evidence_kind = BlankAsNullChoiceField(
        choices=WorkItem.EvidenceKind.choices, help_text="where the outcome comes from; null before any evidence"
    )
    evidence_by: serializers.SlugRelatedField[Person] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    evidence_summary = serializers.CharField(read_only=True)
    destination_load = serializers.UUIDField(
        source="destination_load.public_id",
        read_only=True,
        allow_null=True,
        default=None,
        help_text="the destination export whose facts the item holds; null before any",
    )
    duplicate_explained_by: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )

    class Meta:
        model = WorkItem
        fields = [
            "record_id",
            "outcome",
            "is_eligible",
            "is_in_population",
            "skip_reason",
            "attributes",
            "is_attempted",
            "runner_status",
            "destination_count",
            "destination_ref",
            "destination_load",
            "is_possible_duplicate",
            "duplicate_explained_by",
            "duplicate_explained_at",
            "duplicate_explanation",
            "duplicate_evidence_ref",
            "evidence_kind",
            "evidence_ref",
            "evidence_by",
            "evidence_at",
            "evidence_note",
            "evidence_summary",
        ]
        read_only_fields = fields


class WorkItemRunSerializer(serializers.ModelSerializer[Run]):
    id = serializers.UUIDField(source="public_id", read_only=True)
    job = serializers.CharField(source="job.key", read_only=True)
    tenant = serializers.CharField(source="tenant.slug", read_only=True)

    class Meta:
        model = Run
        fields = ["id", "job", "tenant", "environment", "window_start", "window_end", "status"]
        read_only_fields = fields


class WorkItemSearchSerializer(WorkItemSerializer):
    """A work item found by record id, with the run it belongs to."""

    run = WorkItemRunSerializer(read_only=True)

    class Meta(WorkItemSerializer.Meta):
        fields = ["run", *WorkItemSerializer.Meta.fields]
        read_only_fields = fields


class WorkItemChangeSerializer(serializers.ModelSerializer[WorkItemChange]):
    """One entry of an item's history: a person's change or a provider lookup."""

    record_id = serializers.CharField(source="work_item.record_id", read_only=True)
    changed_by: serializers.SlugRelatedField[Person] = serializers.SlugRelatedField(
        slug_field="username", read_only=True
    )
    load = serializers.UUIDField(source="load.public_id", read_only=True, allow_null=True, default=None)

    class Meta:
        model = WorkItemChange
        fields = [
            "record_id",
            "kind",
            "from_outcome",
            "to_outcome",
            "evidence_kind",
            "evidence_ref",
            "note",
            "changed_by",
            "changed_at",
            "load",
        ]
        read_only_fields = fields


class WorkItemLoadProgressSerializer(serializers.Serializer[dict[str, Any]]):
    phase = serializers.CharField()
    percent = serializers.IntegerField(min_value=0, max_value=100)
    message = serializers.CharField(allow_blank=True)


class WorkItemLoadPreviewItemSerializer(serializers.Serializer[dict[str, Any]]):
    record_id = serializers.CharField()
    to = serializers.CharField(help_text="the outcome after the load")
    possible_duplicate_cleared = serializers.BooleanField()

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields = super().get_fields()
        fields["from"] = serializers.CharField(help_text="the outcome before the load")  # a keyword in Python
        return fields


class WorkItemLoadPreviewSerializer(serializers.Serializer[dict[str, Any]]):
    """What a load would weaken: how many items, by change, and the first 50 (the page offers the whole list)."""

    total = serializers.IntegerField(required=False)
    counts = serializers.DictField(child=serializers.IntegerField(), required=False)
    items = WorkItemLoadPreviewItemSerializer(many=True, required=False)


class WorkItemLoadSerializer(serializers.ModelSerializer[WorkItemLoad]):
    """One uploaded file and what became of it; ``progress`` is live while it is pending or running."""

    id = serializers.UUIDField(source="public_id", read_only=True)
    created_by: serializers.SlugRelatedField[Person] = serializers.SlugRelatedField(
        slug_field="username", read_only=True
    )
    confirmed_by: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    progress = serializers.SerializerMethodField()
    preview = WorkItemLoadPreviewSerializer(
        read_only=True, help_text="while awaiting confirmation: what the load would weaken"
    )

    class Meta:
        model = WorkItemLoad
        fields = [
            "id",
            "number",
            "batch",
            "kind",
            "status",
            "format",
            "id_column",
            "options",
            "is_destination_complete",
            "file_name",
            "size_bytes",
            "sha256",
            "row_count",
            "counts",
            "error",
            "error_line",
            "error_column",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
            "preview",
            "preview_version",
            "confirmed_by",
            "confirmed_at",
            "confirmed_version",
            "confirm_reason",
            "progress",
        ]
        read_only_fields = fields

    @extend_schema_field(WorkItemLoadProgressSerializer)
    def get_progress(self, load: WorkItemLoad) -> dict[str, object]:
        return work_item_load_progress(load=load)  # the cache, not the database


class WorkItemLoadBatchSerializer(serializers.Serializer[dict[str, Any]]):
    """The files of one upload: loaded together (201) or queued together (202)."""

    batch = serializers.UUIDField()
    loads = WorkItemLoadSerializer(many=True)


class WorkItemLoadCreateInputSerializer(serializers.Serializer[dict[str, Any]]):
    """One upload: a file per kind (at least one), the id column's name and the optional columns."""

    population = serializers.FileField(required=False, help_text="the eligible population (record ids)")
    runner_report = serializers.FileField(
        required=False, help_text="what the runner reports: ids with a status (attempted / completed / failed)"
    )
    destination = serializers.FileField(
        required=False, help_text="the ids the destination holds (read-only export), with references"
    )
    provider_lookup = serializers.FileField(
        required=False, help_text="bulk verification: ids with found (yes/no) and the provider's reference"
    )
    format = serializers.ChoiceField(choices=WorkItemLoad.Format.choices, default=WorkItemLoad.Format.AUTO)
    id_column = TextField(
        max_length=200, default="record_id", help_text="the id column, by name (<kind>_id_column overrides it)"
    )
    population_id_column = TextField(max_length=200, required=False, allow_blank=True)
    runner_report_id_column = TextField(max_length=200, required=False, allow_blank=True)
    destination_id_column = TextField(max_length=200, required=False, allow_blank=True)
    provider_lookup_id_column = TextField(max_length=200, required=False, allow_blank=True)
    ref_column = TextField(max_length=200, required=False, allow_blank=True)
    status_column = TextField(max_length=200, required=False, allow_blank=True)
    skip_column = TextField(max_length=200, required=False, allow_blank=True)
    found_column = TextField(max_length=200, required=False, allow_blank=True)
    is_destination_complete = serializers.BooleanField(
        default=False, help_text="the destination export is complete for the window: eligible ids it lacks are absent"
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not any(attrs.get(kind) for kind in WorkItemLoad.Kind.values):
            raise serializers.ValidationError({"file": ["Upload at least one file (population, runner_report, …)."]})
        return attrs


class WorkItemChangeInputSerializer(serializers.Serializer[dict[str, Any]]):
    record_id = TextField(max_length=300)
    outcome = serializers.ChoiceField(choices=WorkItem.Outcome.choices)
    note = TextField(max_length=2000, help_text="why the outcome changes (required)")
    evidence_ref = TextField(max_length=300, required=False, allow_blank=True, default="")


class WorkItemVerifyInputSerializer(serializers.Serializer[dict[str, Any]]):
    record_id = TextField(max_length=300)
    found = serializers.BooleanField(help_text="the provider has it (→ completed) or confirms it has not (→ absent)")
    reference = TextField(max_length=300, required=False, allow_blank=True, default="", help_text="required when found")
    note = TextField(max_length=2000, required=False, allow_blank=True, default="")


class RunLedgerSerializer(serializers.ModelSerializer[Run]):
    """A run's ledger totals (stored when a load or change commits) and its failure class."""

    id = serializers.UUIDField(source="public_id", read_only=True)
    is_reconciled = serializers.SerializerMethodField()
    failure_class_suggested = BlankAsNullChoiceField(
        choices=Run.FailureClass.choices, help_text="the app's suggestion; null before there is one"
    )
    failure_class = BlankAsNullChoiceField(
        choices=Run.FailureClass.choices, help_text="confirmed by a person; null until then"
    )
    failure_class_confirmed_by: serializers.SlugRelatedField[Person] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )

    class Meta:
        model = Run
        fields = [
            "id",
            "eligible_count",
            "attempted_count",
            "completed_count",
            "skipped_count",
            "rejected_count",
            "unresolved_count",
            "unverified_count",
            "absent_count",
            "uncertain_count",
            "possible_duplicate_count",
            "ledger_updated_at",
            "ledger_version",
            "is_reconciled",
            "failure_class_suggested",
            "failure_class",
            "failure_class_confirmed_by",
            "failure_class_confirmed_at",
        ]
        read_only_fields = fields

    def get_is_reconciled(self, run: Run) -> bool:
        """True only when a population is loaded and nothing is unresolved (never "fine" before that)."""
        return run.ledger_updated_at is not None and run.eligible_count > 0 and run.unresolved_count == 0


class WorkItemLoadConfirmInputSerializer(serializers.Serializer[dict[str, Any]]):
    reason = TextField(max_length=2000, help_text="why these records may be weakened (required)")
    ledger_version = serializers.IntegerField(
        min_value=0, help_text="the ledger version the preview was computed on (the load's preview_version)"
    )


class WorkItemLoadDiscardInputSerializer(serializers.Serializer[dict[str, Any]]):
    reason = TextField(max_length=2000, help_text="why the load is not applied (required)")


class WorkItemDuplicateExplainInputSerializer(serializers.Serializer[dict[str, Any]]):
    record_id = TextField(max_length=300)
    reason = TextField(max_length=2000, help_text="why it is not a duplicate (required)")
    evidence_ref = TextField(max_length=300, help_text="ticket, provider operation or query (required)")


class RunFailureClassConfirmInputSerializer(serializers.Serializer[dict[str, Any]]):
    failure_class = serializers.ChoiceField(choices=Run.FailureClass.choices)
    note = TextField(
        max_length=2000, required=False, allow_blank=True, default="", help_text="required when it differs"
    )


# --- views ----------------------------------------------------------------------------------------


def _uuid(value: object) -> uuid.UUID:
    """The UUID in a path segment; a malformed one is simply not found (problem details, 404)."""
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise Http404 from None


def _run(request: Request, run_id: object) -> Run:
    run = run_get_for_ledger(user=request.user, public_id=_uuid(run_id))
    if run is None:
        raise Http404
    return run


def _writable_run(request: Request, run_id: object) -> Run:
    """The run whose ledger the caller changes: 404 when they may not see it, 403 when they may only read.

    Checked before the request body is read or validated, so a reader gets 403 for any body, never a
    400 that tells them what the write would have needed.
    """
    run = _run(request, run_id)
    run_ledger_require_writer(actor=request.user, run=run)
    return run


def _load(run: Run, load_id: object) -> WorkItemLoad:
    """The load ``load_id`` of ``run`` (404 when malformed or not this run's), holding ``run`` itself."""
    load = work_item_load_get(run=run, public_id=_uuid(load_id))
    if load is None:
        raise Http404
    load.run = run
    return load


def _input_problem(exc: LedgerInputError) -> Response:
    """A bad file as problem details, with its ``line`` and ``column`` as fields of their own."""
    extra: dict[str, Any] = {"line": exc.line, "column": exc.column or None}
    return problem_response(problem(exc.status, exc.title, exc.detail, type_=exc.type, errors=exc.errors, extra=extra))


@extend_schema(
    summary="List a run's work items, paged by record id",
    tags=["work ledger"],
    responses={200: WorkItemSerializer(many=True), **READ_PROBLEMS},
)
class WorkItemListView(StrictQueryMixin, generics.ListAPIView[WorkItem]):
    """A run's items in record-id order, with keyset (cursor) pages."""

    queryset = WorkItem.objects.none()  # for the schema only; get_queryset scopes to the caller
    serializer_class = WorkItemSerializer
    pagination_class = WorkItemCursorPagination
    filterset_class = WorkItemFilterSet

    def get_queryset(self) -> QuerySet[WorkItem]:
        return work_item_list(run=_run(self.request, self.kwargs["id"]), **self.query_filters)


@extend_schema(
    summary="What happened to a record? Find it by id across the runs you may see",
    tags=["work ledger"],
    responses={
        200: WorkItemSearchSerializer(many=True),
        **_problem(400, "no record id given, or an invalid page_size"),
        **_problem(401, "not authenticated"),
        **_problem(404, "no such page"),
    },
)
class WorkItemSearchView(StrictQueryMixin, generics.ListAPIView[WorkItem]):
    """Every visible item with exactly this record id, newest window first."""

    queryset = WorkItem.objects.none()  # for the schema only; get_queryset scopes to the caller
    serializer_class = WorkItemSearchSerializer
    pagination_class = WorkItemPagePagination
    filterset_class = WorkItemSearchFilterSet

    def get_queryset(self) -> QuerySet[WorkItem]:
        return work_item_search(user=self.request.user, record_id=self.query_filters["record_id"])


@extend_schema(
    summary="A run's item history (people's changes and provider lookups), newest first",
    tags=["work ledger"],
    responses={200: WorkItemChangeSerializer(many=True), **READ_PROBLEMS},
)
class WorkItemChangeListView(StrictQueryMixin, generics.ListAPIView[WorkItemChange]):
    queryset = WorkItemChange.objects.none()  # for the schema only; get_queryset scopes to the caller
    serializer_class = WorkItemChangeSerializer
    pagination_class = WorkItemChangeCursorPagination
    filterset_class = WorkItemChangeFilterSet

    def get_queryset(self) -> QuerySet[WorkItemChange]:
        return work_item_change_list(run=_run(self.request, self.kwargs["id"]), **self.query_filters)


class RunWriteView(StrictQueryMixin, APIView):
    """A POST that writes one run's ledger through one service.

    The run (``_writable_run``: 404, then 403, before the body is read), the body checked by
    ``input_class`` (400), ``write(actor=, run=, **body)`` (the service; its refusals carry their own
    status, e.g. 409) and what it returns serialized by ``output_class`` (200). A subclass names the
    three (``write`` as a staticmethod) and declares its schema with ``_write_schema``.
    """

    input_class: ClassVar[type[serializers.Serializer[Any]]]
    write: ClassVar[Callable[..., Any]]
    output_class: ClassVar[type[serializers.BaseSerializer[Any]]] = WorkItemSerializer

    def post(self, request: Request, id: str) -> Response:
        run = _writable_run(request, id)
        values = validated_body(request, self.input_class)
        return Response(self.output_class(self.write(actor=request.user, run=run, **values)).data)


def _write_schema(summary: str, conflict: str = "") -> Callable[[type[RunWriteView]], type[RunWriteView]]:
    """The schema of a ``RunWriteView``'s POST from its own classes: ``summary``, and ``conflict`` the
    description of its 409 (none when empty)."""

    def decorate(view: type[RunWriteView]) -> type[RunWriteView]:
        schema = extend_schema(
            summary=summary,
            tags=["work ledger"],
            request=view.input_class,
            responses={200: view.output_class, **PROBLEMS, **(_problem(409, conflict) if conflict else {})},
        )
        return extend_schema_view(post=schema)(view)

    return decorate


@_write_schema("Change one item's outcome", "the item already has that outcome")
class WorkItemChangeView(RunWriteView):
    """A person changes one item's outcome, saying why (kept in its history and on the timeline)."""

    input_class = WorkItemChangeInputSerializer
    write = staticmethod(work_item_change)


@_write_schema("Verify one uncertain item with a provider lookup", "the item is not uncertain or unverified")
class WorkItemVerifyView(RunWriteView):
    """Record a provider lookup for one uncertain (or unverified) item."""

    input_class = WorkItemVerifyInputSerializer
    write = staticmethod(work_item_verify)


class WorkItemLoadListCreateView(StrictQueryMixin, generics.ListAPIView[WorkItemLoad]):
    """A run's uploads (newest first), and a new upload of one file per kind."""

    queryset = WorkItemLoad.objects.none()  # for the schema only; get_queryset scopes to the caller
    serializer_class = WorkItemLoadSerializer
    pagination_class = WorkItemPagePagination
    parser_classes = [MultiPartParser, FormParser]

    def get_queryset(self) -> QuerySet[WorkItemLoad]:
        return work_item_load_list(run=_run(self.request, self.kwargs["id"]))

    @extend_schema(
        summary="List a run's loads",
        tags=["work ledger"],
        responses={200: WorkItemLoadSerializer(many=True), **READ_PROBLEMS},
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        summary="Upload record-id files (population, runner report, destination export, provider lookup)",
        description=(
            "CSV (header detected; the id column chosen by name) or JSON lines. Files of one upload load "
            "together in one transaction: a failed load changes nothing. Small uploads load at once (201); "
            "large ones run as a task (202) whose progress the load's `progress` shows. An upload that would weaken "
            "the ledger is not applied (202, status `awaiting_confirmation`, with its `preview`): confirm it at "
            "`loads/{load_id}/confirm/` or discard it. Loads are numbered per run and kind and never deleted."
        ),
        tags=["work ledger"],
        request={"multipart/form-data": WorkItemLoadCreateInputSerializer},
        responses={
            201: WorkItemLoadBatchSerializer,
            202: WorkItemLoadBatchSerializer,
            **PROBLEMS,
            **_problem(413, "a file over the configured size limit"),
        },
    )
    def post(self, request: Request, id: str) -> Response:
        run = _writable_run(request, id)
        values = validated_body(request, WorkItemLoadCreateInputSerializer)
        files = [
            LoadFile(kind=kind, content=values[kind].read(), file_name=values[kind].name or kind)
            for kind in WorkItemLoad.Kind.values
            if values.get(kind)
        ]
        try:
            loads = work_item_loads_create(
                actor=request.user,
                run=run,
                files=files,
                file_format=values["format"],
                id_column=values["id_column"],
                options={name: values.get(name, "") for name in (*OPTION_NAMES, *ID_COLUMN_OPTIONS)},
                is_destination_complete=values["is_destination_complete"],
            )
        except LedgerInputError as exc:
            return _input_problem(exc)
        committed = all(load.status == WorkItemLoad.Status.COMMITTED for load in loads)
        body = WorkItemLoadBatchSerializer({"batch": loads[0].batch, "loads": loads}).data
        return Response(body, status=status.HTTP_201_CREATED if committed else status.HTTP_202_ACCEPTED)


class WorkItemLoadDetailView(StrictQueryMixin, APIView):
    """One load, with its progress while it runs (poll this)."""

    @extend_schema(
        summary="One load and its progress",
        tags=["work ledger"],
        responses={200: WorkItemLoadSerializer, **READ_PROBLEMS},
    )
    def get(self, request: Request, id: str, load_id: str) -> Response:
        return Response(WorkItemLoadSerializer(_load(_run(request, id), load_id)).data)


class WorkItemLoadRetryView(StrictQueryMixin, APIView):
    """Queue again an upload that failed unexpectedly (not one with bad input: fix and upload that)."""

    @extend_schema(
        summary="Retry a load that failed unexpectedly",
        tags=["work ledger"],
        request=None,
        responses={
            202: WorkItemLoadSerializer,
            **PROBLEMS,
            **_problem(409, "not failed, or failed on bad input"),
        },
    )
    def post(self, request: Request, id: str, load_id: str) -> Response:
        run = _writable_run(request, id)
        load = _load(run, load_id)
        load = work_item_load_retry(actor=request.user, load=load)
        return Response(WorkItemLoadSerializer(load).data, status=status.HTTP_202_ACCEPTED)


class WorkItemLoadConfirmView(StrictQueryMixin, APIView):
    """Apply a load that waits for confirmation, accepting its weakenings against the version previewed."""

    @extend_schema(
        summary="Confirm a load that would weaken the ledger",
        description=(
            "A load that would weaken the ledger (a completed record no longer completed, an absent or rejected one "
            "becoming uncertain or unverified, a possible-duplicate flag cleared) waits `awaiting_confirmation` with "
            "nothing applied and its `preview`. Confirm it with a reason and the `ledger_version` the preview was "
            "computed on (`preview_version`). When the ledger changed since, nothing is applied and the answer is "
            "409 with the load and its new preview under `load`. A small load applies at once (200); a large one is "
            "queued (202)."
        ),
        tags=["work ledger"],
        request=WorkItemLoadConfirmInputSerializer,
        responses={
            200: WorkItemLoadSerializer,
            202: WorkItemLoadSerializer,
            **PROBLEMS,
            **_problem(409, "the load does not wait for a confirmation, or the ledger changed since its preview"),
        },
    )
    def post(self, request: Request, id: str, load_id: str) -> Response:
        run = _writable_run(request, id)
        values = validated_body(request, WorkItemLoadConfirmInputSerializer)
        load = _load(run, load_id)
        try:
            load = work_item_load_confirm(actor=request.user, load=load, **values)
        except LedgerVersionConflict as exc:
            body = problem(
                exc.status,
                exc.title,
                exc.detail,
                type_=exc.type,
                extra={"load": WorkItemLoadSerializer(exc.load).data},
            )
            return problem_response(body)
        except LedgerInputError as exc:
            return _input_problem(exc)
        committed = load.status == WorkItemLoad.Status.COMMITTED
        return Response(
            WorkItemLoadSerializer(load).data, status=status.HTTP_200_OK if committed else status.HTTP_202_ACCEPTED
        )


class WorkItemLoadDiscardView(StrictQueryMixin, APIView):
    """Decline a load that waits for confirmation: kept ``discarded``, nothing applied."""

    @extend_schema(
        summary="Discard a load that waits for confirmation",
        tags=["work ledger"],
        request=WorkItemLoadDiscardInputSerializer,
        responses={
            200: WorkItemLoadSerializer,
            **PROBLEMS,
            **_problem(409, "the load does not wait for a confirmation"),
        },
    )
    def post(self, request: Request, id: str, load_id: str) -> Response:
        run = _writable_run(request, id)
        values = validated_body(request, WorkItemLoadDiscardInputSerializer)
        load = work_item_load_discard(actor=request.user, load=_load(run, load_id), **values)
        return Response(WorkItemLoadSerializer(load).data)


@_write_schema("Explain a possible duplicate", "the item is not an unexplained possible duplicate")
class WorkItemDuplicateExplainView(RunWriteView):
    """A person explains one possible duplicate (the only way its flag is cleared)."""

    input_class = WorkItemDuplicateExplainInputSerializer
    write = staticmethod(work_item_duplicate_explain)


class RunLedgerView(StrictQueryMixin, APIView):
    """A run's ledger totals and failure class."""

    @extend_schema(
        summary="A run's ledger totals and failure class",
        tags=["work ledger"],
        responses={200: RunLedgerSerializer, **READ_PROBLEMS},
    )
    def get(self, request: Request, id: str) -> Response:
        return Response(RunLedgerSerializer(_run(request, id)).data)


@_write_schema("Confirm the run's failure class")
class RunFailureClassConfirmView(RunWriteView):
    """A person confirms the run's failure class (the app only suggests it)."""

    input_class = RunFailureClassConfirmInputSerializer
    write = staticmethod(run_failure_class_confirm)
    output_class = RunLedgerSerializer


__all__ = [
    "RunFailureClassConfirmView",
    "RunLedgerView",
    "WorkItemChangeListView",
    "WorkItemChangeView",
    "WorkItemListView",
    "WorkItemDuplicateExplainView",
    "WorkItemLoadConfirmView",
    "WorkItemLoadDetailView",
    "WorkItemLoadDiscardView",
    "WorkItemLoadListCreateView",
    "WorkItemLoadRetryView",
    "WorkItemSearchView",
    "WorkItemVerifyView",
]

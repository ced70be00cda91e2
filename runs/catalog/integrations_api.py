"""``/api/v1/integrations/``: integrations with their settings in force, keys (prefixes only) and recent deliveries.

Admins only (staff): integrations are site configuration, not tenant data. Custom integrations
are created and changed here too: their mapping is validated and tried on samples before
it is saved, ``test`` maps a sample without saving, ``mapping`` exports and imports it as JSON, and
``reprocess`` re-applies the integration's unmatched alerts after a fix.
"""

from __future__ import annotations

import json
from typing import Any

from django.db.models import Prefetch, QuerySet
from django.http import Http404
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import mixins, permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from handover.core.edits import edit_etag
from handover.core.errors import InvalidTransition
from handover.core.fields import TextField
from handover.core.filters import StrictQueryMixin
from handover.core.people import person_or_none, signed_in
from handover.core.serializers import (
    ProblemSerializer,
    etag_parameters,
    precondition_failed_response,
    validated_body,
)
from runs.alerts.decoders import DECODERS
from runs.alerts.filters import RefusedRequestFilterSet
from runs.alerts.mapping import (
    MappingPreview,
    Sample,
    integration_custom_create,
    integration_custom_create_with_key,
    integration_custom_update,
    integration_mapping,
    integration_mapping_export,
    integration_reprocess_unmatched,
    mapping_preview,
    samples_from_deliveries,
)
from runs.alerts.models import RefusedRequestCount
from runs.alerts.parsers.base import storable_data
from runs.alerts.parsers.custom.catalogue.entries import catalogue_entries, catalogue_entry
from runs.alerts.parsers.custom.parser import SOURCE
from runs.alerts.parsers.registry import integration_settings_in_force
from runs.alerts.refusals import refused_request_rows_by_source, refused_request_summary
from runs.alerts.selectors import delivery_list_recent, integration_list
from runs.catalog.conventions import integration_conventions, integration_conventions_update
from runs.catalog.keys import source_can_sign
from runs.catalog.models import Integration, IntegrationKey, Tenant, environment_is_valid, normalise_slug
from runs.catalog.selectors import integration_edit_values
from runs.catalog.services import IssuedKey, integration_key_create, integration_key_url
from runs.catalog.transport import integration_transport, integration_transport_update


class IntegrationKeySerializer(serializers.ModelSerializer[IntegrationKey]):
    id = serializers.UUIDField(source="public_id", read_only=True)
    tenants: serializers.SlugRelatedField[Tenant] = serializers.SlugRelatedField(
        slug_field="slug", many=True, read_only=True
    )

    class Meta:
        model = IntegrationKey
        fields = [
            "id",
            "kind",
            "prefix",
            "label",
            "all_tenants",
            "tenants",
            "created_at",
            "last_used_at",
            "revoked_at",
        ]
        read_only_fields = fields


class TransportSerializer(serializers.Serializer[Any]):
    """An integration's transport settings (docs/integrations/transport.md)."""

    allow_get = serializers.BooleanField(help_text="GET reports to a URL key's address are accepted")
    decoder = serializers.DictField(help_text='{"kind": "json"|"ndjson"|"envelope"|"form", "item_types": [...]}')


class RefusedRequestSerializer(serializers.Serializer[Any]):
    reason = serializers.ChoiceField(choices=RefusedRequestCount.Reason.choices)
    network = serializers.CharField(help_text="the client's /24 or /64; * past the hourly cap")
    count = serializers.IntegerField()
    first_at = serializers.DateTimeField()
    last_at = serializers.DateTimeField()


class IntegrationSerializer(serializers.ModelSerializer[Integration]):
    id = serializers.UUIDField(source="public_id", read_only=True)
    keys = IntegrationKeySerializer(many=True, read_only=True)
    settings_in_force = serializers.SerializerMethodField()
    endpoint = serializers.SerializerMethodField()
    mapping = serializers.SerializerMethodField()
    transport = serializers.SerializerMethodField()
    can_sign = serializers.SerializerMethodField()
    conventions = serializers.SerializerMethodField()

    class Meta:
        model = Integration
        fields = [
            "id",
            "name",
            "source",
            "is_active",
            "settings",
            "settings_in_force",
            "mapping",
            "endpoint",
            "keys",
            "transport",
            "can_sign",
            "conventions",
            "refused_post_count",
            "created_at",
        ]
        read_only_fields = fields

    def to_representation(self, instance: Integration) -> dict[str, Any]:
        """The integration as JSON; a text of its free-JSON settings that no response can spell (a lone
        surrogate, which only SQLite stores) is shown as U+FFFD (``storable_data``), never a server error."""
        return storable_data(super().to_representation(instance))  # type: ignore[no-any-return]

    @extend_schema_field(TransportSerializer)
    def get_transport(self, integration: Integration) -> dict[str, Any]:
        transport = integration_transport(integration=integration)
        return {"allow_get": transport.allow_get, "decoder": transport.decoder}

    @extend_schema_field({"type": "object", "additionalProperties": True})
    def get_conventions(self, integration: Integration) -> dict[str, Any]:
        """Where a built-in adapter reads each field (empty for custom integrations: their mapping says)."""
        return {} if integration.source == SOURCE else integration_conventions(integration=integration)

    def get_can_sign(self, integration: Integration) -> bool:
        """Whether the source's senders can sign: signatures cannot be required otherwise."""
        return source_can_sign(integration.source)

    def get_settings_in_force(self, integration: Integration) -> dict[str, Any]:
        return integration_settings_in_force(integration)[0]

    def get_endpoint(self, integration: Integration) -> str:
        return f"/api/v1/alerts/{integration.source}/"

    @extend_schema_field({"type": "object", "nullable": True, "additionalProperties": True})
    def get_mapping(self, integration: Integration) -> dict[str, Any] | None:
        """The mapping of a custom integration (``runs/alerts/parsers/custom/``); null for built-in sources."""
        if integration.source != SOURCE:
            return None
        return integration_mapping(integration)


class DeliverySummarySerializer(serializers.Serializer[Any]):
    id = serializers.UUIDField(source="public_id")
    received_at = serializers.DateTimeField()
    outcome = serializers.CharField()
    size_bytes = serializers.IntegerField()
    alert_count = serializers.IntegerField()
    response_status = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField()


class IntegrationDetailSerializer(IntegrationSerializer):
    recent_deliveries = serializers.SerializerMethodField()
    refused_requests = serializers.SerializerMethodField()

    class Meta(IntegrationSerializer.Meta):
        fields = [*IntegrationSerializer.Meta.fields, "recent_deliveries", "refused_requests"]
        read_only_fields = fields

    @extend_schema_field(RefusedRequestSerializer(many=True))
    def get_refused_requests(self, integration: Integration) -> list[dict[str, Any]]:
        """Requests refused that named this integration's key, by reason and network, last 30 days."""
        rows = refused_request_summary(integration=integration)
        return RefusedRequestSerializer(rows, many=True).data  # type: ignore[return-value]

    @extend_schema(responses=DeliverySummarySerializer(many=True))
    def get_recent_deliveries(self, integration: Integration) -> list[dict[str, Any]]:
        return DeliverySummarySerializer(delivery_list_recent(integration=integration), many=True).data  # type: ignore[return-value]


# --- custom integrations (docs/custom-integrations.md) ---------------------------------------------

MAX_SAMPLES = 20
JSON_OBJECT = {"type": "object", "additionalProperties": True}


class _JsonObjectField(serializers.JSONField):
    """A JSON object (a mapping): anything else is refused with a field error."""

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        if not isinstance(value, dict):
            raise ValidationError("Give a JSON object.")
        return value


class _MappingField(_JsonObjectField):
    """A custom integration's mapping: a JSON object whose default environment, if any, is a slug."""

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        problem = mapping_environment_problem(value)
        if problem:
            raise ValidationError(problem)
        return value


def mapping_environment_problem(mapping: dict[str, Any]) -> str | None:
    """Why the mapping's ``defaults.environment`` cannot be stored as an environment; None when it can."""
    defaults = mapping.get("defaults")
    environment = defaults.get("environment") if isinstance(defaults, dict) else None
    if environment is None or environment_is_valid(environment):
        return None
    return f"defaults.environment {environment!r} is not an environment: use letters, digits, '-' and '_' (1-50)."


# OpenAPI: a JSON object with any keys (a mapping is documented in runs/alerts/parsers/custom/ and on the editor page).
MappingObjectField = extend_schema_field(JSON_OBJECT)(_MappingField)


class IntegrationKeyCreateInputSerializer(serializers.Serializer[dict[str, Any]]):
    """The first key of a new integration: the tenants it may write for, or all tenants (explicit)."""

    tenants = serializers.ListField(child=TextField(max_length=100), required=False, default=list)
    all_tenants = serializers.BooleanField(default=False)
    label = TextField(max_length=100, required=False, default="", allow_blank=True)  # type: ignore[assignment]  # API field named like a DRF attribute; the metaclass declares it

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs["tenants"] and not attrs["all_tenants"]:
            raise ValidationError({"tenants": ["Bind the key to at least one tenant, or set all_tenants."]})
        found = []
        for slug in attrs["tenants"]:
            tenant = Tenant.objects.filter(slug_key=normalise_slug(slug).casefold()).first()
            if tenant is None:
                raise ValidationError({"tenants": [f"No tenant {slug!r}."]})
            found.append(tenant)
        attrs["tenant_rows"] = found
        return attrs


class IntegrationCreateInputSerializer(serializers.Serializer[dict[str, Any]]):
    """A new custom integration: its name, mapping, optional samples that must map, and optionally a key."""

    name = TextField(max_length=100)
    mapping = MappingObjectField(
        help_text="the mapping (runs/alerts/parsers/custom/): fields, status_map, defaults, ..."
    )
    samples = serializers.ListField(
        child=serializers.JSONField(),
        required=False,
        default=list,
        max_length=MAX_SAMPLES,
        help_text="payloads the mapping must map without a problem before it is saved",
    )
    is_active = serializers.BooleanField(default=True)
    key = IntegrationKeyCreateInputSerializer(required=False, help_text="issue the first key too (shown once)")


class IntegrationUpdateInputSerializer(serializers.Serializer[dict[str, Any]]):
    """Change a custom integration: any of name, activity, mapping (tried on ``samples`` first)."""

    name = TextField(max_length=100, required=False)
    is_active = serializers.BooleanField(required=False)
    mapping = MappingObjectField(required=False)
    samples = serializers.ListField(child=serializers.JSONField(), required=False, default=list, max_length=MAX_SAMPLES)


class MappingImportInputSerializer(serializers.Serializer[dict[str, Any]]):
    """An export document (``{"format": "handover.mapping/v1", "mapping": {...}}``) or ``{"mapping": {...}}``."""

    format = TextField(required=False, allow_blank=True)
    name = TextField(required=False, allow_blank=True, help_text="ignored on import")
    source = TextField(required=False, allow_blank=True, help_text="ignored on import")  # type: ignore[assignment]  # API field named like a DRF attribute; the metaclass declares it
    mapping = MappingObjectField()
    samples = serializers.ListField(child=serializers.JSONField(), required=False, default=list, max_length=MAX_SAMPLES)


class MappingTestInputSerializer(serializers.Serializer[dict[str, Any]]):
    """A sample to map: a JSON payload, or a delivery of this integration; optionally a mapping to try instead."""

    sample = serializers.JSONField(required=False, help_text="the payload as the sender posts it")
    delivery = serializers.UUIDField(required=False, help_text="a delivery of this integration (its stored body)")
    mapping = MappingObjectField(required=False, help_text="a mapping to try (default: the saved one)")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("sample" in attrs) == ("delivery" in attrs):
            raise ValidationError({"sample": ["Give either a sample or a delivery."]})
        return attrs


class MappingExportSerializer(serializers.Serializer[dict[str, Any]]):
    format = serializers.CharField()
    name = serializers.CharField()
    source = serializers.CharField()  # type: ignore[assignment]  # API field named like a DRF attribute; the metaclass declares it
    mapping = MappingObjectField()


class MappedFieldSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    spec = serializers.CharField(help_text="the expression or template as written; empty when unmapped")
    source = serializers.ChoiceField(choices=["mapping", "default", "unmapped"])  # type: ignore[assignment]  # API field named like a DRF attribute; the metaclass declares it
    found = serializers.CharField(help_text="what the expression found, as text (JSON for objects)")
    value = serializers.CharField(source="shown", help_text="what it became: times in UTC ISO 8601")
    error = serializers.CharField(help_text="why this field keeps the record from mapping")
    note = serializers.CharField(help_text="an optional field whose expression found nothing")


class MappedRecordSerializer(serializers.Serializer[Any]):
    index = serializers.IntegerField()
    kind = serializers.CharField()
    is_ok = serializers.BooleanField()
    problems = serializers.ListField(child=serializers.CharField(), help_text="why the alert would be unmatched")
    warnings = serializers.ListField(child=serializers.CharField())
    placement = serializers.ListField(child=serializers.CharField(), help_text="job, tenant and window it lands in")
    dedup_key = serializers.CharField()
    fields = MappedFieldSerializer(many=True)  # type: ignore[assignment]  # API field named like a DRF attribute; the metaclass declares it


class MappingTestResultSerializer(serializers.Serializer[Any]):
    is_ok = serializers.BooleanField(help_text="the mapping has no error and the sample maps")
    mapping_errors = serializers.DictField(child=serializers.ListField(child=serializers.CharField()))
    error = serializers.CharField(help_text="the sample breaks the format (not JSON, too many records)")
    record_count = serializers.IntegerField()
    records = MappedRecordSerializer(many=True)


class IssuedKeySerializer(serializers.Serializer[Any]):
    id = serializers.UUIDField(source="record.public_id")
    kind = serializers.CharField(source="record.kind")
    prefix = serializers.CharField(source="record.prefix")
    key = serializers.CharField(help_text="the secret: shown in this answer only, never again")
    url = serializers.SerializerMethodField(help_text="a URL key's full ingestion address (it carries the key)")
    all_tenants = serializers.BooleanField(source="record.all_tenants")
    tenants = serializers.SerializerMethodField()

    def get_tenants(self, issued: IssuedKey) -> list[str]:
        return [t.slug for t in issued.record.tenants.all()]

    def get_url(self, issued: IssuedKey) -> str | None:
        if issued.record.kind != IntegrationKey.Kind.URL:
            return None
        request = self.context.get("request")
        base = request.build_absolute_uri("/") if request is not None else None
        return integration_key_url(source=issued.record.integration.source, key=issued.key, base_url=base)


class IntegrationKeyIssueInputSerializer(IntegrationKeyCreateInputSerializer):
    """Another key for an integration: header (default) or URL key, bound to tenants or all tenants."""

    kind = serializers.ChoiceField(choices=IntegrationKey.Kind.choices, default=IntegrationKey.Kind.HEADER)


class TransportUpdateInputSerializer(serializers.Serializer[dict[str, Any]]):
    allow_get = serializers.BooleanField()
    decoder = serializers.ChoiceField(choices=[(d, d) for d in DECODERS], default="json")
    item_types = serializers.ListField(child=TextField(max_length=100), required=False, default=list)


class IntegrationCreatedSerializer(IntegrationDetailSerializer):
    issued_key = serializers.SerializerMethodField()

    class Meta(IntegrationDetailSerializer.Meta):
        fields = [*IntegrationDetailSerializer.Meta.fields, "issued_key"]
        read_only_fields = fields

    @extend_schema_field(IssuedKeySerializer(allow_null=True))
    def get_issued_key(self, integration: Integration) -> dict[str, Any] | None:
        issued = self.context.get("issued_key")
        return IssuedKeySerializer(issued).data if issued else None


class RefusedBySourceSerializer(serializers.Serializer[Any]):
    source = serializers.CharField()  # type: ignore[assignment]  # the field "source" shadows DRF's Field.source
    rows = RefusedRequestSerializer(many=True)


class ConventionsUpdateInputSerializer(serializers.Serializer[dict[str, Any]]):
    values = serializers.DictField(
        help_text="convention -> a path, a list of paths tried in order, a template or name; null or empty: default"
    )


class CatalogueEntrySerializer(serializers.Serializer[Any]):
    """A ready-made mapping of the catalogue (runs/alerts/parsers/custom/catalogue/)."""

    name = serializers.CharField()
    title = serializers.CharField()
    covers = serializers.CharField(help_text="what it maps, and what the tool cannot say")
    conventions = serializers.CharField(help_text="what to name or set in the tool")
    documentation = serializers.ListField(child=serializers.URLField(), help_text="the tool's public documentation")
    transport = serializers.DictField(help_text="key kind, decoder, GET, signature scheme to set")


class CatalogueEntryDetailSerializer(CatalogueEntrySerializer):
    export = serializers.DictField(help_text="the mapping as an export: PUT it to /api/v1/integrations/<id>/mapping/")
    samples = serializers.ListField(child=serializers.DictField(), help_text="sample payloads and what each gives")


class ReprocessResultSerializer(serializers.Serializer[Any]):
    tried = serializers.IntegerField()
    outcomes = serializers.DictField(child=serializers.IntegerField(), help_text="new outcome -> count")
    failures = serializers.ListField(child=serializers.CharField())
    remaining = serializers.IntegerField(help_text="unmatched alerts not tried in this call (reprocess again)")
    summary = serializers.CharField(source="sentence")


PROBLEM = OpenApiResponse(ProblemSerializer)
ADMIN_ERRORS = {401: PROBLEM, 403: OpenApiResponse(ProblemSerializer, description="not an admin (staff)")}
BUILT_IN = OpenApiResponse(ProblemSerializer, description="a built-in integration: it has no mapping to change")
INVALID = OpenApiResponse(
    ProblemSerializer, description="invalid input, a mapping error, or a sample that does not map (errors by path)"
)
STALE = precondition_failed_response("the integration")
READ_ETAG = etag_parameters("the integration", write=False)
WRITE_ETAG = etag_parameters("the integration", write=True)
VERSIONED = (
    " With `If-Match` (the integration's `ETag` as last read: its name, activity or any setting), a change made "
    "since answers 412 and saves nothing; the answer carries the new `ETag`."
)
NOMAD_EXAMPLE = OpenApiExample(
    "Nomad allocation events",
    value={
        "name": "nomad-prod",
        "mapping": {
            "records": "Events[?Topic=='Allocation'].Payload.Allocation",
            "fields": {
                "job_key": "split(JobID, '/periodic-')[0]",
                "tenant": "Namespace",
                "scheduled_for": {"path": "split(JobID, '/periodic-')[1]", "format": "epoch_s"},
                "execution_id": "ID",
                "attempt_number": "sum([length(RescheduleTracker.Events || `[]`), `1`])",
                "status": "ClientStatus",
            },
            "status_map": {"complete": "succeeded", "lost": "failed", "pending": "queued"},
            "defaults": {"environment": "prod"},
        },
        "key": {"tenants": ["acme-foods"]},
    },
    request_only=True,
)


def _samples(values: list[Any]) -> list[Sample]:
    return [
        Sample(label=f"sample {number}", body=json.dumps(value, ensure_ascii=False))
        for number, value in enumerate(values)
    ]


def _test_result(preview: MappingPreview) -> dict[str, Any]:
    sample = preview.samples[0]
    return {
        "is_ok": preview.is_ok,
        "mapping_errors": preview.mapping_errors,
        "error": sample.error,
        "record_count": sample.record_count,
        "records": sample.records,
    }


@extend_schema_view(
    list=extend_schema(
        summary="List integrations (admins)",
        tags=["integrations"],
        responses={200: IntegrationSerializer(many=True), **ADMIN_ERRORS},
    ),
    retrieve=extend_schema(
        summary="One integration with recent deliveries (admins)",
        tags=["integrations"],
        parameters=READ_ETAG,
        responses={200: IntegrationDetailSerializer, **ADMIN_ERRORS, 404: PROBLEM},
    ),
)
class IntegrationViewSet(
    StrictQueryMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Integration]
):
    """Integrations, their keys (prefix and last use; never the secret) and recent deliveries.

    Custom integrations are created, changed, tested, exported/imported and reprocessed here too.
    """

    permission_classes = [permissions.IsAdminUser]  # the staff area: 401 anonymous, 403 others
    queryset = Integration.objects.none()  # for the schema only; get_queryset reads the caller's
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    lookup_value_converter = "uuid"

    def get_queryset(self) -> QuerySet[Integration]:
        keys = IntegrationKey.objects.prefetch_related("tenants").order_by("-created_at")
        return integration_list(user=self.request.user).prefetch_related(Prefetch("keys", queryset=keys))

    def get_object(self) -> Integration:
        integration = self.get_queryset().filter(public_id=self.kwargs["id"]).first()
        if integration is None:
            raise Http404
        return integration

    def get_serializer_class(self) -> type[serializers.BaseSerializer[Integration]]:
        return IntegrationDetailSerializer if self.action == "retrieve" else IntegrationSerializer

    def retrieve(self, request: Request, id: str) -> Response:
        return self._detail(self.get_object(), reload=False)

    def _detail(
        self, integration: Integration, code: int = status.HTTP_200_OK, *, reload: bool = True, **context: Any
    ) -> Response:
        """The detail shape with the integration's ``ETag``; ``reload`` reads it again first (after a write)."""
        fresh = self.get_queryset().get(pk=integration.pk) if reload else integration
        serializer: type[IntegrationDetailSerializer] = (
            IntegrationCreatedSerializer if "issued_key" in context else IntegrationDetailSerializer
        )
        data = serializer(fresh, context={"request": self.request, **context}).data
        return Response(data, status=code, headers={"ETag": edit_etag(integration_edit_values(fresh))})

    def _custom(self) -> Integration:
        integration = self.get_object()
        if integration.source != SOURCE:
            raise InvalidTransition(
                f"{integration.name!r} is a built-in {integration.source} integration; it has no mapping."
            )
        return integration

    @extend_schema(
        summary="Create a custom integration (admins)",
        description="A custom integration maps any JSON payload by configuration (JMESPath). The mapping must "
        "compile and map every given sample; with `key`, its first key is issued and its secret returned once "
        "in `issued_key.key`. Senders post to `/api/v1/alerts/custom/`.",
        tags=["integrations"],
        request=IntegrationCreateInputSerializer,
        examples=[NOMAD_EXAMPLE],
        responses={
            201: IntegrationCreatedSerializer,
            400: INVALID,
            **ADMIN_ERRORS,
            409: OpenApiResponse(ProblemSerializer, description="an integration with this name exists"),
        },
    )
    def create(self, request: Request) -> Response:
        values = validated_body(request, IntegrationCreateInputSerializer)
        key = values.get("key")
        issued: IssuedKey | None = None
        if key:
            integration, issued = integration_custom_create_with_key(
                name=values["name"],
                mapping=values["mapping"],
                samples=_samples(values["samples"]),
                is_active=values["is_active"],
                tenants=key["tenant_rows"],
                all_tenants=key["all_tenants"],
                label=key["label"],
                created_by=signed_in(request.user),
            )
        else:
            integration = integration_custom_create(
                name=values["name"],
                mapping=values["mapping"],
                samples=_samples(values["samples"]),
                is_active=values["is_active"],
                created_by=signed_in(request.user),
            )
        return self._detail(integration, status.HTTP_201_CREATED, issued_key=issued)

    @extend_schema(
        summary="Change a custom integration (admins)",
        description="Any of `name`, `is_active`, `mapping`. A new mapping must compile and map every sample in "
        "`samples`. Built-in integrations answer 409." + VERSIONED,
        tags=["integrations"],
        request=IntegrationUpdateInputSerializer,
        parameters=WRITE_ETAG,
        responses={
            200: IntegrationDetailSerializer,
            400: INVALID,
            **ADMIN_ERRORS,
            404: PROBLEM,
            409: OpenApiResponse(ProblemSerializer, description="a built-in integration, or the name is taken"),
            412: STALE,
        },
    )
    def partial_update(self, request: Request, id: str) -> Response:
        integration = self.get_object()
        values = validated_body(request, IntegrationUpdateInputSerializer)
        integration = integration_custom_update(
            integration=integration,
            name=values.get("name"),
            mapping=values.get("mapping"),
            samples=_samples(values["samples"]),
            is_active=values.get("is_active"),
            actor=signed_in(request.user),
            if_match=request.headers.get("If-Match"),
        )
        return self._detail(integration)

    @extend_schema(
        summary="Map a sample with a custom integration's mapping, without saving (admins)",
        description="Maps `sample` (or the stored body of `delivery`) with `mapping`, or with the saved mapping, "
        "exactly as ingestion would: every field found, converted or failed, the problems that would leave the "
        "alert unmatched, and the job, tenant and window it would land in. Writes nothing.",
        tags=["integrations"],
        request=MappingTestInputSerializer,
        responses={
            200: MappingTestResultSerializer,
            400: INVALID,
            **ADMIN_ERRORS,
            404: PROBLEM,
            409: BUILT_IN,
        },
    )
    @action(detail=True, methods=["post"])
    def test(self, request: Request, id: str) -> Response:
        integration = self._custom()
        values = validated_body(request, MappingTestInputSerializer)
        if "delivery" in values:
            samples = samples_from_deliveries(integration=integration, delivery_ids=[values["delivery"]])
            if not samples:
                raise ValidationError({"delivery": ["No such delivery of this integration."]})
        else:
            samples = _samples([values["sample"]])
        mapping = values.get("mapping", integration_mapping(integration))
        preview = mapping_preview(mapping=mapping, samples=samples)
        return Response(MappingTestResultSerializer(_test_result(preview)).data)

    @extend_schema(
        methods=["GET"],
        summary="Export a custom integration's mapping as JSON (admins)",
        description="The `ETag` is the integration's (as its detail's).",
        tags=["integrations"],
        parameters=READ_ETAG,
        responses={200: MappingExportSerializer, **ADMIN_ERRORS, 404: PROBLEM, 409: BUILT_IN},
    )
    @extend_schema(
        methods=["PUT"],
        summary="Import a mapping into a custom integration (admins)",
        description='The body is an export (or `{"mapping": {...}}`), optionally with `samples` that must map. '
        "The mapping replaces the saved one only when it compiles and maps every sample." + VERSIONED,
        tags=["integrations"],
        request=MappingImportInputSerializer,
        parameters=WRITE_ETAG,
        responses={
            200: MappingExportSerializer,
            400: INVALID,
            **ADMIN_ERRORS,
            404: PROBLEM,
            409: BUILT_IN,
            412: STALE,
        },
    )
    @action(detail=True, methods=["get", "put"])
    def mapping(self, request: Request, id: str) -> Response:
        integration = self._custom()
        if request.method == "PUT":
            values = validated_body(request, MappingImportInputSerializer)
            integration = integration_custom_update(
                integration=integration,
                mapping=values["mapping"],
                samples=_samples(values["samples"]),
                actor=signed_in(request.user),
                if_match=request.headers.get("If-Match"),
            )
            integration = self.get_queryset().get(pk=integration.pk)  # the row as the answer and its ETag show it
        exported = MappingExportSerializer(integration_mapping_export(integration=integration)).data
        return Response(exported, headers={"ETag": edit_etag(integration_edit_values(integration))})

    @extend_schema(
        summary="Reprocess the unmatched alerts of an integration (admins)",
        description="Re-parses each unmatched original alert of this integration from its stored body with the "
        "settings as they are now (after a mapping fix), oldest first, up to 500 per call.",
        tags=["integrations"],
        request=None,
        responses={200: ReprocessResultSerializer, **ADMIN_ERRORS, 404: PROBLEM},
    )
    @action(detail=True, methods=["post"])
    def reprocess(self, request: Request, id: str) -> Response:
        integration = self.get_object()
        summary = integration_reprocess_unmatched(integration=integration, actor=signed_in(request.user))
        return Response(ReprocessResultSerializer(summary).data)

    @extend_schema(
        summary="Issue a key for an integration (admins)",
        description="`kind` `header` (default: sent as `Authorization: Bearer`) or `url` (for senders that cannot set "
        "headers: the answer's `url` is the full ingestion address carrying the key). The secret is in this answer "
        "only. A URL key rotates alone and is never accepted in a header.",
        tags=["integrations"],
        request=IntegrationKeyIssueInputSerializer,
        responses={201: IssuedKeySerializer, 400: INVALID, **ADMIN_ERRORS, 404: PROBLEM},
    )
    @action(detail=True, methods=["post"])
    def keys(self, request: Request, id: str) -> Response:
        integration = self.get_object()
        values = validated_body(request, IntegrationKeyIssueInputSerializer)
        issued = integration_key_create(
            integration=integration,
            tenants=values["tenant_rows"],
            all_tenants=values["all_tenants"],
            label=values["label"],
            created_by=person_or_none(request.user),
            kind=values["kind"],
        )
        body = IssuedKeySerializer(issued, context={"request": request}).data
        return Response(body, status=status.HTTP_201_CREATED, headers={"Cache-Control": "no-store"})

    @extend_schema(
        summary="Set an integration's transport: GET ingestion and body decoder (admins)",
        description="`allow_get`: accept GET reports (status in the query string) at its URL keys' addresses. "
        "`decoder`: `json`, `ndjson`, `envelope` (with `item_types`) or `form`. See docs/integrations/transport.md."
        + VERSIONED,
        tags=["integrations"],
        request=TransportUpdateInputSerializer,
        parameters=WRITE_ETAG,
        responses={200: IntegrationDetailSerializer, 400: INVALID, **ADMIN_ERRORS, 404: PROBLEM, 412: STALE},
    )
    @action(detail=True, methods=["post"])
    def transport(self, request: Request, id: str) -> Response:
        integration = self.get_object()
        values = validated_body(request, TransportUpdateInputSerializer)
        integration = integration_transport_update(
            integration=integration,
            actor=person_or_none(request.user),
            allow_get=values["allow_get"],
            decoder_kind=values["decoder"],
            item_types=values["item_types"],
            if_match=request.headers.get("If-Match"),
        )
        return self._detail(integration)

    @extend_schema(
        summary="Refused requests by source (admins)",
        description="Every refused ingestion request of the last 30 days per source address (no key, a wrong key, a "
        "bad signature, the rate limit, GET not enabled), by reason and client network; `source` narrows to one.",
        tags=["integrations"],
        responses={200: RefusedBySourceSerializer(many=True), 400: INVALID, **ADMIN_ERRORS},
    )
    @action(
        detail=False,
        methods=["get"],
        url_path="refused-requests",
        pagination_class=None,
        filterset_class=RefusedRequestFilterSet,
    )
    def refused_requests(self, request: Request) -> Response:
        source = self.query_filters.get("source")
        rows = [
            {"source": source_slug, "rows": RefusedRequestSerializer(found, many=True).data}
            for source_slug, found in refused_request_rows_by_source(source=source).items()
        ]
        return Response(RefusedBySourceSerializer(rows, many=True).data)

    @extend_schema(
        summary="The catalogue of ready-made mappings (admins)",
        description="Mappings for widely used tools, each built from the tool's public documentation, with the "
        "transport to set and sample payloads. See docs/integrations/catalogue.md.",
        tags=["integrations"],
        responses={200: CatalogueEntrySerializer(many=True), **ADMIN_ERRORS},
    )
    @action(detail=False, methods=["get"], url_path="catalogue", pagination_class=None)
    def catalogue(self, request: Request) -> Response:
        return Response(CatalogueEntrySerializer(catalogue_entries(), many=True).data)

    @extend_schema(
        summary="One ready-made mapping, as an importable export (admins)",
        tags=["integrations"],
        responses={200: CatalogueEntryDetailSerializer, **ADMIN_ERRORS, 404: PROBLEM},
    )
    @action(detail=False, methods=["get"], url_path="catalogue/<slug:name>", pagination_class=None)
    def catalogue_entry(self, request: Request, name: str) -> Response:
        entry = catalogue_entry(name)
        if entry is None:
            raise Http404
        data = {**CatalogueEntrySerializer(entry).data, "export": entry.export(), "samples": entry.samples}
        return Response(CatalogueEntryDetailSerializer(data).data)

    @extend_schema(
        summary="Set a built-in integration's conventions (admins)",
        description="Where the source's adapter reads the job, tenant, environment, execution id, window and times, "
        "and its defaults (docs/integrations/<source>.md). Only the keys given change; null or empty restores the "
        "adapter's default. Custom integrations answer 409 (their mapping says it)." + VERSIONED,
        tags=["integrations"],
        request=ConventionsUpdateInputSerializer,
        parameters=WRITE_ETAG,
        responses={
            200: IntegrationDetailSerializer,
            400: INVALID,
            **ADMIN_ERRORS,
            404: PROBLEM,
            409: OpenApiResponse(ProblemSerializer, description="a custom integration: its mapping says it"),
            412: STALE,
        },
    )
    @action(detail=True, methods=["post"])
    def conventions(self, request: Request, id: str) -> Response:
        integration = self.get_object()
        if integration.source == SOURCE:
            raise InvalidTransition(f"{integration.name!r} is a custom integration: its mapping says where fields are.")
        values = validated_body(request, ConventionsUpdateInputSerializer)
        integration = integration_conventions_update(
            integration=integration,
            actor=person_or_none(request.user),
            values=values["values"],
            if_match=request.headers.get("If-Match"),
        )
        return self._detail(integration)

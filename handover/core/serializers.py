"""The API's error shape for the schema (RFC 9457 problem details), the ``ETag`` / ``If-Match`` headers of
versioned writes, and reading a request body through an input serializer."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers
from rest_framework.request import Request


def validated_body(request: Request, serializer_class: type[serializers.BaseSerializer[Any]]) -> Any:
    """``request``'s body as ``serializer_class`` validates it (its ``validated_data``: a dict for a plain
    input serializer). A body that does not pass raises DRF's ValidationError, answered 400 with the
    field errors by the project's exception handler."""
    data = serializer_class(data=request.data)
    data.is_valid(raise_exception=True)
    return data.validated_data


class ProblemSerializer(serializers.Serializer[dict[str, object]]):
    """RFC 9457 problem details."""

    type = serializers.CharField()
    title = serializers.CharField()
    status = serializers.IntegerField()
    detail = serializers.CharField()
    # the problem body's "errors" member; DRF declares fields as class attributes, the stubs type Serializer.errors
    errors = serializers.DictField(child=serializers.ListField(child=serializers.CharField()), required=False)  # type: ignore[assignment]
    delivery = serializers.UUIDField(required=False)


def etag_parameters(what: str, *, write: bool) -> list[OpenApiParameter]:
    """The schema's ``ETag`` response header of ``what``'s answer and, for a ``write``, the ``If-Match``
    request header it honours (``handover.core.edits.edit_precondition``)."""
    answered = OpenApiParameter(
        "ETag",
        OpenApiTypes.STR,
        OpenApiParameter.HEADER,
        response=[200],
        description=f"a strong entity tag of {what} as it is now (changes whenever a value its edit can change "
        "changes): send it as If-Match with a write",
    )
    if not write:
        return [answered]
    precondition = OpenApiParameter(
        "If-Match",
        OpenApiTypes.STR,
        OpenApiParameter.HEADER,
        required=False,
        description=f"the ETag of {what} as last read (or `*`): the write is refused with 412, nothing written, "
        "when it is no longer current or not an entity tag. Without it the write goes on as before.",
    )
    return [precondition, answered]


def precondition_failed_response(what: str) -> OpenApiResponse:
    """The schema's 412 answer of a write that honours ``If-Match``."""
    return OpenApiResponse(
        ProblemSerializer,
        description=f"If-Match is not the current ETag of {what} (changed since it was read), or malformed; "
        "nothing written",
    )

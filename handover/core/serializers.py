"""The API's error shape for the schema (RFC 9457 problem details), and reading a request body through an
input serializer."""

from __future__ import annotations

from typing import Any

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

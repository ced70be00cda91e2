"""The API's error shape for the schema: RFC 9457 problem details."""

from __future__ import annotations

from rest_framework import serializers


class ProblemSerializer(serializers.Serializer[dict[str, object]]):
    """RFC 9457 problem details."""

    type = serializers.CharField()
    title = serializers.CharField()
    status = serializers.IntegerField()
    detail = serializers.CharField()
    # the problem body's "errors" member; DRF declares fields as class attributes, the stubs type Serializer.errors
    errors = serializers.DictField(child=serializers.ListField(child=serializers.CharField()), required=False)  # type: ignore[assignment]
    delivery = serializers.UUIDField(required=False)

"""The API's error shape for the schema: RFC 9457 problem details."""

from __future__ import annotations

from rest_framework import serializers


class ProblemSerializer(serializers.Serializer[dict[str, object]]):
    """RFC 9457 problem details."""

    type = serializers.CharField()
    title = serializers.CharField()
    status = serializers.IntegerField()
    detail = serializers.CharField()
    errors = serializers.DictField(child=serializers.ListField(child=serializers.CharField()), required=False)
    delivery = serializers.UUIDField(required=False)

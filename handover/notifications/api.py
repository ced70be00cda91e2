"""``/api/v1/notifications/``: the caller's own in-app notifications -- list, unread count, mark read.

Session or token authentication; only the caller's notifications are ever found (nobody reads
another's, admins included). Each notification carries how each outbound channel did (masked
address, ``sent`` only when the channel accepted it, ``undeliverable`` with the reason).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from handover.core.filters import StrictBooleanFilter, StrictFilterSet, StrictQueryMixin
from handover.core.links import absolute_url
from handover.core.parsers import JSONParser
from handover.core.serializers import ProblemSerializer
from handover.notifications.models import Notification, NotificationDelivery
from handover.notifications.selectors import notification_list, notification_unread_count
from handover.notifications.services import notification_mark_read

TAG = ["notifications"]


class NotificationFilterSet(StrictFilterSet):
    """The caller's notifications, read or unread."""

    unread = StrictBooleanFilter(help_text="true: unread only; false: read only")


class NotificationDeliverySerializer(serializers.ModelSerializer[NotificationDelivery]):
    """One outbound channel of a notification: where (masked), how it went."""

    class Meta:
        model = NotificationDelivery
        fields = ["channel", "shown_as", "status", "sent_at", "via_digest", "error"]
        read_only_fields = fields


class NotificationSerializer(serializers.ModelSerializer[Notification]):
    """An in-app notification: what, when, read or not, the link (absolute) and each channel's outcome."""

    id = serializers.UUIDField(source="public_id", read_only=True)
    url = serializers.SerializerMethodField()
    deliveries = NotificationDeliverySerializer(many=True, read_only=True)

    class Meta:
        model = Notification
        fields = ["id", "event", "subject", "body", "url", "created_at", "read_at", "deliveries"]
        read_only_fields = fields

    @extend_schema_field(serializers.URLField(allow_null=True))
    def get_url(self, obj: Notification) -> str | None:
        """The page it is about, absolute (from the request), or null."""
        request = self.context.get("request")
        return absolute_url(obj.link, getattr(request, "_request", None)) if obj.link else None


class NotificationReadInputSerializer(serializers.Serializer[Any]):
    ids = serializers.ListField(
        child=serializers.UUIDField(), required=False, max_length=500, help_text="these; absent: all unread"
    )


class UnreadSerializer(serializers.Serializer[Any]):
    unread = serializers.IntegerField(help_text="the caller's unread in-app notifications")


class MarkedSerializer(UnreadSerializer):
    marked = serializers.IntegerField(help_text="how many were unread and are read now")


class NotificationViewSet(StrictQueryMixin, viewsets.GenericViewSet[Notification]):
    """The caller's in-app notifications."""

    serializer_class = NotificationSerializer
    filterset_class = NotificationFilterSet
    parser_classes = [JSONParser]
    lookup_field = "public_id"

    def get_queryset(self) -> QuerySet[Notification]:
        return notification_list(user=self.request.user)

    @extend_schema(summary="List your notifications, newest first", tags=TAG)
    def list(self, request: Request) -> Response:
        rows = notification_list(user=request.user, unread=self.query_filters.get("unread"))
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(NotificationSerializer(page, many=True, context={"request": request}).data)

    @extend_schema(summary="How many of your notifications are unread", tags=TAG, responses={200: UnreadSerializer})
    @action(detail=False, methods=["get"], url_path="unread-count")
    def unread_count(self, request: Request) -> Response:
        return Response({"unread": notification_unread_count(user=request.user)})

    @extend_schema(
        summary="Mark your notifications read (those named, or all unread)",
        tags=TAG,
        request=NotificationReadInputSerializer,
        responses={200: MarkedSerializer, 400: OpenApiResponse(ProblemSerializer)},
    )
    @action(detail=False, methods=["post"], url_path="read")
    def read(self, request: Request) -> Response:
        data = NotificationReadInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        ids = data.validated_data.get("ids")
        marked = notification_mark_read(user=request.user, public_ids=ids)  # type: ignore[arg-type]
        return Response({"marked": marked, "unread": notification_unread_count(user=request.user)})

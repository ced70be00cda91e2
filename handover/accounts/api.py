"""``/api/v1/tokens/``: the caller's own personal API tokens (list, create, revoke).

Session or token authentication. Only the caller's tokens are ever found: another person's prefix
answers 404, admins included. A new token's secret is in the 201 answer only (``no-store``); a
token created with a token expires no later than the one that created it.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import Http404
from django.urls import register_converter
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from knox.models import AuthToken
from rest_framework import serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from handover.accounts.selectors import api_token_get, api_token_list
from handover.accounts.services import LABEL_MAX_LENGTH, api_token_create, api_token_expiry_choices, api_token_revoke
from handover.core.fields import TextField
from handover.core.filters import StrictQueryMixin
from handover.core.serializers import ProblemSerializer

TAG = ["tokens"]
# knox's token_key: the "ho_" prefix (REST_KNOX["TOKEN_PREFIX"]) and 12 lowercase hex digits (15 characters)
PREFIX_PATTERN = "ho_[0-9a-f]{12}"
PREFIX = OpenApiParameter(
    "prefix",
    str,
    OpenApiParameter.PATH,
    description="the token's first 15 characters, e.g. ho_1a2b3c4d5e6f",
    pattern=f"^{PREFIX_PATTERN}$",
)


class TokenPrefixConverter:
    """The ``<token_prefix:...>`` path converter: a malformed prefix matches no route (a problem-details 404)."""

    regex = PREFIX_PATTERN

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(TokenPrefixConverter, "token_prefix")


class ApiTokenSerializer(serializers.Serializer[AuthToken]):
    """A token as listed: never its secret (only its prefix) nor its digest."""

    prefix = serializers.CharField(source="token_key", read_only=True)
    label = serializers.CharField(read_only=True, allow_null=True, help_text="what it is for; null if none")  # type: ignore[assignment]  # API field named like a DRF attribute; the metaclass declares it
    created_at = serializers.DateTimeField(source="created", read_only=True)
    expires_at = serializers.DateTimeField(source="expiry", read_only=True, allow_null=True)
    last_used_at = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="accurate to a minute; null if never used"
    )
    is_expired = serializers.BooleanField(read_only=True)


class ApiTokenIssuedSerializer(ApiTokenSerializer):
    """A token just created, with its secret: shown in this answer only."""

    token = serializers.CharField(read_only=True, help_text="send as `Authorization: Token <token>`; shown once")


class ApiTokenCreateInputSerializer(serializers.Serializer[Any]):
    label = TextField(max_length=LABEL_MAX_LENGTH, help_text="what the token is for")  # type: ignore[assignment]  # API field named like a DRF attribute; the metaclass declares it
    expires_in_days = serializers.ChoiceField(
        choices=[], required=False, help_text="lifetime in days; default (and maximum): the site's"
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # the choices follow the site's maximum (HANDOVER_API_TOKEN_DAYS), read when asked
        field = self.fields["expires_in_days"]
        assert isinstance(field, serializers.ChoiceField)
        field.choices = api_token_expiry_choices()


class ApiTokenViewSet(StrictQueryMixin, viewsets.GenericViewSet[AuthToken]):
    """The caller's personal API tokens, newest first."""

    serializer_class = ApiTokenSerializer
    queryset = AuthToken.objects.none()  # for the schema only; get_queryset reads the caller's own
    lookup_field = "token_key"
    lookup_url_kwarg = "prefix"
    lookup_value_converter = "token_prefix"

    def get_queryset(self) -> QuerySet[AuthToken]:
        return api_token_list(user=self.request.user)

    @extend_schema(summary="List your API tokens", tags=TAG, responses={200: ApiTokenSerializer(many=True)})
    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(ApiTokenSerializer(page, many=True).data)

    @extend_schema(
        summary="Create an API token for yourself",
        description="The token acts with your permissions. Its secret is in this answer only (only a hash "
        "is stored). Created with a token, it expires no later than that token. Audited.",
        tags=TAG,
        request=ApiTokenCreateInputSerializer,
        responses={
            201: ApiTokenIssuedSerializer,
            400: OpenApiResponse(ProblemSerializer),
            409: OpenApiResponse(ProblemSerializer, description="you hold the most tokens allowed: revoke one"),
        },
    )
    def create(self, request: Request) -> Response:
        data = ApiTokenCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        issued = api_token_create(
            user=request.user,  # type: ignore[arg-type]
            label=data.validated_data["label"],
            expires_in_days=data.validated_data.get("expires_in_days"),
            not_after=request.auth.expiry if isinstance(request.auth, AuthToken) else None,
            actor=request.user,  # type: ignore[arg-type]
        )
        token = self.get_queryset().get(pk=issued.token.pk)
        body = dict(ApiTokenSerializer(token).data, token=issued.raw)
        response = Response(body, status=status.HTTP_201_CREATED)
        response["Cache-Control"] = "no-store"
        return response

    @extend_schema(
        summary="Revoke one of your API tokens",
        description="Requests with it get 401 from now on. Audited.",
        tags=TAG,
        parameters=[PREFIX],
        responses={
            204: None,
            404: OpenApiResponse(ProblemSerializer, description="no such token of yours (or already revoked)"),
        },
    )
    def destroy(self, request: Request, prefix: str) -> Response:
        token = api_token_get(user=request.user, prefix=prefix)
        if token is None:
            raise Http404("No such token.")
        api_token_revoke(token=token, actor=request.user)  # type: ignore[arg-type]
        return Response(status=status.HTTP_204_NO_CONTENT)

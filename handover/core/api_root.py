"""``GET /api/v1/``: the API introduces itself with a link to every collection, its schema and its docs.

The collections are read from the URL conf: every route of the API namespaces named ``<basename>-list``
that takes no argument (the work-item search needs a record id, so it is no collection). A collection
a slice registers appears here without an edit. The answer is JSON whatever the ``Accept`` header asks
(no HTML, no 406).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.urls import URLPattern, URLResolver, get_resolver, reverse
from drf_spectacular.utils import OpenApiExample, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.permissions import AllowAny
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from handover.core.filters import StrictQueryMixin

API_PREFIX = "api/v1/"


class JSONWhateverAccept(BaseContentNegotiation):
    """Content negotiation that always answers with the view's first renderer (JSON), never 406."""

    def select_parser(self, request: Request, parsers: Iterable[BaseParser]) -> BaseParser | None:
        """The first parser (the root takes no body)."""
        return next(iter(parsers), None)

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        """The first renderer and its media type, whatever the request accepts."""
        renderer = next(iter(renderers))
        return renderer, renderer.media_type


def api_collections() -> dict[str, str]:
    """``{collection name: path}`` of every API collection, e.g. ``{"runs": "/api/v1/runs/"}``, sorted by name."""
    found: dict[str, str] = {}
    for entry in get_resolver().url_patterns:
        if not (isinstance(entry, URLResolver) and str(entry.pattern) == API_PREFIX):
            continue
        for route in entry.url_patterns:
            if not isinstance(route, URLPattern) or route.pattern.converters or not route.name:
                continue
            if route.name.endswith("-list"):
                name = str(route.pattern).strip("/").split("/")[0]
                found.setdefault(name, reverse(f"{entry.namespace}:{route.name}"))
    return dict(sorted(found.items()))


class ApiRootView(StrictQueryMixin, APIView):
    """The API root: absolute links to every collection, the OpenAPI schema and the Swagger UI. Public."""

    permission_classes = [AllowAny]
    renderer_classes = [JSONRenderer]
    content_negotiation_class = JSONWhateverAccept

    @extend_schema(
        operation_id="api_root",
        summary="The API root: links to every collection",
        tags=["api"],
        responses={
            200: inline_serializer(
                "ApiRoot",
                {
                    "collections": serializers.DictField(child=serializers.URLField()),
                    "schema": serializers.URLField(),
                    "docs": serializers.URLField(),
                },
            )
        },
        examples=[
            OpenApiExample(
                "The root",
                value={
                    "collections": {
                        "jobs": "http://localhost:8000/api/v1/jobs/",
                        "runs": "http://localhost:8000/api/v1/runs/",
                    },
                    "schema": "http://localhost:8000/api/schema/",
                    "docs": "http://localhost:8000/api/docs/",
                },
                response_only=True,
            )
        ],
    )
    def get(self, request: Request) -> Response:
        return Response(
            {
                "collections": {name: request.build_absolute_uri(path) for name, path in api_collections().items()},
                "schema": request.build_absolute_uri(reverse("api-schema")),
                "docs": request.build_absolute_uri(reverse("api-docs")),
            }
        )

"""The benchmark's baseline endpoint: what any ingestion endpoint has to do at the least.

``POST /api/v1/alerts/<source>/`` on the same DRF ``APIView`` base, the same raw-body parser and
body reading, and the same integration-key authentication (``Authorization: Bearer``, looked up
by prefix and SHA-256, ``runs.catalog.authentication``) as ``runs.alerts.receive_api.AlertIngestView``; then it
stores the body in one row and answers 202. The row is a ``Delivery`` with only the required fields
(integration, key, received_at, size, body; no hash, no redaction, no parsing): one ORM INSERT
into a real table of the app, in autocommit. Served by its own gunicorn with
``DJANGO_SETTINGS_MODULE=bench.baseline_settings``.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.utils import timezone
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from handover.core.errors import problem, problem_response
from runs.alerts.models import Delivery
from runs.alerts.receive_api import RawBodyParser, read_body
from runs.catalog.authentication import bearer_from_request, integration_key_authenticate


class BaselineIngestView(APIView):
    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    parser_classes = [RawBodyParser]

    def post(self, request: Request, source: str) -> Response:
        read = read_body(request)  # a BodyRead since the view's hardening
        body, size = read.body, read.size
        key = integration_key_authenticate(bearer_from_request(request._request))
        if key is None:
            return problem_response(problem(401, "Not authenticated", "Send a valid integration key."))
        delivery = Delivery.objects.create(
            integration=key.integration,
            key=key,
            received_at=timezone.now(),
            size_bytes=size,
            body=body.decode("utf-8", errors="replace"),
        )
        return Response({"delivery": str(delivery.public_id)}, status=202)


def ready(request: HttpRequest) -> HttpResponse:
    """What the benchmark polls until gunicorn answers."""
    return HttpResponse("ok", content_type="text/plain")


urlpatterns = [
    path("healthz", ready, name="healthz"),
    path("api/v1/alerts/<slug:source>/", BaselineIngestView.as_view(), name="baseline-ingest"),
]

"""``POST /api/v1/alerts/<source>/``: the ingestion endpoint for monitoring systems.

Authenticated by an integration key (``Authorization: Bearer <key>``; PagerDuty-format senders may
put it in ``routing_key``, the header wins). Synchronous: the Delivery is committed first, then
every record is parsed and applied in post order, and the answer lists each alert's outcome (202).
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db.models import F
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.parsers import BaseParser
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from handover.errors import problem, problem_response
from runs.authentication import bearer_from_request, integration_key_authenticate
from runs.ingest import get_adapter
from runs.models import AuthFailureCounter, Integration
from runs.serializers import IngestResponseSerializer, ProblemSerializer
from runs.services import IngestResult, delivery_receive, delivery_record_response

logger = logging.getLogger(__name__)
READ_CHUNK = 64 * 1024


class RawBodyParser(BaseParser):
    """Accept any media type; the view reads the raw bytes itself (hashes come from the raw body)."""

    media_type = "*/*"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        return None


def _read_body(request: Request) -> tuple[bytes, int, bool]:
    """Read the body while enforcing the size limit: (kept bytes, size seen, over the limit?).

    Reading stops one chunk past the limit, so an oversized post is never held whole in memory.
    """
    limit = settings.HANDOVER_MAX_BODY_BYTES
    declared = int(request.META.get("CONTENT_LENGTH") or 0)
    raw = request._request  # the Django request: read its stream once, in chunks
    if declared > limit:
        head = raw.read(settings.HANDOVER_KEPT_OVERSIZE_BYTES)
        return head, declared, True
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = raw.read(READ_CHUNK)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[: settings.HANDOVER_KEPT_OVERSIZE_BYTES], size, True
    return b"".join(chunks), size, False


def _count_refusal(source: str, integration: Integration | None = None) -> None:
    if integration is not None:
        Integration.objects.filter(pk=integration.pk).update(refused_post_count=F("refused_post_count") + 1)
        return
    counter, _ = AuthFailureCounter.objects.get_or_create(source=source[:50])
    AuthFailureCounter.objects.filter(pk=counter.pk).update(count=F("count") + 1, last_at=timezone.now())


def _alert_rows(result: IngestResult) -> list[dict[str, Any]]:
    return [
        {
            "id": str(alert.public_id),
            "outcome": alert.outcome,
            "reason": alert.reason,
            "run": str(alert.run.public_id) if alert.run else None,
            "attempt": str(alert.attempt.public_id) if alert.attempt else None,
        }
        for alert in result.alerts
    ]


class AlertIngestView(APIView):
    """Receive one post from a monitoring system."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    parser_classes = [RawBodyParser]

    @extend_schema(
        operation_id="alerts_ingest",
        summary="Post alerts from a monitoring system",
        description=(
            "Authenticate with `Authorization: Bearer <integration key>`. The body is the source's own "
            "format (`generic`: see docs/formats). Answers 202 with each alert's outcome: `accepted`, "
            "`duplicate`, `unmatched` (kept for triage) or `rejected`."
        ),
        tags=["ingestion"],
        request={"application/json": {"type": "object"}},
        auth=[],
        responses={
            202: IngestResponseSerializer,
            400: OpenApiResponse(ProblemSerializer, description="the post breaks the source's format"),
            401: OpenApiResponse(ProblemSerializer, description="missing or unknown key"),
            403: OpenApiResponse(ProblemSerializer, description="the key belongs to another source"),
            404: OpenApiResponse(ProblemSerializer, description="no such source"),
            413: OpenApiResponse(ProblemSerializer, description="body over the size limit"),
        },
    )
    def post(self, request: Request, source: str) -> Response:
        adapter = get_adapter(source)
        if adapter is None:
            return problem_response(problem(404, "Not found", f"There is no alert source called {source!r}."))
        body, size, oversized = _read_body(request)
        token = bearer_from_request(request._request)
        if token is None and hasattr(adapter, "credential_from_body") and not oversized:
            token = adapter.credential_from_body(body)
        key = integration_key_authenticate(token)
        if key is None:
            _count_refusal(source)
            response = problem_response(
                problem(401, "Not authenticated", "Send a valid integration key as `Authorization: Bearer <key>`."),
                headers={"WWW-Authenticate": 'Bearer realm="handover-ingest"'},
            )
            return response
        if key.integration.source != source:
            _count_refusal(source, key.integration)
            return problem_response(
                problem(
                    403,
                    "Forbidden",
                    f"This key belongs to a {key.integration.source!r} integration; post to "
                    f"/api/v1/alerts/{key.integration.source}/ instead.",
                )
            )
        result = delivery_receive(
            key=key,
            body=body,
            content_type=request.META.get("CONTENT_TYPE", ""),
            size_bytes=size,
            is_body_truncated=oversized,
        )
        status, payload = self._answer(adapter, result, oversized)
        delivery_record_response(delivery=result.delivery, status=status, body=payload)
        response = Response(payload, status=status)
        if status >= 400 and not hasattr(adapter, "render_response"):
            response.content_type = "application/problem+json"
        return response

    def _answer(self, adapter: Any, result: IngestResult, oversized: bool) -> tuple[int, dict[str, Any]]:
        delivery_id = str(result.delivery.public_id)
        if hasattr(adapter, "render_response") and not oversized:
            # ``response`` carries what the sender's own shape echoes (PagerDuty's dedup_key, generated
            # by the parser when the event has none).
            return adapter.render_response(
                delivery_id=delivery_id, alerts=_alert_rows(result), error=result.error, response=result.response
            )
        if oversized:
            limit = settings.HANDOVER_MAX_BODY_BYTES
            return 413, problem(
                413,
                "Request body too large",
                f"The body is over {limit} bytes. Its first 64 KiB are kept as delivery {delivery_id}; "
                "split the post into smaller batches.",
                extra={"delivery": delivery_id},
            )
        if result.error is not None:
            error = result.error
            where = f" (field `{error.field}`)" if error.field else ""
            return 400, problem(
                400,
                "The post breaks the source's format",
                f"{error.message}{where}. Stored as delivery {delivery_id}, rejected.",
                type_="invalid-alert",
                errors=error.errors or None,
                extra={"delivery": delivery_id},
            )
        return 202, {"delivery": delivery_id, "alerts": _alert_rows(result), **result.response}

"""``POST /api/v1/alerts/<source>/``: the ingestion endpoint for monitoring systems.

Authenticated by an integration key (``Authorization: Bearer <key>``; PagerDuty-format senders may
put it in ``routing_key``, the header wins). Synchronous: the Delivery is committed first, then
every record is parsed and applied in post order, and the answer lists each alert's outcome (202).

Hardening, in the order applied: the body is read in chunks up to the size limit (chunked posts
included, where the server de-chunks them: gunicorn sets ``wsgi.input_terminated``); the key is
authenticated; a per-key rate limit answers 429 with ``Retry-After`` (nothing stored: the sender
retries); an integration configured with a signing secret must sign each post (HMAC-SHA256 over
``<timestamp>:<body>``, stale timestamps refused, constant-time compare; see ``runs.alerts.signatures``).
Request headers are never stored: the Delivery keeps the content type only (redacted, as the body is).

Every authenticated post ends ``processed``, ``rejected`` or ``failed`` and is answered without a
server error (rule 9 in docs/architecture.md): a body that cannot be read to its end (malformed chunked
framing, a connection closed before its Content-Length) is stored ``rejected`` with 400, and a
processing that fails is answered 202 and left to the sweep. A body that never ends (an unterminated
chunked post) is the front proxy's and gunicorn's to cut off: docs/production.md ("Request buffering
and worker timeouts").
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.parsers import BaseParser
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from handover.core.errors import problem, problem_response
from handover.core.serializers import ProblemSerializer
from runs.alerts.context import IngestResult
from runs.alerts.models import RefusedRequestCount
from runs.alerts.parsers.base import storable_data
from runs.alerts.parsers.registry import get_adapter
from runs.alerts.ratelimit import rate_limit_take
from runs.alerts.receive import delivery_receive, delivery_refusal_count
from runs.alerts.refusals import client_network
from runs.alerts.serializers import IngestResponseSerializer
from runs.alerts.signatures import signature_verify
from runs.catalog.authentication import bearer_from_request, integration_key_authenticate_cached
from runs.catalog.keys import integration_security, signing_secret
from runs.catalog.models import IntegrationKey
from runs.catalog.transport import integration_transport

logger = logging.getLogger(__name__)
READ_CHUNK = 64 * 1024


class RawBodyParser(BaseParser):
    """Accept any media type; the view reads the raw bytes itself (hashes come from the raw body)."""

    media_type = "*/*"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        return None


@dataclass(frozen=True)
class BodyRead:
    """What was read of a post: the kept bytes, the size seen, whether it was over the limit, and why
    it could not be read to its end (``unreadable``, "" when it could)."""

    body: bytes
    size: int
    oversized: bool
    length_required: bool = False
    unreadable: str = ""


def _unreadable_reason(exc: Exception) -> str:
    """Why a body could not be read, in words: gunicorn's parse errors (``InvalidChunkSize``,
    ``ChunkMissingTerminator``, ...) are malformed chunked framing; anything else (a read timeout, a
    connection closed early: ``OSError``) is a failed read."""
    malformed = type(exc).__module__.startswith("gunicorn.http") and not isinstance(exc, OSError)
    kind = "the chunked framing is malformed" if malformed else "reading failed"
    detail = f" ({str(exc)[:200]})" if str(exc) else ""
    return f"{kind}: {type(exc).__name__}{detail}"


def _read_stream(stream: Any, limit: int) -> BodyRead:
    """Read ``stream`` in chunks, stopping one chunk past ``limit`` (never the whole oversized post).

    A read that fails (broken framing) ends the reading: what was read is kept, with the reason.
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        try:
            chunk = stream.read(READ_CHUNK)
        except Exception as exc:  # noqa: BLE001 - OSError (a timeout, a closed connection) or the server's framing errors
            return BodyRead(b"".join(chunks), size, False, unreadable=_unreadable_reason(exc))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return BodyRead(b"".join(chunks)[: settings.HANDOVER_KEPT_OVERSIZE_BYTES], size, True)
    return BodyRead(b"".join(chunks), size, False)


def read_body(request: Request) -> BodyRead:
    """Read the body while enforcing the size limit.

    With a Content-Length, Django's stream is read (it stops at the declared length); a declared
    length over the limit is refused after reading only the kept head. Without one -- a chunked
    post -- Django sees an empty body, so the de-chunked WSGI input is read directly when the
    server says it ends (``wsgi.input_terminated``, set by gunicorn); otherwise the length is
    required (411), since reading an unterminated input could block.
    """
    limit = settings.HANDOVER_MAX_BODY_BYTES
    meta = request.META
    raw = request._request  # the Django request: read its stream once, in chunks
    if meta.get("CONTENT_LENGTH"):
        try:
            declared = int(meta["CONTENT_LENGTH"])
        except ValueError:
            declared = 0
        if declared > limit:
            try:
                head = raw.read(settings.HANDOVER_KEPT_OVERSIZE_BYTES)
            except Exception:  # noqa: BLE001 - refused as oversized either way; keep what there is
                head = b""
            return BodyRead(head, declared, True)
        return _read_stream(raw, limit)
    if "chunked" in meta.get("HTTP_TRANSFER_ENCODING", "").lower():
        if meta.get("wsgi.input_terminated"):
            return _read_stream(meta["wsgi.input"], limit)
        return BodyRead(b"", 0, False, length_required=True)
    return BodyRead(b"", 0, False)


def _meta_name(header: str) -> str:
    """``X-Handover-Signature`` -> ``HTTP_X_HANDOVER_SIGNATURE`` (how WSGI names request headers)."""
    return "HTTP_" + header.upper().replace("-", "_")


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

    # authenticated by the integration key alone: no session, CSRF or messages (handover.core.middleware)
    integration_endpoint = True
    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    parser_classes = [RawBodyParser]

    @extend_schema(
        operation_id="alerts_ingest",
        summary="Post alerts from a monitoring system",
        description=(
            "Authenticate with `Authorization: Bearer <integration key>`. The body is the source's own "
            "format (`generic`: see runs/demo/alerts/generic/FORMAT.md). Answers 202 with each alert's "
            "outcome: `accepted`, "
            "`duplicate`, `unmatched` (kept for triage) or `rejected`. Integrations configured with a "
            "signing secret also need `X-Handover-Signature` (hex HMAC-SHA256 of `<timestamp>:<body>`) "
            "and `X-Handover-Timestamp` (UNIX seconds, within the integration's tolerance)."
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
            411: OpenApiResponse(ProblemSerializer, description="a chunked post the server did not de-chunk"),
            413: OpenApiResponse(ProblemSerializer, description="body over the size limit"),
            429: OpenApiResponse(ProblemSerializer, description="the key's rate limit; see Retry-After"),
            503: OpenApiResponse(ProblemSerializer, description="signed posts cannot be verified right now"),
        },
    )
    def post(self, request: Request, source: str) -> Response:
        return self._receive(request, source)

    def _receive(self, request: Request, source: str, *, url_key: str | None = None, method: str = "POST") -> Response:
        """Authenticate, refuse or store one post (or opted-in GET), and answer with each alert's outcome.

        ``url_key``: the key from the address (``/k/<key>/``); only URL keys are looked up then, only
        header keys otherwise. Every refusal is counted (``delivery_refusal_count``), never stored.
        """
        adapter = get_adapter(source)
        if adapter is None:
            return problem_response(problem(404, "Not found", f"There is no alert source called {source!r}."))
        network = client_network(request._request)
        if method == "GET":
            query = request.META.get("QUERY_STRING", "")
            read = BodyRead(query.encode("latin-1", errors="replace"), len(query), False)
        else:
            read = read_body(request)
        if read.length_required:
            return problem_response(
                problem(411, "Length required", "Send a Content-Length, or post through a server that de-chunks.")
            )
        body, size, oversized = read.body, read.size, read.oversized
        if url_key is not None:
            token: str | None = url_key
            key = integration_key_authenticate_cached(token, kind=IntegrationKey.Kind.URL)
        else:
            token = bearer_from_request(request._request)
            if token is None and hasattr(adapter, "credential_from_body") and not oversized:
                token = adapter.credential_from_body(body)
            key = integration_key_authenticate_cached(token)
        if key is None:
            reason = RefusedRequestCount.Reason.WRONG_KEY if token else RefusedRequestCount.Reason.NO_KEY
            delivery_refusal_count(source=source, reason=reason, network=network)
            hint = (
                "the address's key is not a valid URL key"
                if url_key is not None
                else ("send a valid integration key as `Authorization: Bearer <key>`")
            )
            response = problem_response(
                problem(401, "Not authenticated", f"Not authenticated: {hint}."),
                headers={"WWW-Authenticate": 'Bearer realm="handover-ingest"'},
            )
            return response
        if key.integration.source != source:
            delivery_refusal_count(
                source=source, reason=RefusedRequestCount.Reason.WRONG_KEY, network=network, integration=key.integration
            )
            return problem_response(
                problem(
                    403,
                    "Forbidden",
                    f"This key belongs to a {key.integration.source!r} integration; post to "
                    f"/api/v1/alerts/{key.integration.source}/ instead.",
                )
            )
        if method == "GET" and not integration_transport(integration=key.integration).allow_get:
            delivery_refusal_count(
                source=source,
                reason=RefusedRequestCount.Reason.METHOD_NOT_ALLOWED,
                network=network,
                integration=key.integration,
            )
            return problem_response(
                problem(405, "Method not allowed", "GET ingestion is not enabled for this integration; POST instead."),
                headers={"Allow": "POST"},
            )
        refused = self._rate_limited(key, source, network) or self._signature_refused(
            request, key, body, oversized, source, network
        )
        if refused is not None:
            return refused

        def answer(result: IngestResult) -> tuple[int, dict[str, Any]]:
            # a compressed post that inflates past the limit is as oversized as one sent that large
            status, payload = self._answer(adapter, result, oversized or result.delivery.is_body_truncated)
            # What echoes the sender (PagerDuty's dedup_key, reasons) may hold a lone surrogate, which no
            # JSON answer encodes as UTF-8: the answer says U+FFFD there, as the stored rows do.
            return status, storable_data(payload)

        result = delivery_receive(
            key=key,
            body=body,
            content_type="application/x-www-form-urlencoded"
            if method == "GET"
            else request.META.get("CONTENT_TYPE", ""),
            size_bytes=size,
            is_body_truncated=oversized,
            answer=answer,  # kept on the delivery with its outcome: one UPDATE, in the apply transaction
            unreadable_reason=read.unreadable,
            method=method,
            content_encoding=request.META.get("HTTP_CONTENT_ENCODING", "") if method == "POST" else "",
        )
        assert result.answer is not None
        status, payload = result.answer
        response = Response(payload, status=status)
        if status >= 400 and not hasattr(adapter, "render_response"):
            response.content_type = "application/problem+json"
        return response

    def http_method_not_allowed(self, request: Request, *args: Any, **kwargs: Any) -> Response:  # type: ignore[override]  # DRF passes its Request
        """405 for another method on a real source; 404 when the address names no source at all
        (``GET /api/v1/alerts/not-a-uuid/`` is no alert, and no source either)."""
        if get_adapter(str(kwargs.get("source", ""))) is None:
            return problem_response(problem(404, "Not found", "There is nothing at this address."))
        return super().http_method_not_allowed(request, *args, **kwargs)

    def _rate_limited(self, key: IntegrationKey, source: str, network: str) -> Response | None:
        """429 with Retry-After when the key is over its rate; nothing is stored (the sender retries)."""
        decision = rate_limit_take(
            scope=f"ingest:{key.public_id}",
            limit=settings.HANDOVER_INGEST_RATE_LIMIT,
            window_seconds=settings.HANDOVER_INGEST_RATE_WINDOW_SECONDS,
        )
        if decision.allowed:
            return None
        delivery_refusal_count(
            source=source, reason=RefusedRequestCount.Reason.RATE_LIMITED, network=network, integration=key.integration
        )
        logger.warning(
            "ingest rate limit: key %s of %s refused, retry after %d s",
            key.prefix,
            key.integration.name,
            decision.retry_after_seconds,
        )
        return problem_response(
            problem(
                429,
                "Too many requests",
                f"This key posted more than {settings.HANDOVER_INGEST_RATE_LIMIT} times in "
                f"{settings.HANDOVER_INGEST_RATE_WINDOW_SECONDS} s; retry after {decision.retry_after_seconds} s.",
            ),
            headers={"Retry-After": str(decision.retry_after_seconds)},
        )

    def _signature_refused(
        self, request: Request, key: IntegrationKey, body: bytes, oversized: bool, source: str, network: str
    ) -> Response | None:
        """Where the integration names a signing secret, refuse unsigned, stale or wrongly signed posts.

        A refused post is not stored (it is not authenticated), only counted. An oversized post cannot
        be verified (only its head is read), so it is refused with 413 and not stored either. A secret
        named but missing from the environment is the server's fault: 503, so the sender retries.
        """
        security = integration_security(integration=key.integration)
        if not security.signing_secret_env:
            return None
        secret = signing_secret(security.signing_secret_env)
        if not secret:
            logger.error(
                "integration %s requires signed posts but %s is not set",
                key.integration.name,
                security.signing_secret_env,
            )
            return problem_response(
                problem(503, "Service unavailable", "Signed posts cannot be verified right now; retry later."),
                headers={"Retry-After": "60"},
            )
        if oversized:
            limit = settings.HANDOVER_MAX_BODY_BYTES
            return problem_response(
                problem(413, "Request body too large", f"The body is over {limit} bytes; nothing was stored.")
            )
        meta = request.META
        check = signature_verify(
            secret=secret,
            body=body,
            signature=meta.get(_meta_name(security.signature_header)),
            timestamp=meta.get(_meta_name(security.timestamp_header)),
            tolerance_seconds=security.signature_tolerance_seconds,
            now=time.time(),
            scheme=security.signature_scheme,
            algorithm=security.signature_algorithm,
            encoding=security.signature_encoding,
        )
        if check.ok:
            return None
        # counted on the integration whose key it was, not only on the source's address
        delivery_refusal_count(
            source=source, reason=RefusedRequestCount.Reason.BAD_SIGNATURE, network=network, integration=key.integration
        )
        return problem_response(
            problem(401, "Not authenticated", f"Signature refused: {check.reason}."),
            headers={"WWW-Authenticate": 'Bearer realm="handover-ingest"'},
        )

    def _answer(self, adapter: Any, result: IngestResult, oversized: bool) -> tuple[int, dict[str, Any]]:
        delivery_id = str(result.delivery.public_id)
        if hasattr(adapter, "render_response") and not oversized:
            # ``response`` carries what the sender's own shape echoes (PagerDuty's dedup_key, generated
            # by the parser when the event has none).
            answer: tuple[int, dict[str, Any]] = adapter.render_response(
                delivery_id=delivery_id, alerts=_alert_rows(result), error=result.error, response=result.response
            )
            return answer
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
        if result.failure:  # stored; the sweep finishes it (rule 9: never a server error)
            detail = "Processing failed and is retried; the alerts recorded so far are listed."
            return 202, {"delivery": delivery_id, "alerts": _alert_rows(result), "detail": detail}
        return 202, {"delivery": delivery_id, "alerts": _alert_rows(result), **result.response}


_URL_KEY_RESPONSES = {
    202: IngestResponseSerializer,
    400: OpenApiResponse(ProblemSerializer, description="the post breaks the source's format"),
    401: OpenApiResponse(ProblemSerializer, description="unknown, revoked or header key in the address"),
    403: OpenApiResponse(ProblemSerializer, description="the key belongs to another source"),
    404: OpenApiResponse(ProblemSerializer, description="no such source"),
    405: OpenApiResponse(ProblemSerializer, description="GET ingestion is not enabled for the integration"),
    411: OpenApiResponse(ProblemSerializer, description="a chunked post the server did not de-chunk"),
    413: OpenApiResponse(ProblemSerializer, description="body over the size limit"),
    429: OpenApiResponse(ProblemSerializer, description="the key's rate limit; see Retry-After"),
    503: OpenApiResponse(ProblemSerializer, description="signed posts cannot be verified right now"),
}


class AlertIngestUrlKeyView(AlertIngestView):
    """Receive one post (or an opted-in GET) whose key is in the address: ``/api/v1/alerts/<source>/k/<key>/``.

    For senders that cannot set headers. The key is a URL key (``IntegrationKey.Kind.URL``: created
    explicitly, ingest-only, rotatable alone); a header key in the address is refused like an unknown
    one. The address is masked in access logs (``handover.core.access_log``).
    """

    @extend_schema(
        operation_id="alerts_ingest_url_key",
        summary="Post alerts, authenticated by a URL key in the address",
        description=(
            "For senders that can only put a secret in the URL. The key is a URL key of the integration "
            "(created explicitly: `manage.py create_integration_key <source> --in-url`, the integration page "
            "or `POST /api/v1/integrations/<id>/keys/` with `kind: url`). Body, decoders, signatures and "
            "answers as for `POST /api/v1/alerts/<source>/`."
        ),
        tags=["ingestion"],
        request={"application/json": {"type": "object"}},
        auth=[],
        responses=_URL_KEY_RESPONSES,
    )
    def post(self, request: Request, source: str, key: str) -> Response:  # type: ignore[override]
        return self._receive(request, source, url_key=key)

    @extend_schema(
        operation_id="alerts_ingest_url_key_get",
        summary="Report by GET, status in the query string (opt-in per integration)",
        description=(
            "For senders that can only call a URL. Enabled per integration (transport setting `allow_get`); "
            "the query string is stored as the delivery's body and decoded as a form "
            '(`?job=…&status=failed` reads as `{"job": "…", "status": "failed"}`).'
        ),
        tags=["ingestion"],
        auth=[],
        responses=_URL_KEY_RESPONSES,
    )
    def get(self, request: Request, source: str, key: str) -> Response:
        return self._receive(request, source, url_key=key, method="GET")

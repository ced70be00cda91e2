"""Ingestion hardening: rate limit, body limit (chunked included), HMAC signatures, headers, redaction names."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import time
import uuid
from typing import Any

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import override_settings
from django.test.client import FakePayload, RequestFactory

from runs.alerts.models import AuthFailureCounter, Delivery, RefusedRequestCount
from runs.alerts.ratelimit import rate_limit_take
from runs.alerts.redaction import redaction_token
from runs.alerts.signatures import signature_verify
from runs.catalog.keys import integration_security_update
from runs.catalog.models import Integration, IntegrationKey
from runs.catalog.services import integration_get_or_create, integration_key_create
from tests.conftest import PostAlert
from tests.factories import TenantFactory

pytestmark = pytest.mark.django_db

SECRET_ENV = "HANDOVER_SIGNING_SECRET_TESTS"


def _alert(tenant: str = "acme-foods", **extra: Any) -> dict[str, Any]:
    return {
        "schema": "handover.alert/v1",
        "scheduled_for": "2026-11-28T02:00:00+01:00",
        "job": "nightly-invoice-export",
        "tenant": tenant,
        "environment": "prod",
        "execution_id": f"exec-{uuid.uuid4().hex[:8]}",
        "status": "failed",
        "window_start": "2026-11-27T00:00:00+01:00",
        "window_end": "2026-11-28T00:00:00+01:00",
        **extra,
    }


@pytest.fixture
def generic_key(db: None) -> tuple[Integration, str]:
    tenant = TenantFactory(slug="acme-foods")
    integration = integration_get_or_create(source="generic", name=f"generic-{uuid.uuid4().hex[:6]}")
    return integration, integration_key_create(integration=integration, tenants=[tenant]).key


# --- rate limit -------------------------------------------------------------------------------------


def test_rate_limit_sliding_window_refuses_with_retry_after_and_recovers() -> None:
    scope = f"test:{uuid.uuid4()}"
    start = 1_000_000 * 60.0  # a window boundary
    for second in range(3):
        assert rate_limit_take(scope=scope, limit=3, window_seconds=60, now=start + second).allowed
    refused = rate_limit_take(scope=scope, limit=3, window_seconds=60, now=start + 10)
    assert not refused.allowed
    # the next window starts in 50 s; there the full one weighs (60 - t) / 60 * 3 and fits one more at t = 20
    assert refused.retry_after_seconds == 50 + 20

    # half-way through the next window, the previous 3 posts weigh 1.5: one more fits, a second not
    assert rate_limit_take(scope=scope, limit=3, window_seconds=60, now=start + 90).allowed
    assert not rate_limit_take(scope=scope, limit=3, window_seconds=60, now=start + 90).allowed
    assert rate_limit_take(scope=scope, limit=3, window_seconds=60, now=start + 180).allowed


@pytest.mark.parametrize("backend", ["django.core.cache.backends.filebased.FileBasedCache", "locmem"])
def test_rate_limit_counters_outlive_a_short_default_timeout(backend: str, tmp_path: Any) -> None:
    """A cache whose ``incr`` stores the entry again with its default timeout (the file cache) keeps the
    window's counter for two windows all the same: a default of 1 s does not let a fourth post through."""
    cache_settings = (
        {"BACKEND": backend, "LOCATION": str(tmp_path), "TIMEOUT": 1}
        if backend != "locmem"
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "TIMEOUT": 1}
    )
    scope = f"test:{uuid.uuid4()}"
    with override_settings(CACHES={"default": cache_settings}):
        now = time.time()
        assert all(rate_limit_take(scope=scope, limit=3, window_seconds=60, now=now).allowed for _ in range(3))
        time.sleep(1.2)
        assert not rate_limit_take(scope=scope, limit=3, window_seconds=60, now=now).allowed


def test_rate_limit_of_zero_is_off() -> None:
    assert all(rate_limit_take(scope="off", limit=0, window_seconds=60).allowed for _ in range(5))


def test_ingest_over_the_rate_limit_answers_429_with_retry_after_and_stores_nothing(
    generic_key: tuple[Integration, str], post_alert: PostAlert
) -> None:
    _, key = generic_key
    with override_settings(HANDOVER_INGEST_RATE_LIMIT=2, HANDOVER_INGEST_RATE_WINDOW_SECONDS=3600):
        assert post_alert("generic", _alert(), key).status_code == 202
        assert post_alert("generic", _alert(), key).status_code == 202
        refused = post_alert("generic", _alert(), key)

    assert refused.status_code == 429
    assert int(refused["Retry-After"]) >= 1
    assert refused["Content-Type"] == "application/problem+json"
    assert refused.json()["status"] == 429
    assert Delivery.objects.count() == 2


def test_rate_limit_is_per_key(generic_key: tuple[Integration, str], post_alert: PostAlert) -> None:
    integration, key = generic_key
    other = integration_key_create(integration=integration, all_tenants=True).key
    with override_settings(HANDOVER_INGEST_RATE_LIMIT=1, HANDOVER_INGEST_RATE_WINDOW_SECONDS=3600):
        assert post_alert("generic", _alert(), key).status_code == 202
        assert post_alert("generic", _alert(), key).status_code == 429
        assert post_alert("generic", _alert(), other).status_code == 202


# --- body size, chunked posts -----------------------------------------------------------------------


def _wsgi_post(path: str, body: bytes, headers: dict[str, str], *, terminated: bool) -> tuple[int, dict[str, Any]]:
    """Call the WSGI application the way gunicorn does for a chunked post: no CONTENT_LENGTH, the
    de-chunked body as ``wsgi.input`` and ``wsgi.input_terminated`` set."""
    environ = RequestFactory()._base_environ(  # the test client's own environ builder
        PATH_INFO=path,
        REQUEST_METHOD="POST",
        CONTENT_TYPE="application/json",
        HTTP_TRANSFER_ENCODING="chunked",
        **headers,
    )
    environ.pop("CONTENT_LENGTH", None)
    environ["wsgi.input"] = io.BytesIO(body) if terminated else FakePayload(body)
    if terminated:
        environ["wsgi.input_terminated"] = True
    status: list[str] = []
    # Django closes "old" connections as a request starts and ends; inside the test's transaction on
    # PostgreSQL that would close the test's own connection (the test client does the same).
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    try:
        chunks = WSGIHandler()(environ, lambda s, h: status.append(s))
        payload = b"".join(chunks)
    finally:
        for signal in (request_started, request_finished):
            signal.connect(close_old_connections)
    return int(status[0].split()[0]), json.loads(payload) if payload else {}


def test_chunked_post_is_read_when_the_server_terminates_the_input(generic_key: tuple[Integration, str]) -> None:
    _, key = generic_key
    body = json.dumps(_alert()).encode()

    status, payload = _wsgi_post(
        "/api/v1/alerts/generic/", body, {"HTTP_AUTHORIZATION": f"Bearer {key}"}, terminated=True
    )

    assert status == 202, payload
    delivery = Delivery.objects.get()
    assert delivery.size_bytes == len(body)
    assert delivery.sha256 == hashlib.sha256(body).hexdigest()


def test_chunked_post_over_the_limit_is_cut_while_reading(generic_key: tuple[Integration, str]) -> None:
    _, key = generic_key
    body = b'{"alerts": [' + b" " * (300 * 1024) + b"]}"

    with override_settings(HANDOVER_MAX_BODY_BYTES=200 * 1024):
        status, payload = _wsgi_post(
            "/api/v1/alerts/generic/", body, {"HTTP_AUTHORIZATION": f"Bearer {key}"}, terminated=True
        )

    assert status == 413
    delivery = Delivery.objects.get()
    assert delivery.is_body_truncated and len(delivery.body) == 64 * 1024
    # reading stopped one chunk past the limit: the size seen is not the whole post
    assert 200 * 1024 < delivery.size_bytes < len(body)
    assert payload["delivery"] == str(delivery.public_id)


def test_chunked_post_the_server_did_not_dechunk_needs_a_length(generic_key: tuple[Integration, str]) -> None:
    _, key = generic_key
    status, payload = _wsgi_post(
        "/api/v1/alerts/generic/", b"{}", {"HTTP_AUTHORIZATION": f"Bearer {key}"}, terminated=False
    )
    assert status == 411
    assert Delivery.objects.count() == 0


def test_declared_length_over_the_limit_keeps_only_the_head(
    generic_key: tuple[Integration, str], post_alert: PostAlert
) -> None:
    _, key = generic_key
    body = json.dumps({"alerts": [_alert(note="x" * 1000) for _ in range(150)]}).encode()
    with override_settings(HANDOVER_MAX_BODY_BYTES=100 * 1024):
        response = post_alert("generic", body, key)
    assert response.status_code == 413
    delivery = Delivery.objects.get()
    assert (delivery.size_bytes, delivery.is_body_truncated, delivery.outcome) == (len(body), True, "rejected")


# --- signatures ---------------------------------------------------------------------------------------


def _sign(secret: str, body: bytes, stamp: int) -> str:
    return "sha256=" + hmac.new(secret.encode(), f"{stamp}:".encode() + body, hashlib.sha256).hexdigest()


def test_signature_verify_accepts_good_and_refuses_stale_wrong_and_missing() -> None:
    body, now = b'{"a": 1}', 1_800_000_000
    good = _sign("s3cret", body, now)
    assert signature_verify(
        secret="s3cret", body=body, signature=good, timestamp=str(now), tolerance_seconds=300, now=now
    ).ok
    # milliseconds are accepted too, and a bare hex digest
    stamp_ms = str(now * 1000)
    bare = hmac.new(b"s3cret", f"{stamp_ms}:".encode() + body, hashlib.sha256).hexdigest()
    assert signature_verify(
        secret="s3cret", body=body, signature=bare, timestamp=stamp_ms, tolerance_seconds=300, now=now
    ).ok
    refusals = [
        signature_verify(
            secret="s3cret", body=body, signature=good, timestamp=str(now), tolerance_seconds=300, now=now + 301
        ),
        signature_verify(
            secret="s3cret", body=body + b" ", signature=good, timestamp=str(now), tolerance_seconds=300, now=now
        ),
        signature_verify(secret="other", body=body, signature=good, timestamp=str(now), tolerance_seconds=300, now=now),
        signature_verify(
            secret="s3cret", body=body, signature=None, timestamp=str(now), tolerance_seconds=300, now=now
        ),
        signature_verify(
            secret="s3cret", body=body, signature=good, timestamp="yesterday", tolerance_seconds=300, now=now
        ),
    ]
    assert [r.ok for r in refusals] == [False] * 5
    assert "5 minutes" in refusals[0].reason and "does not match" in refusals[1].reason


@pytest.fixture
def signed_integration(generic_key: tuple[Integration, str], monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    integration, key = generic_key
    integration_security_update(integration=integration, actor=None, redact_names=[], signing_secret_env=SECRET_ENV)
    secret = "whsec-" + uuid.uuid4().hex
    monkeypatch.setenv(SECRET_ENV, secret)
    return key, secret


def test_signed_integration_accepts_a_fresh_correct_signature(
    signed_integration: tuple[str, str], post_alert: PostAlert
) -> None:
    key, secret = signed_integration
    body = json.dumps(_alert()).encode()
    stamp = int(time.time())

    response = post_alert(
        "generic",
        body,
        key,
        HTTP_X_HANDOVER_SIGNATURE=_sign(secret, body, stamp),
        HTTP_X_HANDOVER_TIMESTAMP=str(stamp),
    )

    assert response.status_code == 202
    assert Delivery.objects.count() == 1


@pytest.mark.parametrize("problem", ["missing", "stale", "tampered", "wrong-secret"])
def test_signed_integration_refuses_bad_posts_with_401_and_stores_nothing(
    signed_integration: tuple[str, str], post_alert: PostAlert, problem: str
) -> None:
    key, secret = signed_integration
    body = json.dumps(_alert()).encode()
    stamp = int(time.time()) - (600 if problem == "stale" else 0)
    signed = body if problem != "tampered" else body.replace(b"failed", b"succeeded")
    signature = _sign("nope" if problem == "wrong-secret" else secret, signed, stamp)
    headers = (
        {}
        if problem == "missing"
        else {
            "HTTP_X_HANDOVER_SIGNATURE": signature,
            "HTTP_X_HANDOVER_TIMESTAMP": str(stamp),
        }
    )

    response = post_alert("generic", body, key, **headers)

    assert response.status_code == 401
    assert response.json()["detail"].startswith("Signature refused")
    assert secret not in response.content.decode()
    assert Delivery.objects.count() == 0
    # counted on the integration whose key signed wrongly, not only on the source's address
    integration = IntegrationKey.objects.get(prefix=key[:12]).integration
    assert integration.refused_post_count == 1
    assert not AuthFailureCounter.objects.filter(source="generic").exists()
    counted = RefusedRequestCount.objects.get()
    assert (counted.reason, counted.integration_id, counted.count) == ("bad_signature", integration.pk, 1)


def test_signed_integration_without_its_secret_in_the_environment_answers_503(
    generic_key: tuple[Integration, str], post_alert: PostAlert, monkeypatch: pytest.MonkeyPatch
) -> None:
    integration, key = generic_key
    integration_security_update(integration=integration, actor=None, redact_names=[], signing_secret_env=SECRET_ENV)
    monkeypatch.delenv(SECRET_ENV, raising=False)

    response = post_alert("generic", _alert(), key)

    assert response.status_code == 503
    assert response["Retry-After"]
    assert Delivery.objects.count() == 0


# --- what is stored -----------------------------------------------------------------------------------


def test_request_headers_are_never_stored(generic_key: tuple[Integration, str], post_alert: PostAlert) -> None:
    _, key = generic_key
    marker = f"header-secret-{uuid.uuid4().hex}"

    response = post_alert("generic", _alert(), key, HTTP_X_CUSTOM_SECRET=marker, HTTP_COOKIE=f"session={marker}")

    assert response.status_code == 202
    delivery = Delivery.objects.get()
    stored = json.dumps(
        {f.name: str(getattr(delivery, f.attname)) for f in Delivery._meta.concrete_fields}, ensure_ascii=False
    )
    assert marker not in stored and key not in stored


def test_extra_redaction_names_apply_to_the_stored_body_and_fields(
    generic_key: tuple[Integration, str], post_alert: PostAlert
) -> None:
    integration, key = generic_key
    integration_security_update(integration=integration, actor=None, redact_names=["Customer_Ref"])
    value = f"CUST-{uuid.uuid4().hex}"

    response = post_alert("generic", _alert(customer_ref=value, labels={"customer_ref": value, "password": "pw"}), key)

    assert response.status_code == 202
    delivery = Delivery.objects.get()
    assert value not in delivery.body and redaction_token(value) in delivery.body
    alert = delivery.alerts.get()
    assert value not in json.dumps(alert.fields)

"""Compressed posts (``Content-Encoding: gzip`` / ``deflate``): read as the body they carry, within the size
limit, hashed as received; an encoding not read here, or a broken stream, is refused and kept as sent."""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from collections.abc import Callable
from typing import Any

import pytest
from django.test import override_settings

from runs.alerts.content_encoding import body_inflate
from runs.alerts.models import Alert, Delivery
from runs.catalog.models import Tenant
from tests.conftest import PostAlert
from tests.runs.ingest_support import story_alert

pytestmark = pytest.mark.django_db


def _alert(execution_id: str) -> dict[str, Any]:
    return story_alert(execution_id=execution_id, error="ledger gateway timeout; password=Sup3rSecretValue!")


@pytest.fixture
def key(story_tenants: dict[str, Tenant], make_key: Callable[..., str]) -> str:
    return make_key("generic", all_tenants=True)


@pytest.mark.parametrize(
    ("coding", "compress"),
    [
        ("gzip", gzip.compress),
        ("x-gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda data: (lambda c: c.compress(data) + c.flush())(zlib.compressobj(6, zlib.DEFLATED, -15))),
        ("gzip, identity", gzip.compress),
    ],
    ids=["gzip", "x-gzip", "deflate-zlib", "deflate-raw", "gzip-identity"],
)
def test_a_compressed_post_is_processed_and_stored_inflated_with_the_hash_of_what_was_sent(
    post_alert: PostAlert, key: str, coding: str, compress: Callable[[bytes], bytes]
) -> None:
    sent = compress(json.dumps(_alert("exec-gzip-1")).encode())

    response = post_alert("generic", sent, key, HTTP_CONTENT_ENCODING=coding)

    assert response.status_code == 202, response.content
    delivery = Delivery.objects.get()
    assert delivery.outcome == Delivery.Outcome.PROCESSED
    assert delivery.sha256 == hashlib.sha256(sent).hexdigest() and delivery.size_bytes == len(sent)
    assert json.loads(delivery.body)["execution_id"] == "exec-gzip-1"
    assert "Sup3rSecretValue!" not in delivery.body  # redacted as any body
    assert delivery.notes["content_encoding"] == coding.split(",")[0]
    assert Alert.objects.get().outcome == Alert.Outcome.ACCEPTED


@override_settings(HANDOVER_MAX_BODY_BYTES=20_000)
def test_a_small_post_that_inflates_past_the_limit_is_refused_as_oversized_and_its_head_kept(
    post_alert: PostAlert, key: str
) -> None:
    bomb = gzip.compress(b"[" + b" " * 5_000_000 + b"]")
    assert len(bomb) < 20_000

    response = post_alert("generic", bomb, key, HTTP_CONTENT_ENCODING="gzip")

    assert response.status_code == 413
    delivery = Delivery.objects.get()
    assert delivery.outcome == Delivery.Outcome.REJECTED and delivery.is_body_truncated
    assert len(delivery.body) <= 64 * 1024 and delivery.sha256 == hashlib.sha256(bomb).hexdigest()


@pytest.mark.parametrize(
    ("coding", "body", "reason"),
    [
        ("br", b"\x1b\x00\x00", "Content-Encoding 'br' is not read here"),
        ("gzip", b'{"not": "compressed"}', "The body is not valid gzip"),
        ("gzip", gzip.compress(b'{"cut": true}', mtime=0)[:-6], "The body is not valid gzip"),
    ],
    ids=["br", "not-compressed", "cut"],
)
def test_an_unread_encoding_or_a_broken_stream_is_rejected_with_the_reason_and_kept(
    post_alert: PostAlert, key: str, coding: str, body: bytes, reason: str
) -> None:
    response = post_alert("generic", body, key, HTTP_CONTENT_ENCODING=coding)

    assert response.status_code == 400
    assert reason in response.json()["detail"]
    delivery = Delivery.objects.get()
    assert delivery.outcome == Delivery.Outcome.REJECTED and reason in delivery.reason
    assert delivery.sha256 == hashlib.sha256(body).hexdigest()


def test_inflating_never_produces_more_than_the_limit_in_one_go() -> None:
    bomb = gzip.compress(b"\0" * (50 * 1024 * 1024))

    inflated = body_inflate(bomb, "gzip", limit=1024 * 1024, kept=4096)

    assert inflated.oversized and len(inflated.body) == 4096

"""Transport per integration: URL keys, GET ingestion, signature schemes as data, body decoders, masking."""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import json
import logging
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client, override_settings

from handover.core.access_log import UrlKeyMaskFilter, UrlKeyMaskingLogger, mask_url_keys
from handover.core.errors import DomainError
from runs.alerts.decoders import body_decode
from runs.alerts.models import Alert, AuthFailureCounter, Delivery, RefusedRequestCount
from runs.alerts.parsers.base import FormatError
from runs.alerts.refusals import refused_request_count, refused_request_prune
from runs.alerts.signatures import signature_verify
from runs.alerts.triage import alert_reprocess
from runs.attempts.models import Attempt
from runs.catalog.keys import integration_key_rotate, integration_security_update
from runs.catalog.models import Integration, IntegrationKey
from runs.catalog.services import integration_get_or_create, integration_key_create, job_get_or_create
from runs.catalog.transport import integration_transport, integration_transport_update
from tests.factories import TenantFactory
from tests.runs.ingest_support import custom_integration_with, row_mapping, story_alert

pytestmark = pytest.mark.django_db

SECRET_ENV = "HANDOVER_SIGNING_SECRET_TRANSPORT"
SECRET = "s3cr3t-for-tests"


_alert = story_alert


@pytest.fixture
def custom_integration(story_tenants: dict[str, Any]) -> Integration:
    mapping = row_mapping(status_map={"fail": "failed", "ok": "succeeded"})
    return custom_integration_with(f"custom-{uuid.uuid4().hex[:6]}", mapping)


@pytest.fixture
def url_key(custom_integration: Integration) -> str:
    return integration_key_create(integration=custom_integration, all_tenants=True, kind=IntegrationKey.Kind.URL).key


def _row(run_id: str = "r-1", state: str = "fail") -> dict[str, str]:
    return {
        "job": "nightly-invoice-export",
        "tenant": "acme-foods",
        "run_id": run_id,
        "state": state,
        "scheduled": "2026-11-28T01:00:00Z",
    }


# --- URL keys --------------------------------------------------------------------------------------


def test_url_key_authenticates_a_post_in_the_address_and_stores_the_delivery(
    client: Client, custom_integration: Integration, url_key: str
) -> None:
    response = client.post(f"/api/v1/alerts/custom/k/{url_key}/", data=_row(), content_type="application/json")

    assert response.status_code == 202, response.content
    delivery = Delivery.objects.get()
    assert delivery.integration == custom_integration
    assert delivery.key.kind == IntegrationKey.Kind.URL
    assert response.json()["alerts"][0]["outcome"] in ("accepted", "unmatched")
    assert Alert.objects.filter(delivery=delivery).count() == 1


def test_url_key_is_not_a_header_key_and_a_header_key_is_not_a_url_key(
    client: Client, custom_integration: Integration, url_key: str
) -> None:
    header_key = integration_key_create(integration=custom_integration, all_tenants=True).key

    as_header = client.post(
        "/api/v1/alerts/custom/", data=_row(), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {url_key}"
    )
    in_url = client.post(f"/api/v1/alerts/custom/k/{header_key}/", data=_row(), content_type="application/json")

    assert as_header.status_code == in_url.status_code == 401
    assert not Delivery.objects.exists()
    counts = {(r.reason, r.integration_id) for r in RefusedRequestCount.objects.all()}
    assert counts == {(RefusedRequestCount.Reason.WRONG_KEY, None)}
    assert RefusedRequestCount.objects.get().count == 2
    assert AuthFailureCounter.objects.get(source="custom").count == 2


def test_url_key_rotates_alone_and_keeps_its_kind(
    client: Client, custom_integration: Integration, url_key: str
) -> None:
    header_key = integration_key_create(integration=custom_integration, all_tenants=True).key
    old = IntegrationKey.objects.get(kind=IntegrationKey.Kind.URL)

    issued = integration_key_rotate(key=old, actor=None)

    assert issued.record.kind == IntegrationKey.Kind.URL and issued.key.startswith("hu_")
    assert (
        client.post(f"/api/v1/alerts/custom/k/{url_key}/", data=_row(), content_type="application/json").status_code
        == 401
    )
    assert (
        client.post(f"/api/v1/alerts/custom/k/{issued.key}/", data=_row(), content_type="application/json").status_code
        == 202
    )
    header = client.post(
        "/api/v1/alerts/custom/",
        data=_row("r-2"),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {header_key}",
    )
    assert header.status_code == 202  # the header key was not touched
    assert IntegrationKey.objects.filter(kind=IntegrationKey.Kind.HEADER, revoked_at__isnull=True).count() == 1


def test_create_integration_key_in_url_prints_the_full_address_alone_on_the_last_line(client: Client) -> None:
    TenantFactory(slug="acme-foods")
    out = io.StringIO()

    call_command(
        "create_integration_key", "generic", "--all-tenants", "--in-url", "--base-url", "https://h.example", stdout=out
    )

    last = out.getvalue().strip().splitlines()[-1]
    assert last.startswith("https://h.example/api/v1/alerts/generic/k/hu_") and last.endswith("/")
    key = IntegrationKey.objects.get()
    assert key.kind == IntegrationKey.Kind.URL
    path = last.removeprefix("https://h.example")
    assert client.post(path, data=_alert(), content_type="application/json").status_code == 202


# --- GET ingestion ---------------------------------------------------------------------------------


def test_get_ingestion_is_refused_until_the_integration_enables_it(
    client: Client, custom_integration: Integration, url_key: str
) -> None:
    query = "job=nightly-invoice-export&tenant=acme-foods&run_id=g-1&state=fail&scheduled=2026-11-28T01:00:00Z"

    refused = client.get(f"/api/v1/alerts/custom/k/{url_key}/?{query}")
    assert refused.status_code == 405 and "POST" in refused["Allow"]
    assert not Delivery.objects.exists()
    row = RefusedRequestCount.objects.get()
    assert (row.reason, row.integration_id) == (RefusedRequestCount.Reason.METHOD_NOT_ALLOWED, custom_integration.pk)

    integration_transport_update(integration=custom_integration, actor=None, allow_get=True)
    accepted = client.get(f"/api/v1/alerts/custom/k/{url_key}/?{query}")

    assert accepted.status_code == 202, accepted.content
    delivery = Delivery.objects.get()
    assert delivery.body == query and delivery.notes["method"] == "GET"
    alert = Alert.objects.get()
    assert alert.outcome == Alert.Outcome.ACCEPTED, alert.reason
    assert alert.execution_id == "g-1"
    assert Attempt.objects.get().status == "failed"


# --- decoders --------------------------------------------------------------------------------------


def test_form_decoder_reads_a_form_post(client: Client, custom_integration: Integration, url_key: str) -> None:
    integration_transport_update(integration=custom_integration, actor=None, allow_get=False, decoder_kind="form")
    body = "job=nightly-invoice-export&tenant=acme-foods&run_id=f-1&state=fail&scheduled=2026-11-28T01%3A00%3A00Z"

    response = client.post(
        f"/api/v1/alerts/custom/k/{url_key}/", data=body, content_type="application/x-www-form-urlencoded"
    )

    assert response.status_code == 202
    alert = Alert.objects.get()
    assert alert.outcome == Alert.Outcome.ACCEPTED, alert.reason
    assert Delivery.objects.get().body == body  # stored as sent, decoded when parsed


def test_ndjson_decoder_gives_one_alert_per_line_and_a_bad_line_rejects_the_post(
    client: Client, custom_integration: Integration, url_key: str
) -> None:
    integration_transport_update(integration=custom_integration, actor=None, allow_get=False, decoder_kind="ndjson")
    body = "\n".join(json.dumps(_row(f"n-{i}")) for i in range(3)) + "\n"

    ok = client.post(f"/api/v1/alerts/custom/k/{url_key}/", data=body, content_type="application/x-ndjson")
    bad = client.post(
        f"/api/v1/alerts/custom/k/{url_key}/", data='{"a": 1}\nnot json\n', content_type="application/x-ndjson"
    )

    assert ok.status_code == 202
    assert sorted(Alert.objects.values_list("execution_id", flat=True)) == ["n-0", "n-1", "n-2"]
    assert bad.status_code == 400 and "line 2" in bad.json()["detail"]
    assert Delivery.objects.filter(outcome=Delivery.Outcome.REJECTED).count() == 1


def test_envelope_decoder_selects_items_by_type_and_honours_lengths() -> None:
    payload = json.dumps({"check_in_id": "c1", "status": "error"})
    body = (
        json.dumps({"event_id": "e1", "sent_at": "2026-11-28T01:00:00Z"})
        + "\n"
        + json.dumps({"type": "session"})
        + "\n"
        + '{"sid": "x"}'
        + "\n"
        + json.dumps({"type": "check_in", "length": len(payload.encode())})
        + "\n"
        + payload
        + "\n"
    ).encode()

    decoded = json.loads(body_decode(body, decoder={"kind": "envelope", "item_types": ["check_in"]}))

    assert decoded == [
        {
            "envelope": {"event_id": "e1", "sent_at": "2026-11-28T01:00:00Z"},
            "header": {"type": "check_in", "length": len(payload)},
            "payload": {"check_in_id": "c1", "status": "error"},
        }
    ]
    with pytest.raises(FormatError):
        body_decode(b'{"e": 1}\n{"type": "check_in", "length": 99}\n{}', decoder={"kind": "envelope"})


def test_form_decoder_keeps_repeated_names_as_a_list() -> None:
    assert json.loads(body_decode(b"a=1&b=2&b=3&c=", decoder={"kind": "form"})) == {"a": "1", "b": ["2", "3"], "c": ""}
    assert body_decode(b'{"x": 1}', decoder={"kind": "json"}) == b'{"x": 1}'


def test_transport_update_refuses_an_unknown_decoder(custom_integration: Integration) -> None:
    with pytest.raises(DomainError) as refused:
        integration_transport_update(integration=custom_integration, actor=None, allow_get=True, decoder_kind="xml")

    assert "decoder" in refused.value.errors
    assert integration_transport(integration=custom_integration).allow_get is False


# --- signature schemes -----------------------------------------------------------------------------


def _sign(message: bytes, algorithm: Any = hashlib.sha256) -> bytes:
    return hmac.new(SECRET.encode(), message, algorithm).digest()


@pytest.mark.parametrize(
    ("scheme", "algorithm", "encoding", "headers"),
    [
        ("body", "sha256", "hex", lambda body, ts: {"HTTP_X_SIG": "sha256=" + _sign(body).hex()}),
        ("body", "sha1", "hex", lambda body, ts: {"HTTP_X_SIG": _sign(body, hashlib.sha1).hex().upper()}),
        ("body", "sha256", "base64", lambda body, ts: {"HTTP_X_SIG": base64.b64encode(_sign(body)).decode()}),
        (
            "ts.body",
            "sha256",
            "hex",
            lambda body, ts: {"HTTP_X_SIG": _sign(ts.encode() + b"." + body).hex(), "HTTP_X_TS": ts},
        ),
        (
            "ts:body",
            "sha512",
            "hex",
            lambda body, ts: {"HTTP_X_SIG": _sign(ts.encode() + b":" + body, hashlib.sha512).hex(), "HTTP_X_TS": ts},
        ),
        (
            "t=,v1=",
            "sha256",
            "hex",
            lambda body, ts: {"HTTP_X_SIG": f"t={ts},v1=00ff,v1={_sign(ts.encode() + b'.' + body).hex()}"},
        ),
    ],
)
def test_each_signature_scheme_accepts_its_signature_and_refuses_a_tampered_body(
    client: Client,
    monkeypatch: pytest.MonkeyPatch,
    custom_integration: Integration,
    url_key: str,
    scheme: str,
    algorithm: str,
    encoding: str,
    headers: Any,
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    integration_security_update(
        integration=custom_integration,
        actor=None,
        redact_names=[],
        signing_secret_env=SECRET_ENV,
        signature_header="X-Sig",
        timestamp_header="X-Ts",
        signature_scheme=scheme,
        signature_algorithm=algorithm,
        signature_encoding=encoding,
    )
    body = json.dumps(_row()).encode()
    ts = str(int(time.time()))
    url = f"/api/v1/alerts/custom/k/{url_key}/"

    good = client.post(url, data=body, content_type="application/json", **headers(body, ts))
    tampered = client.post(url, data=body + b" ", content_type="application/json", **headers(body, ts))

    assert good.status_code == 202, good.content
    assert tampered.status_code == 401
    assert Delivery.objects.count() == 1
    row = RefusedRequestCount.objects.get()
    assert (row.reason, row.integration_id, row.count) == (
        RefusedRequestCount.Reason.BAD_SIGNATURE,
        custom_integration.pk,
        1,
    )
    custom_integration.refresh_from_db()
    assert custom_integration.refused_post_count == 1


def test_a_stale_timestamp_is_refused_by_the_timed_schemes() -> None:
    body = b"{}"
    old = str(int(time.time()) - 3600)
    stripe = f"t={old},v1={_sign(old.encode() + b'.' + body).hex()}"

    check = signature_verify(
        secret=SECRET,
        body=body,
        signature=stripe,
        timestamp=None,
        tolerance_seconds=300,
        now=time.time(),
        scheme="t=,v1=",
    )

    assert not check.ok and "5 minutes" in check.reason


def test_signatures_cannot_be_required_from_a_sender_that_cannot_sign(db: None) -> None:
    integration = integration_get_or_create(source="alertmanager", name="am-signing")

    with pytest.raises(DomainError) as refused:
        integration_security_update(integration=integration, actor=None, redact_names=[], signing_secret_env=SECRET_ENV)

    assert "cannot sign" in refused.value.errors["signing_secret_env"][0]
    integration.refresh_from_db()
    assert "signing_secret_env" not in integration.settings


# --- refused-request counters ----------------------------------------------------------------------


def test_refusals_count_per_network_and_hour_with_a_cap_and_are_pruned_after_30_days(db: None) -> None:
    at = datetime(2026, 11, 28, 10, 15, tzinfo=UTC)
    for n in range(52):
        refused_request_count(
            source="generic", reason=RefusedRequestCount.Reason.NO_KEY, network=f"10.0.{n}.0/24", at=at
        )
    refused_request_count(source="generic", reason=RefusedRequestCount.Reason.NO_KEY, network="10.0.0.0/24", at=at)
    refused_request_count(
        source="generic", reason=RefusedRequestCount.Reason.NO_KEY, network="10.0.0.0/24", at=at + timedelta(hours=1)
    )

    hour = at.replace(minute=0)
    assert RefusedRequestCount.objects.filter(hour=hour).count() == 51  # 50 networks + "*"
    assert RefusedRequestCount.objects.get(hour=hour, network="*").count == 2
    assert RefusedRequestCount.objects.get(hour=hour, network="10.0.0.0/24").count == 2

    assert refused_request_prune(now=at + timedelta(days=30, minutes=30)) == 51
    assert RefusedRequestCount.objects.count() == 1


def test_refused_post_is_counted_under_the_clients_network(client: Client, db: None) -> None:
    client.post("/api/v1/alerts/generic/", data=_alert(), content_type="application/json", REMOTE_ADDR="203.0.113.77")
    client.post("/api/v1/alerts/generic/", data=_alert(), content_type="application/json", REMOTE_ADDR="2001:db8::1")

    assert set(RefusedRequestCount.objects.values_list("network", "reason")) == {
        ("203.0.113.0/24", "no_key"),
        ("2001:db8::/64", "no_key"),
    }


@override_settings(HANDOVER_INGEST_RATE_LIMIT=1)
def test_a_rate_limited_post_is_counted_on_its_integration(
    client: Client, custom_integration: Integration, url_key: str
) -> None:
    url = f"/api/v1/alerts/custom/k/{url_key}/"
    assert client.post(url, data=_row(), content_type="application/json").status_code == 202
    assert client.post(url, data=_row("r-2"), content_type="application/json").status_code == 429

    row = RefusedRequestCount.objects.get()
    assert (row.reason, row.integration_id) == (RefusedRequestCount.Reason.RATE_LIMITED, custom_integration.pk)


# --- masking ---------------------------------------------------------------------------------------


def test_url_keys_are_masked_in_access_log_atoms_and_log_records() -> None:
    path = "/api/v1/alerts/custom/k/hu_abcDEF-123_xyz/"
    assert mask_url_keys(f"POST {path}?x=1 HTTP/1.1") == "POST /api/v1/alerts/custom/k/‹url-key›/?x=1 HTTP/1.1"

    class Response:
        status = "202 Accepted"
        headers: list[tuple[str, str]] = []
        sent = 10

    environ = {"REQUEST_METHOD": "POST", "RAW_URI": path, "SERVER_PROTOCOL": "HTTP/1.1", "PATH_INFO": path}
    from gunicorn.config import Config

    atoms = UrlKeyMaskingLogger(Config()).atoms(
        Response(), [("Referer", "https://x" + path)], environ, timedelta(seconds=1)
    )
    assert "hu_abc" not in json.dumps(atoms, default=str)
    assert atoms["U"] == "/api/v1/alerts/custom/k/‹url-key›/"

    record = logging.LogRecord("django.request", logging.WARNING, __file__, 1, "%s: %s", ("Unauthorized", path), None)
    UrlKeyMaskFilter().filter(record)
    assert "hu_abc" not in record.getMessage()


def test_an_executors_cancel_is_a_cancelled_attempt_and_fails_the_run(
    client: Client, custom_integration: Integration, url_key: str
) -> None:
    mapping = custom_integration.settings["mapping"]
    mapping["status_map"]["aborted"] = "cancelled"
    custom_integration.save()
    url = f"/api/v1/alerts/custom/k/{url_key}/"

    running = client.post(url, data=_row("c-1", "running"), content_type="application/json")
    cancelled = client.post(url, data=_row("c-1", "aborted"), content_type="application/json")
    late_running = client.post(url, data=_row("c-1", "running"), content_type="application/json")

    assert running.status_code == cancelled.status_code == late_running.status_code == 202
    attempt = Attempt.objects.get(execution_id="c-1")
    assert attempt.status == Attempt.Status.CANCELLED  # terminal: a later "running" never moves it back
    assert attempt.run.status == "failed"
    assert attempt.run.timeline.filter(summary__icontains="cancelled").exists()


def test_an_unmatched_alert_of_an_ndjson_post_is_reprocessed_through_the_decoder(
    client: Client, custom_integration: Integration, url_key: str
) -> None:
    # reprocessing once parsed the stored body as JSON: "The stored body no longer parses"
    integration_transport_update(integration=custom_integration, actor=None, allow_get=False, decoder_kind="ndjson")
    body = json.dumps({**_row("nd-1"), "job": "ndjson-export"}) + "\n" + json.dumps(_row("nd-2")) + "\n"
    client.post(f"/api/v1/alerts/custom/k/{url_key}/", data=body, content_type="application/x-ndjson")
    unmatched = Alert.objects.get(execution_id="nd-1")
    assert unmatched.outcome == Alert.Outcome.UNMATCHED
    assert "job 'ndjson-export' is not registered" in unmatched.reason

    job_get_or_create(key="ndjson-export", defaults={"schedule": "0 2 * * *", "timezone": "Europe/Berlin"})
    reprocessed = alert_reprocess(alert=unmatched)

    assert (reprocessed.outcome, reprocessed.reason) == (Alert.Outcome.ACCEPTED, "")
    attempt = Attempt.objects.get(execution_id="nd-1")
    assert (attempt.run.job.key, attempt.run.tenant.slug, attempt.status) == ("ndjson-export", "acme-foods", "failed")

"""Hostile inputs nobody here wrote (i61): each test is a fault found by probing, fixed at its rule."""

from __future__ import annotations

import io
import json
from typing import Any
from urllib.parse import urlencode

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import Client, RequestFactory
from gunicorn.http.errors import InvalidChunkSize

from runs.alerts.models import Alert, Delivery
from runs.attempts.models import Attempt
from runs.catalog.models import Integration, Tenant
from runs.catalog.transport import integration_transport_update
from runs.timeline.models import TimelineEvent
from tests.conftest import PostAlert, fixture_path
from tests.factories import UserFactory
from tests.runs.ingest_support import custom_with_url_key, row_mapping

pytestmark = pytest.mark.django_db

SECRET = "hunter2-Sup3rS3cretValue-xyz"
URL_PASSWORD = "pa55w0rd-in-the-userinfo"


def _generic_with_repeats() -> bytes:
    """The generic story's first file, with two keys repeated before its own fields: a secret-named
    key whose first value is the secret (recurring in a note), and ``error`` whose first value holds a
    URL with a password."""
    body = fixture_path("generic", "01-first-failure.json").read_text()
    repeats = (
        f'"password": "{SECRET}", "password": "other-secret-value-1234", '
        f'"error": "cannot reach postgres://etl:{URL_PASSWORD}@db.internal/ledger", '
        f'"operator_note": "retried with {SECRET} in place", '
    )
    return body.replace("{", "{" + repeats, 1).encode()


def test_a_repeated_key_never_stores_its_earlier_secret_value(
    story_tenants: dict[str, Tenant], make_key: Any, post_alert: PostAlert
) -> None:
    """JSON keeps a repeated key's last value; the earlier one is in the text alone, where the in-place
    redaction never looked: it was stored verbatim. Such a body is written out whole from the document,
    and a secret among the hidden values is the post's own, redacted where it recurs."""
    key = make_key("generic", all_tenants=True)
    response = post_alert("generic", _generic_with_repeats(), key)
    assert response.status_code == 202
    delivery = Delivery.objects.get(public_id=response.json()["delivery"])
    assert delivery.outcome == Delivery.Outcome.PROCESSED
    assert SECRET not in delivery.body
    assert URL_PASSWORD not in delivery.body
    stored = json.loads(delivery.body)  # what the parser read: the last values, the secret's redacted
    assert stored["error"] == "Timeout waiting for acknowledgement from ledger gateway"
    assert stored["password"] != "other-secret-value-1234"
    assert stored["operator_note"].startswith("retried with ‹redacted:")
    (alert,) = delivery.alerts.all()
    assert alert.outcome == Alert.Outcome.ACCEPTED


@pytest.fixture
def custom_key(story_tenants: dict[str, Tenant]) -> tuple[Integration, str]:
    """A custom integration reading one row per record (its error under ``msg``) and a URL key to it."""
    return custom_with_url_key("custom-i61", row_mapping(fields={"error_summary": "msg"}))


DECODED_SECRET = "Qm9vZ2llV29vZ2llMTIzNDU2Nzg5"


def _row(run_id: str) -> dict[str, str]:
    return {
        "job": "nightly-invoice-export",
        "tenant": "acme-foods",
        "run_id": run_id,
        "state": "fail",
        "scheduled": "2026-11-28T01:00:00Z",
        "api_key": DECODED_SECRET,
        "msg": f"login with {DECODED_SECRET} refused",
    }


@pytest.mark.parametrize("decoder", ["ndjson", "form"])
def test_a_decoded_posts_secret_is_redacted_where_it_recurs(
    client: Client, custom_key: tuple[Integration, str], decoder: str
) -> None:
    """A secret under a secret name is redacted wherever it recurs in the same post (free text, fields,
    timeline). A body a transport decoder reads (ndjson lines, a form) is not JSON as sent, so its
    secrets were never found: the stored body, the error summaries and the timeline kept them verbatim."""
    integration, key = custom_key
    integration_transport_update(integration=integration, actor=None, allow_get=False, decoder_kind=decoder)
    if decoder == "ndjson":
        body = json.dumps(_row("r-1")) + "\n" + json.dumps(_row("r-2")) + "\n"
    else:
        body = urlencode(_row("r-1"))
    response = client.post(f"/api/v1/alerts/custom/k/{key}/", data=body, content_type="text/plain")
    assert response.status_code == 202
    delivery = Delivery.objects.get(public_id=response.json()["delivery"])
    assert delivery.outcome == Delivery.Outcome.PROCESSED
    alerts = list(delivery.alerts.all())
    assert alerts and all(alert.outcome == Alert.Outcome.ACCEPTED for alert in alerts)
    assert DECODED_SECRET not in delivery.body
    assert not [a for a in alerts if DECODED_SECRET in str([getattr(a, f.attname) for f in a._meta.concrete_fields])]
    assert not Attempt.objects.filter(error_summary__contains=DECODED_SECRET).exists()
    assert not TimelineEvent.objects.filter(summary__contains=DECODED_SECRET).exists()


@pytest.mark.parametrize("decoder", ["ndjson", "envelope"])
def test_a_decoded_line_with_an_integer_too_long_to_read_rejects_the_post(
    client: Client, custom_key: tuple[Integration, str], decoder: str
) -> None:
    """Python refuses to read an integer of more than 4300 digits with a ValueError that is not a
    JSONDecodeError: the ndjson and envelope decoders let it through, so the post's processing failed
    and the delivery was left ``received`` for the sweep instead of being rejected with a 400."""
    integration, key = custom_key
    integration_transport_update(integration=integration, actor=None, allow_get=False, decoder_kind=decoder)
    body = '{"a": ' + "9" * 5000 + "}\n" + json.dumps({"type": "event"}) + "\n"
    response = client.post(f"/api/v1/alerts/custom/k/{key}/", data=body, content_type="text/plain")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert "Exceeds the limit" in response.json()["detail"]
    delivery = Delivery.objects.get()
    assert delivery.outcome == Delivery.Outcome.REJECTED
    assert not delivery.alerts.exists()


@pytest.fixture
def admin(client: Client) -> Client:
    client.force_login(UserFactory(admin=True))
    return client


NESTED_DEEP = "[" * 50000 + "]" * 50000


@pytest.mark.parametrize(
    "mapping",
    [NESTED_DEEP, '{"records": "@", "fields": {"job_key": "\\ud800"}}', '{"records": "@", "n": ' + "9" * 5000 + "}"],
    ids=["nested-deep", "lone-surrogate", "integer-too-long"],
)
def test_the_mapping_editor_and_the_create_page_refuse_json_handover_does_not_store(
    admin: Client, custom_key: tuple[Integration, str], mapping: str
) -> None:
    """A mapping typed into a page is read as a post's body is (``load_json``) and refused when it holds
    what a database cannot store: JSON nested past the decoder's recursion limit and a lone surrogate
    (shown again in the page) were server errors."""
    integration, _ = custom_key
    for action in ("preview", "save"):
        page = admin.post(
            f"/integrations/{integration.public_id}/mapping/", data={"mapping": mapping, "action": action}
        )
        assert page.status_code == 200
        assert page.context["json_error"]
    created = admin.post("/integrations/new/", data={"name": "typed", "mapping": mapping, "key_all_tenants": "on"})
    assert created.status_code == 200
    assert created.context["form"].errors
    integration.refresh_from_db()
    assert integration.settings["mapping"]["fields"]["job_key"] == "job"
    assert not Integration.objects.filter(name="typed").exists()


def test_a_sample_holding_a_lone_surrogate_is_previewed_not_a_server_error(
    admin: Client, custom_key: tuple[Integration, str]
) -> None:
    """A sample's ``\\ud800`` (a JSON escape, as a sender may post it) reached the tenant lookup and the
    API's answer unmended: the mapping page, ``test`` and a PATCH with samples answered 500. Samples are
    mended as ingestion mends a post's records."""
    integration, _ = custom_key
    sample = json.dumps({**_row("r-\ud800"), "tenant": "acme\ud800"})
    mapping = json.dumps(integration.settings["mapping"])
    page = admin.post(
        f"/integrations/{integration.public_id}/mapping/",
        data={"mapping": mapping, "action": "preview", "sample": sample},
    )
    assert page.status_code == 200
    tried = admin.post(
        f"/api/v1/integrations/{integration.public_id}/test/",
        data=f'{{"sample": {sample}}}',
        content_type="application/json",
    )
    assert tried.status_code == 200
    assert "acme\ufffd" in tried.content.decode()
    patched = admin.patch(
        f"/api/v1/integrations/{integration.public_id}/",
        data=f'{{"samples": [{sample}], "mapping": {mapping}}}',
        content_type="application/json",
    )
    assert patched.status_code == 200


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json; api_key=sk_live_abcdef1234567890abcdef",
        "application/json; x=AKIAIOSFODNN7EXAMPLE",
        "application/json; charset=utf-8; via=https://etl:pa55w0rd-in-the-userinfo@proxy.internal/",
    ],
)
def test_a_secret_in_the_content_type_is_not_stored(
    story_tenants: dict[str, Tenant], make_key: Any, client: Client, content_type: str
) -> None:
    """The Delivery keeps the post's Content-Type, which is the sender's text like the body: a key, an
    AWS key id or a URL's password put there was stored verbatim. It is redacted by the free-text rules."""
    key = make_key("generic", all_tenants=True)
    body = fixture_path("generic", "01-first-failure.json").read_bytes()
    response = client.generic(
        "POST", "/api/v1/alerts/generic/", data=body, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {key}"
    )
    assert response.status_code == 202
    delivery = Delivery.objects.get(public_id=response.json()["delivery"])
    assert delivery.outcome == Delivery.Outcome.PROCESSED
    assert delivery.content_type.startswith("application/json;")
    for secret in ("sk_live_abcdef1234567890abcdef", "AKIAIOSFODNN7EXAMPLE", "pa55w0rd-in-the-userinfo"):
        assert secret not in delivery.content_type


class _ChunkSizeLineIsTheBody(io.RawIOBase):
    """A de-chunked WSGI input as gunicorn's fails when a sender declares chunked framing but sends the
    JSON as it is: the first line is read as a chunk size, and the error quotes it."""

    def read(self, size: int = -1) -> bytes:
        raise InvalidChunkSize(f'{{"job": "x", "password": "{SECRET}", "error": "token={JWT}"}}'.encode())


JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"


def test_a_framing_error_quoting_the_body_is_stored_redacted(story_tenants: dict[str, Tenant], make_key: Any) -> None:
    """A malformed chunked post is stored ``rejected`` with the server's reason, and gunicorn's
    ``InvalidChunkSize`` quotes the line it could not read -- for a sender that declared chunked framing
    and sent plain JSON, the body itself: its secrets were stored verbatim in the reason and notes."""
    key = make_key("generic", all_tenants=True)
    environ = RequestFactory()._base_environ(
        PATH_INFO="/api/v1/alerts/generic/",
        REQUEST_METHOD="POST",
        CONTENT_TYPE="application/json",
        HTTP_TRANSFER_ENCODING="chunked",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    environ.pop("CONTENT_LENGTH", None)
    environ["wsgi.input"] = _ChunkSizeLineIsTheBody()
    environ["wsgi.input_terminated"] = True
    status: list[str] = []
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    try:
        payload = json.loads(b"".join(WSGIHandler()(environ, lambda s, h: status.append(s))))
    finally:
        for signal in (request_started, request_finished):
            signal.connect(close_old_connections)
    assert status[0].startswith("400")
    delivery = Delivery.objects.get(public_id=payload["delivery"])
    assert delivery.outcome == Delivery.Outcome.REJECTED
    assert "chunked framing is malformed" in delivery.reason
    stored = json.dumps([delivery.reason, delivery.notes, delivery.body])
    assert SECRET not in stored
    assert JWT not in stored


def test_a_forms_secret_recurring_percent_encoded_is_not_stored(
    client: Client, custom_key: tuple[Integration, str]
) -> None:
    """A form carries a secret percent-encoded: its value under ``api_key`` was redacted, but the same
    secret in another field (``+`` for its space, ``%2F`` for its slash) is not the decoded value the
    post's secrets are matched by, and was stored verbatim in the body."""
    integration, key = custom_key
    integration_transport_update(integration=integration, actor=None, allow_get=False, decoder_kind="form")
    secret = "wJalr+XUtn/FEMI K7MDENG=bPxRfiCY&EXAMPLEKEY"
    body = urlencode({**_row("r-1"), "api_key": secret, "msg": f"login with {secret} refused"})
    response = client.post(
        f"/api/v1/alerts/custom/k/{key}/", data=body, content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 202
    delivery = Delivery.objects.get(public_id=response.json()["delivery"])
    assert delivery.outcome == Delivery.Outcome.PROCESSED
    assert [alert.outcome for alert in delivery.alerts.all()] == [Alert.Outcome.ACCEPTED]
    assert "bPxRfiCY" not in delivery.body
    assert "login+with+‹redacted:" in delivery.body

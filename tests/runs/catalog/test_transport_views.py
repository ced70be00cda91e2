"""Transport on the integration page and API: URL keys issued, transport settings, refused-request counts,
and senders refused for an hour on *needs attention* (admins only)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from runs.alerts.models import Delivery, RefusedRequestCount
from runs.alerts.refusals import refused_request_count
from runs.catalog.models import Integration, IntegrationKey, Tenant
from runs.catalog.services import integration_get_or_create, integration_key_create
from runs.catalog.transport import integration_transport
from tests.factories import UserFactory
from tests.page_forms import page_form
from tests.runs.ingest_support import story_alert

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(client: Client) -> Client:
    client.force_login(UserFactory(admin=True))
    return client


@pytest.fixture
def generic(story_tenants: dict[str, Tenant]) -> Integration:
    return integration_get_or_create(source="generic", name="generic-transport")


def _alert() -> dict[str, Any]:
    return story_alert(execution_id="exec-url-1")


def test_api_issues_a_url_key_whose_address_ingests(admin: Client, generic: Integration) -> None:
    response = admin.post(
        f"/api/v1/integrations/{generic.public_id}/keys/",
        data={"kind": "url", "tenants": ["acme-foods"]},
        content_type="application/json",
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["kind"] == "url" and body["key"].startswith("hu_")
    assert body["url"] == f"http://testserver/api/v1/alerts/generic/k/{body['key']}/"
    assert response["Cache-Control"] == "no-store"
    key = IntegrationKey.objects.get(public_id=body["id"])
    assert key.kind == IntegrationKey.Kind.URL and [t.slug for t in key.tenants.all()] == ["acme-foods"]

    posted = Client().post(
        body["url"].removeprefix("http://testserver"), data=_alert(), content_type="application/json"
    )
    assert posted.status_code == 202
    assert Delivery.objects.get().key == key


def test_api_sets_the_transport_and_reports_refusals(admin: Client, generic: Integration) -> None:
    changed = admin.post(
        f"/api/v1/integrations/{generic.public_id}/transport/",
        data={"allow_get": True, "decoder": "ndjson"},
        content_type="application/json",
    )
    refused_request_count(source="generic", reason="bad_signature", network="198.51.100.0/24", integration=generic)
    refused_request_count(source="generic", reason="no_key", network="192.0.2.0/24")

    assert changed.status_code == 200
    generic.refresh_from_db()
    assert changed.json()["transport"] == {"allow_get": True, "decoder": {"kind": "ndjson"}}
    assert integration_transport(integration=generic).allow_get is True
    detail = admin.get(f"/api/v1/integrations/{generic.public_id}/").json()
    assert [(r["reason"], r["network"], r["count"]) for r in detail["refused_requests"]] == [
        ("bad_signature", "198.51.100.0/24", 1)
    ]
    by_source = admin.get("/api/v1/integrations/refused-requests/?source=generic").json()
    assert by_source[0]["source"] == "generic"
    assert sorted(r["reason"] for r in by_source[0]["rows"]) == ["bad_signature", "no_key"]
    bad = admin.post(
        f"/api/v1/integrations/{generic.public_id}/transport/",
        data={"allow_get": 1, "decoder": "xml"},
        content_type="application/json",
    )
    assert bad.status_code == 400


def test_page_issues_a_url_key_and_shows_the_address_once(admin: Client, generic: Integration) -> None:
    posted = admin.post(f"/integrations/{generic.public_id}/keys/", data={"key_all_tenants": "on", "key_kind": "url"})
    assert posted.status_code == 302
    response = admin.get(posted["Location"])

    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    html = response.content.decode()
    match = re.search(r'class="issued-url">(http://testserver/api/v1/alerts/generic/k/(hu_[^/]+)/)<', html)
    assert match, html
    key = IntegrationKey.objects.get()
    assert key.kind == IntegrationKey.Kind.URL and key.prefix == match.group(2)[:12]
    detail = admin.get(f"/integrations/{generic.public_id}/").content.decode()
    assert "URL key" in detail and match.group(2) not in detail
    assert match.group(2) not in admin.get(posted["Location"], follow=True).content.decode()  # a reload
    assert IntegrationKey.objects.count() == 1


def test_page_saves_the_transport_and_lists_refusals(admin: Client, generic: Integration) -> None:
    refused_request_count(source="generic", reason="rate_limited", network="203.0.113.0/24", integration=generic)

    saved = admin.post(
        f"/integrations/{generic.public_id}/transport/",
        data={"allow_get": "on", "decoder_kind": "envelope", "item_types": "check_in, event"},
    )
    page = admin.get(f"/integrations/{generic.public_id}/").content.decode()
    listing = admin.get("/integrations/").content.decode()

    assert saved.status_code == 302
    generic.refresh_from_db()
    assert integration_transport(integration=generic).decoder == {
        "kind": "envelope",
        "item_types": ["check_in", "event"],
    }
    assert "203.0.113.0/24" in page and "Rate-limited" in page
    assert "Refused requests by source" in listing and "generic" in listing


@pytest.mark.parametrize("minute", [4, 55])  # a streak that began in the hour before last, or in the last hour
def test_a_sender_refused_for_an_hour_shows_on_needs_attention_for_admins_only(
    client: Client, generic: Integration, minute: int, time_machine: Any
) -> None:
    now = datetime(2026, 12, 1, 10, minute, tzinfo=UTC)
    time_machine.move_to(now, tick=False)
    for minutes in (70, 40, 5):
        refused_request_count(
            source="generic",
            reason="wrong_key",
            network="10.1.2.0/24",
            integration=generic,
            at=now - timedelta(minutes=minutes),
        )
    refused_request_count(source="alertmanager", reason="no_key", network="10.9.9.0/24", at=now - timedelta(minutes=5))

    client.force_login(UserFactory(admin=True))
    html = client.get("/handovers/attention/").content.decode()
    assert "Senders refused for an hour or more" in html
    assert "generic-transport: 3 request(s) refused" in html
    assert "alertmanager address" not in html  # refused for 5 minutes only

    client.force_login(UserFactory())
    assert "generic-transport: 3 request(s) refused" not in client.get("/handovers/attention/").content.decode()
    assert RefusedRequestCount.objects.filter(integration=generic).count() == 2  # two hours' rows


def test_conventions_are_edited_as_named_fields_on_the_page_and_the_api(admin: Client, story_tenants: Any) -> None:
    integration = integration_get_or_create(source="alertmanager", name="am-conventions")

    page = admin.get(f"/integrations/{integration.public_id}/").content.decode()
    assert 'name="conv_tenant_from"' in page and "labels.tenant" in page

    saved = admin.post(
        f"/integrations/{integration.public_id}/conventions/",
        data={"conv_tenant_from": "labels.customer", "conv_error_from": "annotations.error, annotations.summary"},
    )
    assert saved.status_code == 302
    integration.refresh_from_db()
    assert integration.settings["tenant_from"] == "labels.customer"
    assert integration.settings["error_from"] == ["annotations.error", "annotations.summary"]

    api = admin.post(
        f"/api/v1/integrations/{integration.public_id}/conventions/",
        data={"values": {"tenant_from": None, "default_environment": "prod"}},
        content_type="application/json",
    )
    assert api.status_code == 200, api.content
    assert api.json()["conventions"]["tenant_from"] == "labels.tenant"  # back to the adapter's default
    assert api.json()["conventions"]["default_environment"] == "prod"
    bad = admin.post(
        f"/api/v1/integrations/{integration.public_id}/conventions/",
        data={"values": {"no_such": "x", "job_from": "labels.job name;drop"}},
        content_type="application/json",
    )
    assert bad.status_code == 400
    assert set(bad.json()["errors"]) == {"no_such", "job_from"}


def test_the_editor_never_pre_ticks_a_delivery_that_cannot_map_and_the_picker_shows_outcomes(
    admin: Client, story_tenants: Any
) -> None:
    integration = integration_get_or_create(source="custom", name="editor-pretick")
    integration.settings = {"mapping": {"fields": {"job_key": "job"}, "defaults": {"environment": "prod"}}}
    integration.save()
    key = integration_key_create(integration=integration, all_tenants=True).key
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    client = Client()
    client.post(
        "/api/v1/alerts/custom/", data={"job": "nightly-invoice-export"}, content_type="application/json", **headers
    )
    client.post("/api/v1/alerts/custom/", data=b"not json", content_type="application/json", **headers)
    processed = Delivery.objects.get(outcome=Delivery.Outcome.PROCESSED)
    assert Delivery.objects.filter(outcome=Delivery.Outcome.REJECTED).count() == 1  # the newest

    page = admin.get(f"/integrations/{integration.public_id}/mapping/")

    form = page.context["form"]
    assert form.initial["deliveries"] == [str(processed.public_id)]
    labels = dict(form.fields["deliveries"].choices)
    assert "1 alert(s), 1 unmatched" in labels[str(processed.public_id)]
    assert "rejected · 0 alert(s)" in " ".join(labels.values())


def test_the_integration_pages_key_form_sent_twice_issues_one_key(admin: Client, generic: Integration) -> None:
    action = f"/integrations/{generic.public_id}/keys/"
    form = page_form(admin, f"/integrations/{generic.public_id}/", action)
    form.update(key_kind="url", key_all_tenants="on")

    first = admin.post(action, form)
    second = admin.post(action, form)

    assert IntegrationKey.objects.filter(integration=generic).count() == 1
    assert second.status_code == 302 and second["Location"] == first["Location"]
    assert "?issued=" in second["Location"]

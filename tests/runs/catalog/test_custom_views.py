"""The custom-integration pages: create with a key shown once, the mapping editor (htmx), reprocess, completeness."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client

from runs.alerts.models import Alert
from runs.attempts.models import Run
from runs.catalog.models import Integration, IntegrationKey, Tenant
from runs.catalog.services import integration_get_or_create, integration_key_create
from tests.conftest import PostAlert
from tests.factories import UserFactory
from tests.runs.custom_support import CustomStory, create_custom_story, data_path, load_mapping, utc

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(client: Client) -> Client:
    client.force_login(UserFactory(admin=True))
    return client


@pytest.fixture
def nomad(story_tenants: dict[str, Tenant], post_alert: PostAlert) -> CustomStory:
    return create_custom_story("nomad", ["borealis-retail"], post_alert)


def editor_url(integration: Integration) -> str:
    return f"/integrations/{integration.public_id}/mapping/"


def fixed(mapping: dict[str, Any]) -> dict[str, Any]:
    mapping = json.loads(json.dumps(mapping))
    mapping["status_map"]["lost"] = "failed"
    return mapping


# --- create -------------------------------------------------------------------------------------


def test_a_custom_integration_is_created_in_the_ui_and_its_key_shown_once_then_it_ingests(
    admin: Client, story_tenants: dict[str, Tenant], post_alert: PostAlert
) -> None:
    form = admin.get("/integrations/new/")
    assert form.status_code == 200 and "Mapping reference" in form.content.decode()
    assert "&quot;job_key&quot;" in form.content.decode()  # the starter mapping to edit

    posted = admin.post(
        "/integrations/new/",
        data={
            "name": "jenkins-prod",
            "mapping": data_path("jenkins", "mapping.json").read_text(),
            "sample": data_path("jenkins", "02-completed-failure.json").read_text(),
            "key_tenants": ["cedar-health"],
            "key_label": "jenkins controller",
        },
    )
    assert posted.status_code == 302 and "/keys/?issued=" in posted["Location"]
    response = admin.get(posted["Location"])

    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    assert "Integration &#x27;jenkins-prod&#x27; created." in response.content.decode()
    html = response.content.decode()
    key = re.search(r'<code class="issued-key">([^<]+)</code>', html).group(1)  # type: ignore[union-attr]
    integration = Integration.objects.get(name="jenkins-prod")
    assert integration.source == "custom" and integration.settings == {"mapping": load_mapping("jenkins")}
    record = IntegrationKey.objects.get(integration=integration)
    assert key.startswith(record.prefix) and key not in record.secret_hash
    assert list(record.tenants.values_list("slug", flat=True)) == ["cedar-health"]
    assert record.label == "jenkins controller" and not record.all_tenants
    assert key not in admin.get(f"/integrations/{integration.public_id}/").content.decode()  # never again
    reloaded = admin.get(posted["Location"], follow=True)
    assert key not in reloaded.content.decode() and "shown only once" in reloaded.content.decode()
    assert IntegrationKey.objects.filter(integration=integration).count() == 1

    posted = post_alert("custom", data_path("jenkins", "02-completed-failure.json"), key)

    assert [a["outcome"] for a in posted.json()["alerts"]] == ["accepted"]
    assert Run.objects.get().tenant.slug == "cedar-health"


def test_creating_refuses_a_bad_mapping_a_failing_sample_or_no_tenant(
    admin: Client, story_tenants: dict[str, Tenant]
) -> None:
    mapping = load_mapping("jenkins")
    mapping["fields"]["status"] = "build.status ||"

    bad = admin.post(
        "/integrations/new/",
        data={"name": "jenkins-prod", "mapping": json.dumps(mapping), "key_tenants": ["cedar-health"]},
    )
    failing = admin.post(
        "/integrations/new/",
        data={
            "name": "jenkins-prod",
            "mapping": data_path("jenkins", "mapping.json").read_text(),
            "sample": json.dumps({"name": "nightly-invoice-export", "build": {"status": "NOT_BUILT"}}),
            "key_tenants": ["cedar-health"],
        },
    )
    untied = admin.post(
        "/integrations/new/", data={"name": "jenkins-prod", "mapping": data_path("jenkins", "mapping.json").read_text()}
    )

    assert "mapping.fields.status" in bad.content.decode()
    assert "not a valid JMESPath expression" in bad.content.decode()
    assert "samples.0" in failing.content.decode() and "the value &#x27;NOT_BUILT&#x27; has no mapping" in (
        failing.content.decode()
    )
    assert "Bind the key to at least one tenant" in untied.content.decode()
    assert not Integration.objects.filter(name="jenkins-prod").exists()
    assert not IntegrationKey.objects.exists()


def test_a_key_is_issued_from_the_integration_page_and_shown_once(admin: Client, nomad: CustomStory) -> None:
    posted = admin.post(
        f"/integrations/{nomad.integration.public_id}/keys/", data={"key_all_tenants": "on", "key_label": "second"}
    )
    assert posted.status_code == 302 and "?issued=" in posted["Location"]
    response = admin.get(posted["Location"])
    reloaded = admin.get(posted["Location"])

    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    key = re.search(r'<code class="issued-key">([^<]+)</code>', response.content.decode()).group(1)  # type: ignore[union-attr]
    record = IntegrationKey.objects.get(label="second")
    assert record.all_tenants and key.startswith(record.prefix)
    assert response.content.decode().count(key) == 1
    assert reloaded.status_code == 302 and reloaded["Location"] == f"/integrations/{nomad.integration.public_id}/"
    assert key not in admin.get(reloaded["Location"]).content.decode()
    assert IntegrationKey.objects.filter(label="second").count() == 1
    refused = admin.post(f"/integrations/{nomad.integration.public_id}/keys/", data={"key_label": "nobody"})
    assert refused.status_code == 302 and not IntegrationKey.objects.filter(label="nobody").exists()


# --- the editor ------------------------------------------------------------------------------------


def test_the_editor_shows_the_mapping_and_the_newest_delivery_mapped(admin: Client, nomad: CustomStory) -> None:
    nomad.post("01-first-failure.json", at=utc(2026, 11, 28, 1, 19, 41))
    nomad.post("05-lost-allocation.json", at=utc(2026, 11, 28, 1, 35))

    page = admin.get(editor_url(nomad.integration))

    assert page.status_code == 200
    html = page.content.decode()
    assert "Events[?Topic==&#x27;Allocation&#x27;].Payload.Allocation" in html  # the saved mapping
    assert 'hx-post="' in html and 'id="mapping-result"' in html
    # the newest delivery (05) is picked and fails on its status
    assert "the value &#x27;lost&#x27; has no mapping" in html
    assert "1 of 1 records do not map" in html
    assert "Reprocess 1 unmatched alert of this integration" in html


def test_the_htmx_fragment_maps_a_pasted_sample_field_by_field_without_saving(
    admin: Client, nomad: CustomStory
) -> None:
    saved = json.loads(json.dumps(nomad.integration.settings))
    response = admin.post(
        editor_url(nomad.integration),
        data={
            "mapping": json.dumps(load_mapping("nomad")),
            "sample": data_path("nomad", "01-first-failure.json").read_text(),
            "action": "preview",
        },
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 200
    html = response.content.decode()
    assert html.startswith('<div id="mapping-result"') and "<html" not in html  # the fragment only
    assert "2 records, all mapped" in html and "ready to save" in html
    assert "2026-11-28T01:00:03.482113Z" in html  # started_at, nanoseconds cut to µs
    assert "window 2026-11-26 23:00:00Z → 2026-11-27 23:00:00Z: scheduled for 2026-11-28 01:00:00Z" in html
    assert "(default)" in html  # the environment comes from the integration's default
    nomad.integration.refresh_from_db()
    assert nomad.integration.settings == saved


def test_the_fragment_shows_every_error_of_a_bad_mapping(admin: Client, nomad: CustomStory) -> None:
    mapping = load_mapping("nomad")
    mapping["fields"]["execution_id"] = "length(ID"
    mapping["fields"]["tenant"] = "Meta.tenant"
    mapping["status_map"]["down"] = "sad"

    response = admin.post(
        editor_url(nomad.integration),
        data={"mapping": json.dumps(mapping), "sample": data_path("nomad", "02-retry-failure.json").read_text()},
        HTTP_HX_REQUEST="true",
    )

    html = response.content.decode()
    assert "Errors in the mapping" in html
    assert "fields.execution_id" in html and "not a valid JMESPath expression" in html
    assert "status_map.down" in html and "&#x27;sad&#x27; is not one of" in html
    assert "tenant: `Meta.tenant` found nothing and the mapping has no default" in html
    assert "not ready" in html
    not_json = admin.post(
        editor_url(nomad.integration), data={"mapping": "{fields:", "sample": "{}"}, HTTP_HX_REQUEST="true"
    )
    assert "The mapping is not valid JSON" in not_json.content.decode()


def test_saving_is_refused_while_a_chosen_sample_fails(admin: Client, nomad: CustomStory) -> None:
    lost = nomad.post("05-lost-allocation.json", at=utc(2026, 11, 28, 1, 35))
    delivery = Alert.objects.get(public_id=lost.json()["alerts"][0]["id"]).delivery
    before = json.loads(json.dumps(nomad.integration.settings))
    changed = load_mapping("nomad")
    changed["status_map"]["pending"] = "running"

    refused = admin.post(
        editor_url(nomad.integration),
        data={"mapping": json.dumps(changed), "deliveries": [str(delivery.public_id)], "action": "save"},
    )
    no_sample = admin.post(
        editor_url(nomad.integration), data={"mapping": json.dumps(fixed(changed)), "action": "save"}
    )

    assert refused.status_code == 400
    html = refused.content.decode()
    assert "Not saved." in html and "samples.0" in html and "the value &#x27;lost&#x27; has no mapping" in html
    assert no_sample.status_code == 400 and "Choose at least one sample" in no_sample.content.decode()
    nomad.integration.refresh_from_db()
    assert nomad.integration.settings == before


def test_after_a_fix_the_editor_saves_and_the_page_reprocesses_the_unmatched_alerts(
    admin: Client, nomad: CustomStory
) -> None:
    nomad.post("01-first-failure.json", at=utc(2026, 11, 28, 1, 19, 41))
    lost = nomad.post("05-lost-allocation.json", at=utc(2026, 11, 28, 1, 35))
    alert = Alert.objects.get(public_id=lost.json()["alerts"][0]["id"])
    assert alert.outcome == "unmatched"

    saved = admin.post(
        f"{editor_url(nomad.integration)}?delivery={alert.delivery.public_id}",
        data={
            "mapping": json.dumps(fixed(load_mapping("nomad"))),
            "deliveries": [str(alert.delivery.public_id)],
            "sample": data_path("nomad", "04-next-run-ok.json").read_text(),
            "action": "save",
        },
    )

    assert saved.status_code == 302 and saved["Location"] == f"/integrations/{nomad.integration.public_id}/"
    nomad.integration.refresh_from_db()
    assert nomad.integration.settings["mapping"]["status_map"]["lost"] == "failed"

    detail = admin.get(saved["Location"]).content.decode()
    assert "Mapping saved: 2 sample(s) map." in detail
    assert "Reprocess unmatched alerts of this integration" in detail

    reprocessed = admin.post(f"/integrations/{nomad.integration.public_id}/reprocess/", follow=True)

    assert "Reprocessed 1 unmatched alert: 1 accepted." in reprocessed.content.decode()
    alert.refresh_from_db()
    assert alert.outcome == "accepted" and alert.attempt is not None
    assert (alert.attempt.source_number, alert.attempt.status) == (3, "failed")


def test_a_delivery_from_the_inbox_can_be_picked_by_id(
    admin: Client, nomad: CustomStory, django_assert_max_num_queries: Any
) -> None:
    first = nomad.post("01-first-failure.json", at=utc(2026, 11, 28, 1, 19, 41))
    nomad.post("04-next-run-ok.json", at=utc(2026, 11, 29, 1, 14, 6))
    delivery = Alert.objects.get(public_id=first.json()["alerts"][0]["id"]).delivery

    # session, user, preferences, unread notifications; the integration; the picked delivery (validated);
    # recent deliveries; the unmatched count; the samples' bodies; one job and one tenant lookup for both
    # records (cached)
    with django_assert_max_num_queries(11):
        page = admin.get(f"{editor_url(nomad.integration)}?delivery={delivery.public_id}")
    html = page.content.decode()

    assert f'value="{delivery.public_id}"' in html and "checked" in html
    assert "2 records, all mapped" in html  # 01 holds two allocation events


def test_the_editor_is_for_staff_and_custom_integrations_only(
    client: Client, nomad: CustomStory, story_tenants: dict[str, Tenant]
) -> None:
    url = editor_url(nomad.integration)
    client.force_login(UserFactory())
    mapping = dict(nomad.integration.settings["mapping"])
    assert client.get(url).status_code == 302
    saved = client.post(url, {"mapping": json.dumps({"fields": {}}), "action": "save"})
    assert saved.status_code == 302 and saved["Location"].startswith("/admin/login/")
    assert client.post(f"/integrations/{nomad.integration.public_id}/reprocess/").status_code == 302
    nomad.integration.refresh_from_db()
    assert nomad.integration.settings["mapping"] == mapping
    client.force_login(UserFactory(admin=True))
    generic = integration_get_or_create(source="generic")
    assert client.get(editor_url(generic)).status_code == 404


def test_the_mapping_exports_as_a_json_download(admin: Client, nomad: CustomStory) -> None:
    response = admin.get(f"/integrations/{nomad.integration.public_id}/mapping/export/")

    assert response["Content-Disposition"] == 'attachment; filename="nomad-prod-mapping.json"'
    assert response.json() == {
        "format": "handover.mapping/v1",
        "name": "nomad-prod",
        "source": "custom",
        "mapping": load_mapping("nomad"),
    }
    # importing is pasting the export into an editor: the envelope is accepted as the mapping
    html = admin.post(
        editor_url(nomad.integration),
        data={"mapping": response.content.decode(), "sample": data_path("nomad", "04-next-run-ok.json").read_text()},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert "ready to save" in html


# --- the integration page ---------------------------------------------------------------------------


def test_the_integration_page_shows_completeness_and_the_fields_most_often_missing(
    admin: Client, nomad: CustomStory, story_tenants: dict[str, Tenant], django_assert_max_num_queries: Any
) -> None:
    for name in ["01-first-failure.json", "02-retry-failure.json", "04-next-run-ok.json", "05-lost-allocation.json"]:
        nomad.post(name, at=utc(2026, 11, 29, 2))
    other = integration_get_or_create(source="generic")
    integration_key_create(integration=other, tenants=[story_tenants["acme-foods"]])

    # session, user, preferences, unread notifications; the integration; the completeness aggregate; the
    # unmatched count; keys and their tenants; the tenants of the "issue a key" form; recent deliveries;
    # the refused-request counts
    with django_assert_max_num_queries(12):
        page = admin.get(f"/integrations/{nomad.integration.public_id}/")

    html = page.content.decode()
    assert "Alert completeness" in html
    assert (
        "Most often missing: <strong>a window</strong> (100% of alerts lack it), "
        "<strong>a correlation reference</strong> (100% of alerts lack it)."
    ) in html
    assert "<code>nightly-invoice-export</code></td><td>5</td><td>100% <span" in html
    assert "Mapping editor" in html and "1 unmatched alert of this integration" in html
    generic_page = admin.get(f"/integrations/{other.public_id}/").content.decode()
    assert "No attempt alerts yet." in generic_page and "Mapping editor" not in generic_page


def test_the_integration_list_links_to_new_custom_integrations(admin: Client) -> None:
    assert 'href="/integrations/new/"' in admin.get("/integrations/").content.decode()

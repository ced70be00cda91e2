"""``/api/v1/integrations/`` for custom integrations: create, change, test, export/import, reprocess."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from runs.alerts.models import Alert
from runs.catalog.models import Integration, IntegrationKey, Tenant
from runs.catalog.services import integration_get_or_create
from tests.conftest import PostAlert
from tests.factories import UserFactory
from tests.runs.custom_support import CustomStory, admin_api, create_custom_story, data_path, load_mapping, utc

pytestmark = pytest.mark.django_db


@pytest.fixture
def api() -> Client:
    return admin_api()


@pytest.fixture
def nomad(story_tenants: dict[str, Tenant], post_alert: PostAlert) -> CustomStory:
    return create_custom_story("nomad", ["borealis-retail"], post_alert)


def post(client: Client, url: str, data: Any) -> Any:
    return client.post(url, data=data, content_type="application/json")


def sample(fmt: str, name: str) -> Any:
    return json.loads(data_path(fmt, name).read_text())


# --- create -------------------------------------------------------------------------------------


def test_create_returns_the_integration_and_its_key_once(api: Client, story_tenants: dict[str, Tenant]) -> None:
    response = post(
        api,
        "/api/v1/integrations/",
        {
            "name": "jenkins-prod",
            "mapping": load_mapping("jenkins"),
            "samples": [sample("jenkins", "01-started.json"), sample("jenkins", "05-next-run-ok.json")],
            "key": {"tenants": ["Cedar-Health"], "label": "controller"},
        },
    )

    assert response.status_code == 201
    body = response.json()
    integration = Integration.objects.get(public_id=body["id"])
    assert (body["name"], body["source"], body["endpoint"]) == ("jenkins-prod", "custom", "/api/v1/alerts/custom/")
    assert body["mapping"] == load_mapping("jenkins") == integration.settings["mapping"]
    key = IntegrationKey.objects.get(integration=integration)
    assert body["issued_key"] | {"key": "…"} == {
        "id": str(key.public_id),
        "kind": "header",
        "prefix": key.prefix,
        "key": "…",
        "url": None,
        "all_tenants": False,
        "tenants": ["cedar-health"],
    }
    assert body["issued_key"]["key"].startswith(key.prefix)
    detail = api.get(f"/api/v1/integrations/{body['id']}/").json()
    assert "issued_key" not in detail and body["issued_key"]["key"] not in json.dumps(detail)


def test_create_without_a_key_and_inactive(api: Client) -> None:
    response = post(
        api, "/api/v1/integrations/", {"name": "nomad-staging", "mapping": load_mapping("nomad"), "is_active": False}
    )

    assert response.status_code == 201
    assert response.json()["issued_key"] is None and response.json()["is_active"] is False
    assert not IntegrationKey.objects.exists()


@pytest.mark.parametrize(
    ("payload", "status", "errors"),
    [
        ({"name": "x", "mapping": ["job"]}, 400, {"mapping": ["Give a JSON object."]}),
        ({"mapping": {}}, 400, {"name": ["This field is required."]}),
        (
            {"name": "x", "mapping": {"fields": {"status": "a.["}}},
            400,
            {"mapping.fields.status", "mapping.fields.job_key", "mapping.fields.scheduled_for"},
        ),
        ({"name": "x", "mapping": "job: nightly", "samples": []}, 400, {"mapping": ["Give a JSON object."]}),
        ({"name": "x", "mapping": "NOMAD", "key": {"tenants": []}}, 400, {"key.tenants"}),
        (
            {"name": "x", "mapping": "NOMAD", "key": {"tenants": ["nobody"]}},
            400,
            {"key.tenants": ["No tenant 'nobody'."]},
        ),
        ({"name": "x", "mapping": "NOMAD", "samples": [{"Events": []}]}, 400, {"samples.0"}),
    ],
)
def test_create_refuses_bad_input_naming_every_field(
    api: Client, story_tenants: dict[str, Tenant], payload: dict[str, Any], status: int, errors: Any
) -> None:
    if payload.get("mapping") == "NOMAD":
        payload = {**payload, "mapping": load_mapping("nomad")}

    response = post(api, "/api/v1/integrations/", payload)

    assert response.status_code == status
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    if isinstance(errors, dict):
        assert body["errors"] == errors
    else:
        assert errors <= set(body["errors"])
    assert not Integration.objects.filter(name="x").exists() and not IntegrationKey.objects.exists()


def test_create_refuses_a_taken_name_with_409(api: Client, nomad: CustomStory) -> None:
    response = post(api, "/api/v1/integrations/", {"name": "nomad-prod", "mapping": load_mapping("nomad")})

    assert response.status_code == 409 and response.json()["errors"] == {"name": ["This name is taken."]}
    assert Integration.objects.filter(name="nomad-prod").count() == 1
    assert IntegrationKey.objects.filter(integration__name="nomad-prod").count() == 1


def test_integrations_api_is_for_admins_only(client: Client, nomad: CustomStory) -> None:
    url = f"/api/v1/integrations/{nomad.integration.public_id}/"
    assert client.post("/api/v1/integrations/", data={}, content_type="application/json").status_code == 401
    person = admin_api(UserFactory())
    assert post(person, "/api/v1/integrations/", {"name": "x", "mapping": {}}).status_code == 403
    assert person.patch(url, data={"name": "y"}, content_type="application/json").status_code == 403
    assert post(person, f"{url}test/", {"sample": {}}).status_code == 403
    assert person.get(f"{url}mapping/").status_code == 403
    assert post(person, f"{url}reprocess/", {}).status_code == 403
    nomad.integration.refresh_from_db()
    assert nomad.integration.name == "nomad-prod" and not Integration.objects.filter(name="x").exists()


# --- list and change ------------------------------------------------------------------------------


def test_list_shows_the_mapping_of_custom_integrations_only(api: Client, nomad: CustomStory) -> None:
    integration_get_or_create(source="generic")

    results = {i["source"]: i for i in api.get("/api/v1/integrations/").json()["results"]}

    assert results["custom"]["mapping"] == load_mapping("nomad")
    assert results["generic"]["mapping"] is None


def test_update_changes_the_mapping_only_when_every_sample_maps(api: Client, nomad: CustomStory) -> None:
    url = f"/api/v1/integrations/{nomad.integration.public_id}/"
    lost = sample("nomad", "05-lost-allocation.json")
    mapping = load_mapping("nomad")

    refused = api.patch(url, data={"mapping": mapping, "samples": [lost]}, content_type="application/json")
    mapping["status_map"]["lost"] = "failed"
    accepted = api.patch(
        url, data={"mapping": mapping, "samples": [lost], "name": "nomad-eu"}, content_type="application/json"
    )

    assert refused.status_code == 400
    assert refused.json()["errors"]["samples.0"][1] == (
        "record 0: status: the value 'lost' has no mapping: add it to status_map "
        "(to one of queued, running, succeeded, failed, timed_out, cancelled) (found by `ClientStatus`)"
    )
    assert accepted.status_code == 200
    assert accepted.json()["mapping"]["status_map"]["lost"] == "failed" and accepted.json()["name"] == "nomad-eu"
    nomad.integration.refresh_from_db()
    assert nomad.integration.settings["mapping"] == mapping and nomad.integration.name == "nomad-eu"


def test_update_refuses_built_in_integrations_and_taken_names(api: Client, nomad: CustomStory) -> None:
    generic = integration_get_or_create(source="generic")

    built_in = api.patch(
        f"/api/v1/integrations/{generic.public_id}/", data={"name": "g"}, content_type="application/json"
    )
    taken = api.patch(
        f"/api/v1/integrations/{nomad.integration.public_id}/",
        data={"name": "generic"},
        content_type="application/json",
    )
    missing = api.patch(
        "/api/v1/integrations/00000000-0000-4000-8000-000000000000/", data={}, content_type="application/json"
    )

    assert built_in.status_code == 409 and "built-in generic integration" in built_in.json()["detail"]
    assert taken.status_code == 409
    assert missing.status_code == 404
    generic.refresh_from_db()
    nomad.integration.refresh_from_db()
    assert generic.name != "g" and nomad.integration.name == "nomad-prod"
    assert api.put(f"/api/v1/integrations/{generic.public_id}/", data={}).status_code == 405


# --- test, export/import, reprocess ---------------------------------------------------------------


def test_the_test_action_maps_a_sample_without_saving(api: Client, nomad: CustomStory) -> None:
    url = f"/api/v1/integrations/{nomad.integration.public_id}/test/"

    response = post(api, url, {"sample": sample("nomad", "02-retry-failure.json")})

    assert response.status_code == 200
    body = response.json()
    assert (body["is_ok"], body["mapping_errors"], body["error"], body["record_count"]) == (True, {}, "", 1)
    [record] = body["records"]
    assert record["problems"] == [] and record["kind"] == "attempt"
    fields = {f["name"]: f for f in record["fields"]}
    assert fields["attempt_number"] | {"spec": ""} == {
        "name": "attempt_number",
        "spec": "",
        "source": "mapping",
        "found": "2",
        "value": "2",
        "error": "",
        "note": "",
    }
    assert fields["scheduled_at"]["value"] == "2026-11-28T01:20:10Z"
    assert fields["environment"]["source"] == "default"
    assert record["placement"] == [
        "window 2026-11-26 23:00:00Z → 2026-11-27 23:00:00Z: scheduled for 2026-11-28 01:00:00Z, by the job's "
        "schedule '0 2 * * *' (Europe/Berlin; a target's override may differ)"
    ]
    assert not Alert.objects.exists()


def test_the_test_action_tries_another_mapping_or_a_stored_delivery(api: Client, nomad: CustomStory) -> None:
    url = f"/api/v1/integrations/{nomad.integration.public_id}/test/"
    lost = nomad.post("05-lost-allocation.json", at=utc(2026, 11, 28, 1, 35))
    delivery = Alert.objects.get(public_id=lost.json()["alerts"][0]["id"]).delivery
    broken = {**load_mapping("nomad"), "timezone": "Europe/Berlinn"}

    stored = post(api, url, {"delivery": str(delivery.public_id)}).json()
    tried = post(api, url, {"sample": sample("nomad", "04-next-run-ok.json"), "mapping": broken}).json()
    not_json_sample = post(api, url, {"sample": "not a payload"}).json()

    assert stored["is_ok"] is False and "the value 'lost' has no mapping" in stored["records"][0]["problems"][0]
    assert tried["is_ok"] is False and tried["mapping_errors"] == {
        "timezone": ["unknown time zone 'Europe/Berlinn'; use an IANA name like 'Europe/Berlin'"]
    }
    # a JSON string is a valid JSON document: it maps to one record with every reason
    assert not_json_sample["record_count"] == 1 and not_json_sample["records"][0]["problems"]
    assert post(api, url, {}).status_code == 400
    assert post(api, url, {"sample": {}, "delivery": str(delivery.public_id)}).status_code == 400
    other = post(api, url, {"delivery": "00000000-0000-4000-8000-000000000000"})
    assert other.status_code == 400 and other.json()["errors"] == {
        "delivery": ["No such delivery of this integration."]
    }
    generic = integration_get_or_create(source="generic")
    assert post(api, f"/api/v1/integrations/{generic.public_id}/test/", {"sample": {}}).status_code == 409


def test_the_mapping_exports_and_imports_as_json(api: Client, nomad: CustomStory, post_alert: PostAlert) -> None:
    exported = api.get(f"/api/v1/integrations/{nomad.integration.public_id}/mapping/").json()
    copy = create_custom_story("jenkins", ["cedar-health"], post_alert)
    url = f"/api/v1/integrations/{copy.integration.public_id}/mapping/"

    imported = api.put(
        url,
        data={**exported, "samples": [sample("nomad", "01-first-failure.json")]},
        content_type="application/json",
    )
    refused = api.put(url, data={"mapping": {"fields": {"job_key": "`"}}}, content_type="application/json")

    assert exported == {
        "format": "handover.mapping/v1",
        "name": "nomad-prod",
        "source": "custom",
        "mapping": load_mapping("nomad"),
    }
    assert imported.status_code == 200 and imported.json()["mapping"] == load_mapping("nomad")
    assert refused.status_code == 400 and "mapping.fields.job_key" in refused.json()["errors"]
    copy.integration.refresh_from_db()
    assert copy.integration.settings["mapping"] == load_mapping("nomad")


def test_reprocess_action_reapplies_unmatched_alerts_after_a_fix(api: Client, nomad: CustomStory) -> None:
    nomad.post("01-first-failure.json", at=utc(2026, 11, 28, 1, 19, 41))
    nomad.post("05-lost-allocation.json", at=utc(2026, 11, 28, 1, 35))
    url = f"/api/v1/integrations/{nomad.integration.public_id}/"

    unchanged = post(api, f"{url}reprocess/", {}).json()
    mapping = load_mapping("nomad")
    mapping["status_map"]["lost"] = "failed"
    api.patch(url, data={"mapping": mapping}, content_type="application/json")
    fixed = post(api, f"{url}reprocess/", {}).json()
    again = post(api, f"{url}reprocess/", {}).json()

    assert unchanged | {"summary": ""} == {
        "tried": 1,
        "outcomes": {"unmatched": 1},
        "failures": [],
        "remaining": 0,
        "summary": "",
    }
    assert fixed == {
        "tried": 1,
        "outcomes": {"accepted": 1},
        "failures": [],
        "remaining": 0,
        "summary": "Reprocessed 1 unmatched alert: 1 accepted.",
    }
    assert again["tried"] == 0 and again["summary"] == "No unmatched alerts to reprocess."
    assert Alert.objects.filter(outcome="unmatched").count() == 0

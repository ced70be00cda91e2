"""The catalogue of ready-made mappings: every entry's samples through the real endpoint, posted twice
(nothing lost, duplicates change nothing), with the entry's own transport; import and export as JSON."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from typing import Any

import pytest
from django.test import Client

from runs.alerts.mapping import mapping_from_json
from runs.alerts.models import Alert, Delivery
from runs.alerts.parsers.custom.catalogue.entries import CatalogueEntry, catalogue_entries, catalogue_entry
from runs.alerts.parsers.custom.compiler import mapping_errors
from runs.attempts.models import Attempt, Run
from runs.catalog.keys import integration_security_update
from runs.catalog.models import Integration, IntegrationKey, Tenant
from runs.catalog.services import integration_get_or_create, integration_key_create
from runs.catalog.transport import integration_transport_update
from runs.timeline.models import TimelineEvent

pytestmark = pytest.mark.django_db
SECRET_ENV = "HANDOVER_SIGNING_SECRET_CATALOGUE"
SECRET = "catalogue-test-secret"
ENTRIES = [e.name for e in catalogue_entries()]


def test_the_catalogue_has_entries_each_documented_with_samples() -> None:
    assert len(ENTRIES) >= 4
    for entry in catalogue_entries():
        assert mapping_errors(entry.mapping) == {}, entry.name
        assert entry.documentation and all(link.startswith("https://") for link in entry.documentation)
        assert entry.covers and entry.conventions and entry.samples
        # importable as it stands: the file is an export document
        assert mapping_from_json(json.dumps(entry.document)) == entry.mapping


def _connect(entry: CatalogueEntry, monkeypatch: pytest.MonkeyPatch) -> tuple[Integration, str]:
    integration = integration_get_or_create(source="custom", name=f"{entry.name}-{uuid.uuid4().hex[:4]}")
    integration.settings = {"mapping": entry.mapping}
    integration.save()
    transport = entry.transport
    integration_transport_update(
        integration=integration,
        actor=None,
        allow_get=bool(transport.get("allow_get")),
        decoder_kind=transport.get("decoder", "json"),
    )
    signature = transport.get("signature")
    if signature:
        monkeypatch.setenv(SECRET_ENV, SECRET)
        integration_security_update(
            integration=integration,
            actor=None,
            redact_names=[],
            signing_secret_env=SECRET_ENV,
            signature_header=signature["signature_header"],
            signature_scheme=signature["scheme"],
            signature_algorithm=signature["algorithm"],
            signature_encoding=signature["encoding"],
        )
    kind = IntegrationKey.Kind.URL if transport.get("key") == "url" else IntegrationKey.Kind.HEADER
    issued = integration_key_create(integration=integration, all_tenants=True, kind=kind)
    return integration, issued.key


def _send(client: Client, entry: CatalogueEntry, key: str, sample: dict[str, Any]) -> Any:
    is_url = entry.transport.get("key") == "url"
    address = f"/api/v1/alerts/custom/k/{key}/" if is_url else "/api/v1/alerts/custom/"
    headers: dict[str, str] = {} if is_url else {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    if sample.get("method") == "GET":
        return client.get(f"{address}?{sample['query']}", **headers)
    body = json.dumps(sample["body"]).encode() if "body" in sample else sample["text"].encode()
    signature = entry.transport.get("signature")
    if signature:
        digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        header = "HTTP_" + signature["signature_header"].upper().replace("-", "_")
        headers[header] = f"sha256={digest}"
    content_type = sample.get("content_type", "application/json")
    return client.post(address, data=body, content_type=content_type, **headers)


def _counts() -> tuple[int, int, int, int]:
    originals = Alert.objects.filter(duplicate_of__isnull=True).count()
    return Run.objects.count(), Attempt.objects.count(), TimelineEvent.objects.count(), originals


@pytest.mark.parametrize("name", ENTRIES)
def test_each_entry_maps_its_samples_through_the_endpoint_and_a_second_posting_changes_nothing(
    name: str, client: Client, story_tenants: dict[str, Tenant], monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = catalogue_entry(name)
    assert entry is not None
    integration, key = _connect(entry, monkeypatch)

    for sample in entry.samples:
        response = _send(client, entry, key, sample)
        assert response.status_code == 202, (sample["name"], response.content)
        alert = Alert.objects.get(public_id=response.json()["alerts"][0]["id"])
        expect = sample["expect"]
        assert alert.outcome == expect["outcome"], (sample["name"], alert.reason)
        assert alert.execution_id == expect["execution_id"]
        assert alert.attempt is not None and alert.attempt.status == expect["status"], sample["name"]
        assert alert.run is not None and alert.run.job.key == "nightly-invoice-export"
        assert alert.run.tenant.slug == "acme-foods"

    first = _counts()
    deliveries = Delivery.objects.filter(integration=integration).count()
    for sample in entry.samples:
        again = _send(client, entry, key, sample)
        assert again.status_code == 202
        assert [a["outcome"] for a in again.json()["alerts"]] == ["duplicate"], sample["name"]

    assert _counts() == first  # duplicates change nothing
    assert Delivery.objects.filter(integration=integration).count() == deliveries + len(entry.samples)  # nothing lost
    assert Alert.objects.filter(integration=integration).count() == 2 * len(entry.samples)


def test_catalogue_api_lists_entries_and_exports_an_importable_mapping(admin_client: Client) -> None:
    listing = admin_client.get("/api/v1/integrations/catalogue/")
    assert listing.status_code == 200
    names = [e["name"] for e in listing.json()]
    assert names == ENTRIES
    one = admin_client.get("/api/v1/integrations/catalogue/github-actions-workflow-run/")
    assert one.status_code == 200
    body = one.json()
    assert body["export"]["format"] == "handover.mapping/v1"
    assert body["transport"]["signature"]["scheme"] == "body"
    assert admin_client.get("/api/v1/integrations/catalogue/no-such-tool/").status_code == 404

    integration = integration_get_or_create(source="custom", name="imported-from-catalogue")
    imported = admin_client.put(
        f"/api/v1/integrations/{integration.public_id}/mapping/", data=body["export"], content_type="application/json"
    )
    assert imported.status_code == 200, imported.content
    integration.refresh_from_db()
    assert integration.settings["mapping"] == catalogue_entry("github-actions-workflow-run").mapping  # type: ignore[union-attr]


def test_the_editor_loads_a_catalogue_entry_with_its_sample(
    admin_client: Client, story_tenants: dict[str, Tenant]
) -> None:
    integration = integration_get_or_create(source="custom", name="editor-catalogue")

    page = admin_client.get(f"/integrations/{integration.public_id}/mapping/?catalogue=aws-batch-job-state-change")

    assert page.status_code == 200
    html = page.content.decode()
    assert "AWS Batch: Job State Change events" in html and "GitHub Actions: workflow_run webhook" in html
    assert "detail.jobName" in html  # the mapping is in the editor, not saved
    preview = page.context["preview"]
    assert preview.samples[0].sample.label == "aws-batch-job-state-change sample"
    assert preview.samples[0].records[0].problems == []
    integration.refresh_from_db()
    assert integration.settings.get("mapping") in (None, {})

"""A page per source (``/sources/<source>/``) and its API (``/api/v1/sources/``): the guide, the
integrations, refused requests at the address and recent deliveries with their alerts' outcomes."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from runs.alerts.models import Alert, Delivery, RefusedRequestCount
from runs.alerts.parsers.registry import available_sources
from runs.catalog.models import Tenant
from runs.catalog.services import integration_get_or_create
from runs.catalog.sources import source_guide
from tests.conftest import PostAlert, fixture_path
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

WRONG_KEY = "hk_" + "0" * 40


@pytest.fixture
def admin(client: Client) -> Client:
    client.force_login(UserFactory(admin=True))
    return client


@pytest.fixture
def posted(story_tenants: dict[str, Tenant], make_key: Any, post_alert: PostAlert) -> dict[str, Any]:
    """Alertmanager: one accepted and one unmatched post, two posts with a wrong key; Grafana: one post."""
    tenants = [story_tenants["dunmore-pharmacy"]]
    am_key = make_key("alertmanager", tenants=tenants, name="Prometheus prod")
    make_key("alertmanager", tenants=tenants, name="Prometheus staging")
    accepted = post_alert("alertmanager", fixture_path("alertmanager", "01-first-failure.json"), am_key)
    unmatched = post_alert("alertmanager", fixture_path("alertmanager", "91-missing-labels.json"), am_key)
    for _ in range(2):
        assert post_alert("alertmanager", {"version": "4"}, WRONG_KEY).status_code == 401
    grafana_key = make_key("grafana", tenants=[story_tenants["elmwood-books"]], name="Grafana")
    post_alert("grafana", fixture_path("grafana", "01-first-failure.json"), grafana_key)
    assert (accepted.status_code, unmatched.status_code) == (202, 202)
    return {
        "accepted": Delivery.objects.get(alerts__public_id=accepted.json()["alerts"][0]["id"]),
        "unmatched": Delivery.objects.get(alerts__public_id=unmatched.json()["alerts"][0]["id"]),
    }


def test_the_guide_is_the_docs_file_title_and_first_paragraph() -> None:
    guide = source_guide("alertmanager")
    assert guide.path == "docs/integrations/alertmanager.md"
    assert guide.title == "Prometheus Alertmanager"
    assert guide.summary.startswith("Alertmanager's webhook receiver posts groups of alerts")
    assert "## 1" not in guide.summary
    # a guide that opens with a section falls back to the adapter's docstring
    grafana = source_guide("grafana")
    assert grafana.title.startswith("Grafana alerting") and grafana.summary
    assert source_guide("custom").path == "docs/custom-integrations.md"


def test_source_page_shows_guide_integrations_refusals_and_deliveries_with_outcomes(
    admin: Client, posted: dict[str, Any]
) -> None:
    response = admin.get("/sources/alertmanager/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "Prometheus Alertmanager" in page and "docs/integrations/alertmanager.md" in page
    assert "its senders cannot sign" in page
    assert "Prometheus prod" in page and "Prometheus staging" in page and "Grafana" not in page
    overview = response.context["o"]
    assert [i.name for i in overview.integrations] == ["Prometheus prod", "Prometheus staging"]
    assert [(i.delivery_count, i.key_count) for i in overview.integrations] == [(2, 1), (0, 1)]
    # the wrong key's two refusals, counted at the address (no integration recognised)
    assert overview.refused_total == 2
    assert [(r.reason, r.count) for r in overview.refused] == [(RefusedRequestCount.Reason.WRONG_KEY, 2)]
    assert "2 requests refused at this address" in page
    # the newest first, each with its alerts' outcomes
    shown = [(d.pk, d.alert_count, d.accepted_count, d.unmatched_count) for d in overview.deliveries]
    assert shown == [(posted["unmatched"].pk, 1, 0, 1), (posted["accepted"].pk, 1, 1, 0)]
    assert dict(response.context["conventions"])["job_from"] == "labels.job_name"


def test_sources_list_links_every_source_with_its_counts(admin: Client, posted: dict[str, Any]) -> None:
    response = admin.get("/sources/")

    assert response.status_code == 200
    rows = {row["source"]: row for row in response.context["sources"]}
    assert list(rows) == available_sources()
    assert rows["alertmanager"]["integration_count"] == 2 and rows["alertmanager"]["refused"].count == 2
    assert rows["grafana"]["integration_count"] == 1 and rows["grafana"]["refused"] is None
    assert 'href="/sources/alertmanager/"' in response.content.decode()
    # the integration pages link to their source's page
    integration = posted["accepted"].integration
    assert 'href="/sources/alertmanager/"' in admin.get(f"/integrations/{integration.public_id}/").content.decode()
    assert 'href="/sources/alertmanager/"' in admin.get("/integrations/").content.decode()


def test_source_page_is_for_admins_and_an_unknown_source_is_404(client: Client, admin: Client) -> None:
    assert admin.get("/sources/no-such-source/").status_code == 404
    client.force_login(UserFactory())
    response = client.get("/sources/alertmanager/")
    assert response.status_code == 302 and "/login" in response["Location"]


def test_api_source_detail_matches_the_page(admin: Client, posted: dict[str, Any]) -> None:
    response = admin.get("/api/v1/sources/alertmanager/")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["source"] == "alertmanager" and body["endpoint"] == "/api/v1/alerts/alertmanager/"
    assert body["can_sign"] is False
    assert body["guide"]["path"] == "docs/integrations/alertmanager.md"
    assert body["default_conventions"]["job_from"] == "labels.job_name"
    assert [i["name"] for i in body["integrations"]] == ["Prometheus prod", "Prometheus staging"]
    assert body["refused_count"] == 2
    assert [(r["reason"], r["count"]) for r in body["refused_requests"]] == [("wrong_key", 2)]
    deliveries = body["recent_deliveries"]
    assert [d["id"] for d in deliveries] == [str(posted["unmatched"].public_id), str(posted["accepted"].public_id)]
    assert [(d["outcome"], d["accepted_count"], d["unmatched_count"]) for d in deliveries] == [
        ("processed", 0, 1),
        ("processed", 1, 0),
    ]
    assert deliveries[0]["integration_name"] == "Prometheus prod"
    assert Alert.objects.filter(delivery=posted["unmatched"], outcome=Alert.Outcome.UNMATCHED).exists()


def test_api_source_list_and_refusals(client: Client, admin: Client, posted: dict[str, Any]) -> None:
    response = admin.get("/api/v1/sources/")

    assert response.status_code == 200
    rows = {row["source"]: row for row in response.json()}
    assert list(rows) == available_sources()
    assert (rows["alertmanager"]["integration_count"], rows["alertmanager"]["refused_count"]) == (2, 2)
    assert rows["custom"]["guide"]["path"] == "docs/custom-integrations.md"
    assert admin.get("/api/v1/sources/no-such-source/").status_code == 404
    assert admin.get("/api/v1/sources/?colour=blue").status_code == 400
    client.logout()
    client.force_login(UserFactory())
    assert client.get("/api/v1/sources/").status_code == 403
    assert client.get("/api/v1/sources/alertmanager/").status_code == 403
    integration_get_or_create(source="custom", name="unused")  # no side effect on what an outsider sees
    assert client.get("/api/v1/sources/custom/").status_code == 403

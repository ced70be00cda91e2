"""``/api/v1/`` introduces the API; every 404 under ``/api/`` is problem details; the schema's examples are ours."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db

COLLECTIONS = {
    "alerts",
    "audit-events",
    "checks",
    "handovers",
    "integrations",
    "jobs",
    "replays",
    "runs",
    "tokens",
}


@pytest.mark.parametrize("accept", ["application/json", "text/html", "*/*", "image/png"])
def test_the_root_answers_json_links_to_every_collection_whatever_the_accept(accept: str) -> None:
    response = Client().get("/api/v1/", HTTP_ACCEPT=accept)

    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    body = response.json()
    assert COLLECTIONS <= set(body["collections"])
    assert body["collections"]["jobs"] == "http://testserver/api/v1/jobs/"
    assert "items" not in body["collections"]  # a search by record id, not a list
    assert body["schema"] == "http://testserver/api/schema/" and body["docs"] == "http://testserver/api/docs/"


def test_every_link_of_the_root_answers_a_signed_in_admin(admin_client: Client) -> None:
    links = Client().get("/api/v1/").json()["collections"]

    answers = {name: admin_client.get(url).status_code for name, url in links.items()}

    assert set(answers.values()) == {200}, answers


@pytest.mark.parametrize("debug", [True, False])
@pytest.mark.parametrize("accept", ["text/html", "application/json"])
@pytest.mark.parametrize(
    "path", ["/api/", "/api/v2/", "/api/v1/nothing-here/", "/api/v1/runs/not-a-uuid/", "/api/redoc/"]
)
def test_every_404_under_api_is_problem_details(path: str, accept: str, debug: bool) -> None:
    with override_settings(DEBUG=debug):
        response = Client(raise_request_exception=False).get(path, HTTP_ACCEPT=accept)

    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"
    assert response.json() == {
        "type": "about:blank",
        "title": "Not found",
        "status": 404,
        "detail": "There is nothing at this address.",
    }


def test_a_404_outside_the_api_stays_a_page() -> None:
    response = Client().get("/no-such-page/")

    assert response.status_code == 404 and response["Content-Type"].startswith("text/html")


def test_the_schema_shows_this_api_not_the_framework_placeholder(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "schema.json"
    call_command("spectacular", "--format", "openapi-json", "--file", str(out))
    text = out.read_text()
    schema = json.loads(text)

    assert "example.org" not in text
    base = settings.SPECTACULAR_SETTINGS["SERVERS"][0]["url"]  # HANDOVER_BASE_URL (default http://127.0.0.1:8000)
    assert schema["servers"] == [{"url": base, "description": "this installation"}]
    runs_page = schema["components"]["schemas"]["PaginatedRunListList"]["properties"]
    assert runs_page["next"]["example"] == f"{base}/api/v1/runs/?page=4"
    job_example = schema["paths"]["/api/v1/jobs/{id}/"]["get"]["responses"]["200"]["content"]["application/json"]
    assert job_example["examples"]["ANightlyExport"]["value"]["key"] == "nightly-invoice-export"
    assert "/api/v1/" in schema["paths"] and "/api/v1/jobs/" in schema["paths"]

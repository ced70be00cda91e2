"""Regression tests for what the schema fuzzer (``test_api_fuzz.py``) found, one per failure."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client
from django.urls import URLResolver, get_resolver
from drf_spectacular.generators import SchemaGenerator

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client() -> Client:
    client = Client()
    client.force_login(UserFactory(admin=True))
    return client


def test_too_many_form_fields_are_a_400_problem_not_a_500(admin_client: Client) -> None:
    # found: POST /api/v1/replays/ with thousands of record_ids -> TooManyFieldsSent -> 500
    fields = "&".join(f"record_ids={i}" for i in range(1200))
    response = admin_client.post("/api/v1/handovers/", fields, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert "DATA_UPLOAD_MAX_NUMBER_FIELDS" in response.json()["detail"]


def test_malformed_ids_under_the_api_get_problem_details(admin_client: Client) -> None:
    # found: GET /api/v1/runs/null/ answered Django's HTML 404 page, undocumented content type
    response = admin_client.get("/api/v1/runs/null/")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["status"] == 404
    # pages for people keep Django's own 404
    assert admin_client.get("/runs/null/")["Content-Type"].startswith("text/html")


def test_a_malformed_alert_id_is_a_404_not_a_405(admin_client: Client) -> None:
    # found: GET /api/v1/alerts/null/ reached the ingestion route (POST only) and answered 405
    response = admin_client.get("/api/v1/alerts/null/")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"
    # a real source keeps its honest 405
    assert admin_client.get("/api/v1/alerts/generic/").status_code == 405


def test_runs_routes_have_no_format_suffix_twins(admin_client: Client) -> None:
    # found: POST /api/v1/checks/<id>/confirm.json -> the action got an unexpected `format` -> 500
    response = admin_client.post(f"/api/v1/checks/{uuid.uuid4()}/confirm.json")
    assert response.status_code == 404


def test_other_routers_have_no_format_suffix_twins(admin_client: Client) -> None:
    # found: POST /api/v1/handovers/<id>/close.json -> the action got an unexpected `format` -> 500
    response = admin_client.post(f"/api/v1/handovers/{uuid.uuid4()}/close.json")
    assert response.status_code == 404
    assert admin_client.post(f"/api/v1/replays/{uuid.uuid4()}/cancel.json").status_code == 404


def test_no_route_in_the_url_conf_takes_a_format_suffix() -> None:
    def patterns(resolver: URLResolver, prefix: str = "") -> list[str]:
        found = []
        for entry in resolver.url_patterns:
            if isinstance(entry, URLResolver):
                found += patterns(entry, prefix + str(entry.pattern))
            else:
                found.append(prefix + str(entry.pattern))
        return found

    routes = patterns(get_resolver())
    assert routes and not [route for route in routes if "format" in route], "a router adds .json twins"


def test_every_operation_documents_its_problem_answers() -> None:
    # found: error answers are application/problem+json, documented as nothing or application/json;
    # 401/403/404 answered by the framework were undocumented
    schema = SchemaGenerator().get_schema(request=None, public=True)
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            responses = operation["responses"]
            if "{" in path:
                assert "404" in responses, (method, path)
            for code, response in responses.items():
                if int(code) >= 400:
                    assert "application/problem+json" in response["content"], (method, path, code)

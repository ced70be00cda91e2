"""Integration posts skip the middlewares of people's requests; pages keep them; both keep the security headers."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, RequestFactory

from handover.core.middleware import is_integration_request
from tests.conftest import fixture_path

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("post", "/api/v1/alerts/generic/", True),
        ("post", "/api/v1/alerts/generic/k/hu_abcdefghijkl/", True),
        ("get", "/api/v1/replays/claimable/", True),
        ("post", "/api/v1/replays/6f1d2c3e-0000-4000-8000-000000000001/runner-report/", True),
        ("get", "/api/v1/alerts/6f1d2c3e-0000-4000-8000-000000000002/", False),  # a person's read of one alert
        ("get", "/api/v1/replays/", False),
        ("get", "/api/v1/alerts/", False),
        ("get", "/inbox/", False),
        ("get", "/api/v1/alerts/no/such/thing/", False),
    ],
)
def test_which_requests_are_integration_posts(method: str, path: str, expected: bool) -> None:
    request = getattr(RequestFactory(), method)(path)
    assert is_integration_request(request) is expected
    assert is_integration_request(request) is expected  # remembered on the request


def test_an_ingest_post_gets_no_session_or_csrf_cookie_but_the_security_headers(
    story_tenants: dict, make_key, settings
) -> None:
    key = make_key("generic", tenants=story_tenants.values())
    user = get_user_model().objects.create_user(username="sam", password="pw-long-enough-1")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    body = fixture_path("generic", "01-first-failure.json").read_bytes()
    response = client.post(
        "/api/v1/alerts/generic/", data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
    )
    assert response.status_code == 202, response.content
    assert settings.SESSION_COOKIE_NAME not in response.cookies
    assert settings.CSRF_COOKIE_NAME not in response.cookies
    assert "messages" not in response.cookies
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "Content-Security-Policy" in response or "Content-Security-Policy-Report-Only" in response
    assert not response.wsgi_request.user.is_authenticated  # DRF's anonymous user: the session was never read
    assert not hasattr(response.wsgi_request, "session")


def test_a_page_keeps_its_session_user_and_csrf(db: None) -> None:
    user = get_user_model().objects.create_user(username="kim", password="pw-long-enough-1")
    client = Client()
    client.force_login(user)
    response = client.get("/")
    assert response.wsgi_request.user == user
    assert hasattr(response.wsgi_request, "session")
    assert response["X-Frame-Options"] == "DENY"
    api = client.get("/api/v1/alerts/")
    assert api.status_code == 200 and api.wsgi_request.user == user

"""The profile page's chat/push targets: a private or loopback URL is refused on save with the reason,
an allowed one is stored masked and "Send test" reaches it; nobody finds another person's target."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from django.test import Client, override_settings

from handover.notifications.models import AppriseTarget
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
PASSWORD = "correct-horse-battery"


class _Ok(BaseHTTPRequestHandler):
    hits = 0

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        type(self).hits += 1
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def server() -> Iterator[str]:
    _Ok.hits = 0
    httpd = HTTPServer(("127.0.0.1", 0), _Ok)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def signed_in(username: str) -> Client:
    UserFactory(username=username)
    client = Client()
    assert client.login(username=username, password=PASSWORD)
    return client


@override_settings(HANDOVER_APPRISE_SCHEMES=["json"], HANDOVER_APPRISE_GENERIC_HOSTS=["127.0.0.1"])
def test_a_loopback_target_is_refused_on_the_profile_page(server: str) -> None:
    client = signed_in("bea")
    response = client.post("/profile/targets/", {"url": f"json://{server}/hook", "label": "mine"})
    assert response.status_code == 400
    assert "loopback, private or link-local" in response.content.decode()
    assert not AppriseTarget.objects.exists() and _Ok.hits == 0


@override_settings(
    HANDOVER_APPRISE_SCHEMES=["json"],
    HANDOVER_APPRISE_GENERIC_HOSTS=["127.0.0.1"],
    HANDOVER_APPRISE_PRIVATE_HOSTS=["127.0.0.1"],
)
def test_an_allowed_target_is_stored_masked_and_send_test_reaches_it(server: str) -> None:
    client = signed_in("bea")
    assert client.post("/profile/targets/", {"url": f"json://{server}/secret-path", "label": "mine"}).status_code == 302
    target = AppriseTarget.objects.get()
    page = client.get("/profile/").content.decode()
    assert target.url_masked in page and "secret-path" not in page
    answer = client.post(f"/profile/targets/{target.public_id}/test/", follow=True)
    assert "Test message accepted" in answer.content.decode() and _Ok.hits == 1
    other = signed_in("mallory")
    assert other.post(f"/profile/targets/{target.public_id}/test/").status_code == 404
    assert other.post(f"/profile/targets/{target.public_id}/delete/").status_code == 404
    assert client.post(f"/profile/targets/{target.public_id}/delete/").status_code == 302
    assert not AppriseTarget.objects.exists()

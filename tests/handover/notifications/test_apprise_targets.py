"""Chat/push targets: the allow-lists and the refusals at save and at send, encryption and masking,
and a real Apprise call to an allow-listed local test server."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from django.test import override_settings

from handover.core.errors import DomainError
from handover.notifications.apprise_targets import TargetNotAllowed, apprise_send, target_check, url_decrypt
from handover.notifications.models import AppriseTarget
from handover.notifications.services import apprise_target_add, apprise_target_test
from tests.factories import UserFactory

SLACK = "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ"


@pytest.mark.parametrize(
    "url",
    [
        "json://127.0.0.1:8080/hook",  # loopback
        "json://10.1.2.3/hook",  # private
        "json://169.254.169.254/latest/meta-data",  # link-local (cloud metadata)
        "json://[::1]/hook",
        "json://localhost/hook",
        "mmosts://192.168.0.10/abcdefghij",  # a self-hosted service on a private address
    ],
)
def test_private_and_loopback_targets_are_refused_without_the_allow_list(url: str) -> None:
    hosts = ["127.0.0.1", "10.1.2.3", "169.254.169.254", "::1", "[::1]", "localhost", "192.168.0.10"]
    with override_settings(HANDOVER_APPRISE_GENERIC_HOSTS=hosts, HANDOVER_APPRISE_SCHEMES=["json", "mmosts"]):
        with pytest.raises(TargetNotAllowed, match="loopback, private or link-local"):
            target_check(url)


@override_settings(HANDOVER_APPRISE_SCHEMES=["slack"])
def test_a_scheme_off_the_allow_list_is_refused() -> None:
    with pytest.raises(TargetNotAllowed, match="not on this site's allow-list"):
        target_check("discord://123/abc")
    assert target_check(SLACK).host == ""  # a fixed service: no host of ours to check


@override_settings(HANDOVER_APPRISE_SCHEMES=["json", "jsons"], HANDOVER_APPRISE_GENERIC_HOSTS=["hooks.example.com"])
def test_generic_targets_reach_only_admin_set_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        socket, "getaddrinfo", lambda *a, **k: [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", 443))]
    )
    with pytest.raises(TargetNotAllowed, match="only hosts an admin allowed"):
        target_check("jsons://evil.example.net/hook")
    assert target_check("jsons://hooks.example.com/hook").host == "hooks.example.com"


@override_settings(HANDOVER_APPRISE_SCHEMES=["jsons"], HANDOVER_APPRISE_GENERIC_HOSTS=["hooks.example.com"])
def test_a_name_that_resolves_to_a_private_address_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        socket, "getaddrinfo", lambda *a, **k: [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.9.8.7", 443))]
    )
    with pytest.raises(TargetNotAllowed, match="resolves to a loopback, private or link-local"):
        target_check("jsons://hooks.example.com/hook")


@pytest.mark.django_db
@override_settings(HANDOVER_APPRISE_SCHEMES=["slack", "json"])
def test_a_saved_url_is_encrypted_masked_and_checked_again_at_send() -> None:
    person = UserFactory(username="bea")
    target = apprise_target_add(url=SLACK, user=person, label="my DMs")
    stored = AppriseTarget.objects.get(pk=target.pk)
    assert "TIiajkdnlazkcOXrIdevi7FQ" not in stored.url_encrypted + stored.url_masked
    assert stored.url_masked.startswith("slack://T1J…") and url_decrypt(stored.url_encrypted) == SLACK
    with override_settings(HANDOVER_APPRISE_SCHEMES=["msteams"]):  # the admin took slack off the list
        with pytest.raises(DomainError, match="not on this site's allow-list"):
            apprise_target_test(target=stored)
    with pytest.raises(DomainError):
        apprise_target_add(url="json://127.0.0.1/hook", user=person)
    assert AppriseTarget.objects.count() == 1


class _Recorder(BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        length = int(self.headers.get("Content-Length", 0))
        type(self).received.append(json.loads(self.rfile.read(length) or b"{}"))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def chat_server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A local HTTP server standing in for a generic webhook target (allow-listed by the tests)."""
    _Recorder.received = []
    server = HTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}", _Recorder.received
    server.shutdown()


def test_apprise_posts_to_an_allow_listed_test_host(chat_server: tuple[str, list[dict[str, Any]]]) -> None:
    address, received = chat_server
    url = f"json://{address}/hook"
    with override_settings(
        HANDOVER_APPRISE_SCHEMES=["json"],
        HANDOVER_APPRISE_GENERIC_HOSTS=["127.0.0.1"],
        HANDOVER_APPRISE_PRIVATE_HOSTS=["127.0.0.1"],
    ):
        assert apprise_send(url, title="[Handover] hello", body="from the test") is True
    with override_settings(HANDOVER_APPRISE_SCHEMES=["json"], HANDOVER_APPRISE_GENERIC_HOSTS=["127.0.0.1"]):
        with pytest.raises(TargetNotAllowed):  # the same target without the private allow-list: refused at send
            apprise_send(url, title="x", body="y")
    assert len(received) == 1 and received[0]["title"] == "[Handover] hello"

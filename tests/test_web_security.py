"""Web hardening: security headers and the CSP, templates without inline code, login throttling,
session cookies, payload links, and ``manage.py check --deploy`` with production settings."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
import time_machine
from django.conf import settings
from django.template import engines
from django.test import Client, RequestFactory, override_settings
from django.utils import timezone

from handover.accounts.login_throttle import client_ip
from handover.templatetags.handover_tags import safe_link
from tests.factories import UserFactory

REPO = Path(__file__).resolve().parent.parent
TEMPLATE_DIRS = [REPO / "templates", *(REPO / app / "templates" for app in ("runs", "handover", "approvals"))]


@pytest.mark.django_db
def test_pages_carry_a_csp_without_unsafe_inline_and_the_other_security_headers(client: Client) -> None:
    client.force_login(UserFactory())
    response = client.get("/runs/")

    csp = response["Content-Security-Policy"]
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    for directive in (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "object-src 'none'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'self'",
    ):
        assert directive in csp
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"


@pytest.mark.django_db
def test_the_api_docs_page_runs_no_inline_script(client: Client) -> None:
    page = client.get("/api/docs/").content.decode()
    assert re.search(r"<script(?![^>]*\bsrc=)[^>]*>\s*\S", page) is None
    assert client.get("/api/docs/?script").status_code == 200


def _template_files() -> list[Path]:
    files = [p for d in TEMPLATE_DIRS if d.exists() for p in d.rglob("*.html")]
    return files + list((REPO / "templates").rglob("*.md"))


def test_templates_have_no_inline_script_style_or_event_handler() -> None:
    offenders = []
    for path in _template_files():
        if path.suffix != ".html":
            continue
        text = path.read_text()
        if re.search(r"<script(?![^>]*\bsrc=)[^>]*>", text) and "application/json" not in text:
            offenders.append(f"{path}: inline <script>")
        if re.search(r"<style\b", text):
            offenders.append(f"{path}: <style> element")
        if re.search(r"\sstyle\s*=", text):
            offenders.append(f"{path}: style attribute")
        if re.search(r"\son[a-z]+\s*=", text):
            offenders.append(f"{path}: inline event handler")
        if re.search(r"hx-on|hx-vars|js:", text):
            offenders.append(f"{path}: htmx evaluates script")
    assert not offenders, "\n".join(offenders)


def test_templates_never_turn_autoescaping_off() -> None:
    offenders = [
        str(path) for path in _template_files() if re.search(r"{%\s*autoescape\s+off|\|\s*safe\b", path.read_text())
    ]
    assert not offenders, offenders


def test_ledger_bar_has_no_style_attribute() -> None:
    assert " style=" not in (REPO / "templates/runs/ledger/_ledger.html").read_text()


def test_markdown_export_escapes_every_value() -> None:
    """Autoescaping stays on in the export, and each value goes through a Markdown filter (so it is not
    HTML-escaped instead); tests/handover/handovers/test_export_hostile_text.py renders hostile text through it."""
    text = (REPO / "templates/handover/handovers/export.md").read_text()
    assert "autoescape" not in text
    unfiltered = [
        value
        for value in re.findall(r"{{\s*([^}]*?)\s*}}", text)
        if not re.search(r"\|(markdown_escape|markdown_code|utc|date:)", value)
        and not value.endswith(("reopen_count", ".number", "|length", "|pluralize", "public_id"))
    ]
    assert not unfiltered, unfiltered


def test_integration_mapping_page_has_no_style_element() -> None:
    assert "<style" not in (REPO / "templates/runs/catalog/integration_mapping.html").read_text()
    assert ".mapping-grid" in (REPO / "handover/static/handover/app.css").read_text()


def test_payload_links_are_shown_only_when_http_or_https() -> None:
    assert "<a " in safe_link("https://logs.example/run/1")
    for url in ("javascript:alert(1)", "JAVASCRIPT:alert(1)", "data:text/html,<b>x</b>", "//evil.example/x"):
        rendered = safe_link(url)
        assert "<a " not in rendered
    rendered = (
        engines["django"]
        .from_string("{% load handover_tags %}{{ url|safe_link }}")
        .render({"url": '"><script>alert(1)</script>'})
    )
    assert "<script>" not in rendered


@pytest.mark.django_db
def test_session_and_csrf_cookies_are_http_only_and_same_site(client: Client) -> None:
    username = f"cookie-{uuid.uuid4().hex[:8]}"
    UserFactory(username=username)
    response = client.post("/login/", {"username": username, "password": "correct-horse-battery"})
    assert response.status_code == 302
    session = response.cookies[settings.SESSION_COOKIE_NAME]
    assert session["httponly"] and session["samesite"] == "Lax"
    assert settings.CSRF_COOKIE_HTTPONLY
    assert settings.SESSION_COOKIE_AGE <= 12 * 3600


@pytest.mark.django_db
def test_login_is_throttled_per_username_and_address_then_recovers() -> None:
    username = f"throttled-{uuid.uuid4().hex[:8]}"
    UserFactory(username=username)
    client = Client(REMOTE_ADDR="203.0.113.7")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert client.post("/login/", {"username": username, "password": "wrong"}).status_code == 200
    assert client.post("/login/", {"username": username, "password": "wrong"}).status_code == 429
    # locked: even the right password is refused now
    locked = client.post("/login/", {"username": username, "password": "correct-horse-battery"})
    assert locked.status_code == 429
    assert b"Too many failed logins" in locked.content
    # the lock is per username and address: another person from the same address may log in
    other = f"other-{uuid.uuid4().hex[:8]}"
    UserFactory(username=other)
    assert client.post("/login/", {"username": other, "password": "correct-horse-battery"}).status_code == 302
    # after the cool-off the person may log in again
    with time_machine.travel(timezone.now() + settings.AXES_COOLOFF_TIME + timedelta(seconds=1)):
        again = Client(REMOTE_ADDR="203.0.113.7")
        assert again.post("/login/", {"username": username, "password": "correct-horse-battery"}).status_code == 302


def _fail_until_locked(client: Client, username: str, **extra: str) -> None:
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert client.post("/login/", {"username": username, "password": "wrong"}, **extra).status_code == 200
    assert client.post("/login/", {"username": username, "password": "wrong"}, **extra).status_code == 429


@pytest.mark.django_db
def test_without_trusted_proxies_login_throttling_ignores_x_forwarded_for() -> None:
    assert settings.HANDOVER_TRUSTED_PROXY_COUNT == 0  # the default
    username = f"direct-{uuid.uuid4().hex[:8]}"
    UserFactory(username=username)
    client = Client(REMOTE_ADDR="203.0.113.20")

    _fail_until_locked(client, username, HTTP_X_FORWARDED_FOR="198.51.100.1")

    # a made-up X-Forwarded-For does not make a new address: still locked
    spoofed = client.post(
        "/login/", {"username": username, "password": "correct-horse-battery"}, HTTP_X_FORWARDED_FOR="192.0.2.99"
    )
    assert spoofed.status_code == 429
    # another socket address is another pair
    other = Client(REMOTE_ADDR="203.0.113.21")
    assert other.post("/login/", {"username": username, "password": "correct-horse-battery"}).status_code == 302


@pytest.mark.django_db
@override_settings(HANDOVER_TRUSTED_PROXY_COUNT=1)
def test_behind_a_trusted_proxy_login_throttling_keys_on_the_forwarded_address() -> None:
    username = f"proxied-{uuid.uuid4().hex[:8]}"
    UserFactory(username=username)
    balancer = Client(REMOTE_ADDR="10.0.0.2")  # every request arrives from the load balancer

    _fail_until_locked(balancer, username, HTTP_X_FORWARDED_FOR="203.0.113.30")

    def login(forwarded_for: str) -> int:
        data = {"username": username, "password": "correct-horse-battery"}
        return int(balancer.post("/login/", data, HTTP_X_FORWARDED_FOR=forwarded_for).status_code)

    # a client's own entries left of the balancer's do not change the address: still locked
    assert login("192.0.2.99, 203.0.113.30") == 429
    # the same person from another address, through the same balancer, is not locked out
    assert login("198.51.100.31") == 302


@pytest.mark.parametrize(
    ("count", "remote", "forwarded", "expected"),
    [
        (0, "10.0.0.2", "203.0.113.5", "10.0.0.2"),
        (1, "10.0.0.2", "203.0.113.5", "203.0.113.5"),
        (1, "10.0.0.2", "192.0.2.1, 203.0.113.5", "203.0.113.5"),
        (2, "10.0.0.2", "192.0.2.1, 203.0.113.5, 10.0.0.9", "203.0.113.5"),
        (2, "10.0.0.2", "203.0.113.5", "203.0.113.5"),  # fewer hops than proxies: the left-most
        (1, "10.0.0.2", "", "10.0.0.2"),
        (1, "10.0.0.2", "not-an-address", "10.0.0.2"),
        (1, "10.0.0.2", " 2001:db8::1 ", "2001:db8::1"),
    ],
)
def test_client_ip_takes_the_entry_the_outermost_trusted_proxy_wrote(
    rf: RequestFactory, count: int, remote: str, forwarded: str, expected: str
) -> None:
    request = rf.get("/", REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR=forwarded)
    with override_settings(HANDOVER_TRUSTED_PROXY_COUNT=count):
        assert client_ip(request) == expected


@pytest.mark.django_db
def test_failed_logins_log_no_username(client: Client, caplog: pytest.LogCaptureFixture) -> None:
    username = f"private-{uuid.uuid4().hex[:8]}"
    for _ in range(settings.AXES_FAILURE_LIMIT + 1):
        client.post("/login/", {"username": username, "password": "wrong"}, REMOTE_ADDR="198.51.100.9")
    assert caplog.records, "lockouts are logged"
    assert username not in caplog.text and "198.51.100.9" not in caplog.text


def test_check_deploy_is_clean_with_production_settings(tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "HANDOVER_", "DATABASE_URL"))},
        "HANDOVER_PRODUCTION": "true",
        "DJANGO_SECRET_KEY": "x" * 20 + uuid.uuid4().hex + "y" * 20,
        "DJANGO_ALLOWED_HOSTS": "handover.example.com",
        "HANDOVER_BASE_URL": "https://handover.example.com",
        "HANDOVER_VAR_DIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout

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
from django.test import Client
from django.utils import timezone

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


# Offenders found in other people's work in progress, reported to them; each has a strict xfail below
# that starts passing (and so fails) once it is fixed -- then take it off this list.
REPORTED = {
    "runs/_ledger.html": "style attribute for the ledger bar's segment widths (blocked by the CSP)",
    "handover/export.md": "autoescape off: payload text reaches the Markdown export unescaped",
    "runs/integration_mapping.html": "a <style> element (blocked by the CSP)",
}


def _template_files(*, reported: bool = False) -> list[Path]:
    files = [p for d in TEMPLATE_DIRS if d.exists() for p in d.rglob("*.html")]
    files += list((REPO / "templates").rglob("*.md"))
    return [p for p in files if reported or str(p.relative_to(REPO / "templates")) not in REPORTED]


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


@pytest.mark.xfail(strict=True, reason="reported to the work-ledger engineer: " + REPORTED["runs/_ledger.html"])
def test_ledger_bar_has_no_style_attribute() -> None:
    assert " style=" not in (REPO / "templates/runs/_ledger.html").read_text()


@pytest.mark.xfail(strict=True, reason="reported to the handover engineer: " + REPORTED["handover/export.md"])
def test_markdown_export_escapes_payload_text() -> None:
    text = (REPO / "templates/handover/export.md").read_text()
    assert "autoescape off" not in text


@pytest.mark.xfail(strict=True, reason="reported: " + REPORTED["runs/integration_mapping.html"])
def test_integration_mapping_page_has_no_style_element() -> None:
    assert "<style" not in (REPO / "templates/runs/integration_mapping.html").read_text()


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

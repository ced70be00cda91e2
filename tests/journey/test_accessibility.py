"""axe-core on the main pages, as the demo's admin and support person, at 390 px and 1440 px, light and dark.

axe-core (tests/data/axe/, MPL-2.0, vendored unmodified) runs with the WCAG 2.0 and 2.1 level A and AA
tags and no rule disabled. Each page's violation count is printed (``-s`` shows the table); every
page listed here must have none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from playwright.sync_api import Browser, Page, expect

from approvals.recurrence.demo import demo_history_load
from approvals.replays.demo import demo_replay_load
from handover.handovers.demo import demo_handover_load
from handover.handovers.models import Handover
from runs.attempts.models import Run
from runs.catalog.models import Job
from runs.demo.loader import demo_load
from tests.factories import UserFactory

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        "postgresql" not in settings.DATABASES["default"]["ENGINE"],
        reason="browser tests run on PostgreSQL (scripts/test.sh runs them there; SQLite skips them)",
    ),
]

AXE = (Path(__file__).resolve().parents[1] / "data" / "axe" / "axe.min.js").read_text()
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
WIDTHS = {"phone": {"width": 390, "height": 844}, "desktop": {"width": 1440, "height": 900}}
THEMES = ("light", "dark")


def _pages() -> list[str]:
    run = Run.objects.order_by("window_start", "pk").first()
    job = Job.objects.order_by("key").first()
    handover = Handover.objects.order_by("pk").first()
    assert run is not None and job is not None and handover is not None  # the demo wrote them
    return [
        "/runs/",
        f"/runs/{run.public_id}/",
        "/inbox/",
        "/items/search/",
        "/handovers/mine/",
        "/handovers/attention/",
        f"/handovers/{handover.public_id}/",
        "/replays/",
        "/checks/",
        "/jobs/",
        f"/jobs/{job.public_id}/",
        "/recurrence/?days=90&until=2026-11-30",
        "/supportability/?days=90",
        "/preferences/",
        "/account/tokens/",
    ]


def _axe(page: Page) -> list[dict[str, Any]]:
    """axe's violations on the loaded page: ``[{"id", "impact", "nodes": [html, ...]}]``."""
    page.evaluate(AXE)  # through the DevTools protocol: the page's CSP (no inline script) does not apply
    found = page.evaluate(
        "async (tags) => (await axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']}))"
        ".violations.map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.html)}))",
        WCAG_TAGS,
    )
    return list(found)


def _log_in(page: Page, base: str, username: str, password: str) -> None:
    page.goto(f"{base}/login/")
    page.get_by_label("User name").fill(username)
    page.get_by_label("Password").fill(password)
    page.keyboard.press("Enter")
    expect(page.get_by_text(f"{username} ·")).to_be_visible()


@pytest.fixture
def demo(settings: Any) -> dict[str, str]:
    settings.AXES_ENABLED = False
    passwords = demo_load().passwords
    demo_handover_load()  # as manage.py load_demo does: the runs app's loader writes no handover or replay
    demo_replay_load()
    demo_history_load()  # weeks of failures of two more jobs: the recurrence and supportability pages rank them
    return passwords


def test_main_pages_have_no_wcag_a_or_aa_violations(browser: Browser, live_server: Any, demo: dict[str, str]) -> None:
    base = live_server.url
    pages = _pages()
    counts: dict[tuple[str, str, str, str], int] = {}
    details: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for width, viewport in WIDTHS.items():
        for theme in THEMES:
            for username in ("admin", "support"):
                context = browser.new_context(viewport=viewport, color_scheme=theme, locale="en-GB")
                page = context.new_page()
                try:
                    login_violations = _axe(page) if page.goto(f"{base}/login/") else []
                    counts[("/login/", username, width, theme)] = len(login_violations)
                    details[("/login/", username, width, theme)] = login_violations
                    _log_in(page, base, username, demo[username])
                    for path in pages:
                        answer = page.goto(base + path)
                        assert answer is not None and answer.status == 200, (path, username)
                        violations = _axe(page)
                        counts[(path, username, width, theme)] = len(violations)
                        details[(path, username, width, theme)] = violations
                finally:
                    context.close()

    print("\naxe-core WCAG 2.0/2.1 A+AA violations (rules violated) per page, person, width and theme:")
    for (path, username, width, theme), count in sorted(counts.items()):
        print(f"  {count:3d}  {path:60s} {username:8s} {width:8s} {theme}")
    print("axe-core totals: " + json.dumps({"pages": len(counts), "violations": sum(counts.values())}))
    failing = {" ".join(key): value for key, value in details.items() if value}
    assert failing == {}, json.dumps(failing, indent=1)[:6000]


def test_the_theme_toggle_is_remembered_and_the_skip_link_comes_first(
    browser: Browser, live_server: Any, settings: Any
) -> None:
    settings.AXES_ENABLED = False
    UserFactory(username="keyboard-kim")
    context = browser.new_context(viewport=WIDTHS["phone"], color_scheme="light", locale="en-GB")
    page = context.new_page()
    try:
        page.goto(f"{live_server.url}/login/")
        toggle = page.locator("#theme-toggle")
        expect(toggle).to_have_attribute("aria-pressed", "false")
        light_background = page.evaluate("getComputedStyle(document.body).backgroundColor")

        toggle.click()
        page.reload()  # the choice is stored and put on <html> by the head script, before the first paint

        assert page.evaluate("document.documentElement.dataset.theme") == "dark"
        assert page.evaluate("localStorage.getItem('theme')") == "dark"
        expect(page.locator("#theme-toggle")).to_have_attribute("aria-pressed", "true")
        assert light_background == "rgb(246, 247, 250)"
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(15, 20, 28)"

        _log_in(page, live_server.url, "keyboard-kim", "correct-horse-battery")  # the login form focuses a field
        page.goto(f"{live_server.url}/jobs/")
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent") == "Skip to main content"
        page.keyboard.press("Enter")
        assert page.evaluate("document.activeElement.id") == "main"
    finally:
        context.close()

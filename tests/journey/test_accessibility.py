"""axe-core on every page, as each of the demo's five people, at 390 px and 1440 px, light and dark.

axe-core (tests/data/axe/, MPL-2.0, vendored unmodified) runs with the WCAG 2.0 and 2.1 level A and AA
tags and no rule disabled. Every HTML page a person opens (``_pages``: the lists, one of each detail
page, the run pages of a failed, a replayed and an ok run with their HTMX fragments loaded, the forms,
the account pages, the admin pages) is crawled as ``support``, ``business-owner``, ``tech-owner``,
``auditor`` and ``admin``; a page the person may not open (404, 403, sent to a login) is left out for
them, and every page must be crawled by someone. Each page is loaded once per person and axe runs on it
at both widths and in both themes (the viewport and ``prefers-color-scheme`` change in place; the CSS
follows). Pages are crawled concurrently in one browser (async Playwright), which keeps the crawl
within CI's ten minutes. The violation count of every page, person, width and theme is printed (``-s``
shows the table); all must be zero.
"""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.urls import reverse
from playwright.async_api import BrowserContext, async_playwright
from playwright.sync_api import Browser, Page, expect

from approvals.recurrence.demo import demo_history_load
from approvals.replays.demo import demo_replay_load
from approvals.replays.models import ReplayRequest
from handover.handovers.demo import demo_handover_load
from handover.handovers.models import Handover
from handover.notifications.models import Team
from handover.ownership.demo import demo_ownership_load
from handover.problems.demo import demo_problem_load
from handover.problems.models import Problem
from runs.alerts.models import Alert
from runs.attempts.business_state import run_business_state, run_business_state_annotate
from runs.attempts.models import Run
from runs.catalog.models import Integration, Job
from runs.checks.models import NextRunCheck
from runs.demo.loader import DEMO_USERS, demo_load
from tests.factories import UserFactory
from tests.journey.conftest import CHROMIUM, CHROMIUM_ARGS

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
CONCURRENT_PAGES = 4  # tabs crawled at once in the one browser (the machine has two cores)
SETTLED = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"
AXE_RUN = (
    "async (tags) => (await axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']}))"
    ".violations.map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.html)}))"
)


def _ok_run() -> Run:
    for run in run_business_state_annotate(Run.objects.filter(status=Run.Status.SUCCEEDED).order_by("pk")):
        if run_business_state(run).state == "ok":
            return run
    raise AssertionError("the demo has no run that is ok")


def _pages() -> dict[str, str]:
    """label -> path of every HTML page, with the demo's objects in its URL."""
    handover = Handover.objects.order_by("pk").first()
    replay = ReplayRequest.objects.order_by("pk").first()
    failed = Run.objects.filter(handover_links__handover=handover).order_by("pk").first()
    job = Job.objects.order_by("key").first()
    check = NextRunCheck.objects.order_by("pk").first()
    alert = Alert.objects.filter(outcome="unmatched").order_by("pk").first()
    integration = Integration.objects.order_by("pk").first()
    assert handover is not None and replay is not None and failed is not None and job is not None
    assert check is not None and alert is not None and integration is not None  # the demo wrote them
    team = Team.objects.order_by("name").first()
    problem = Problem.objects.order_by("pk").first()
    assert team is not None and problem is not None  # the demo wrote them
    ok_run = _ok_run()

    def url(name: str, **kwargs: Any) -> str:
        return reverse(name, kwargs=kwargs)

    return {
        "home": "/",
        "runs": url("runs:run-list"),
        "run (failed, with its handover)": url("runs:run-detail", id=failed.public_id),
        "run (replayed)": url("runs:run-detail", id=replay.run.public_id),
        "run (ok)": url("runs:run-detail", id=ok_run.public_id),
        "replays of a run": url("approvals:run-replays", run_id=replay.run.public_id),
        "request a replay": url("approvals:replay-create", run_id=failed.public_id),
        "inbox": url("runs:alert-inbox"),
        "alert (unmatched)": url("runs:alert-detail", id=alert.public_id),
        "find a record": url("runs:work-item-search") + "?record_id=INV-1004",
        "handovers": url("handover:handover-list"),
        "my handovers": url("handover:handover-mine"),
        "needs attention": url("handover:attention"),
        "handover": url("handover:handover-detail", id=handover.public_id),
        "handover edit": url("handover:handover-edit", id=handover.public_id),
        "handover history": url("handover:handover-history", id=handover.public_id),
        "handover generated diff": url("handover:handover-generated-diff", id=handover.public_id),
        "handover print": url("handover:handover-print", id=handover.public_id),
        "new handover": url("handover:handover-new") + f"?run={ok_run.public_id}",
        "replays": url("approvals:replay-list"),
        "replay": url("approvals:replay-detail", id=replay.public_id),
        "checks": url("runs:check-list"),
        "check": url("runs:check-detail", id=check.public_id),
        "jobs": url("runs:job-list"),
        "job": url("runs:job-detail", id=job.public_id),
        "job pause": url("handover:job-pause", id=job.public_id),
        "notifications": url("handover:notification-list"),
        "profile": url("handover:profile"),
        "time zone": url("preferences"),
        "API tokens": url("handover:api-token-list"),
        "audit trail": url("manage:audit-list"),
        "integrations": url("runs:integration-list"),
        "integration": url("runs:integration-detail", id=integration.public_id),
        "new integration": url("runs:integration-create"),
        "integration security": url("manage:integration-security", id=integration.public_id),
        "roles": url("manage:role-list"),
        "keys": url("manage:key-list"),
        "sources": url("runs:source-list"),
        "source": url("runs:source-detail", source="alertmanager"),
        "job owners": url("handover:job-ownership", id=job.public_id),
        "team": url("handover:team-detail", id=team.public_id),
        "my aged work": url("handover:aged-work-mine"),
        "problems": url("handover:problem-list"),
        "new problem": url("handover:problem-new"),
        "problem": url("handover:problem-detail", id=problem.public_id),
        "recurrence": url("approvals:recurrence") + "?days=90&until=2026-11-30",
        "supportability": url("approvals:supportability") + "?days=90",
    }


async def _axe_everywhere(context: BrowserContext, base: str, path: str) -> dict[tuple[str, str], Any]:
    """Open ``path`` once; axe at each width and theme. None when the person may not open the page."""
    page = await context.new_page()
    try:
        answer = await page.goto(base + path, wait_until="networkidle")  # the HTMX fragments loaded too
        if answer is None or answer.status != 200 or not page.url.startswith(base + path.split("?")[0]):
            return {}
        await page.evaluate(AXE)  # through the DevTools protocol: the page's CSP (no inline script) does not apply
        found: dict[tuple[str, str], Any] = {}
        for width, viewport in WIDTHS.items():
            await page.set_viewport_size(viewport)
            await page.evaluate(SETTLED)  # scroll-regions.js marks what now overflows on resize
            for theme in THEMES:
                await page.emulate_media(color_scheme=theme)  # type: ignore[arg-type]
                found[(width, theme)] = await page.evaluate(AXE_RUN, WCAG_TAGS)
        return found
    finally:
        await page.close()


async def _crawl(base: str, passwords: dict[str, str], pages: dict[str, str]) -> dict[tuple[str, ...], Any]:
    """Every page as every person (and the login page anonymously): ``(label, person, width, theme)`` -> violations."""
    results: dict[tuple[str, ...], Any] = {}
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        gate = asyncio.Semaphore(CONCURRENT_PAGES)

        async def one(context: BrowserContext, person: str, label: str, path: str) -> None:
            async with gate:
                for (width, theme), violations in (await _axe_everywhere(context, base, path)).items():
                    results[(label, person, width, theme)] = violations

        async def person(username: str) -> None:
            context = await browser.new_context(viewport=WIDTHS["desktop"], locale="en-GB")
            login = await context.new_page()
            await login.goto(f"{base}/login/")
            await login.get_by_label("User name").fill(username)
            await login.get_by_label("Password").fill(passwords[username])
            await login.keyboard.press("Enter")
            await login.get_by_text(f"{username} ·").wait_for()
            await login.close()
            await asyncio.gather(*(one(context, username, label, path) for label, path in pages.items()))
            await context.close()

        anonymous = await browser.new_context(locale="en-GB")
        await one(anonymous, "anonymous", "login", "/login/")
        await asyncio.gather(*(person(username) for username in passwords))
        await anonymous.close()
        await browser.close()
    return results


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
    demo_ownership_load()  # as manage.py load_demo does: owners first, so the problem names its team
    demo_handover_load()  # the runs app's loader writes no handover or replay
    demo_problem_load()
    demo_replay_load()
    demo_history_load()  # weeks of failures of two more jobs: the recurrence and supportability pages rank them
    return passwords


def test_every_page_as_every_role_has_no_wcag_a_or_aa_violations(live_server: Any, demo: dict[str, str]) -> None:
    assert set(demo) == set(DEMO_USERS)
    pages = _pages()
    started = time.monotonic()
    # in a thread of its own: its event loop never meets the sync Playwright of the other tests here
    with ThreadPoolExecutor(max_workers=1) as pool:
        results = pool.submit(asyncio.run, _crawl(live_server.url, demo, pages)).result()
    seconds = time.monotonic() - started

    print("\naxe-core WCAG 2.0/2.1 A+AA violations (rules violated) per page, person, width and theme:")
    for (label, person, width, theme), violations in sorted(results.items()):
        print(f"  {len(violations):3d}  {label:34s} {person:15s} {width:8s} {theme}")
    crawled = {label for label, *_ in results}
    print(
        "axe-core totals: "
        + json.dumps(
            {
                "pages": len(crawled),
                "page loads": len({(label, person) for label, person, *_ in results}),
                "axe runs": len(results),
                "violations": sum(len(v) for v in results.values()),
                "seconds": round(seconds, 1),
            }
        )
    )
    assert crawled == {*pages, "login"}, f"never crawled: {sorted({*pages, 'login'} - crawled)}"
    # the admin opens every page; each person at least the lists
    admin_pages = {label for label, person, *_ in results if person == "admin"}
    assert admin_pages == set(pages), sorted(set(pages) - admin_pages)
    for username in DEMO_USERS:
        assert {"runs", "replays", "handovers", "checks", "jobs"} <= {
            label for label, person, *_ in results if person == username
        }, username
    failing = {" ".join(key): value for key, value in results.items() if value}
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

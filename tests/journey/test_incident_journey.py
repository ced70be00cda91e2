"""The whole incident journey in a real browser: from the first alert to a closed handover.

Three people, each with their own login and browser — support (``support``), the business owner of the
tenant (``business-owner``) and the technical owner of the job (``tech-owner``), named as the demo's
users are — plus the monitoring system and the job runner, which speak to the API. Everything the people
do goes through the pages; everything the machines do goes through ``/api/v1/``; the beat's sweeps are
run as their task functions, the way the beat would, and the worker runs what the pages enqueued. The
clock is travelled with time-machine so the story happens when the fixtures say (the night of
2026-11-28, Berlin) and the screenshots are the same on every run.

Then the business records are checked, not the pages: one dispatch with one key, the ledger with nothing
unresolved and no possible duplicate, one attempt per execution, the check passed on the right evidence,
and the run's timeline complete and in order.

Screenshots of each step (1280×800; two at 390×844, a phone) go to ``$HANDOVER_VAR_DIR/screenshots/``;
with ``HANDOVER_UPDATE_SCREENSHOTS=1`` they replace the committed ones in ``docs/screenshots/`` instead.
"""

from __future__ import annotations

import re
import shutil
import zoneinfo
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import mail
from playwright.sync_api import APIRequestContext, Page, Playwright, expect

from approvals.replays import tasks as replay_tasks
from handover.accounts.preferences import user_preference_set
from handover.env import env
from handover.handovers import tasks as handover_tasks
from handover.handovers.models import Handover
from runs.alerts.models import Alert
from runs.attempts.models import Run
from runs.catalog.models import Job, RunnerCredential, SideEffect
from runs.catalog.services import (
    integration_get_or_create,
    integration_key_create,
    job_get_or_create,
    job_target_get_or_create,
    role_grant,
    tenant_get_or_create,
)
from runs.checks import tasks as check_tasks
from runs.checks.models import NextRunCheck
from runs.ledger.models import WorkItem, WorkItemChange
from runs.timeline.models import TimelineEvent
from tests.conftest import STORY_JOB_DEFAULTS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        "postgresql" not in settings.DATABASES["default"]["ENGINE"],
        reason="the browser journey runs once, on PostgreSQL (scripts/test.sh runs it there; SQLite skips it)",
    ),
]

REPO = Path(__file__).resolve().parents[2]
ALERTS = REPO / "runs" / "demo" / "alerts" / "generic"
LEDGER = REPO / "tests" / "data" / "journey"
# The committed screenshots (README, docs) are rewritten only on request: a journey run otherwise
# leaves them alone and writes its screenshots under the var directory.
UPDATE_SCREENSHOTS = env.bool("HANDOVER_UPDATE_SCREENSHOTS", default=False)
SCREENSHOTS = REPO / "docs" / "screenshots" if UPDATE_SCREENSHOTS else settings.VAR_DIR / "screenshots"
BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")
PHONE = {"width": 390, "height": 844}
TIMEOUT_MS = 15_000


def berlin(text: str) -> datetime:
    """``"2026-11-28 09:00"`` as an aware Berlin time."""
    return datetime.fromisoformat(text).replace(tzinfo=BERLIN)


# --- the cast -------------------------------------------------------------------------------------


@dataclass
class Person:
    username: str
    password: str
    email: str
    user: Any = None
    page: Page | None = None


@dataclass
class World:
    job: Job
    tenant: Any
    alert_key: str
    support: Person
    business: Person
    technical: Person


@pytest.fixture
def world(db: None) -> World:
    """What an admin set up beforehand: the job and its side effect, the tenant and target, an
    integration key bound to the tenant, and three people with roles (the job's runner credential is
    issued on the job page by its technical owner, during the journey)."""
    job, _ = job_get_or_create(
        key="nightly-invoice-export",
        defaults=STORY_JOB_DEFAULTS,
    )
    SideEffect.objects.create(
        job=job,
        description="posts invoices to the ledger gateway",
        repeat_safety=SideEffect.RepeatSafety.IDEMPOTENT_WITH_KEY,
        evidence="the gateway deduplicates on the invoice number (API doc §4.2)",
    )
    tenant, _ = tenant_get_or_create(slug="acme-foods", name="Acme Foods")
    job_target_get_or_create(job=job, tenant=tenant, environment="prod")
    alert_key = integration_key_create(
        integration=integration_get_or_create(source="generic", name="scheduler"), tenants=[tenant], label="journey"
    ).key
    people = {}
    for username, role, obj in (
        ("support", "support", tenant),
        ("business-owner", "business_owner", tenant),
        ("tech-owner", "technical_owner", job),
    ):
        person = Person(username=username, password=f"{username}-pass-7Q!x", email=f"{username}@acme.example")
        person.user = get_user_model().objects.create_user(username, email=person.email, password=person.password)
        role_grant(user=person.user, role=role, obj=obj)
        user_preference_set(user=person.user, time_zone="Europe/Berlin")
        people[role] = person
    return World(
        job=job,
        tenant=tenant,
        alert_key=alert_key,
        support=people["support"],
        business=people["business_owner"],
        technical=people["technical_owner"],
    )


# --- the worker: tasks the pages enqueue, run when the test says so ---------------------------------


@dataclass
class Worker:
    """Stands in for the Celery worker: records each ``delay`` and runs the queue on ``work()``."""

    queue: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)
    enqueued: list[str] = field(default_factory=list)
    tasks: dict[str, Any] = field(default_factory=dict)

    def work(self) -> list[str]:
        done = []
        while self.queue:
            name, args, kwargs = self.queue.pop(0)
            self.tasks[name](*args, **kwargs)
            done.append(name)
        return done


@pytest.fixture
def worker(monkeypatch: pytest.MonkeyPatch) -> Worker:
    """Capture what the pages and services enqueue (per task, no global eager mode)."""
    from approvals.replays import tasks as approval_tasks
    from handover.handovers import tasks as handover_tasks
    from handover.notifications import tasks as notification_tasks
    from runs.ledger import tasks as ledger_tasks

    found = Worker()
    for task in (
        ledger_tasks.work_item_load_run,
        handover_tasks.next_run_check_notify_failed,
        notification_tasks.notification_deliver,
        approval_tasks.replay_request_dispatch,
        approval_tasks.dispatch_webhook_deliver,
        approval_tasks.replay_request_notify,
    ):
        found.tasks[task.name] = task

        def delay(*args: Any, _name: str = task.name, **kwargs: Any) -> None:
            found.queue.append((_name, args, kwargs))
            found.enqueued.append(_name)

        monkeypatch.setattr(task, "delay", delay)
    return found


@pytest.fixture
def browser_cookies_without_dates(settings: Any) -> None:
    """The server's clock is travelled, the browser's is not: keep session and CSRF cookies dateless
    so the browser never sees them as already expired."""
    settings.SESSION_EXPIRE_AT_BROWSER_CLOSE = True
    settings.CSRF_COOKIE_AGE = None


@pytest.fixture
def api(playwright: Playwright, live_server: Any) -> Iterator[APIRequestContext]:
    """The monitoring system's and the job runner's HTTP client (no cookies, no browser)."""
    context = playwright.request.new_context(base_url=live_server.url)
    yield context
    context.dispose()


# --- helpers --------------------------------------------------------------------------------------


# The steps the README shows: each is also taken dark, on a phone, and on a phone dark, and only
# these are published to docs/screenshots/ (tests/test_readme.py checks the README names exactly these).
README_SHOTS = (
    "run-failed",
    "ledger-verify-uncertain",
    "handover-written",
    "queue-business-owner",
    "next-run-check-passed",
    "run-recovered",
)
VARIANTS = (("dark", None, "dark"), ("phone", PHONE, "light"), ("phone-dark", PHONE, "dark"))


class Shots:
    """Numbered screenshots of each step, viewport only (small PNGs), published to ``SCREENSHOTS`` only
    when the whole journey passed (a failed run leaves the published ones alone). The README's steps
    (``README_SHOTS``) are taken in every variant (``VARIANTS``): ``journey-NN-<step>-dark.png``,
    ``-phone.png`` (390 px) and ``-phone-dark.png``; when publishing to docs/screenshots/ only those are
    kept, without their step number (``journey-run-failed-dark.png``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.taken: list[str] = []
        self.count = 0

    def __call__(self, page: Page, name: str, focus: Any = None) -> None:
        self.count += 1
        stem = f"journey-{self.count:02d}-{name}"
        self._take(page, f"{stem}.png", focus)
        if name not in README_SHOTS:
            return
        size = page.viewport_size
        try:
            for suffix, viewport, scheme in VARIANTS:
                page.set_viewport_size(viewport or size)  # type: ignore[arg-type]
                page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
                self._take(page, f"{stem}-{suffix}.png", focus)
        finally:
            page.set_viewport_size(size)  # type: ignore[arg-type]
            page.emulate_media(color_scheme="light")

    def _take(self, page: Page, file_name: str, focus: Any) -> None:
        if focus is not None:
            focus.scroll_into_view_if_needed()
        else:
            page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(self.folder / file_name))
        self.taken.append(file_name)

    def publish(self) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        for old in SCREENSHOTS.glob("journey-*.png"):
            old.unlink()
        for name in self.taken:
            if not UPDATE_SCREENSHOTS:
                shutil.copyfile(self.folder / name, SCREENSHOTS / name)
            elif step_of(name) in README_SHOTS:  # unnumbered: a step added to the journey renames nothing
                shutil.copyfile(self.folder / name, SCREENSHOTS / re.sub(r"^journey-\d+-", "journey-", name))


def step_of(file_name: str) -> str:
    """``journey-02-run-failed-phone-dark.png`` -> ``run-failed``."""
    step = file_name.removesuffix(".png").split("-", 2)[2]
    for suffix in sorted((v[0] for v in VARIANTS), key=len, reverse=True):  # "-phone-dark" before "-dark"
        if step.endswith(f"-{suffix}"):
            return step.removesuffix(f"-{suffix}")
    return step


def watch_console(page: Page, problems: list[str]) -> None:
    """Collect what the browser complains about: CSP refusals, script errors, failed requests."""

    def console(message: Any) -> None:
        # a failed request is reported below with its address; everything else is a real complaint
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            problems.append(f"{page.url}: {message.text}")

    def response(answer: Any) -> None:
        if answer.status >= 400 and not answer.url.endswith("/favicon.ico"):  # no favicon is served
            problems.append(f"{answer.url}: {answer.status}")

    page.on("console", console)
    page.on("response", response)
    page.on("pageerror", lambda error: problems.append(f"{page.url}: {error}"))


def log_in(page: Page, base: str, person: Person) -> None:
    """Log in with the keyboard: type the name, tab to the password, press Enter."""
    page.goto(f"{base}/login/")
    page.get_by_label("User name").fill(person.username)
    page.keyboard.press("Tab")
    page.keyboard.type(person.password)
    page.keyboard.press("Enter")
    expect(page.get_by_text(f"{person.username} ·")).to_be_visible()


def post_alert(api: APIRequestContext, key: str, body: bytes) -> dict[str, Any]:
    response = api.post(
        "/api/v1/alerts/generic/",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        data=body,
    )
    assert response.status == 202, response.text()
    return response.json()


def runner_post(api: APIRequestContext, key: str, path: str, payload: dict[str, Any] | None = None) -> Any:
    response = api.post(path, headers={"Authorization": f"Bearer {key}"}, data=payload or {})
    assert response.status == 200, (path, response.status, response.text())
    return response.json()


def wait_for_fragments(page: Page) -> None:
    """The run page loads its handover box and replays over htmx; wait until both arrived."""
    expect(page.locator("#handover-box")).not_to_contain_text("loading…")
    expect(page.locator("#run-replays table, #run-replays p.muted").first).to_be_visible()


def upload(
    page: Page,
    files: dict[str, str],
    complete: bool,
    before_load: Callable[[], None] | None = None,
    expect_message: str = "Loaded:",
) -> None:
    """Open the ledger's upload form, choose the files by kind, tick "complete" or not, and load."""
    form = page.locator("form.ledger-upload")
    if not form.is_visible():
        page.locator("details:has(form.ledger-upload) > summary").click()
    for field_name, file_name in files.items():
        form.locator(f"input[name={field_name}]").set_input_files(LEDGER / file_name)
    checkbox = form.locator("input[name=is_destination_complete]")
    checkbox.set_checked(complete)
    if before_load is not None:
        before_load()
    form.get_by_role("button", name="Load").click()
    expect(page.locator("#ledger-messages")).to_contain_text(expect_message)


# --- the journey ----------------------------------------------------------------------------------


def test_incident_journey_from_first_alert_to_closed_handover(
    world: World,
    worker: Worker,
    browser_cookies_without_dates: None,
    page: Page,
    new_context: Callable[..., Any],
    api: APIRequestContext,
    live_server: Any,
    tmp_path: Path,
) -> None:
    base = live_server.url
    page.set_default_timeout(TIMEOUT_MS)
    shot = Shots(tmp_path)
    sam, bella, tom = world.support, world.business, world.technical
    sam.page = page
    problems: list[str] = []
    watch_console(page, problems)

    # The clock stands still between steps (tick=False): each step happens at the time it names.
    with time_machine.travel(berlin("2026-11-28 02:19:41"), tick=False) as clock:
        # -- 02:19 to 02:33: the scheduler reports the failure, its retry, and redelivers the retry ------
        first = post_alert(api, world.alert_key, (ALERTS / "01-first-failure.json").read_bytes())
        clock.move_to(berlin("2026-11-28 02:31:03"))
        retry = post_alert(api, world.alert_key, (ALERTS / "02-retry-failure.json").read_bytes())
        clock.move_to(berlin("2026-11-28 02:33:00"))
        again = post_alert(api, world.alert_key, (ALERTS / "03-duplicate-redelivery.json").read_bytes())
        assert [a["outcome"] for r in (first, retry, again) for a in r["alerts"]] == [
            "accepted",
            "accepted",
            "duplicate",
        ]
        run = Run.objects.get(public_id=first["alerts"][0]["run"])
        assert retry["alerts"][0]["run"] == again["alerts"][0]["run"] == str(run.public_id)
        run_url = f"{base}/runs/{run.public_id}/"

        # -- 08:45: support opens the runs list and the run ------------------------------------------------
        clock.move_to(berlin("2026-11-28 08:45:00"))
        log_in(page, base, sam)
        expect(page.locator("table tbody tr")).to_have_count(1)
        expect(page.locator("table tbody tr").first).to_contain_text("failed")
        shot(page, "runs-list")
        page.get_by_role("link", name="nightly-invoice-export").click()
        page.wait_for_url(run_url)
        wait_for_fragments(page)
        expect(page.locator("h1")).to_contain_text("nightly-invoice-export · acme-foods · prod")
        expect(page.locator("#attempts + figure svg.time-axis")).to_be_visible()
        shot(page, "run-failed")

        # -- 09:00: the population, the runner's report and the gateway's first (incomplete) export -----
        clock.move_to(berlin("2026-11-28 09:00:00"))
        upload(
            page,
            {
                "population": "population.csv",
                "runner_report": "runner-report.csv",
                "destination": "destination-0900.csv",
            },
            complete=False,
            before_load=lambda: shot(page, "ledger-upload", focus=page.locator("form.ledger-upload")),
        )
        ledger = page.locator("#ledger")
        expect(ledger.locator(".ledger-headline")).to_contain_text("Not reconciled")
        row_1004 = ledger.locator("table.ledger-items tr", has=page.locator("code", has_text="INV-1004"))
        expect(row_1004).to_contain_text("uncertain")
        shot(page, "ledger-loaded-one-uncertain", focus=ledger.locator(".ledger-headline"))

        # -- 09:10: the payment provider found INV-1004: verified with its reference ----------------------
        clock.move_to(berlin("2026-11-28 09:10:00"))
        page.get_by_label("Provider reference for INV-1004").fill("pp-op-7731")
        shot(page, "ledger-verify-uncertain", focus=ledger.locator("table.ledger-items"))
        page.get_by_role("button", name="INV-1004 found by the provider").click()
        expect(page.locator(".messages li.success")).to_contain_text("INV-1004 verified: completed")

        # -- 09:30: the gateway's export is complete now: INV-1003 and INV-1005 never arrived -------------
        clock.move_to(berlin("2026-11-28 09:30:00"))
        upload(page, {"destination": "destination-0930-complete.csv"}, complete=True)
        expect(ledger.locator(".ledger-headline")).to_contain_text("2 absent")
        shot(page, "ledger-two-absent", focus=ledger.locator(".ledger-headline"))
        ledger.get_by_label("Failure class").select_option("partially_committed")
        ledger.locator("form[action$='/items/failure-class/']").get_by_role("button", name="Confirm").click()
        expect(page.locator(".messages li.success")).to_contain_text("Failure class confirmed")

        # -- 09:35: support drafts the handover, writes it, names the owners, and hands it over ----------
        clock.move_to(berlin("2026-11-28 09:35:00"))
        wait_for_fragments(page)
        page.locator("#handover-box").get_by_role("link", name="Draft a handover").click()
        page.get_by_role("button", name="Draft the handover").click()
        expect(page.locator(".messages li.success")).to_contain_text("Handover drafted")
        handover_url = page.url
        page.get_by_role("link", name="Edit", exact=True).click()
        page.get_by_role("textbox", name="What is safe to do next").fill(
            "Replay only INV-1003 and INV-1005 (confirmed absent in the complete export). "
            "Do NOT rerun the whole batch: INV-1001, -1002 and -1004 are already in the ledger gateway."
        )
        page.get_by_role("textbox", name="Business impact").fill(
            "Acme Foods' accounts team cannot send two invoices (EUR 1,504.10) to their customers since 02:00; "
            "month-end close on 2026-11-30 waits for them."
        )
        page.get_by_role("textbox", name="Escalation owner").fill(tom.username)
        page.get_by_role("textbox", name="Customer update owner").fill(bella.username)
        page.get_by_role("textbox", name="Engineering defect").fill("https://tracker.example/INV-EXPORT-412")
        for box in page.locator("fieldset input[type=checkbox]").all():
            box.check()
        page.get_by_role("button", name="Save").click()
        expect(page.locator(".messages li.success")).to_contain_text("Saved")
        shot(page, "handover-written")
        clock.move_to(berlin("2026-11-28 09:38:00"))
        page.get_by_role("button", name="Hand over").click()
        expect(page.locator("h1")).to_contain_text("Handed over")

        # -- 09:40: support requests a replay of the two absent invoices ----------------------------------
        clock.move_to(berlin("2026-11-28 09:40:00"))
        page.goto(run_url)
        wait_for_fragments(page)
        page.locator("#run-replays").get_by_role("link", name="Request replay").click()
        page.get_by_label("All absent items (2)").check()
        page.get_by_label("Reason").fill(
            "INV-1003 and INV-1005 are absent from the complete gateway export; the gateway deduplicates on "
            "the invoice number, so a replay of these two cannot double-post."
        )
        shot(page, "replay-request")
        page.get_by_role("button", name="Request replay").click()
        expect(page.locator(".messages li.success")).to_contain_text("Replay requested")
        replay_url = page.url
        expect(page.locator("h1")).to_contain_text("pending")
        worker.work()  # the worker e-mails the eligible approvers

        # -- 09:50 and 09:55: the business owner and the technical owner approve from their queues --------
        for approver, kind, at in ((bella, "business", "09:50"), (tom, "technical", "09:55")):
            clock.move_to(berlin(f"2026-11-28 {at}:00"))
            approver.page = new_context().new_page()
            approver.page.set_default_timeout(TIMEOUT_MS)
            watch_console(approver.page, problems)
            log_in(approver.page, base, approver)
            # in-app: bella was asked to approve; tom too, and he was handed the handover at 09:38
            expect(approver.page.get_by_test_id("unread-count")).to_have_text("1" if kind == "business" else "2")
            approver.page.get_by_role("link", name="Replays").click()
            row = approver.page.locator("tr[id^=queue-]")
            expect(row).to_have_count(1)
            expect(row.locator("select[name=kind] option")).to_have_text([kind])
            row.get_by_label("your password").fill(approver.password)
            shot(approver.page, f"queue-{kind}-owner")
            row.get_by_label("your password").press("Enter")  # the keyboard submits the queue's form
            expect(approver.page.locator("tr[id^=queue-]")).to_contain_text("decided")
        assert "approvals.replay_request_dispatch" in worker.work()

        # -- 09:57: bella's unread count moved (approved, dispatched); she reads them and it is gone ---------
        bella.page.reload()
        expect(bella.page.get_by_test_id("unread-count")).to_have_text("3")
        bella.page.get_by_test_id("nav-notifications").click()
        expect(bella.page.get_by_test_id("notification-list")).to_contain_text("Replay dispatched to the job's runner")
        bella.page.get_by_role("button", name="Mark all read").click()
        expect(bella.page.get_by_test_id("unread-count")).to_have_count(0)

        # -- 09:58: tom issues the job's runner credential on the job page (shown once) ---------------------
        clock.move_to(berlin("2026-11-28 09:58:00"))
        tom.page.get_by_role("link", name="Jobs").click()
        tom.page.get_by_role("link", name="nightly-invoice-export").click()
        tom.page.get_by_label("Label").fill("invoice runner")
        tom.page.get_by_role("button", name="Issue a runner credential").click()
        issued = tom.page.get_by_test_id("runner-credential-issued").locator("code.secret")
        runner_key = issued.inner_text().strip()
        assert runner_key.startswith("rc_")
        expect(tom.page.get_by_test_id("runner-curl")).to_contain_text(f"{base}/api/v1/replays/claimable/")
        tom.page.reload()  # shown once: a reload neither shows it nor issues another
        expect(tom.page.get_by_test_id("runner-credential-issued")).to_have_count(0)
        assert RunnerCredential.objects.filter(job=world.job).count() == 1

        # -- 10:00: the runner claims the replay, runs it and reports --------------------------------------
        clock.move_to(berlin("2026-11-28 10:00:00"))
        replay_id = replay_url.rstrip("/").rsplit("/", 1)[-1]
        claimable = api.get("/api/v1/replays/claimable/", headers={"Authorization": f"Bearer {runner_key}"})
        assert claimable.status == 200
        assert [r["id"] for r in claimable.json()] == [replay_id]  # dispatched by the worker, not leased yet
        lease = runner_post(api, runner_key, f"/api/v1/replays/{replay_id}/claim/")
        assert lease["claimed_now"] is True
        again_lease = runner_post(api, runner_key, f"/api/v1/replays/{replay_id}/claim/")
        assert (again_lease["dispatch"], again_lease["claimed_now"]) == (lease["dispatch"], False)
        assert sorted(lease["replay"]["record_ids"]) == ["INV-1003", "INV-1005"], lease["replay"]
        report = {
            "idempotency_key": lease["idempotency_key"],
            "execution_id": "exp-20261128-replay-1",
            "status": "running",
            "started_at": berlin("2026-11-28 10:00:20").isoformat(),
        }
        assert (
            runner_post(api, runner_key, f"/api/v1/replays/{replay_id}/runner-report/", report)["attempt_status"]
            == "running"
        )
        clock.move_to(berlin("2026-11-28 10:02:00"))
        report.update(status="succeeded", ended_at=berlin("2026-11-28 10:01:48").isoformat())
        done = runner_post(api, runner_key, f"/api/v1/replays/{replay_id}/runner-report/", report)
        assert (done["dispatch_status"], done["attempt_status"]) == ("succeeded", "succeeded")
        assert done["replay_status"] == "dispatched"  # the ledger has not confirmed the two invoices yet

        # -- 10:05: support loads the gateway's export again; the beat completes the replay ---------------
        clock.move_to(berlin("2026-11-28 10:05:00"))
        page.goto(run_url)
        upload(page, {"destination": "destination-1005-after-replay.csv"}, complete=True)
        expect(ledger.locator(".ledger-headline")).to_contain_text("Reconciled")
        assert replay_tasks.replay_sweep()["completed"] == 1  # the beat's tick, as its task function
        page.goto(replay_url)
        expect(page.locator("h1")).to_contain_text("completed")
        shot(page, "replay-completed", focus=page.get_by_role("heading", name="Dispatch and delivery log"))

        # -- 10:06: the gateway sends a second, partial export "complete for the window": only the two -----
        # replayed invoices. Taken as the whole truth it would make three delivered invoices absent: it is
        # not applied, it waits with its preview, and support discards it.
        clock.move_to(berlin("2026-11-28 10:06:00"))
        page.goto(run_url)
        upload(page, {"destination": "destination-1006-replayed-only.csv"}, complete=True, expect_message="Not applied")
        waiting = page.locator(".ledger-awaiting")
        expect(waiting).to_contain_text("Destination export #4")
        expect(waiting).to_contain_text("would weaken 3 records")
        expect(waiting.locator("table.ledger-preview tbody tr")).to_have_count(3)
        expect(ledger.locator(".ledger-headline")).to_contain_text("Reconciled")  # nothing applied
        shot(page, "ledger-second-export-waits", focus=waiting)
        waiting.get_by_label("Why not apply it?").fill("a partial export: the gateway re-sent only the replayed two")
        waiting.get_by_role("button", name="Discard the load").click()
        expect(page.locator("#ledger-messages")).to_contain_text("discarded")
        expect(page.locator(".ledger-awaiting")).to_have_count(0)

        # -- 10:08: sam and tom edit the handover at once: nobody's text is overwritten unseen ------------
        clock.move_to(berlin("2026-11-28 10:08:00"))
        edit_url = f"{handover_url}edit/"
        page.goto(edit_url)
        tom.page.goto(edit_url)
        page.get_by_role("textbox", name="Deadlines and waiting downstream tasks").fill(
            "Month-end close on 2026-11-30 09:00 waits for INV-1003 and INV-1005."
        )
        page.get_by_role("button", name="Save").click()
        expect(page.locator(".messages li.success")).to_contain_text("Saved")
        tom.page.get_by_role("textbox", name="Deadlines and waiting downstream tasks").fill(
            "Month-end close 2026-11-30; the dunning run at 06:00 reads the two invoices first."
        )
        tom.page.get_by_role("button", name="Save").click()
        conflict = tom.page.locator("#conflict-deadlines")
        expect(conflict.locator(".conflict-theirs")).to_contain_text("09:00 waits for INV-1003")
        shot(tom.page, "handover-conflicting-edit", focus=tom.page.locator(".edit-conflicts"))
        conflict.get_by_label("edit (the box below)").check()
        tom.page.get_by_role("textbox", name="Deadlines and waiting downstream tasks").fill(
            "Month-end close on 2026-11-30 09:00 waits for INV-1003 and INV-1005; the dunning run at 06:00 "
            "reads them first."
        )
        tom.page.get_by_role("button", name="Save").click()
        expect(tom.page.locator(".messages li.success")).to_contain_text("Saved")

        # -- 10:10: support moves the handover to verifying: the next-run check is scheduled ---------------
        clock.move_to(berlin("2026-11-28 10:10:00"))
        page.goto(handover_url)
        expect(page.locator("h1")).to_contain_text("Recovering")
        page.get_by_role("button", name="Verify the next run").click()
        expect(page.locator("h1")).to_contain_text("Verifying")
        check = NextRunCheck.objects.get(target__tenant=world.tenant)
        assert check.expected_at == berlin("2026-11-29 02:00")
        shot(page, "handover-verifying", focus=page.get_by_role("heading", name="Runs and executions"))

        # -- 2026-11-29 02:13: the next scheduled run succeeds, reported through the tenant's key ---------
        clock.move_to(berlin("2026-11-29 02:13:00"))
        nxt = post_alert(api, world.alert_key, (ALERTS / "04-next-run-ok.json").read_bytes())
        assert nxt["alerts"][0]["outcome"] == "accepted"
        clock.move_to(berlin("2026-11-29 02:14:00"))
        swept = check_tasks.next_run_check_sweep()  # the beat's tick: the success is in time, but the run has no ledger
        assert (swept["due"], swept["passed"], swept["awaiting_confirmation"]) == (1, 0, 1)
        check.refresh_from_db()
        assert check.status == "scheduled" and check.evidence_attempt is not None

        # -- 08:30: support confirms duplicates were checked (the next run has no ledger): passed ---------
        clock.move_to(berlin("2026-11-29 08:30:00"))
        log_in(page, base, sam)  # yesterday's session has expired (12 hours)
        page.get_by_role("link", name="Next-run checks").click()
        page.locator("table a", has_text="acme-foods").first.click()
        expect(page.locator("h1")).to_contain_text("scheduled")
        expect(page.locator("dl.facts")).to_contain_text("awaiting a person's confirmation")
        page.get_by_label("How duplicates were checked").fill(
            "Compared the 2026-11-28 window's gateway export: INV-1010 and INV-1011 only, none of the recovered"
        )
        page.get_by_role("button", name="Confirm").click()
        expect(page.locator("h1")).to_contain_text("passed")
        shot(page, "next-run-check-passed")

        # -- 08:31: the beat resolves the handover; 08:35 support closes it -------------------------------
        clock.move_to(berlin("2026-11-29 08:31:00"))
        assert handover_tasks.handover_sweep_verifying()["resolved"] == 1
        clock.move_to(berlin("2026-11-29 08:35:00"))
        page.goto(handover_url)
        expect(page.locator("h1")).to_contain_text("Resolved")
        page.get_by_role("button", name="Close").click()
        expect(page.locator("h1")).to_contain_text("Closed")
        shot(page, "handover-closed")
        shot(page, "handover-closing-conditions", focus=page.get_by_role("heading", name="Closing conditions"))
        page.goto(run_url)
        wait_for_fragments(page)
        shot(page, "run-recovered")
        shot(page, "run-recovered-timeline", focus=page.get_by_role("heading", name="Timeline"))

        # -- the same pages on a phone ----------------------------------------------------------------
        page.set_viewport_size(PHONE)
        page.reload()
        wait_for_fragments(page)
        shot(page, "phone-run")
        page.goto(handover_url)
        shot(page, "phone-handover")
        worker.work()

    # Every page worked under the CSP (no inline script or style refused) and without a script error.
    assert not problems, problems
    _assert_business_records(world, run, replay_id, handover_url, worker)
    shot.publish()


# --- the business records ---------------------------------------------------------------------------


def _assert_business_records(world: World, run: Run, replay_id: str, handover_url: str, worker: Worker) -> None:
    from approvals.replays.models import Approval, Dispatch, ReplayRequest

    sam, bella, tom = world.support.user, world.business.user, world.technical.user
    run.refresh_from_db()

    # One dispatch, with one key, whose attempt is the replay's (rule 5, rule 7).
    replay = ReplayRequest.objects.get(public_id=replay_id)
    assert replay.status == ReplayRequest.Status.COMPLETED
    assert replay.requested_by == sam
    dispatches = list(Dispatch.objects.all())
    assert len(dispatches) == 1
    dispatch = dispatches[0]
    assert dispatch.request == replay and dispatch.status == "succeeded"
    assert dispatch.attempt.replay_key == dispatch.idempotency_key
    live = {a.kind: a for a in Approval.objects.filter(request=replay, voided_at__isnull=True)}
    assert {k: a.actor for k, a in live.items()} == {"business": bella, "technical": tom}
    assert all(a.scope_fingerprint == replay.scope_fingerprint for a in live.values())
    assert sorted(replay.items.values_list("work_item__record_id", flat=True)) == ["INV-1003", "INV-1005"]

    # The ledger: nothing unresolved, no possible duplicate; the provider's word kept in the history.
    items = dict(WorkItem.objects.filter(run=run).values_list("record_id", "outcome"))
    assert items == {
        "INV-1001": "completed",
        "INV-1002": "completed",
        "INV-1003": "completed",
        "INV-1004": "completed",
        "INV-1005": "completed",
        "INV-1006": "skipped",
    }
    assert not WorkItem.objects.filter(run=run, is_possible_duplicate=True).exists()
    assert (run.eligible_count, run.completed_count, run.skipped_count) == (5, 5, 1)
    assert (run.unresolved_count, run.possible_duplicate_count, run.rejected_count) == (0, 0, 0)
    verified = WorkItemChange.objects.get(work_item__record_id="INV-1004", kind="verify")
    assert (verified.from_outcome, verified.to_outcome) == ("uncertain", "completed")
    assert (verified.evidence_kind, verified.evidence_ref, verified.changed_by) == (
        "provider_lookup",
        "pp-op-7731",
        sam,
    )
    assert run.failure_class == "partially_committed" and run.failure_class_confirmed_by == sam

    # One attempt per execution; the redelivered alert is a duplicate of the original, nothing more.
    attempts = list(run.attempts.order_by("number").values_list("number", "trigger", "status", "execution_id"))
    assert attempts == [
        (1, "scheduled", "failed", "exp-20261128-0200-a1"),
        (2, "automatic_retry", "failed", "exp-20261128-0200-a2"),
        (3, "manual_replay", "succeeded", "exp-20261128-replay-1"),
    ]
    assert run.status == "succeeded"
    alerts = list(Alert.objects.filter(attempt__run=run).order_by("id"))
    assert [a.outcome for a in alerts] == ["accepted", "accepted", "duplicate"]
    assert alerts[2].duplicate_of == alerts[1]
    assert len({a.delivery_id for a in alerts}) == 3  # three posts, each kept
    next_run = Run.objects.exclude(pk=run.pk).get()
    assert list(next_run.attempts.values_list("trigger", "status")) == [("scheduled", "succeeded")]

    # The next-run check passed on the next run's scheduled attempt, and the handover links it.
    check = NextRunCheck.objects.get()
    assert check.status == "passed" and check.recovered_run == run
    assert check.evidence_attempt == next_run.attempts.get()
    handover = Handover.objects.get(public_id=handover_url.rstrip("/").rsplit("/", 1)[-1])
    assert handover.status == "closed" and handover.closed_by == sam and handover.handed_over_by == sam
    assert handover.escalation_owner == tom
    assert handover.links.get().next_run_check == check
    assert handover.deadlines.startswith("Month-end close on 2026-11-30 09:00") and "dunning run" in handover.deadlines
    from runs.ledger.models import WorkItemLoad

    loads = list(WorkItemLoad.objects.filter(run=run, kind="destination").order_by("number"))
    assert [(ld.number, ld.status) for ld in loads] == [
        (1, "committed"),
        (2, "committed"),
        (3, "committed"),
        (4, "discarded"),
    ]
    assert handover.handed_over_at < handover.verifying_at < handover.resolved_at < handover.closed_at

    # Who was told: the approvers of the request, the escalation owner of the handover.
    recipients = {address for message in mail.outbox for address in message.to}
    assert {"business-owner@acme.example", "tech-owner@acme.example"} <= recipients
    assert set(worker.enqueued) >= {"approvals.replay_request_dispatch", "handover.notification_deliver"}
    from handover.notifications.models import Notification, NotificationDelivery

    told = sorted(Notification.objects.values_list("recipient__username", "event"))
    assert ("business-owner", "approval_needed") in told and ("tech-owner", "approval_needed") in told
    assert ("tech-owner", "handed_over") in told and ("support", "replay_completed") in told
    assert len(told) == len(set(told))  # once per person and event
    assert not NotificationDelivery.objects.filter(status="pending").exists()  # the worker sent every one
    assert "runs.next_run_check_notify_failed" not in worker.enqueued

    # The run's timeline: complete and in order (the redelivered alert added nothing), every event with
    # its job, tenant and summary, recorded in the order it was written.
    events = list(TimelineEvent.objects.filter(run=run).order_by("occurred_at", "recorded_at", "id"))
    story = "\n".join(f"{e.occurred_at:%Y-%m-%d %H:%M:%S}Z {e.kind}: {e.summary}" for e in events)
    assert [e.kind for e in events] == [
        "attempt_failed",  # 01: attempt 1, 02:19 Berlin
        "attempt_failed",  # 02: attempt 2, the automatic retry (03, its redelivery, is only a duplicate alert)
        "work_items_loaded",  # population, runner report, first export: one event with the counts
        "failure_class_suggested",
        "work_item_verified",  # INV-1004, provider reference pp-op-7731
        "work_items_loaded",  # the complete export: INV-1003 and INV-1005 absent
        "failure_class_confirmed",
        "handover_created",
        "handover_edited",
        "handover_handed_over",
        "replay_requested",
        "handover_recovering",
        "replay_approval",  # business, bella
        "replay_approval",  # technical, tom
        "replay_approved",
        "replay_dispatched",  # once
        "replay_claimed",
        "replay_attempt_linked",  # rule 7: the job's runner credential and the replay's key
        "replay_attempt_started",
        "attempt_running",
        "attempt_succeeded",
        "replay_attempt_succeeded",
        "work_items_loaded",  # the export after the replay: nothing unresolved
        "failure_class_suggested",  # the suggestion withdrawn: the run succeeded
        "next_run_check_scheduled",
        "replay_completed",
        "work_items_load_awaiting_confirmation",  # 10:06 the partial export: not applied, waits
        "work_items_load_discarded",
        "handover_edited",  # 10:08 sam's deadlines
        "handover_edited",  # tom's, written after he saw sam's beside his own
        "handover_verifying",
        "next_run_check_awaiting_confirmation",  # the next run succeeded; it has no ledger
        "next_run_check_confirmed",
        "next_run_check_passed",
        "handover_resolved",
        "handover_closed",
    ], story
    by_id = sorted(events, key=lambda e: e.id)
    assert [e.recorded_at for e in by_id] == sorted(e.recorded_at for e in by_id)
    assert all(e.job_id == run.job_id and e.tenant_id == run.tenant_id and e.summary for e in events)
    actors = {e.kind: e.actor_user for e in events}
    assert actors["handover_closed"] == sam and actors["next_run_check_confirmed"] == sam
    assert actors["handover_resolved"] is None  # the system's act
    assert [e.actor_user for e in events if e.kind == "replay_approval"] == [bella, tom]

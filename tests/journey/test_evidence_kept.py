"""In a real browser: a second destination export that would weaken the ledger waits for a person (preview,
list, confirmation), and two tabs editing one handover never overwrite each other unseen.

Slow (a browser and a live server), PostgreSQL only, like the incident journey. With
``HANDOVER_SHOTS_DIR`` set, the screenshots of both stories are written there.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from playwright.sync_api import BrowserContext, Page, expect

from handover.handovers.models import Handover
from handover.handovers.services import handover_create
from runs.attempts.models import Run
from runs.catalog.services import role_grant
from runs.ledger.loads import LoadFile, work_item_loads_create
from runs.ledger.models import WorkItem, WorkItemChange, WorkItemLoad
from tests.factories import AttemptFactory, RunFactory

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        "postgresql" not in settings.DATABASES["default"]["ENGINE"],
        reason="browser tests run on PostgreSQL (SQLite skips them)",
    ),
]
PASSWORD = "sam-pass-7Q!x"
TIMEOUT_MS = 15_000
SHOTS = os.environ.get("HANDOVER_SHOTS_DIR", "")


def shot(page: Page, name: str, focus: Any = None) -> None:
    if not SHOTS:
        return
    if focus is not None:
        focus.scroll_into_view_if_needed()
    Path(SHOTS).mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(Path(SHOTS) / f"{name}.png"))


def csv(*lines: str) -> bytes:
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def support(db: None) -> Any:
    return get_user_model().objects.create_user("sam", email="sam@acme.example", password=PASSWORD)


@pytest.fixture
def eleven(support: Any) -> Run:
    """A failed run with 11 items: 5 completed (INV-5 twice), X-1 not eligible, INV-6/7 absent, INV-8..10 unverified."""
    run = RunFactory(status=Run.Status.FAILED)
    AttemptFactory(run=run, status="failed", started_at=run.scheduled_for)
    role_grant(user=support, role="support", obj=run.tenant)
    eligible = [f"INV-{n}" for n in range(1, 11)]
    first = ["INV-1,d1", "INV-2,d2", "INV-3,d3", "INV-4,d4", "INV-5,d5", "INV-5,d5b", "X-1,dx"]
    work_item_loads_create(
        actor=support,
        run=run,
        files=[
            LoadFile(kind="population", content=csv("record_id", *eligible), file_name="population.csv"),
            LoadFile(kind="destination", content=csv("record_id,reference", *first), file_name="export-1.csv"),
        ],
    )
    work_item_loads_create(
        actor=support,
        run=run,
        files=[LoadFile("provider_lookup", csv("record_id,found", "INV-6,no", "INV-7,no"), "lookup.csv")],
    )
    return Run.objects.get(pk=run.pk)


def log_in(page: Page, base: str) -> None:
    page.goto(f"{base}/login/")
    page.get_by_label("User name").fill("sam")
    page.keyboard.press("Tab")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    expect(page.get_by_text("sam ·")).to_be_visible()


def test_a_second_export_waits_with_its_preview_and_applies_only_when_confirmed(
    eleven: Run, page: Page, live_server: Any, tmp_path: Path
) -> None:
    page.set_default_timeout(TIMEOUT_MS)
    base = live_server.url
    log_in(page, base)
    page.goto(f"{base}/runs/{eleven.public_id}/")
    before = dict(WorkItem.objects.filter(run=eleven).values_list("record_id", "outcome"))
    replayed = tmp_path / "export-2.csv"
    replayed.write_bytes(csv("record_id,reference", "INV-6,r6", "INV-7,r7"))

    form = page.locator("form.ledger-upload")
    if not form.is_visible():
        page.locator("details:has(form.ledger-upload) > summary").click()
    form.locator("input[name=destination]").set_input_files(replayed)
    form.locator("input[name=is_destination_complete]").check()
    form.get_by_role("button", name="Load").click()

    card = page.locator(".ledger-awaiting")
    expect(card).to_contain_text("would weaken 6 records")
    expect(card).to_contain_text("Destination export #2")
    expect(card.locator("table.ledger-preview tbody tr")).to_have_count(6)
    expect(page.locator("#ledger-messages")).to_contain_text("Not applied")
    shot(page, "after-ledger-second-export-waits", focus=card)
    assert dict(WorkItem.objects.filter(run=eleven).values_list("record_id", "outcome")) == before
    with page.expect_download() as download:
        card.get_by_role("link", name="Download the whole list (CSV)").click()
    assert download.value.suggested_filename == "destination-2-weakened.csv"

    card.get_by_label("Why may these records be weakened?").fill("the gateway's export is the full day")
    card.get_by_role("button", name="Apply, weakening these records").click()
    expect(page.locator("#ledger-messages")).to_contain_text("applied")
    expect(page.locator(".ledger-awaiting")).to_have_count(0)
    shot(page, "after-ledger-second-export-confirmed", focus=page.locator("#ledger"))
    assert WorkItem.objects.filter(run=eleven).count() == 11  # nothing deleted
    assert WorkItemChange.objects.filter(run=eleven, kind="weaken").count() == 5
    load = WorkItemLoad.objects.get(run=eleven, kind="destination", number=2)
    assert (load.status, load.confirmed_by.get_username()) == ("committed", "sam")


def test_two_tabs_editing_one_handover_never_overwrite_each_other(
    eleven: Run, support: Any, context: BrowserContext, live_server: Any
) -> None:
    base = live_server.url
    handover = handover_create(actor=support, runs=[eleven])
    one, two = context.new_page(), context.new_page()
    for tab in (one, two):
        tab.set_default_timeout(TIMEOUT_MS)
    log_in(one, base)
    edit = f"{base}/handovers/{handover.public_id}/edit/"
    one.goto(edit)
    two.goto(edit)

    one.get_by_role("textbox", name="Deadlines and waiting downstream tasks").fill("Billing run at 09:00")
    one.get_by_role("button", name="Save").click()
    expect(one.locator(".messages li.success")).to_contain_text("Saved")
    two.get_by_role("textbox", name="Recent deployments or configuration changes").fill("Gateway 4.2 on Monday")
    two.get_by_role("button", name="Save").click()
    expect(two.locator(".messages")).to_contain_text("did not overlap")
    saved = Handover.objects.get(pk=handover.pk)
    assert (saved.deadlines, saved.recent_changes) == ("Billing run at 09:00", "Gateway 4.2 on Monday")

    # now both change the same section
    one.goto(edit)
    two.goto(edit)
    one.get_by_role("textbox", name="Deadlines and waiting downstream tasks").fill("Billing run moved to 11:00")
    one.get_by_role("button", name="Save").click()
    expect(one.locator(".messages li.success")).to_contain_text("Saved")
    two.get_by_role("textbox", name="Deadlines and waiting downstream tasks").fill("Billing run at 10:00")
    two.get_by_role("button", name="Save").click()
    conflict = two.locator("#conflict-deadlines")
    expect(conflict.locator(".conflict-mine")).to_have_text("Billing run at 10:00")
    expect(conflict.locator(".conflict-theirs")).to_have_text("Billing run moved to 11:00")
    shot(two, "after-conflicting-edit-side-by-side", focus=two.locator(".edit-conflicts"))
    assert Handover.objects.get(pk=handover.pk).deadlines == "Billing run moved to 11:00"  # nothing overwritten

    conflict.get_by_label("keep theirs").check()
    two.get_by_role("button", name="Save").click()
    expect(two.locator(".messages li.success")).to_contain_text("Saved")
    assert Handover.objects.get(pk=handover.pk).deadlines == "Billing run moved to 11:00"

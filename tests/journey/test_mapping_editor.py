"""The custom-integration editor in a browser (Debian's Chromium, htmx live): an admin opens the editor of
a Nomad integration whose mapping misses a status, reads what the picked delivery makes field by field,
writes the fix, ticks and unticks stored deliveries (Save follows the ticked samples), saves, reprocesses
the waiting alert, then a sample posted through the real endpoint shows as its run.

Slow suite, PostgreSQL (the live server and the test share real transactions).
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
import time_machine
from django.conf import settings
from django.contrib.auth import get_user_model
from playwright.sync_api import Browser, Page, expect

from runs.alerts.models import Alert, Delivery
from runs.attempts.models import Run
from runs.catalog.models import Tenant
from tests.conftest import PostAlert
from tests.runs.custom_support import CustomStory, create_custom_story, data_path, load_mapping, utc

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        "postgresql" not in settings.DATABASES["default"]["ENGINE"],
        reason="browser tests run on PostgreSQL (SQLite skips them)",
    ),
]
PASSWORD = "ada-pass-7Q!x"
TIMEOUT_MS = 15_000


@pytest.fixture
def nomad(story_tenants: dict[str, Tenant], post_alert: PostAlert) -> CustomStory:
    """Nomad's integration (its mapping has no ``lost`` status) with three stored posts, oldest first:
    one that maps, one left ``unmatched`` by the missing status, one that is not JSON (``rejected``)."""
    story = create_custom_story("nomad", ["borealis-retail"], post_alert)
    story.post("01-first-failure.json", at=utc(2026, 11, 28, 1, 19, 41))
    story.post("05-lost-allocation.json", at=utc(2026, 11, 28, 1, 35))
    with time_machine.travel(utc(2026, 11, 28, 1, 40), tick=False):
        assert post_alert("custom", b'{"Events": [', story.key).status_code == 400
    return story


def fixed_mapping() -> dict[str, Any]:
    mapping = load_mapping("nomad")
    mapping["status_map"]["lost"] = "failed"
    return mapping


def delivery_box(page: Page, delivery: Delivery) -> Any:
    return page.locator(f'input[name="deliveries"][value="{delivery.public_id}"]')


def test_the_editor_maps_field_by_field_saves_on_the_ticked_samples_and_a_post_becomes_a_run(
    browser: Browser, live_server: Any, nomad: CustomStory
) -> None:
    get_user_model().objects.create_user("ada", password=PASSWORD, is_staff=True, is_superuser=True)
    mapped, lost, broken = Delivery.objects.order_by("received_at")
    assert (mapped.outcome, lost.outcome, broken.outcome) == ("processed", "processed", "rejected")
    waiting = Alert.objects.get(delivery=lost)
    # the unmatched reason is short and names the field
    assert waiting.outcome == Alert.Outcome.UNMATCHED and "status" in waiting.reason and len(waiting.reason) <= 300
    base = live_server.url
    context = browser.new_context(viewport={"width": 1280, "height": 800}, locale="en-GB")
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    try:
        page.goto(f"{base}/login/")
        page.get_by_label("User name").fill("ada")
        page.get_by_label("Password").fill(PASSWORD)
        page.keyboard.press("Enter")
        expect(page.get_by_text("ada ·")).to_be_visible()

        # the editor: the picker shows each stored delivery's outcome; the newest that was parsed is
        # ticked, not the newest (rejected) one, which can never map
        page.goto(f"{base}/integrations/{nomad.integration.public_id}/mapping/")
        picker = page.locator("fieldset")
        expect(picker).to_contain_text("rejected · 0 alert(s)")
        expect(picker).to_contain_text("processed · 1 alert(s), 1 unmatched")
        expect(delivery_box(page, lost)).to_be_checked()
        expect(delivery_box(page, broken)).not_to_be_checked()
        expect(delivery_box(page, mapped)).not_to_be_checked()

        # the picked sample, field by field: what each expression found, and the error in plain words
        result = page.locator("#mapping-result")
        card = result.locator(".mapping-sample")
        expect(card).to_have_count(1)
        expect(card).to_contain_text("does not map")
        expect(card).to_contain_text("When it was received: processed: 1 alert, 1 unmatched")
        status_row = card.locator("table.mapping-fields tr", has=page.locator("th", has_text="status")).first
        expect(status_row.locator("code")).to_have_text("ClientStatus")  # the expression that read it
        expect(status_row.locator("td").nth(1)).to_have_text("lost")  # what it found
        expect(status_row).to_contain_text("the value 'lost' has no mapping")
        save = page.locator("#mapping-save")
        expect(save).to_be_disabled()
        expect(result).to_contain_text("Enabled once the mapping has no error and every ticked or pasted sample maps")

        # a pasted payload naming a job nobody registered: the preview says so next to the other problem
        typo = data_path("nomad", "05-lost-allocation.json").read_text().replace("invoice-export/", "invoice-exprt/")
        page.locator("#mapping-form textarea[name=sample]").fill(typo)
        pasted = result.locator(".mapping-sample", has_text="pasted sample")
        expect(pasted).to_contain_text("job 'nightly-invoice-exprt' is not registered")
        expect(pasted).to_contain_text("the value 'lost' has no mapping")
        page.locator("#mapping-form textarea[name=sample]").fill("")
        expect(result.locator(".mapping-sample")).to_have_count(1)

        # write the fix: the preview follows the typing, the sample maps, Save is enabled
        page.locator("#mapping-form textarea[name=mapping]").fill(json.dumps(fixed_mapping(), indent=2))
        expect(card).to_contain_text("maps")
        expect(card).not_to_contain_text("does not map")
        expect(save).to_be_enabled()
        status_row = card.locator("table.mapping-fields tr", has=page.locator("th", has_text="status")).first
        expect(status_row).to_contain_text("failed")
        execution_row = card.locator("table.mapping-fields tr", has=page.locator("th", has_text="execution_id")).first
        expect(execution_row.locator("code")).not_to_have_text("—")  # the expression that read it
        expect(execution_row).not_to_have_class("mapping-field-bad")

        # tick the other parsed delivery: two samples, both map
        delivery_box(page, mapped).check()
        expect(result.locator(".mapping-sample")).to_have_count(2)
        expect(result).to_contain_text("2 samples map.")
        expect(save).to_be_enabled()
        # tick the rejected one: its own outcome and why it cannot map; Save is disabled
        delivery_box(page, broken).check()
        expect(result.locator(".mapping-sample")).to_have_count(3)
        broken_card = result.locator(".mapping-sample", has_text="rejected:")
        expect(broken_card).to_contain_text("does not map")
        expect(broken_card).to_contain_text("not valid JSON")
        expect(save).to_be_disabled()
        # untick it: Save follows the ticked samples again
        delivery_box(page, broken).uncheck()
        expect(result.locator(".mapping-sample")).to_have_count(2)
        expect(save).to_be_enabled()

        save.click()
        expect(page.locator("h1")).to_contain_text("nomad-prod")
        expect(page.get_by_text("Mapping saved: 2 sample(s) map.")).to_be_visible()
        nomad.integration.refresh_from_db()
        assert nomad.integration.settings["mapping"]["status_map"]["lost"] == "failed"

        # the waiting alert, reprocessed from the page with the saved mapping
        page.get_by_role("button", name="Reprocess unmatched alerts of this integration").click()
        expect(page.get_by_text("Reprocessed 1 unmatched alert: 1 accepted.")).to_be_visible()
        waiting.refresh_from_db()
        assert waiting.outcome == Alert.Outcome.ACCEPTED and waiting.attempt is not None

        # a sample posted through the real endpoint becomes its run, shown on the run page
        request = urllib.request.Request(
            f"{base}/api/v1/alerts/custom/",
            data=data_path("nomad", "02-retry-failure.json").read_bytes(),
            headers={"Authorization": f"Bearer {nomad.key}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 202
            alerts = json.loads(answer.read())["alerts"]
        assert {a["outcome"] for a in alerts} <= {"accepted", "duplicate"} and alerts[0]["run"]
        run = Run.objects.get(public_id=alerts[0]["run"])
        page.goto(f"{base}/runs/{run.public_id}/")
        expect(page.locator("main")).to_contain_text(run.job.key)
        expect(page.locator("main")).to_contain_text("borealis-retail")
    finally:
        context.close()

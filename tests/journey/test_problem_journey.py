"""In a real browser: one problem behind two tenants' handovers, its fix deployed, verified after N clean runs
of both targets, then closed (docs/problems.md).

Slow (a browser and a live server), PostgreSQL only, like the other journeys. With ``HANDOVER_SHOTS_DIR``
set, screenshots are written there.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import Page, expect

from handover.handovers.models import Handover
from handover.handovers.services import handover_create
from handover.problems import tasks as problem_tasks
from handover.problems.models import Problem, ProblemEvent
from runs.attempts.models import Run
from runs.catalog.services import role_grant
from tests.factories import JobFactory, JobTargetFactory, RunFactory, TenantFactory

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        "postgresql" not in settings.DATABASES["default"]["ENGINE"],
        reason="browser tests run on PostgreSQL (SQLite skips them)",
    ),
]
PASSWORD = "olga-pass-9Z!q"
TIMEOUT_MS = 15_000
SHOTS = os.environ.get("HANDOVER_SHOTS_DIR", "")


def shot(page: Page, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


FAILED_NIGHT = datetime(2026, 11, 27, 23, 0, tzinfo=UTC)  # the failures the problem is opened for


@pytest.fixture
def two_handovers(db: None) -> dict[str, Any]:
    """One job failing for acme-foods and borealis-retail on one night; a handover each; olga owns the job."""
    olga = get_user_model().objects.create_user("olga", email="olga@example.com", password=PASSWORD)
    job = JobFactory(key="nightly-invoice-export")
    role_grant(user=olga, role="technical_owner", obj=job)
    handovers, tenants = [], []
    for slug in ("acme-foods", "borealis-retail"):
        tenant = TenantFactory(slug=slug)
        target = JobTargetFactory(job=job, tenant=tenant)
        # a fixed night before the fix: the factory's windows grow by a day with every run made in the
        # process, so late in a whole run a sequence window ends after "now" (and after the fix deployed
        # in this test) and the failed run would reset the clean count (reproduced with reset_sequence(400))
        run = RunFactory(
            job=job,
            tenant=tenant,
            target=target,
            status=Run.Status.FAILED,
            window_start=FAILED_NIGHT,
            window_end=FAILED_NIGHT + timedelta(days=1),
            scheduled_for=FAILED_NIGHT + timedelta(days=1, hours=2),
        )
        handovers.append(handover_create(actor=olga, runs=[run]))
        tenants.append(tenant)
    return {"job": job, "tenants": tenants, "handovers": handovers}


def test_a_problem_behind_two_handovers_is_verified_by_clean_runs_then_closed(
    two_handovers: dict[str, Any], page: Page, live_server: Any
) -> None:
    page.set_default_timeout(TIMEOUT_MS)
    base = live_server.url
    first, second = two_handovers["handovers"]
    page.goto(f"{base}/login/")
    page.get_by_label("User name").fill("olga")
    page.get_by_label("Password").fill(PASSWORD)
    page.keyboard.press("Enter")
    expect(page.get_by_text("olga ·")).to_be_visible()

    # from the first handover's page: a new problem, two clean runs required
    page.goto(f"{base}/handovers/{first.public_id}/")
    page.get_by_role("link", name="New problem from this handover").click()
    page.get_by_label("Title").fill("Ledger gateway drops acknowledgements")
    page.get_by_label("Defect reference").fill("PRB-2041")
    page.get_by_label("Clean runs required").fill("2")
    page.get_by_role("button", name="Open the problem").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Ledger gateway drops acknowledgements")
    problem = Problem.objects.get()
    problem_url = page.url

    # from the second handover's page: link it to that problem
    page.goto(f"{base}/handovers/{second.public_id}/")
    page.get_by_label("Link to problem").select_option(str(problem.public_id))
    page.get_by_role("button", name="Link", exact=True).click()
    expect(page.get_by_test_id("handover-problems")).to_contain_text("Ledger gateway drops acknowledgements")

    page.goto(problem_url)
    expect(page.get_by_test_id("problem-handovers").locator("li")).to_have_count(2)
    page.get_by_role("button", name="Start the fix").click()
    expect(page.locator("h1")).to_contain_text("Fix in progress")
    page.get_by_role("button", name="Fix deployed").click()
    expect(page.locator("h1")).to_contain_text("Fix deployed")
    expect(page.get_by_test_id("clean-runs")).to_contain_text("0 of 2")
    shot(page, "problem-fix-deployed")

    # the next nights: two clean runs of each target after the deployment (one only for borealis first)
    deployed = Problem.objects.get(pk=problem.pk).fix_deployed_at
    assert deployed is not None
    job, (acme, borealis) = two_handovers["job"], two_handovers["tenants"]
    for tenant, nights in ((acme, 2), (borealis, 1)):
        for night in range(1, nights + 1):
            slot = deployed + timedelta(minutes=night)
            RunFactory(
                job=job,
                tenant=tenant,
                window_start=slot - timedelta(days=1),
                window_end=slot,
                scheduled_for=slot,
                status=Run.Status.SUCCEEDED,
            )
    problem_tasks.problem_verify_sweep()
    page.reload()
    expect(page.get_by_test_id("clean-runs")).to_contain_text("1 of 2")
    expect(page.locator("h1")).to_contain_text("Fix deployed")

    slot = deployed + timedelta(minutes=3)
    RunFactory(
        job=job,
        tenant=borealis,
        window_start=slot - timedelta(days=1),
        window_end=slot,
        scheduled_for=slot,
        status=Run.Status.SUCCEEDED,
    )
    assert problem_tasks.problem_verify_sweep() == {"checked": 1, "verified": 1}
    page.reload()
    expect(page.locator("h1")).to_contain_text("Verified")
    expect(page.get_by_test_id("clean-runs")).to_contain_text("2 of 2")
    shot(page, "problem-verified")

    page.get_by_role("button", name="Close").click()
    expect(page.locator("h1")).to_contain_text("Closed")
    closed = Problem.objects.get(pk=problem.pk)
    assert closed.status == "closed" and closed.closed_by.get_username() == "olga"
    assert closed.closed_at is not None and closed.closed_at <= timezone.now()
    moves = list(
        ProblemEvent.objects.filter(problem=problem, kind="transitioned")
        .order_by("id")
        .values_list("to_status", flat=True)
    )
    assert moves == ["fix_in_progress", "fix_deployed", "verified", "closed"]
    expect(page.get_by_test_id("problem-history")).to_contain_text("Verified (the system)")
    # the handovers themselves were never moved by the problem
    assert set(Handover.objects.values_list("status", flat=True)) == {"draft"}

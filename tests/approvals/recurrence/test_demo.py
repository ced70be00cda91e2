"""The demo answers a support lead's three questions from the product alone, on fixed dates, and loads once.

"Which jobs cost us most this month, who owns each, and what instrumentation would stop the calls to
engineering": the recurrence ranking with its owners, the supportability report with the fields the
alerts lacked, and the problem behind two handovers with its owning team, all read over the period
ending on the demo's fixed last day (``approvals.recurrence.demo.DEMO_LAST_DAY``), whatever day the
tests run on. Expected figures are computed from the demo's own fixture tables.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from io import StringIO
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from approvals.recurrence.demo import DEMO_LAST_DAY, PAYMENT_NIGHTS, PAYMENT_SYNC_KEY, STATEMENT_MAIL_KEY
from handover.handovers.models import Handover
from handover.problems.models import Problem

pytestmark = pytest.mark.django_db

QUERY = {"days": "30", "until": DEMO_LAST_DAY.isoformat()}
# the 30 local days ending with DEMO_LAST_DAY
FIRST_DAY = DEMO_LAST_DAY.replace(day=1)


def _row_counts() -> dict[str, int]:
    """Rows of every table the project's apps own (sessions and the like are not touched by the command)."""
    return {
        model._meta.label: model._default_manager.count()
        for model in apps.get_models()
        if model._meta.app_label in {"runs", "handover", "approvals", "auth", "guardian"}
    }


@pytest.fixture
def loaded() -> dict[str, Any]:
    first = StringIO()
    call_command("load_demo", demo=True, stdout=first)
    counts = _row_counts()
    second = StringIO()
    call_command("load_demo", demo=True, stdout=second)
    return {"first": first.getvalue(), "second": second.getvalue(), "counts": counts}


def _client(username: str) -> Client:
    client = Client()
    client.force_login(get_user_model().objects.get(username=username))
    return client


def _payment_figures() -> tuple[int, int]:
    """(failures, runs affected) of the payment sync in the period, straight from the fixture table."""
    failing = {"failed", "timed_out"}
    nights = [statuses for day, _tenant, statuses in PAYMENT_NIGHTS if FIRST_DAY <= day <= DEMO_LAST_DAY]
    failures = sum(1 for statuses in nights for s in statuses if s in failing)
    affected = sum(1 for statuses in nights if failing & set(statuses))
    return failures, affected


def test_a_second_load_changes_no_table_and_says_where_the_history_is_read(loaded: dict[str, Any]) -> None:
    assert _row_counts() == loaded["counts"]
    assert loaded["counts"]["handover.Problem"] == 1 and loaded["counts"]["handover.JobOwnership"] == 3
    for output in (loaded["first"], loaded["second"]):
        assert f"/recurrence/?days=30&until={DEMO_LAST_DAY.isoformat()}" in output
        assert f"/supportability/?days=30&until={DEMO_LAST_DAY.isoformat()}" in output


def test_the_recurrence_ranking_names_the_costliest_jobs_and_their_owners(loaded: dict[str, Any]) -> None:
    body = _client("support").get("/api/v1/recurrence/", QUERY).json()

    rows = {row["job"]["key"]: row for row in body["jobs"]}
    ranked = [row["job"]["key"] for row in body["jobs"]]
    assert ranked[0] == PAYMENT_SYNC_KEY and STATEMENT_MAIL_KEY in ranked
    scores = [row["figures"]["score"] for row in body["jobs"]]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0
    payment = rows[PAYMENT_SYNC_KEY]["figures"]
    assert (payment["failures"], payment["runs_affected"]) == _payment_figures()
    # the two handovers of the history, each one the technical owner had to explain, written on fixed times
    assert payment["handovers"] == 2 and payment["owner_explained"] == 2
    # the retries that succeeded ended 20 minutes after the failure, as the runner reported (not at load time)
    assert payment["to_recovery_median_seconds"] == 20 * 60
    assert payment["score"] == pytest.approx(
        payment["failures"]
        + 3 * payment["handovers"]
        + 2 * payment["replays"]
        + payment["days_open"]
        + 5 * payment["owner_explained"]
    )
    owners = {key: (row["ownership"]["team"] or {}).get("name") for key, row in rows.items()}
    assert owners == {
        PAYMENT_SYNC_KEY: "Payments platform",
        "nightly-invoice-export": "Invoicing platform",
        STATEMENT_MAIL_KEY: "Customer communications",
    }
    assert rows[PAYMENT_SYNC_KEY]["ownership"]["escalation_owner"] == "tech-owner"
    assert rows[PAYMENT_SYNC_KEY]["technical_owners"] == ["tech-owner"]

    page = _client("support").get("/recurrence/", QUERY).content.decode()
    assert page.index(PAYMENT_SYNC_KEY) < page.index(STATEMENT_MAIL_KEY)
    assert "Payments platform" in page and "Customer communications" in page


def test_the_supportability_report_lists_the_concrete_fields_the_alerts_lacked(loaded: dict[str, Any]) -> None:
    failures, _ = _payment_figures()
    body = _client("support").get("/api/v1/supportability/", QUERY).json()

    rows = {row["job"]["key"]: row for row in body["jobs"]}
    assert body["jobs"][0]["job"]["key"] == PAYMENT_SYNC_KEY
    payment = rows[PAYMENT_SYNC_KEY]
    # every failing alert of the sync lacked a run reference, a window and an impact; none its execution id
    assert payment["alerts"] == failures
    assert payment["missing"] == {
        "run_reference": failures,
        "window": failures,
        "execution_id": 0,
        "business_impact": failures,
    }
    assert sorted(h["ticket"][:6] for h in payment["owner_explained"]) == ["SUP-97", "SUP-98"]
    assert payment["ownership"]["team"]["name"] == "Payments platform"
    assert STATEMENT_MAIL_KEY not in rows  # its alerts were complete and no handover needed its owner

    text = _client("support").get("/supportability/export.md", QUERY).content.decode()
    section = text[text.index(f"`{PAYMENT_SYNC_KEY}`") :].split("\n## ")[0]
    assert "send the processing window" in section and "business_impact" in section
    assert "Payments platform" in section


def test_the_problem_behind_two_handovers_has_a_fixed_opening_and_an_owning_team(loaded: dict[str, Any]) -> None:
    problem = Problem.objects.select_related("owning_team").get()

    assert problem.owning_team is not None and problem.owning_team.name == "Invoicing platform"
    assert problem.created_at == datetime(2026, 11, 28, 9, 10, tzinfo=UTC)
    assert problem.status == "fix_in_progress" and problem.status_changed_at == datetime(2026, 11, 30, 10, tzinfo=UTC)
    handovers = Handover.objects.filter(problem_links__problem=problem)
    assert handovers.count() == 2
    assert all(h.created_at < problem.created_at for h in handovers)
    page = _client("support").get(f"/problems/{problem.public_id}/").content.decode()
    assert "Invoicing platform" in page


def test_aged_work_shows_its_owning_team_and_escalation_owner(loaded: dict[str, Any]) -> None:
    page = _client("support").get("/handovers/attention/").content.decode()

    aged = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.split("Aged work", 1)[1].split("</section>", 1)[0]))
    # the history's handovers were handed over on 2026-11-17 and 2026-11-26 and have not moved since
    assert "Payments platform" in aged and "escalation owner tech-owner" in aged
    assert "window 2026-11-16" in aged and "Handover not progressing" in aged

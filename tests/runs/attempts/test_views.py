"""The pages: login required, per-tenant visibility from the first page, query budgets, what is shown."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from runs.alerts.models import Alert
from runs.attempts.models import Run
from runs.catalog.services import role_grant
from tests.conftest import fixture_files
from tests.factories import AttemptFactory, RunFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def loaded(story_tenants: Any, make_key: Any, post_alert: Any) -> dict[str, Any]:
    key = make_key("generic", tenants=[story_tenants[s] for s in ("acme-foods", "borealis-retail", "cedar-health")])
    for path in fixture_files("generic"):
        post_alert("generic", path, key)
    return story_tenants


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_pages_require_login() -> None:
    response = Client().get("/runs/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_login_page_logs_a_person_in() -> None:
    UserFactory(username="sam")
    client = Client()
    assert client.get("/login/").status_code == 200
    response = client.post("/login/", {"username": "sam", "password": "correct-horse-battery"})
    assert response.status_code == 302
    assert client.get("/runs/").status_code == 200


def test_runs_list_shows_only_visible_tenants(loaded: Any) -> None:
    person = UserFactory()
    role_grant(user=person, role="support", obj=loaded["borealis-retail"])

    page = logged_in(person).get("/runs/").content.decode()

    assert "borealis-retail" in page
    assert "acme-foods" not in page and "cedar-health" not in page


def test_runs_list_filters_and_searches_by_execution_id(loaded: Any) -> None:
    client = logged_in(UserFactory(admin=True))

    response = client.get("/runs/?q=exp-20261128-0200-c1")
    assert [run.tenant.slug for run in response.context["page"]] == ["cedar-health"]
    assert "No runs match" in client.get("/runs/?status=missed").content.decode()


def test_run_page_shows_identity_attempts_and_timeline_in_the_right_zones(loaded: Any) -> None:
    client = logged_in(UserFactory(admin=True))
    run = Run.objects.get(tenant__slug="acme-foods", status=Run.Status.FAILED)

    page = client.get(f"/runs/{run.public_id}/").content.decode()

    # the window in the job's zone; every time carries its UTC value
    window = '<time datetime="2026-11-26T23:00:00+00:00">2026-11-27 00:00</time>'
    assert window in page and '<time datetime="2026-11-27T23:00:00+00:00">2026-11-28 00:00</time> CET' in page
    assert "exp-20261128-0200-a1" in page and "Automatic retry" in page and "Manual re-run (outside approval)" in page
    assert "went around the approval process" in page
    assert "https://logs.example.internal/q/exp-20261128-0200-a1" in page
    assert "Runner report (not evidence of the destination)" in page


def test_run_page_of_an_invisible_run_is_404(loaded: Any) -> None:
    person = UserFactory()
    role_grant(user=person, role="auditor", obj=loaded["borealis-retail"])
    hidden = Run.objects.get(tenant__slug="cedar-health")

    assert logged_in(person).get(f"/runs/{hidden.public_id}/").status_code == 404


def test_times_follow_the_viewer_time_zone_preference(loaded: Any) -> None:
    person = UserFactory(admin=True)
    client = logged_in(person)
    assert client.post("/preferences/", {"time_zone": "America/New_York"}).status_code == 302
    run = Run.objects.get(tenant__slug="cedar-health")

    page = client.get(f"/runs/{run.public_id}/").content.decode()

    assert "2026-11-27 21:00:02 EST" in page  # started 02:00:02 Berlin = 20:00:02 New York... ended 21:00:02
    assert client.post("/preferences/", {"time_zone": "Mars/Olympus"}).status_code == 200


def test_inbox_counts_outcomes_and_lists_unmatched_first(loaded: Any) -> None:
    client = logged_in(UserFactory(admin=True))

    response = client.get("/inbox/")

    page = response.content.decode()
    assert "quarterly-vat-filing" in page
    assert page.index("quarterly-vat-filing") < page.index("exp-20261128-0200-a1")
    counts = dict(response.context["counts"])
    assert counts["unmatched"] == 1 and counts["duplicate"] == 1 and counts["accepted"] == 7


def test_inbox_htmx_request_returns_only_the_rows(loaded: Any) -> None:
    client = logged_in(UserFactory(admin=True))
    response = client.get("/inbox/", HTTP_HX_REQUEST="true")
    assert b"<html" not in response.content and b"<table>" in response.content


def test_admin_reprocesses_and_ignores_from_the_alert_page(loaded: Any) -> None:
    admin = logged_in(UserFactory(admin=True))
    unmatched = Alert.objects.get(outcome=Alert.Outcome.UNMATCHED)

    assert admin.post(f"/alerts/{unmatched.public_id}/reprocess/").status_code == 302
    admin.post(f"/alerts/{unmatched.public_id}/ignore/", {"reason": "VAT filing is monitored elsewhere"})

    unmatched.refresh_from_db()
    assert unmatched.outcome == Alert.Outcome.IGNORED and "monitored elsewhere" in unmatched.reason


def test_support_cannot_reprocess(loaded: Any) -> None:
    support = UserFactory()
    role_grant(user=support, role="support", obj=loaded["acme-foods"])
    unmatched = Alert.objects.get(outcome=Alert.Outcome.UNMATCHED)

    response = logged_in(support).post(f"/alerts/{unmatched.public_id}/reprocess/")

    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    unmatched.refresh_from_db()
    assert unmatched.outcome == Alert.Outcome.UNMATCHED


def test_runs_page_query_count_is_bounded(django_assert_max_num_queries: Any) -> None:
    person = UserFactory()
    tenant = TenantFactory()
    role_grant(user=person, role="support", obj=tenant)
    for _ in range(40):
        AttemptFactory(run=RunFactory(tenant=tenant))
    client = logged_in(person)

    # session, user, preference; count; page; tenants for the filter
    with django_assert_max_num_queries(8):
        response = client.get("/runs/")
    assert len(response.context["page"]) == 40


def test_run_page_query_count_is_bounded(django_assert_max_num_queries: Any) -> None:
    admin = UserFactory(admin=True)
    run = RunFactory()
    for number in range(1, 16):
        AttemptFactory(run=run, number=number, config_version=f"cfg@{number % 2}")
    client = logged_in(admin)

    # session, user, preference, unread notifications; run; attempts; runner reports; timeline; checks;
    # ledger loads; the slot rules' flags: unexplained re-fires, recent durations of the target
    # (no item page and no duplicates query: the run has no ledger, its stored totals say so)
    with django_assert_max_num_queries(12):
        response = client.get(f"/runs/{run.public_id}/")
    assert response.context["config_changed"] is True


def test_integration_pages_are_for_admins(loaded: Any) -> None:
    from runs.catalog.models import Integration

    integration = Integration.objects.get(source="generic")
    support = UserFactory()
    role_grant(user=support, role="support", obj=loaded["acme-foods"])

    assert logged_in(support).get(f"/integrations/{integration.public_id}/").status_code == 302
    page = logged_in(UserFactory(admin=True)).get(f"/integrations/{integration.public_id}/").content.decode()
    assert integration.keys.get().prefix in page and "rejected" in page and "processed" in page


def test_api_docs_and_schema_are_served_offline() -> None:
    client = logged_in(UserFactory(admin=True))
    assert client.get("/api/schema/").status_code == 200
    docs = client.get("/api/docs/").content.decode()
    assert "drf_spectacular_sidecar" in docs or "/static/" in docs


def test_healthz_reports_database_and_backlog(db: None) -> None:
    body = Client().get("/healthz").json()
    assert body["database"] == "ok" and body["pending_alerts"] == 0 and "beat_age_seconds" in body

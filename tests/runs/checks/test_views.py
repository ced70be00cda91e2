"""The checks page and its forms, and the run page's next fire times and check result."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.test import Client

from runs.attempts.models import Run
from runs.catalog.models import JobTarget
from runs.catalog.services import role_grant
from runs.checks import views
from runs.checks.models import NextRunCheck
from runs.checks.scheduling import next_run_check_schedule
from runs.health.models import Heartbeat
from runs.health.services import heartbeat_record
from tests.factories import JobTargetFactory, NextRunCheckFactory, UserFactory

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def acme(story_tenants: Any) -> JobTarget:
    return JobTarget.objects.get(tenant=story_tenants["acme-foods"], environment="prod")


@pytest.fixture
def support(acme: JobTarget) -> Any:
    person = UserFactory(username="support-sam")
    role_grant(user=person, role="support", obj=acme.tenant)
    return person


def test_checks_page_groups_due_upcoming_failed_and_waived_within_a_query_budget(
    acme: JobTarget, support: Any, story_tenants: Any, django_assert_max_num_queries: Any
) -> None:
    def target(env: str) -> JobTarget:
        return JobTargetFactory(job=acme.job, tenant=acme.tenant, environment=env)

    for env in ("qa", "uat"):
        NextRunCheckFactory(target=target(env), expected_at=NOW + timedelta(days=2))  # upcoming
    for env in ("dev", "int"):
        NextRunCheckFactory(target=target(env), expected_at=NOW - timedelta(days=1))  # due: deadline passed
    NextRunCheckFactory(target=target("perf"), failed=True, result_summary="Failed: no run was reported")
    NextRunCheckFactory(target=target("demo"), waived=True)
    NextRunCheckFactory(target=JobTarget.objects.get(tenant=story_tenants["borealis-retail"]))  # not visible
    client = logged_in(support)

    with time_machine.travel(NOW, tick=False):
        # session + user (2), five sections (5), visible targets for the create form (1), guardian
        # permission caches (a few): the budget must not grow with the number of checks
        with django_assert_max_num_queries(14):
            response = client.get("/checks/")

    assert response.status_code == 200
    sections = {key: rows for key, _, _, rows in response.context["sections"]}
    assert [c.target.environment for c in sections["upcoming"]] == ["qa", "uat"]
    assert [c.target.environment for c in sections["due"]] == ["dev", "int"]
    assert [c.target.environment for c in sections["failed"]] == ["perf"]
    assert [c.target.environment for c in sections["waived"]] == ["demo"]
    page = response.content.decode()
    assert "borealis-retail" not in page.split("<h2")[1]  # no check of another tenant is listed
    assert "Failed: no run was reported" in page


def test_no_never_ticked_warning_before_a_full_tick_interval_since_start(support: Any) -> None:
    client = logged_in(support)
    started = views.SERVING_SINCE
    assert views.beat_tick_interval_seconds() == 60.0  # the heartbeat task's CELERY_BEAT_SCHEDULE entry

    with time_machine.travel(started + timedelta(seconds=59), tick=False):
        early = client.get("/checks/").content.decode()
    with time_machine.travel(started + timedelta(seconds=61), tick=False):
        late = client.get("/checks/").content.decode()

    assert not Heartbeat.objects.exists()
    assert "Celery beat" not in early
    assert "The Celery beat has never ticked here" in late


def test_checks_page_warns_when_the_beat_is_silent(support: Any) -> None:
    with time_machine.travel(views.SERVING_SINCE + timedelta(minutes=2), tick=False):
        page = logged_in(support).get("/checks/").content.decode()
    assert "The Celery beat has never ticked here" in page

    heartbeat_record(name=Heartbeat.BEAT, at=datetime.now(UTC) - timedelta(minutes=10))
    page = logged_in(support).get("/checks/").content.decode()
    assert "has been silent for" in page

    heartbeat_record(name=Heartbeat.BEAT, at=datetime.now(UTC))
    assert "Celery beat" not in logged_in(support).get("/checks/").content.decode()


def test_create_waive_and_see_a_check_through_the_pages(acme: JobTarget, support: Any) -> None:
    owner = UserFactory(username="owner-olga")
    role_grant(user=owner, role="support", obj=acme.tenant)
    client = logged_in(support)

    with time_machine.travel(NOW, tick=False):
        created = client.post("/checks/create/", {"target": str(acme.public_id)})
        check = NextRunCheck.objects.get()
        assert created.status_code == 302 and created["Location"] == f"/checks/{check.public_id}/"
        detail = client.get(created["Location"]).content.decode()
        assert "2026-11-29 02:00:00 CET" in detail and "Waive" in detail
        waived = client.post(
            f"/checks/{check.public_id}/waive/",
            {"checkpoint": "2027-03-01", "owner": "owner-olga", "reason": "Next run is far away"},
            follow=True,
        )

    check.refresh_from_db()
    assert check.status == NextRunCheck.Status.WAIVED and check.waiver_owner == owner
    page = waived.content.decode()
    assert "Check waived." in page and "owner <strong>owner-olga</strong>" in page


def test_waive_page_shows_the_rule_broken_and_auditors_get_403(acme: JobTarget, support: Any) -> None:
    check = NextRunCheckFactory(target=acme, expected_at=NOW + timedelta(days=1))
    auditor = UserFactory()
    role_grant(user=auditor, role="auditor", obj=acme.tenant)

    with time_machine.travel(NOW, tick=False):
        response = logged_in(support).post(
            f"/checks/{check.public_id}/waive/",
            {"checkpoint": "2026-01-01", "owner": "support-sam", "reason": "x"},
            follow=True,
        )
        forbidden = logged_in(auditor).post(f"/checks/{check.public_id}/confirm/", {"note": "x"})
        hidden = logged_in(UserFactory()).get(f"/checks/{check.public_id}/")

    assert "must not be in the past" in response.content.decode()
    assert NextRunCheck.objects.get(pk=check.pk).status == NextRunCheck.Status.SCHEDULED
    assert forbidden.status_code == 403
    assert hidden.status_code == 404


def test_run_page_shows_the_next_fire_times_and_the_checks_result(
    acme: JobTarget, support: Any, make_key: Any, post_alert: Any
) -> None:
    key = make_key("generic", tenants=[acme.tenant])
    post_alert(
        "generic",
        {
            "schema": "handover.alert/v1",
            "job": "nightly-invoice-export",
            "tenant": "acme-foods",
            "scheduled_for": "2026-11-28T02:00:00+01:00",
            "execution_id": "exp-1",
            "status": "failed",
        },
        key,
    )
    run = Run.objects.get()
    with time_machine.travel(NOW, tick=False):
        next_run_check_schedule(target=acme, after=NOW, recovered_run=run)
        page = logged_in(support).get(f"/runs/{run.public_id}/").content.decode()

    assert "2026-11-29 02:00:00 CET" in page and "2026-11-29 01:00:00 UTC" in page
    assert "2026-12-03 02:00:00 CET" in page  # the fifth fire time
    assert "verifies this run&#x27;s recovery" in page or "verifies this run's recovery" in page
    assert "not evaluated yet" in page


def test_healthz_reports_the_broker_and_overdue_next_run_checks() -> None:
    NextRunCheckFactory(expected_at=NOW - timedelta(hours=1))  # deadline passed, not swept yet
    NextRunCheckFactory(expected_at=NOW + timedelta(days=1))

    with time_machine.travel(NOW, tick=False):
        body = Client().get("/healthz").json()

    assert body["database"] == "ok" and body["broker"] == "ok"
    assert body["overdue_next_run_checks"] == 1


def test_check_page_shows_evidence_late_success_and_the_admin_list_is_read_only(acme: JobTarget, support: Any) -> None:
    passed = NextRunCheckFactory(target=acme, passed=True, result_summary="Passed: the next run succeeded")
    late = NextRunCheckFactory(
        target=acme,
        failed=True,
        late_success_attempt=passed.evidence_attempt,
        late_success_at=passed.expected_at + timedelta(hours=2),
        result_summary="Failed: the next run succeeded only after the deadline (kept as evidence)",
    )

    passed_page = logged_in(support).get(f"/checks/{passed.public_id}/").content.decode()
    late_page = logged_in(support).get(f"/checks/{late.public_id}/").content.decode()
    admin = logged_in(UserFactory(admin=True))

    assert "Passed: the next run succeeded" in passed_page and passed.evidence_attempt.execution_id in passed_page
    assert "late success" in late_page and "the check stays failed" in late_page
    assert "Waive" not in late_page  # only a scheduled check can be waived
    assert admin.get("/admin/runs/nextruncheck/").status_code == 200
    assert admin.get("/admin/runs/nextruncheck/add/").status_code == 403

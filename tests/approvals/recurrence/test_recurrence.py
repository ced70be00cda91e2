"""Recurrence figures against a direct computation over generated histories; visibility; query budgets."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client
from django.utils import timezone

from approvals.recurrence.selectors import percentile, recurrence_report
from handover.notifications.models import Team
from handover.ownership.services import job_ownership_set
from runs.attempts.failures import period_ending
from runs.catalog.models import Job, Tenant
from runs.catalog.services import role_grant
from tests.approvals.recurrence.history import RunPlan, expected_figures, history_create, history_plan
from tests.factories import JobFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db

LAST_DAY = date(2026, 11, 30)
END = datetime(2026, 12, 1, tzinfo=UTC)  # the end of LAST_DAY in UTC (tests run in UTC)
FIGURES = (
    "failures",
    "runs_affected",
    "handovers",
    "owner_explained",
    "replays",
    "duplicates",
    "days_open",
    "to_handover_median",
    "to_handover_p90",
    "to_approved_replay_median",
    "to_approved_replay_p90",
    "to_recovery_median",
    "to_recovery_p90",
    "unrecovered",
    "score",
)


class World:
    def __init__(self, runs: int, seed: int = 7) -> None:
        self.jobs: list[Job] = [JobFactory(key=f"history-job-{n}") for n in range(3)]
        self.tenants: list[Tenant] = [TenantFactory(slug=f"history-tenant-{n}") for n in range(3)]
        self.admin: AbstractBaseUser = UserFactory(username="history-admin", admin=True)
        self.plans: list[RunPlan] = history_plan(runs=runs, days=100, end=END, jobs=3, tenants=3, seed=seed)
        history_create(plans=self.plans, jobs=self.jobs, tenants=self.tenants, person=self.admin)


@pytest.fixture
def utc_zone() -> Any:
    with timezone.override("UTC"):
        yield


def _figures(figures: Any) -> dict[str, Any]:
    return {name: getattr(figures, name) for name in FIGURES}


@pytest.mark.parametrize("days", [7, 30, 90])
def test_figures_by_job_tenant_and_class_match_a_direct_computation(days: int, utc_zone: None) -> None:
    world = World(runs=400)
    period = period_ending(days=days, last_day=LAST_DAY)
    assert period.until == END and period.since == END - timedelta(days=days)
    report = recurrence_report(user=world.admin, period=period)

    by_job = expected_figures(world.plans, since=period.since, until=period.until, key=lambda p: p.job)
    got = {world.jobs.index(row.job): _figures(row.figures) for row in report.jobs}
    assert got == by_job
    assert sum(f["failures"] for f in by_job.values()) > 0  # the history has failures in every period

    by_group = expected_figures(
        world.plans,
        since=period.since,
        until=period.until,
        key=lambda p: (p.job, p.tenant, p.failure_class or "unclassified"),
    )
    got_groups = {
        (world.jobs.index(row.job), world.tenants.index(g.tenant), g.class_code): _figures(g.figures)
        for row in report.jobs
        for g in row.groups
    }
    assert got_groups == by_group
    # ranked by score, highest first
    scores = [row.figures.score for row in report.jobs]
    assert scores == sorted(scores, reverse=True)


def test_trend_counts_failures_per_day_and_per_week(utc_zone: None) -> None:
    world = World(runs=300, seed=11)
    for days, width in ((30, 1), (90, 7)):
        period = period_ending(days=days, last_day=LAST_DAY)
        report = recurrence_report(user=world.admin, period=period)
        expected: dict[date, int] = {}
        first = LAST_DAY - timedelta(days=days - 1)
        for plan in world.plans:
            day = plan.scheduled_for.date()
            if plan.failed and first <= day <= LAST_DAY:
                start = first + timedelta(days=(day - first).days // width * width)
                expected[start] = expected.get(start, 0) + plan.failures
        assert {p.start: p.failures for p in report.trend if p.failures} == expected
        assert report.trend[0].start == first and report.trend[-1].end == LAST_DAY
        assert all((p.end - p.start).days < width for p in report.trend)


def test_a_viewer_of_one_tenant_gets_only_that_tenants_counts(utc_zone: None) -> None:
    world = World(runs=300, seed=3)
    support = UserFactory(username="support-of-0")
    role_grant(user=support, role="support", obj=world.tenants[0])
    period = period_ending(days=90, last_day=LAST_DAY)

    report = recurrence_report(user=support, period=period)

    only_own = [p for p in world.plans if p.tenant == 0]
    expected = expected_figures(only_own, since=period.since, until=period.until, key=lambda p: p.job)
    assert {world.jobs.index(r.job): _figures(r.figures) for r in report.jobs} == expected
    assert {g.tenant for r in report.jobs for g in r.groups} == {world.tenants[0]}
    # a tenant filter naming a tenant the person may not see counts nothing
    assert recurrence_report(user=support, period=period, tenants=[world.tenants[1]]).jobs == []


def test_a_technical_owner_sees_every_tenant_of_their_job_and_nothing_else(utc_zone: None) -> None:
    world = World(runs=300, seed=5)
    owner = UserFactory(username="owner-of-1")
    role_grant(user=owner, role="technical_owner", obj=world.jobs[1])
    period = period_ending(days=90, last_day=LAST_DAY)

    report = recurrence_report(user=owner, period=period)

    assert [r.job for r in report.jobs] == [world.jobs[1]]
    assert report.jobs[0].owners == ["owner-of-1"]
    expected = expected_figures(world.plans, since=period.since, until=period.until, key=lambda p: p.job)
    assert _figures(report.jobs[0].figures) == expected[1]


def test_a_person_without_roles_reads_an_empty_report_and_anonymous_is_refused(client: Client) -> None:
    World(runs=50)
    nobody = UserFactory(username="nobody")
    client.force_login(nobody)
    body = client.get("/api/v1/recurrence/", {"days": "90", "until": LAST_DAY.isoformat()}).json()
    assert body["jobs"] == [] and sum(p["failures"] for p in body["trend"]) == 0
    client.logout()
    assert client.get("/api/v1/recurrence/").status_code == 401


def test_the_api_answers_the_same_figures_in_seconds(client: Client) -> None:
    world = World(runs=200)
    client.force_login(world.admin)
    body = client.get("/api/v1/recurrence/", {"days": "30", "until": LAST_DAY.isoformat()}).json()
    period = period_ending(days=30, last_day=LAST_DAY)
    expected = expected_figures(world.plans, since=period.since, until=period.until, key=lambda p: p.job)
    for row in body["jobs"]:
        job = next(j for j in world.jobs if str(j.public_id) == row["job"]["id"])
        want = expected[world.jobs.index(job)]
        assert row["figures"]["failures"] == want["failures"]
        assert row["figures"]["score"] == want["score"]
        median = want["to_handover_median"]
        assert row["figures"]["to_handover_median_seconds"] == (None if median is None else int(median))
    assert len(body["jobs"]) == len(expected)
    one = body["jobs"][0]["job"]["id"]
    narrowed = client.get("/api/v1/recurrence/", {"days": "30", "until": LAST_DAY.isoformat(), "job": one}).json()
    assert [r["job"]["id"] for r in narrowed["jobs"]] == [one]


@pytest.mark.parametrize("params", [{"days": "14"}, {"until": "1900-01-01"}, {"job": "nope"}, {"colour": "red"}])
def test_the_api_refuses_bad_parameters_with_problem_details(client: Client, params: dict[str, str]) -> None:
    client.force_login(UserFactory(username="reader"))
    response = client.get("/api/v1/recurrence/", params)
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/problem+json")
    assert set(params) <= set(response.json()["errors"])


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 0.5) is None
    assert percentile([5.0], 0.9) == 5.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.0
    assert percentile([float(n) for n in range(1, 11)], 0.9) == 9.0


def _budget_world(runs: int) -> AbstractBaseUser:
    world = World(runs=runs, seed=runs)
    support = UserFactory(username=f"budget-support-{runs}")
    for tenant in world.tenants[:2]:
        role_grant(user=support, role="support", obj=tenant)
    role_grant(user=support, role="technical_owner", obj=world.jobs[2])
    role_grant(user=UserFactory(username=f"budget-owner-{runs}"), role="technical_owner", obj=world.jobs[0])
    team = Team.objects.create(name=f"budget-team-{runs}")
    job_ownership_set(actor=world.admin, job=world.jobs[0], team=team, escalation_owner=support)  # type: ignore[arg-type]
    return support


RECURRENCE_BUDGET = 14


@pytest.mark.parametrize("runs", [10, 300])
def test_the_recurrence_page_and_api_keep_one_query_budget_at_10_and_300_runs(
    runs: int, client: Client, django_assert_max_num_queries: Any
) -> None:
    support = _budget_world(runs)
    client.force_login(support)
    query = {"days": "90", "until": LAST_DAY.isoformat()}
    client.get("/recurrence/", query)  # warm the session and caches
    with django_assert_max_num_queries(RECURRENCE_BUDGET):
        page = client.get("/recurrence/", query)
    assert page.status_code == 200
    with django_assert_max_num_queries(RECURRENCE_BUDGET):
        api = client.get("/api/v1/recurrence/", query)
    assert api.status_code == 200
    if runs == 300:
        assert len(api.json()["jobs"]) == 3 and b"Failures per day" in page.content

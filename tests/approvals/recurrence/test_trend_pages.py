"""The failure trend on the job page and the recurrence page: a server-rendered, labelled SVG with a table beside it."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from approvals.recurrence.selectors import recurrence_report
from handover.notifications.models import Team
from handover.ownership.services import job_ownership_set
from runs.attempts.failures import TrendPoint, period_ending
from runs.catalog.services import role_grant
from runs.templatetags.trend_charts import failure_trend_chart
from tests.factories import AttemptFactory, JobFactory, RunFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db


def _failed_run(job: Any, tenant: Any, at: datetime, attempts: int = 1) -> None:
    run = RunFactory(
        job=job,
        tenant=tenant,
        window_start=at - timedelta(days=1),
        window_end=at - timedelta(hours=1),
        scheduled_for=at,
        status="failed",
        status_changed_at=at + timedelta(minutes=30),
    )
    for number in range(1, attempts + 1):
        AttemptFactory(run=run, number=number, status="failed", ended_at=at + timedelta(minutes=10 * number))


def test_the_chart_names_every_bar_and_describes_the_figures() -> None:
    points = [
        TrendPoint(start=date(2026, 11, 28), end=date(2026, 11, 28), failures=3, runs=2),
        TrendPoint(start=date(2026, 11, 29), end=date(2026, 11, 29), failures=0, runs=0),
    ]
    svg = str(failure_trend_chart(points, "c1", "Failures <of> x"))
    assert 'role="img"' in svg and 'aria-labelledby="c1-title c1-desc"' in svg
    assert '<title id="c1-title">Failures &lt;of&gt; x</title>' in svg
    assert "3 failures in all. 28 Nov: 3; 29 Nov: 0." in svg
    assert svg.count('<rect class="tr-bar"') == 2 and "<title>28 Nov: 3 failures (2 runs)</title>" in svg
    assert "<script" not in svg and "style=" not in svg
    assert str(failure_trend_chart([], "c2", "none")) == ""


def test_the_job_page_shows_the_trend_of_the_runs_the_viewer_sees(client: Client) -> None:
    job = JobFactory(key="trend-job")
    own, other = TenantFactory(slug="trend-own"), TenantFactory(slug="trend-other")
    today = timezone.localdate()
    noon = datetime(today.year, today.month, today.day, 12, tzinfo=UTC)
    _failed_run(job, own, noon - timedelta(days=2), attempts=2)
    _failed_run(job, other, noon - timedelta(days=2), attempts=3)
    support = UserFactory(username="trend-support")
    role_grant(user=support, role="support", obj=own)
    client.force_login(support)

    page = client.get(f"/jobs/{job.public_id}/", {"days": "7"}).content.decode()

    assert "Failures, last 7 days" in page
    assert '<svg class="trend-chart"' in page
    desc = re.search(r'<desc id="job-trend-desc">([^<]*)</desc>', page)
    assert desc is not None and desc.group(1).startswith("2 failures in all.")  # the other tenant's 3 are not seen
    assert page.count('<th scope="row">') >= 7  # the table alternative: one row per day


def test_the_recurrence_page_links_each_job_and_shows_its_owners(client: Client) -> None:
    job = JobFactory(key="ranked-job", name="Ranked job")
    tenant = TenantFactory(slug="ranked-tenant")
    owner = UserFactory(username="ranked-owner")
    role_grant(user=owner, role="technical_owner", obj=job)
    _failed_run(job, tenant, datetime.combine(timezone.localdate(), datetime.min.time(), tzinfo=UTC))
    client.force_login(owner)

    page = client.get("/recurrence/", {"days": "7"}).content.decode()

    assert f'href="/jobs/{job.public_id}/"' in page
    assert "ranked-owner" in page and "unclassified" in page
    assert 'aria-current="page">7 days' in page
    report = recurrence_report(user=owner, period=period_ending(days=7))
    assert [r.job for r in report.jobs] == [job]
    assert report.jobs[0].figures.failures == 1


def test_each_job_shows_its_owning_team_and_escalation_owner_or_no_owning_team(client: Client) -> None:
    owned = JobFactory(key="owned-job")
    orphan = JobFactory(key="orphan-job")
    tenant = TenantFactory(slug="owning-tenant")
    admin = UserFactory(username="owning-admin", admin=True)
    olga = UserFactory(username="olga-escalation")
    billing = Team.objects.create(name="Billing squad")
    job_ownership_set(actor=admin, job=owned, team=billing, escalation_owner=olga)
    today = datetime.combine(timezone.localdate(), datetime.min.time(), tzinfo=UTC)
    _failed_run(owned, tenant, today, attempts=2)
    _failed_run(orphan, tenant, today)

    report = recurrence_report(user=admin, period=period_ending(days=7))
    rows = {r.job.key: r for r in report.jobs}
    assert rows["owned-job"].ownership.team == billing and rows["owned-job"].ownership.escalation_owner == olga
    assert rows["orphan-job"].ownership.team is None and rows["orphan-job"].ownership.escalation_owner is None

    client.force_login(admin)
    page = client.get("/recurrence/", {"days": "7"}).content.decode()
    owned_at, orphan_at = page.index("<code>owned-job</code>"), page.index("<code>orphan-job</code>")
    owned_row = page[owned_at : page.index("</tr>", owned_at)]
    orphan_row = page[orphan_at : page.index("</tr>", orphan_at)]
    assert f'href="/teams/{billing.public_id}/">Billing squad</a>' in owned_row and "olga-escalation" in owned_row
    assert "no owning team" in orphan_row and "Billing squad" not in orphan_row
    body = client.get("/api/v1/recurrence/", {"days": "7"}).json()
    api = {r["job"]["key"]: r["ownership"] for r in body["jobs"]}
    assert api["owned-job"] == {
        "team": {"id": str(billing.public_id), "name": "Billing squad"},
        "escalation_owner": "olga-escalation",
    }
    assert api["orphan-job"] == {"team": None, "escalation_owner": None}


def test_invalid_page_parameters_fall_back_to_the_defaults_and_say_so(client: Client) -> None:
    client.force_login(UserFactory(username="trend-reader"))
    page = client.get("/recurrence/", {"days": "12", "until": "1800-01-01"})
    assert page.status_code == 200
    assert "the default is used" in page.content.decode()
    assert 'aria-current="page">30 days' in page.content.decode()

"""The supportability report: alerts that lacked a run reference, a window, an execution id or a business impact
(posted through the real ingestion path), handovers the technical owner had to explain; visibility; Markdown."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any

import pytest
from django.test import Client

from approvals.recurrence.supportability import supportability_report
from handover.handovers.services import handover_create, handover_update
from handover.notifications.models import Team
from handover.ownership.services import job_ownership_set
from runs.alerts.models import Alert
from runs.attempts.failures import period_ending
from runs.attempts.models import Run
from runs.catalog.models import Job, Tenant
from runs.catalog.services import job_get_or_create, job_target_get_or_create, role_grant, tenant_get_or_create
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

# The posts' runs are of 2026-11-10 … 2026-11-15: the report counts alerts and handovers by their runs' run
# time, so a fixed period holds them whatever day the tests run on.
PERIOD = period_ending(days=7, last_day=date(2026, 11, 16))
PARAMS = {"days": "7", "until": "2026-11-16"}

# (job, tenant, has correlation id, has window, has business impact)
POSTS = [
    ("nightly-invoice-export", "acme-foods", True, True, True),
    ("nightly-invoice-export", "acme-foods", False, True, False),
    ("nightly-invoice-export", "borealis-retail", False, False, False),
    ("nightly-invoice-export", "borealis-retail", True, False, False),
    ("nightly-payment-sync", "acme-foods", False, False, False),
    ("nightly-payment-sync", "borealis-retail", True, True, True),
]


def _body(index: int, job: str, tenant: str, correlation: bool, window: bool, impact: bool) -> dict[str, Any]:
    day = 10 + index
    body: dict[str, Any] = {
        "schema": "handover.alert/v1",
        "job": job,
        "tenant": tenant,
        "scheduled_for": f"2026-11-{day:02d}T02:00:00+01:00",
        "execution_id": f"sup-{index}",
        "status": "failed",
        "started_at": f"2026-11-{day:02d}T02:01:00+01:00",
        "ended_at": f"2026-11-{day:02d}T02:09:00+01:00",
        "error": "boom",
    }
    if correlation:
        body["correlation_id"] = f"trace-{index}"
    if window:
        body["window_start"] = f"2026-11-{day - 1:02d}T00:00:00+01:00"
        body["window_end"] = f"2026-11-{day:02d}T00:00:00+01:00"
    if impact:
        body["business_impact"] = "Invoices of the day are not sent to customers."
    return body


class World:
    def __init__(self, make_key: Callable[..., str], post_alert: Callable[..., Any]) -> None:
        self.jobs: dict[str, Job] = {}
        self.tenants: dict[str, Tenant] = {}
        for key in ("nightly-invoice-export", "nightly-payment-sync"):
            self.jobs[key], _ = job_get_or_create(
                key=key, defaults={"schedule": "0 2 * * *", "timezone": "Europe/Berlin", "window_alignment": "day"}
            )
        for slug in ("acme-foods", "borealis-retail"):
            self.tenants[slug], _ = tenant_get_or_create(slug=slug)
            for job in self.jobs.values():
                job_target_get_or_create(job=job, tenant=self.tenants[slug], environment="prod")
        key = make_key("generic", tenants=list(self.tenants.values()))
        for index, post in enumerate(POSTS):
            response = post_alert("generic", _body(index, *post), key)
            assert response.status_code == 202, response.content
            assert response.json()["alerts"][0]["outcome"] == "accepted"
        self.support = UserFactory(username="sup-support")
        role_grant(user=self.support, role="support", obj=self.tenants["acme-foods"])
        self.owner = UserFactory(username="sup-owner")
        role_grant(user=self.owner, role="technical_owner", obj=self.jobs["nightly-invoice-export"])
        self.admin = UserFactory(username="sup-admin", admin=True)

    def handover(self, job: str, tenant: str, *, explained: bool, ticket: str = "") -> Any:
        run = Run.objects.filter(job=self.jobs[job], tenant=self.tenants[tenant]).order_by("pk").first()
        assert run is not None
        handover = handover_create(actor=self.admin, runs=[run])
        if explained:
            handover = handover_update(
                handover=handover,
                actor=self.admin,
                fields={"is_supportability_defect": True, "supportability_ticket": ticket},
                base_version=handover.version,
            )
        return handover


@pytest.fixture
def world(make_key: Callable[..., str], post_alert: Callable[..., Any]) -> World:
    return World(make_key, post_alert)


def _expected(posts: list[tuple[str, str, bool, bool, bool]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for job, _tenant, correlation, window, impact in posts:
        row = out.setdefault(
            job, {"alerts": 0, "run_reference": 0, "window": 0, "execution_id": 0, "business_impact": 0}
        )
        row["alerts"] += 1
        row["run_reference"] += not correlation
        row["window"] += not window
        row["business_impact"] += not impact
    return out


def _got(report: Any) -> dict[str, dict[str, int]]:
    return {row.job.key: {"alerts": row.alerts, **row.missing} for row in report.jobs if row.alerts}


def test_missing_fields_per_job_match_what_was_posted(world: World) -> None:
    report = supportability_report(user=world.admin, period=PERIOD)
    assert _got(report) == _expected(POSTS)
    by_source = {(row.job.key, s.source): s.alerts for row in report.jobs for s in row.sources}
    assert by_source == {("nightly-invoice-export", "generic"): 4, ("nightly-payment-sync", "generic"): 2}
    stored = Alert.objects.get(execution_id="sup-0")
    assert stored.fields["details"]["business_impact"] == "Invoices of the day are not sent to customers."


def test_alerts_and_handovers_count_in_the_period_of_their_runs_not_of_their_arrival(world: World) -> None:
    world.handover("nightly-payment-sync", "acme-foods", explained=True, ticket="ENG-7")

    before = supportability_report(user=world.admin, period=period_ending(days=7, last_day=date(2026, 11, 9)))
    today = supportability_report(user=world.admin, period=period_ending(days=7, last_day=date(2026, 11, 12)))

    # received and written today, but about runs of 2026-11-10 … 15: none before the 10th, only the
    # runs of the 10th … 12th (posts 0 … 2) in the period ending on the 12th
    assert before.jobs == []
    assert _got(today) == _expected(POSTS[:3])
    assert {r.job.key: len(r.owner_explained) for r in today.jobs} == {"nightly-invoice-export": 0}
    assert _got(supportability_report(user=world.admin, period=PERIOD)) == _expected(POSTS)


def test_an_impact_in_annotations_and_an_inferred_execution_id_are_read_from_the_stored_fields(world: World) -> None:
    alert = Alert.objects.get(execution_id="sup-2")
    fields = dict(alert.fields)
    fields["details"] = {"annotations": {"business_impact": "Retail prices are stale"}, "execution_id_inferred": True}
    Alert.objects.filter(pk=alert.pk).update(fields=fields)  # as an Alertmanager/Grafana alert stores them

    report = supportability_report(user=world.admin, period=PERIOD)

    row = next(r for r in report.jobs if r.job.key == "nightly-invoice-export")
    expected = _expected(POSTS)["nightly-invoice-export"]
    assert row.missing["business_impact"] == expected["business_impact"] - 1
    assert row.missing["execution_id"] == 1


def test_handovers_the_owner_had_to_explain_rank_the_job_and_reach_the_markdown(world: World, client: Client) -> None:
    world.handover("nightly-payment-sync", "acme-foods", explained=True, ticket="ENG-42 | progress not reported")
    world.handover("nightly-payment-sync", "borealis-retail", explained=True)
    world.handover("nightly-invoice-export", "acme-foods", explained=False)

    report = supportability_report(user=world.admin, period=PERIOD)

    rows = {r.job.key: r for r in report.jobs}
    assert rows["nightly-payment-sync"].handovers == 2
    assert len(rows["nightly-payment-sync"].owner_explained) == 2
    assert rows["nightly-invoice-export"].handovers == 1 and rows["nightly-invoice-export"].owner_explained == []
    # payment sync: 2 alerts x 3 gaps + 3 missing of the other + 5 x 2 explained; invoice export: 4 alerts' gaps
    assert rows["nightly-payment-sync"].score == 3 + 5 * 2
    assert rows["nightly-invoice-export"].score == sum(
        v for k, v in _expected(POSTS)["nightly-invoice-export"].items() if k != "alerts"
    )
    assert [r.job.key for r in report.jobs] == ["nightly-payment-sync", "nightly-invoice-export"]

    client.force_login(world.admin)
    response = client.get("/supportability/export.md", PARAMS)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="supportability-7d-')
    text = response.content.decode()
    assert "## 1. `nightly-payment-sync`" in text
    assert "| run reference | 1 of 2 |" in text
    assert "ENG-42 \\| progress not reported" in text  # escaped: no table cell injected
    assert "/jobs/" in text and "/handovers/" in text


def test_each_job_names_its_owning_team_on_the_page_the_markdown_and_the_api(world: World, client: Client) -> None:
    payments = Team.objects.create(name="Payments team")
    escalation = UserFactory(username="pat-escalation")
    job_ownership_set(
        actor=world.admin,
        job=Job.objects.get(key="nightly-payment-sync"),
        team=payments,
        escalation_owner=escalation,
    )

    report = supportability_report(user=world.admin, period=PERIOD)

    rows = {r.job.key: r for r in report.jobs}
    assert rows["nightly-payment-sync"].ownership.team == payments
    assert rows["nightly-payment-sync"].ownership.escalation_owner == escalation
    assert rows["nightly-invoice-export"].ownership.team is None
    client.force_login(world.admin)
    page = client.get("/supportability/", PARAMS).content.decode()
    assert f'href="/teams/{payments.public_id}/">Payments team</a>' in page and "no owning team" in page
    text = client.get("/supportability/export.md", PARAMS).content.decode()
    payment_part = text[text.index("`nightly-payment-sync`") :].split("\n## ")[0]
    invoice_part = text[text.index("`nightly-invoice-export`") :].split("\n## ")[0]
    assert f"- **Owning team:** Payments team — http://testserver/teams/{payments.public_id}/" in payment_part
    assert "**escalation owner:** pat-escalation" in payment_part
    assert "- **Owning team:** no owning team" in invoice_part
    body = client.get("/api/v1/supportability/", PARAMS).json()
    api = {r["job"]["key"]: r["ownership"] for r in body["jobs"]}
    assert api["nightly-payment-sync"]["team"] == {"id": str(payments.public_id), "name": "Payments team"}
    assert api["nightly-payment-sync"]["escalation_owner"] == "pat-escalation"
    assert api["nightly-invoice-export"] == {"team": None, "escalation_owner": None}


def test_a_support_person_of_one_tenant_counts_only_that_tenants_alerts_and_handovers(world: World) -> None:
    world.handover("nightly-payment-sync", "borealis-retail", explained=True)

    report = supportability_report(user=world.support, period=PERIOD)

    own = [p for p in POSTS if p[1] == "acme-foods"]
    assert _got(report) == _expected(own)
    assert all(r.handovers == 0 for r in report.jobs)  # the explained handover is of borealis-retail


def test_a_technical_owner_counts_every_tenant_of_their_job_only(world: World, client: Client) -> None:
    report = supportability_report(user=world.owner, period=PERIOD)
    assert _got(report) == {k: v for k, v in _expected(POSTS).items() if k == "nightly-invoice-export"}
    assert report.jobs[0].owners == ["sup-owner"]

    client.force_login(world.owner)
    body = client.get("/api/v1/supportability/", PARAMS).json()
    assert [r["job"]["key"] for r in body["jobs"]] == ["nightly-invoice-export"]
    assert body["jobs"][0]["missing"]["window"] == _expected(POSTS)["nightly-invoice-export"]["window"]


def test_the_supportability_page_lists_the_concrete_fields_to_add(world: World, client: Client) -> None:
    client.force_login(world.support)
    page = client.get("/supportability/", PARAMS)
    assert page.status_code == 200
    html = page.content.decode()
    assert "nightly-payment-sync" in html and "missing from 1 of 1 alerts" in html
    assert "borealis" not in html.split("<main", 1)[1].split("</form>", 1)[1]


@pytest.mark.parametrize("path", ["/api/v1/supportability/", "/api/v1/recurrence/"])
def test_a_period_given_empty_or_outside_the_choices_is_refused_and_absent_means_thirty_days(
    world: World, client: Client, path: str
) -> None:
    client.force_login(world.owner)
    for days in ("", "14"):
        refused = client.get(path, {"days": days})
        assert refused.status_code == 400 and refused["Content-Type"] == "application/problem+json"
        assert "days" in refused.json()["errors"]
    assert client.get(path).json()["period"]["days"] == 30

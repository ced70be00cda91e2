"""Aged work and its owners (docs/ownership.md): each kind at its age's boundary, owners (target over
job, "no owner"), the reminder ladder (each step once, never re-sent, no burst), its timeline event and
notifications, visibility of the list, the team page and the API, and the needs-attention section."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import IntegrityError, transaction
from django.test import Client

from handover.core.errors import Forbidden
from handover.handovers.models import Handover
from handover.notifications.models import Notification, Team
from handover.ownership.models import AgedWorkEscalation, JobOwnership
from handover.ownership.selectors import aged_work_list
from handover.ownership.services import aged_work_escalate, job_ownership_set, target_ownership_set
from runs.attempts.models import Run
from runs.checks.models import NextRunCheck
from runs.timeline.models import TimelineEvent
from tests.factories import JobFactory, JobTargetFactory, NextRunCheckFactory, UserFactory
from tests.handover.helpers import LedgerLoader, World
from tests.page_forms import page_form

pytestmark = pytest.mark.django_db
T = datetime(2026, 11, 28, 6, 0, tzinfo=UTC)  # when the world's run failed, for these tests
DAY = 86400


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _failed_at(world: World, at: datetime) -> None:
    Run.objects.filter(pk=world.run.pk).update(status_changed_at=at)


def _kinds(now: datetime, **kw: Any) -> list[tuple[str, Any]]:
    return [(item.kind, item.subject) for item in aged_work_list(now=now, **kw)]


@pytest.fixture
def team(world: World) -> Team:
    """Team "Billing" with the world's technical owner and one more member, owning the world's job."""
    team = Team.objects.create(name="Billing")
    team.members.add(world.owner, UserFactory(username="bea-billing"))
    job_ownership_set(actor=world.owner, job=world.job, team=team, escalation_owner=world.support)
    return team


# --- each kind at its boundary ----------------------------------------------------------------------


def test_a_failed_run_with_no_handover_ages_exactly_at_its_age(world: World) -> None:
    _failed_at(world, T)
    age = timedelta(seconds=settings.HANDOVER_AGED_FAILED_RUN_SECONDS)

    assert _kinds(T + age - timedelta(seconds=1), kinds=["failed_run"]) == []
    assert _kinds(T + age, kinds=["failed_run"]) == [("failed_run", world.run.public_id)]
    [item] = aged_work_list(now=T + age + timedelta(hours=2), kinds=["failed_run"])
    assert item.age_seconds == settings.HANDOVER_AGED_FAILED_RUN_SECONDS + 7200
    assert item.age_words == "6 hours" and item.since == T


def test_a_failed_run_with_a_handover_is_not_aged_as_a_failed_run(world: World, draft: Handover) -> None:
    _failed_at(world, T)
    assert _kinds(T + timedelta(days=30), kinds=["failed_run"]) == []


def test_a_handover_with_no_write_ages_from_its_last_write(world: World, draft: Handover) -> None:
    Handover.objects.filter(pk=draft.pk).update(updated_at=T)
    age = timedelta(seconds=settings.HANDOVER_AGED_HANDOVER_SECONDS)

    assert _kinds(T + age - timedelta(seconds=1), kinds=["stalled_handover"]) == []
    assert _kinds(T + age, kinds=["stalled_handover"]) == [("stalled_handover", draft.public_id)]
    # a verifying handover waits on its next-run check (which ages on its own)
    Handover.objects.filter(pk=draft.pk).update(
        status="verifying", handed_over_at=T, handed_over_by=world.support, verifying_at=T
    )
    assert _kinds(T + age, kinds=["stalled_handover"]) == []


def test_an_unresolved_ledger_ages_from_its_last_change(world: World, load_ledger: LedgerLoader) -> None:
    load_ledger(world.run, completed=["inv-1"], uncertain=["inv-2"], absent=["inv-3"])
    Run.objects.filter(pk=world.run.pk).update(ledger_updated_at=T)
    age = timedelta(seconds=settings.HANDOVER_AGED_LEDGER_SECONDS)

    assert _kinds(T + age - timedelta(seconds=1), kinds=["unresolved_ledger"]) == []
    [item] = aged_work_list(now=T + age, kinds=["unresolved_ledger"])
    assert item.subject == world.run.public_id
    assert item.detail == "2 unresolved item(s): 1 uncertain, 1 absent, 0 unverified"


def test_a_next_run_check_still_scheduled_past_its_deadline_ages_from_the_deadline(world: World) -> None:
    check = NextRunCheckFactory(target=world.target, expected_at=T - timedelta(minutes=30), deadline_at=T)
    NextRunCheckFactory(target=world.target, failed=True, expected_at=T - timedelta(days=1))  # settled: never aged
    age = timedelta(seconds=settings.HANDOVER_AGED_CHECK_SECONDS)

    assert _kinds(T + age - timedelta(seconds=1), kinds=["overdue_check"]) == []
    assert _kinds(T + age, kinds=["overdue_check"]) == [("overdue_check", check.public_id)]
    NextRunCheck.objects.filter(pk=check.pk).update(status="failed", failed_at=T, failure_reason="deadline_passed")
    assert _kinds(T + age, kinds=["overdue_check"]) == []  # settled by the sweep: no longer overdue


# --- owners -------------------------------------------------------------------------------------------


def test_an_item_shows_no_owner_until_one_is_named_and_the_target_overrides_the_job(world: World) -> None:
    _failed_at(world, T)
    now = T + timedelta(days=1)
    [item] = aged_work_list(now=now, kinds=["failed_run"])
    assert item.owner.words == "no owner"

    billing = Team.objects.create(name="Billing")
    job_ownership_set(actor=world.owner, job=world.job, team=billing, escalation_owner=world.owner)
    [item] = aged_work_list(now=now, kinds=["failed_run"])
    assert item.owner.words == "team Billing · escalation owner olga-owner" and not item.owner.from_target

    acme = Team.objects.create(name="Acme desk")
    target_ownership_set(actor=world.owner, target=world.target, team=acme, escalation_owner=None)
    [item] = aged_work_list(now=now, kinds=["failed_run"])
    # the target's team wins; its empty escalation owner falls back to the job's
    assert item.owner.words == "team Acme desk · escalation owner olga-owner" and item.owner.from_target


def test_only_admins_and_the_technical_owner_set_ownership_each_change_on_the_timeline(world: World) -> None:
    billing = Team.objects.create(name="Billing")
    for person in (world.support, world.auditor, world.stranger):
        with pytest.raises(Forbidden):
            job_ownership_set(actor=person, job=world.job, team=billing, escalation_owner=None)
    assert not JobOwnership.objects.exists()

    job_ownership_set(actor=world.owner, job=world.job, team=billing, escalation_owner=world.support)
    job_ownership_set(actor=world.owner, job=world.job, team=billing, escalation_owner=world.support)  # no change
    events = TimelineEvent.objects.filter(kind=TimelineEvent.Kind.OWNERSHIP_CHANGED)
    assert [e.summary for e in events] == ["Job ownership set: team Billing, escalation owner sam-support"]
    assert events[0].actor_user == world.owner and events[0].job == world.job


# --- the ladder ---------------------------------------------------------------------------------------


def test_each_ladder_step_is_sent_once_to_the_team_and_the_escalation_owner(world: World, team: Team) -> None:
    _failed_at(world, T)

    assert aged_work_escalate(now=T + timedelta(seconds=DAY - 1)).sent == 0  # aged, but before the first step
    first = aged_work_escalate(now=T + timedelta(seconds=DAY))
    again = aged_work_escalate(now=T + timedelta(seconds=DAY + 3600))

    assert (first.sent, again.sent) == (1, 0)
    row = AgedWorkEscalation.objects.get()
    assert (row.kind, row.subject, row.step, row.step_seconds) == ("failed_run", world.run.public_id, 1, DAY)
    assert row.team == team and row.escalation_owner == world.support and row.told_count == 2
    told = Notification.objects.filter(event=Notification.Event.AGED_WORK).order_by("recipient__username")
    # bea is in the team but holds no role on the tenant: a team grants no permission, so she is not told
    assert [n.recipient.get_username() for n in told] == ["olga-owner", "sam-support"]
    assert told[0].link == f"/runs/{world.run.public_id}/" and "Failed run with no handover".lower() in told[0].subject
    event = TimelineEvent.objects.get(kind=TimelineEvent.Kind.AGED_WORK_ESCALATED)
    assert event.run == world.run and event.tenant == world.tenant and event.actor_kind == "system"
    assert event.summary == (
        "Aged work escalated (reminder 1 of 3): failed run with no handover, 1 day old — "
        "team Billing · escalation owner sam-support"
    )

    assert aged_work_escalate(now=T + timedelta(days=3)).sent == 1
    assert aged_work_escalate(now=T + timedelta(days=6)).sent == 0
    assert aged_work_escalate(now=T + timedelta(days=7)).sent == 1
    assert aged_work_escalate(now=T + timedelta(days=20)).sent == 0  # the ladder ends
    assert list(AgedWorkEscalation.objects.order_by("step").values_list("step", flat=True)) == [1, 2, 3]
    assert TimelineEvent.objects.filter(kind=TimelineEvent.Kind.AGED_WORK_ESCALATED).count() == 3
    assert Notification.objects.filter(event="aged_work").count() == 6


def test_an_item_found_late_gets_only_its_highest_step_not_a_burst(world: World, team: Team) -> None:
    _failed_at(world, T)
    assert aged_work_escalate(now=T + timedelta(days=8)).sent == 1
    assert list(AgedWorkEscalation.objects.values_list("step", flat=True)) == [3]
    assert aged_work_escalate(now=T + timedelta(days=9)).sent == 0


def test_with_no_owner_the_technical_owners_are_told_and_the_timeline_says_so(world: World) -> None:
    _failed_at(world, T)
    aged_work_escalate(now=T + timedelta(days=1))
    assert [n.recipient for n in Notification.objects.filter(event="aged_work")] == [world.owner]
    event = TimelineEvent.objects.get(kind=TimelineEvent.Kind.AGED_WORK_ESCALATED)
    assert event.summary.endswith("no owner named: the job's technical owners")


def test_a_handover_that_progresses_and_stalls_again_starts_a_new_ladder(world: World, draft: Handover) -> None:
    Handover.objects.filter(pk=draft.pk).update(updated_at=T)
    aged_work_escalate(now=T + timedelta(days=1))
    Handover.objects.filter(pk=draft.pk).update(updated_at=T + timedelta(days=2))
    aged_work_escalate(now=T + timedelta(days=3))
    rows = AgedWorkEscalation.objects.filter(kind="stalled_handover").order_by("since")
    assert [(r.since, r.step) for r in rows] == [(T, 1), (T + timedelta(days=2), 1)]


def test_one_step_per_item_and_episode_is_a_database_rule(world: World) -> None:
    values = {
        "kind": "failed_run",
        "subject": world.run.public_id,
        "since": T,
        "step": 1,
        "step_seconds": DAY,
        "job": world.job,
        "sent_at": T,
    }
    AgedWorkEscalation.objects.create(**values)
    with pytest.raises(IntegrityError), transaction.atomic():
        AgedWorkEscalation.objects.create(**values)


# --- who sees what ------------------------------------------------------------------------------------


def test_the_api_lists_aged_work_the_caller_may_see_with_owner_and_age(world: World, team: Team) -> None:
    _failed_at(world, T)  # days before the tests' clock: aged
    url = "/api/v1/aged-work/"
    body = client_for(world.support).get(url).json()
    [item] = [r for r in body["results"] if r["kind"] == "failed_run"]
    assert item["subject"] == str(world.run.public_id) and item["team"] == {
        "id": str(team.public_id),
        "name": "Billing",
    }
    assert item["escalation_owner"] == "sam-support" and item["owner"] == "team Billing · escalation owner sam-support"
    assert item["age_seconds"] > 3 * DAY and item["url"].endswith(f"/runs/{world.run.public_id}/")

    assert client_for(world.auditor).get(url).json()["count"] == body["count"]  # auditors read
    assert client_for(world.stranger).get(url).json()["count"] == 0  # support of another tenant
    assert client_for(world.support).get(url, {"kind": "overdue_check"}).json()["count"] == 0
    assert client_for(world.support).get(url, {"team": str(team.public_id)}).json()["count"] == body["count"]
    other = Team.objects.create(name="Other")
    assert client_for(world.support).get(url, {"team": str(other.public_id)}).json()["count"] == 0
    assert client_for(world.support).get(url, {"kind": "nope"}).status_code == 400
    mine = client_for(UserFactory(username="bea-billing")).get(url, {"mine": "true"}).json()
    assert mine["count"] == 0  # a member of the team who sees no tenant of the job sees nothing


def test_a_team_page_lists_its_aged_work_and_is_hidden_from_people_who_see_none_of_its_jobs(
    world: World, team: Team
) -> None:
    _failed_at(world, T)
    url = f"/teams/{team.public_id}/"
    page = client_for(world.support).get(url)
    assert page.status_code == 200 and f"/runs/{world.run.public_id}/" in page.content.decode()
    assert "Failed run with no handover" in page.content.decode()
    assert client_for(world.stranger).get(url).status_code == 404
    assert client_for(world.owner).get(url).status_code == 200  # a member, and the job's technical owner


def test_my_aged_work_lists_what_the_escalation_owner_owns(world: World, team: Team) -> None:
    _failed_at(world, T)
    page = client_for(world.support).get("/aged-work/")
    assert page.status_code == 200 and [i.subject for i in page.context["items"]] == [world.run.public_id]
    assert client_for(world.auditor).get("/aged-work/").context["items"] == []  # sees it, owns nothing


def test_the_job_ownership_api_reads_for_readers_and_writes_for_the_technical_owner(world: World) -> None:
    billing = Team.objects.create(name="Billing")
    url = f"/api/v1/jobs/{world.job.public_id}/ownership/"
    body = {"team": str(billing.public_id), "escalation_owner": "sam-support"}

    assert client_for(world.stranger).patch(url, body, content_type="application/json").status_code == 404
    assert client_for(world.support).patch(url, body, content_type="application/json").status_code == 403
    answer = client_for(world.owner).patch(url, body, content_type="application/json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["team"]["name"] == "Billing" and answer.json()["escalation_owner"] == "sam-support"
    assert JobOwnership.objects.get(job=world.job).set_by == world.owner
    assert client_for(world.auditor).get(url).json()["escalation_owner"] == "sam-support"

    # a partial change keeps the other field; null clears
    answer = client_for(world.owner).patch(url, {"escalation_owner": None}, content_type="application/json")
    assert answer.json()["team"]["name"] == "Billing" and answer.json()["escalation_owner"] is None
    refused = client_for(world.owner).patch(url, {"escalation_owner": "nobody-here"}, content_type="application/json")
    assert refused.status_code == 400 and "escalation_owner" in refused.json()["errors"]

    target_url = f"/api/v1/jobs/{world.job.public_id}/targets/{world.target.public_id}/ownership/"
    answer = client_for(world.owner).patch(
        target_url, {"escalation_owner": "ada-auditor"}, content_type="application/json"
    )
    assert answer.status_code == 200
    assert answer.json()["targets"][0]["escalation_owner"] == "ada-auditor"
    assert TimelineEvent.objects.filter(kind="ownership_changed").count() == 3


def test_the_job_ownership_page_saves_the_job_and_a_target(world: World) -> None:
    billing = Team.objects.create(name="Billing")
    url = f"/jobs/{world.job.public_id}/ownership/"
    assert "Save the job" not in client_for(world.support).get(url).content.decode()
    assert client_for(world.stranger).get(url).status_code == 404
    client = client_for(world.owner)
    assert "Save the job" in client.get(url).content.decode()
    client.post(url, {"team": str(billing.public_id), "escalation_owner": "olga-owner"})
    client.post(url, {"target": str(world.target.public_id), "escalation_owner": "sam-support"})
    assert JobOwnership.objects.get(job=world.job).escalation_owner == world.owner
    page = client.get(url).content.decode()
    assert "team Billing</a> · escalation owner sam-support" in page
    response = client_for(world.support).post(url, {"team": str(billing.public_id)}, follow=True)
    assert "technical owners and admins" in response.content.decode()  # refused by the service


def test_needs_attention_lists_aged_work_with_its_owner(world: World, team: Team) -> None:
    _failed_at(world, T)
    sections = {
        key: items for key, _, items in client_for(world.support).get("/handovers/attention/").context["sections"]
    }
    [item] = sections["aged_work"]
    assert item.owner == "team Billing · escalation owner sam-support"
    assert item.detail.startswith("Failed run with no handover, aged ")
    assert client_for(world.stranger).get("/handovers/attention/").context["sections"][0][2] == []


def test_an_overdue_check_is_escalated_on_its_jobs_timeline_with_its_tenant(world: World, team: Team) -> None:
    Run.objects.filter(pk=world.run.pk).update(status="succeeded")  # only the check ages here
    check = NextRunCheckFactory(target=world.target, expected_at=T - timedelta(minutes=30), deadline_at=T)
    assert aged_work_escalate(now=T + timedelta(days=1)).sent == 1
    event = TimelineEvent.objects.get(kind=TimelineEvent.Kind.AGED_WORK_ESCALATED)
    assert (event.job, event.tenant, event.run) == (world.job, world.tenant, None)
    assert event.data["kind"] == "overdue_check" and event.data["subject"] == str(check.public_id)
    assert event.summary.startswith("Aged work escalated (reminder 1 of 3): next-run check overdue, 1 day old")
    assert {n.link for n in Notification.objects.filter(event="aged_work")} == {f"/checks/{check.public_id}/"}


def test_a_stale_ownership_form_keeps_the_team_another_owner_set_and_refuses_a_clash(world: World) -> None:
    """The owner and an admin open the job's ownership page. The admin names Billing; the owner, on the
    page opened before, names an escalation owner only: Billing stays. The owner then names another team
    on that same stale page: refused, nothing changed (``handover.core.edits``)."""
    billing, payments = Team.objects.create(name="Billing"), Team.objects.create(name="Payments")
    url = f"/jobs/{world.job.public_id}/ownership/"
    owner, admin = client_for(world.owner), client_for(UserFactory(admin=True))
    stale, fresh = page_form(owner, url), page_form(admin, url)
    fresh["team"] = str(billing.public_id)
    admin.post(url, fresh)

    stale["escalation_owner"] = "olga-owner"
    owner.post(url, stale)
    row = JobOwnership.objects.get(job=world.job)
    assert (row.team, row.escalation_owner) == (billing, world.owner)

    stale["team"] = str(payments.public_id)
    page = owner.post(url, stale, follow=True).content.decode()
    assert "Someone changed the owning team of job nightly-invoice-export" in page
    assert JobOwnership.objects.get(job=world.job).team == billing
    assert TimelineEvent.objects.filter(kind="ownership_changed").count() == 2


def test_the_ownership_form_and_api_offer_only_teams_the_owner_may_name(world: World) -> None:
    """A technical owner of one job may name a team that owns nothing (an engineering team) or one they
    see, never the team owning only another client's job: the page does not offer it and the API finds
    no such team, as for problems (``team_list_assignable``)."""
    engineering = Team.objects.create(name="Platform engineering")
    hidden = Team.objects.create(name="Brightwater secret desk")
    other_job = JobFactory(key="brightwater-payroll")
    JobTargetFactory(job=other_job, tenant=world.other_tenant)
    job_ownership_set(actor=UserFactory(admin=True), job=other_job, team=hidden, escalation_owner=None)
    owner = client_for(world.owner)
    url = f"/jobs/{world.job.public_id}/ownership/"

    page = owner.get(url).content.decode()
    assert "Platform engineering" in page and "Brightwater secret desk" not in page
    refused = owner.post(url, {"team": str(hidden.public_id)}, follow=True)
    assert not JobOwnership.objects.filter(job=world.job, team=hidden).exists()
    assert "Choose a team" in refused.content.decode()
    api = owner.patch(
        f"/api/v1/jobs/{world.job.public_id}/ownership/",
        {"team": str(hidden.public_id)},
        content_type="application/json",
    )
    assert api.status_code == 400 and api.json()["errors"]["team"] == ["No such team."]
    owner.post(url, {"team": str(engineering.public_id)})
    assert JobOwnership.objects.get(job=world.job).team == engineering

"""HTML pages: the handover page, edit form, print view, Markdown, history, my handovers, needs attention,
the run page's box, job pause — with 404 for other tenants, 403 for readers, and query budgets."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from handover.handovers.models import Handover, HandoverRevision
from handover.handovers.services import handover_create, handover_update, residual_exception_create
from runs.alerts.models import Alert
from runs.catalog.models import Job
from runs.catalog.pause import job_pause
from runs.timeline.models import TimelineEvent
from tests.conftest import fixture_path
from tests.factories import RunFactory, UserFactory
from tests.handover.helpers import LedgerLoader, World, edit_form_data, force_status

pytestmark = pytest.mark.django_db


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_handover_page_reads_next_action_first_and_marks_generated_text(world: World, draft: Handover) -> None:
    response = client_for(world.auditor).get(f"/handovers/{draft.public_id}/")

    assert response.status_code == 200
    html = response.content.decode()
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in html
    assert html.index("What is safe to do next") < html.index("What definitely happened")
    assert html.count('class="generated-mark"') >= 6
    assert "Closing conditions" in html and "exp-a2" in html
    assert "Edit</a>" not in html  # an auditor reads only


def test_html_pages_are_404_for_another_tenant_and_writes_403_for_readers(world: World, draft: Handover) -> None:
    for suffix in ("", "edit/", "print/", "markdown/", "history/"):
        assert client_for(world.stranger).get(f"/handovers/{draft.public_id}/{suffix}").status_code == 404
    auditor = client_for(world.auditor)
    assert auditor.get(f"/handovers/{draft.public_id}/edit/").status_code == 403
    assert auditor.post(f"/handovers/{draft.public_id}/hand-over/").status_code == 403
    assert auditor.post(f"/handovers/{draft.public_id}/exceptions/", {"description": "x"}).status_code == 403
    assert not TimelineEvent.objects.filter(actor_user=world.auditor).exists()


def test_edit_form_saves_a_revision_and_confirms_generated_text(world: World, draft: Handover) -> None:
    client = client_for(world.support)
    form = client.get(f"/handovers/{draft.public_id}/edit/")
    assert form.status_code == 200 and "Confirm generated text as it is" in form.content.decode()
    data = edit_form_data(draft)
    data.update(
        business_impact="Acme's dunning run waits for 2 invoices.",
        escalation_owner="olga-owner",
        confirm=["definitely_happened"],
    )

    response = client.post(f"/handovers/{draft.public_id}/edit/", data)

    assert response.status_code == 302 and response["Location"] == f"/handovers/{draft.public_id}/"
    handover = Handover.objects.get(pk=draft.pk)
    assert handover.business_impact == "Acme's dunning run waits for 2 invoices."
    assert handover.escalation_owner == world.owner
    assert "definitely_happened" not in handover.generated_sections
    assert "next_action" in handover.generated_sections  # untouched text stays generated
    assert (
        HandoverRevision.objects.filter(handover=draft, section="business_impact", created_by=world.support).count()
        == 1
    )
    history = client.get(f"/handovers/{draft.public_id}/history/?section=business_impact").content.decode()
    assert "Acme&#x27;s dunning run waits for 2 invoices." in history


def test_actions_post_redirect_get_with_messages(world: World, draft: Handover) -> None:
    client = client_for(world.support)

    refused = client.post(f"/handovers/{draft.public_id}/hand-over/", follow=True)
    assert "Name the escalation owner before handing over." in refused.content.decode()

    handover_update(handover=draft, actor=world.support, fields={"escalation_owner": world.owner})
    done = client.post(f"/handovers/{draft.public_id}/hand-over/", follow=True)
    assert "Handed over" in done.content.decode()
    assert Handover.objects.get(pk=draft.pk).status == "handed_over"
    assert client.post(f"/handovers/{draft.public_id}/explode/").status_code == 404


def test_print_and_markdown(world: World, draft: Handover) -> None:
    client = client_for(world.support)

    printed = client.get(f"/handovers/{draft.public_id}/print/").content.decode()
    markdown = client.get(f"/handovers/{draft.public_id}/markdown/?download=1")

    assert "generated — not confirmed" in printed and "<nav>" not in printed
    assert markdown["Content-Type"] == "text/markdown; charset=utf-8"
    assert markdown["Content-Disposition"] == f'attachment; filename="handover-{draft.public_id}.md"'
    assert markdown.content.decode().startswith(f"# Handover: {draft.title}")


def test_new_handover_from_the_run_page(world: World) -> None:
    client = client_for(world.support)
    box = client.get(f"/runs/{world.run.public_id}/handover-box/").content.decode()
    assert "Draft a handover" in box

    page = client.get(f"/handovers/new/?run={world.run.public_id}")
    assert page.status_code == 200
    response = client.post("/handovers/new/", {"run": str(world.run.public_id), "runs": [str(world.run.public_id)]})

    handover = Handover.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/handovers/{handover.public_id}/"
    box = client.get(f"/runs/{world.run.public_id}/handover-box/").content.decode()
    assert handover.title in box and "Draft a handover" not in box
    assert client_for(world.stranger).get(f"/handovers/new/?run={world.run.public_id}").status_code == 404
    assert client.get("/handovers/new/?run=not-a-uuid").status_code == 404


def test_the_run_page_shows_the_box_slot_and_the_pause(world: World) -> None:
    job_pause(job=world.job, actor=world.owner, reason="ledger gateway maintenance")

    page = client_for(world.support).get(f"/runs/{world.run.public_id}/").content.decode()
    listing = client_for(world.support).get("/runs/").content.decode()

    assert f'hx-get="/runs/{world.run.public_id}/handover-box/"' in page
    assert "is paused</strong>" in page and "ledger gateway maintenance" in page
    assert "⏸ paused" in listing


def test_my_handovers_lists_what_i_escalate(world: World, draft: Handover) -> None:
    other = RunFactory(job=world.job, tenant=world.tenant, target=world.target, status="failed")
    mine = handover_create(actor=world.support, runs=[other])
    handover_update(handover=mine, actor=world.support, fields={"escalation_owner": world.owner})

    html = client_for(world.owner).get("/handovers/mine/").content.decode()

    assert f"/handovers/{mine.public_id}/" in html and f"/handovers/{draft.public_id}/" not in html


def test_my_handovers_query_budget(world: World, django_assert_max_num_queries: Any) -> None:
    for _ in range(5):
        run = RunFactory(job=world.job, tenant=world.tenant, target=world.target, status="failed")
        handover = handover_create(actor=world.support, runs=[run])
        handover_update(handover=handover, actor=world.support, fields={"escalation_owner": world.owner})
    client = client_for(world.owner)
    client.get("/handovers/mine/")

    # session, user, preference, unread count; open: count, page, runs; closed: handovers, runs (none)
    with django_assert_max_num_queries(9):
        response = client.get("/handovers/mine/")
    assert response.content.decode().count('class="card"') >= 5


def test_needs_attention_lists_each_kind_oldest_first_with_owners(
    world: World, load_ledger: LedgerLoader, django_assert_max_num_queries: Any
) -> None:
    now = timezone.now()
    old = RunFactory(
        job=world.job,
        tenant=world.tenant,
        target=world.target,
        status="failed",
        scheduled_for=now - timedelta(days=3),
    )
    newer = RunFactory(
        job=world.job, tenant=world.tenant, target=world.target, status="failed", scheduled_for=now - timedelta(hours=2)
    )
    load_ledger(old, uncertain=["INV-1"])
    handover_create(actor=world.support, runs=[newer])  # no escalation owner
    for days in (10, 11, 12):
        RunFactory(
            job=world.job,
            tenant=world.tenant,
            target=world.target,
            status="failed",
            window_start=now - timedelta(days=days),
            window_end=now - timedelta(days=days - 1),
        )
    client = client_for(world.owner)
    client.get("/handovers/attention/")

    # session, user, preference, five sections (the long-unresolved runs in two parts, the repeated failures
    # as the targets' last runs and the runs without a target: seven queries), two for the technical
    # owners' names; the slot
    # rules' sections: made-up windows (candidates, their jobs, their targets), unexplained re-fires,
    # durations (attempts, their jobs, targets);
    # aged work: one per kind (four), the owners (job's, target's) and the ladder steps sent; the
    # navigation's audit link (whether the person audits any tenant); the unmatched alerts' visibility,
    # looked up first: the person's tenant slugs, tenant ids and owned jobs (runs.alerts.selectors)
    with django_assert_max_num_queries(29):
        response = client.get("/handovers/attention/")

    sections = response.context["sections"]
    items = {key: items for key, _, items in sections}
    failed = items["failed_runs"]
    assert [item.since for item in failed] == sorted(item.since for item in failed)  # oldest first
    assert len(failed) == 5  # every failed run but the one with a handover
    assert all(item.owner == "olga-owner (technical owner)" for item in items["failed_runs"])
    assert [i.title for i in items["unowned_handovers"]] and items["unowned_handovers"][
        0
    ].owner == "sam-support (wrote it)"
    assert [i.detail for i in items["unresolved_runs"]] == ["1 unresolved item(s)"]
    assert items["repeated_failures"][0].title == "nightly-invoice-export · acme-foods · prod"
    assert items["repeated_failures"][0].detail == "5 of its last 5 runs failed"
    assert items["unmatched_alerts"] == []
    assert client_for(world.stranger).get("/handovers/attention/").context["sections"][0][2] == []


def test_needs_attention_shows_unmatched_alerts_to_admins(
    story_tenants: dict[str, Any], make_key: Any, post_alert: Any
) -> None:
    key = make_key("generic", tenants=[story_tenants["acme-foods"]])
    post_alert("generic", fixture_path("generic", "93-unknown-job-key.json"), key)
    alert = Alert.objects.get(outcome="unmatched")

    items = client_for(UserFactory(admin=True)).get("/handovers/attention/").context["sections"][-1][2]

    assert [item.url for item in items] == [f"/alerts/{alert.public_id}/"]
    assert items[0].owner == "admins (triage)"


def test_job_pause_page(world: World) -> None:
    client = client_for(world.owner)
    url = f"/jobs/{world.job.public_id}/pause/"

    assert "Pause the job" not in client_for(world.support).get(url).content.decode()
    assert client_for(world.support).post(url, {"reason": "x"}).status_code == 403
    assert "Pause the job" in client.get(url).content.decode()
    response = client.post(url, {"reason": "gateway maintenance"})
    assert response.status_code == 302
    job = Job.objects.get(pk=world.job.pk)
    assert job.paused_by == world.owner and job.pause_reason == "gateway maintenance"
    assert "Resume the job" in client.get(url).content.decode()
    assert client_for(world.auditor).post(url, {"reason": "x"}).status_code == 403
    assert client_for(world.stranger).get(url).status_code == 404
    client.post(f"/jobs/{world.job.public_id}/resume/", {"note": "done"})
    assert Job.objects.get(pk=world.job.pk).paused_at is None


def test_the_handover_page_shows_the_pause(world: World, draft: Handover) -> None:
    job_pause(job=world.job, actor=world.owner, reason="ledger gateway maintenance")

    html = client_for(world.support).get(f"/handovers/{draft.public_id}/").content.decode()

    assert "is paused</strong>" in html and "by olga-owner" in html


def test_a_closed_handover_offers_reopen_only(world: World, draft: Handover) -> None:
    force_status(draft, "closed", world.support)

    html = client_for(world.support).get(f"/handovers/{draft.public_id}/").content.decode()

    assert "Reopen (back to recovering)" in html and ">Close</button>" not in html


def test_reopen_on_the_page_needs_a_reason_and_says_what_is_wrong(world: World, draft: Handover) -> None:
    force_status(draft, "closed", world.support)
    client = client_for(world.support)
    url = f"/handovers/{draft.public_id}/reopen/"

    blank = client.post(url, {"reason": "  "}, follow=True).content.decode()
    too_long = client.post(url, {"reason": "x" * 2001}, follow=True).content.decode()

    assert "Say why the handover is reopened." in blank
    assert "at most 2000 characters" in too_long
    assert Handover.objects.get(pk=draft.pk).status == "closed"
    assert not TimelineEvent.objects.filter(kind="handover_reopened").exists()

    done = client.post(url, {"reason": "INV-7 turned up twice"}, follow=True).content.decode()

    assert "Reopened: back to recovering." in done
    handover = Handover.objects.get(pk=draft.pk)
    assert handover.status == "recovering" and handover.reopen_reason == "INV-7 turned up twice"
    event = TimelineEvent.objects.get(kind="handover_reopened")
    assert event.actor_user == world.support and event.data["reason"] == "INV-7 turned up twice"


def test_the_handover_page_query_budget(
    world: World, draft: Handover, load_ledger: LedgerLoader, django_assert_max_num_queries: Any
) -> None:
    load_ledger(world.run, completed=["INV-1"], absent=["INV-2", "INV-3"], duplicates=["INV-4"])
    for n in range(3):
        residual_exception_create(
            handover=draft,
            actor=world.support,
            description=f"left over {n}",
            record_ids=["INV-2"],
            owner=world.owner,
        )
    client = client_for(world.support)
    client.get(f"/handovers/{draft.public_id}/")

    # session, user, preference, unread count; handover, runs, exceptions, covered items, notifications;
    # who was told (notifications, deliveries); closing conditions: runs with checks, two per item rule,
    # exceptions; may-write: owned jobs, support tenants; problems: the linked ones, those to link to
    with django_assert_max_num_queries(21):
        response = client.get(f"/handovers/{draft.public_id}/")
    assert response.status_code == 200 and response.content.decode().count("<p>left over") == 3

"""``/api/v1/handovers/`` and job pause: tenant isolation (404), read-only roles (403), problems, budgets."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest
import time_machine
from django.core.cache import cache
from django.test import Client
from django.utils import timezone
from knox.models import AuthToken

from handover.accounts.models import ApiTokenUse
from handover.handovers.models import Handover, HandoverRevision, ResidualException
from handover.handovers.services import handover_create
from runs.catalog.models import Job
from runs.timeline.models import TimelineEvent
from tests.factories import JobTargetFactory, RunFactory, UserFactory
from tests.handover.helpers import LedgerLoader, World, force_status

pytestmark = pytest.mark.django_db
BASE = "/api/v1/handovers/"


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_create_pre_fills_and_answers_the_detail(world: World) -> None:
    response = client_for(world.support).post(
        BASE, {"runs": [str(world.run.public_id)]}, content_type="application/json"
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "draft" and body["job"] == "nightly-invoice-export" and body["tenants"] == ["acme-foods"]
    assert body["runs"][0]["execution_id"] == "exp-a2" and body["runs"][0]["next_run_check"] is None
    assert "next_action" in body["generated_sections"]
    assert body["next_action"].startswith("Reconcile first")
    assert [c["key"] for c in body["closing_conditions"]] == [
        "reconciled",
        "duplicates_explained",
        "next_run_checked",
        "exceptions_owned",
    ]
    assert Handover.objects.get(public_id=body["id"]).created_by == world.support


def test_create_for_an_invisible_run_is_404_and_for_a_reader_403(world: World) -> None:
    payload = {"runs": [str(world.run.public_id)]}

    assert client_for(world.stranger).post(BASE, payload, content_type="application/json").status_code == 404
    response = client_for(world.auditor).post(BASE, payload, content_type="application/json")
    assert response.status_code == 403 and response["Content-Type"] == "application/problem+json"
    assert not Handover.objects.exists()


def test_a_second_open_handover_for_a_run_is_409(world: World, draft: Handover) -> None:
    response = client_for(world.support).post(
        BASE, {"runs": [str(world.run.public_id)]}, content_type="application/json"
    )
    assert response.status_code == 409 and response.json()["type"].endswith("/conflict")
    assert list(Handover.objects.values_list("pk", flat=True)) == [draft.pk]  # nothing half-made


@pytest.mark.parametrize(
    ("method", "suffix"),
    [
        ("get", ""),
        ("get", "markdown/"),
        ("get", "revisions/"),
        ("patch", ""),
        ("post", "hand-over/"),
        ("post", "close/"),
        ("post", "reopen/"),
        ("post", "residual-exceptions/"),
    ],
)
def test_another_tenants_handover_is_404(world: World, draft: Handover, method: str, suffix: str) -> None:
    response = getattr(client_for(world.stranger), method)(
        f"{BASE}{draft.public_id}/{suffix}", {}, content_type="application/json"
    )
    assert response.status_code == 404
    assert response.json()["status"] == 404


def test_another_tenants_handover_is_not_listed(world: World, draft: Handover) -> None:
    assert client_for(world.stranger).get(BASE).json()["count"] == 0
    assert client_for(world.auditor).get(BASE).json()["count"] == 1


@pytest.mark.parametrize(
    ("method", "suffix", "payload"),
    [
        ("patch", "", {"deadlines": "Friday"}),
        ("post", "hand-over/", {}),
        ("post", "start-recovery/", {}),
        ("post", "verify/", {}),
        ("post", "close/", {}),
        ("post", "reopen/", {"reason": "x"}),
        ("post", "refresh/", {}),
        ("post", "residual-exceptions/", {"description": "x"}),
    ],
)
def test_an_auditor_reads_but_every_write_is_403(
    world: World, draft: Handover, method: str, suffix: str, payload: dict[str, Any]
) -> None:
    client = client_for(world.auditor)
    assert client.get(f"{BASE}{draft.public_id}/").status_code == 200

    response = getattr(client, method)(f"{BASE}{draft.public_id}/{suffix}", payload, content_type="application/json")

    assert response.status_code == 403
    assert response.json()["title"] == "Forbidden"
    assert Handover.objects.get(pk=draft.pk).status == "draft"
    assert not TimelineEvent.objects.filter(actor_user=world.auditor).exists()


def test_a_handover_spanning_a_tenant_the_caller_cannot_see_is_hidden(world: World) -> None:
    other = RunFactory(
        job=world.job,
        tenant=world.other_tenant,
        target=JobTargetFactory(job=world.job, tenant=world.other_tenant),
        status="failed",
    )
    handover = handover_create(actor=world.owner, runs=[world.run, other])

    assert client_for(world.support).get(f"{BASE}{handover.public_id}/").status_code == 404
    assert client_for(world.owner).get(f"{BASE}{handover.public_id}/").status_code == 200  # owns the job


def test_patch_edits_sections_and_owners_and_keeps_history(world: World, draft: Handover) -> None:
    client = client_for(world.owner)  # the technical owner may act too

    response = client.patch(
        f"{BASE}{draft.public_id}/",
        {"business_impact": "Acme cannot bill 2 customers.", "escalation_owner": "olga-owner", "confirm": ["affected"]},
        content_type="application/json",
        HTTP_IF_MATCH=f'"{draft.version}"',
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["business_impact"] == "Acme cannot bill 2 customers." and body["escalation_owner"] == "olga-owner"
    assert "affected" not in body["generated_sections"]
    history = client.get(f"{BASE}{draft.public_id}/revisions/?section=business_impact").json()
    assert history == [
        {
            "section": "business_impact",
            "text": "Acme cannot bill 2 customers.",
            "is_generated": False,
            "created_by": "olga-owner",
            "created_at": history[0]["created_at"],
        }
    ]
    unknown = client.patch(
        f"{BASE}{draft.public_id}/", {"escalation_owner": "nobody", "version": 2}, content_type="application/json"
    )
    assert unknown.status_code == 400 and "escalation_owner" in unknown.json()["errors"]


def test_close_refused_lists_what_is_missing(world: World, draft: Handover, load_ledger: LedgerLoader) -> None:
    load_ledger(world.run, completed=["INV-1"], absent=["INV-2"])
    force_status(draft, "verifying", world.support)
    client = client_for(world.support)

    response = client.post(f"{BASE}{draft.public_id}/close/")

    assert response.status_code == 409
    body = response.json()
    assert body["type"].endswith("/invalid-transition")
    assert any("INV-2" in line for line in body["errors"]["closing_conditions"])
    assert any("No next-run check" in line for line in body["errors"]["closing_conditions"])


def test_transition_from_the_wrong_status_is_409(world: World, draft: Handover) -> None:
    response = client_for(world.support).post(f"{BASE}{draft.public_id}/close/")
    assert response.status_code == 409 and response.json()["errors"] == {"status": ["draft"]}
    assert Handover.objects.get(pk=draft.pk).status == "draft"
    assert not TimelineEvent.objects.filter(kind="handover_closed").exists()


def test_reopen_needs_a_reason(world: World, draft: Handover) -> None:
    closed = force_status(draft, "closed", world.support)
    response = client_for(world.support).post(f"{BASE}{closed.public_id}/reopen/", {}, content_type="application/json")
    assert response.status_code == 400 and "reason" in response.json()["errors"]
    assert Handover.objects.get(pk=draft.pk).status == "closed"
    assert not TimelineEvent.objects.filter(kind="handover_reopened").exists()


def test_markdown_export(world: World, draft: Handover) -> None:
    response = client_for(world.auditor).get(f"{BASE}{draft.public_id}/markdown/")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/markdown")
    text = response.content.decode()
    assert text.startswith(f"# Handover: {draft.title}")
    assert "## What is safe to do next _(generated — not yet confirmed by a person)_" in text
    assert "`exp-a2` (attempt 2)" in text
    assert "- [ ] The missing output is reconciled" in text


def test_residual_exception_api(world: World, draft: Handover, load_ledger: LedgerLoader) -> None:
    load_ledger(world.run, absent=["INV-7"])
    client = client_for(world.support)

    created = client.post(
        f"{BASE}{draft.public_id}/residual-exceptions/",
        {"description": "INV-7 re-sent by hand", "record_ids": ["INV-7"], "owner": "olga-owner"},
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["record_ids"] == ["INV-7"] and created.json()["due_date"] is None
    exception = ResidualException.objects.get(handover=draft)
    assert exception.owner == world.owner and exception.due_date is None
    assert [item.record_id for item in exception.work_items.all()] == ["INV-7"]

    updated = client.patch(
        f"{BASE}{draft.public_id}/residual-exceptions/{created.json()['id']}/",
        {"owner": "olga-owner", "due_date": "2026-12-04", "version": created.json()["version"]},
        content_type="application/json",
    )
    assert updated.status_code == 200 and updated.json()["due_date"] == "2026-12-04"
    assert ResidualException.objects.get(pk=exception.pk).due_date == date(2026, 12, 4)


def test_list_query_budget(world: World, django_assert_max_num_queries: Any, load_ledger: LedgerLoader) -> None:
    for _ in range(6):
        run = RunFactory(job=world.job, tenant=world.tenant, target=world.target, status="failed")
        handover_create(actor=world.support, runs=[run])
    client = client_for(world.support)
    client.get(BASE)  # warm the session and the content-type cache

    # session, user, time-zone preference, count, handovers (job, owners joined), their runs with tenants
    with django_assert_max_num_queries(6):
        response = client.get(BASE)
    assert response.json()["count"] == 6


def test_detail_query_budget(world: World, draft: Handover, django_assert_max_num_queries: Any) -> None:
    client = client_for(world.support)
    client.get(f"{BASE}{draft.public_id}/")

    # session, user, time-zone preference, handover, runs, exceptions (covered items when there are any),
    # notifications, closing conditions (runs with checks, residual exceptions)
    with django_assert_max_num_queries(10):
        response = client.get(f"{BASE}{draft.public_id}/")
    assert response.status_code == 200


def test_pause_and_resume_a_job(world: World) -> None:
    url = f"/api/v1/jobs/{world.job.public_id}/"
    client = client_for(world.owner)

    missing = client.post(url + "pause/", {}, content_type="application/json")
    paused = client.post(url + "pause/", {"reason": "gateway maintenance"}, content_type="application/json")

    assert missing.status_code == 400
    assert (
        paused.status_code == 200
        and paused.json()["is_paused"]
        and paused.json()["paused_by"] == world.owner.get_username()
    )
    event = TimelineEvent.objects.get(kind="job_paused")
    assert event.job == world.job and event.run is None and event.tenant is None and event.actor_user == world.owner
    again = client.post(url + "pause/", {"reason": "another reason"}, content_type="application/json")
    assert again.json()["pause_reason"] == "gateway maintenance"  # the first pause stays
    assert TimelineEvent.objects.filter(kind="job_paused").count() == 1

    resumed = client.post(url + "resume/", {"note": "gateway back"}, content_type="application/json")
    assert resumed.status_code == 200 and not resumed.json()["is_paused"]
    assert Job.objects.get(pk=world.job.pk).paused_at is None
    assert TimelineEvent.objects.get(kind="job_resumed").data["paused_reason"] == "gateway maintenance"


def test_pause_is_404_for_strangers_and_403_for_readers_and_support(world: World) -> None:
    url = f"/api/v1/jobs/{world.job.public_id}/pause/"
    payload = {"reason": "x"}
    outsider = UserFactory()

    assert client_for(outsider).post(url, payload, content_type="application/json").status_code == 404
    assert client_for(world.auditor).post(url, payload, content_type="application/json").status_code == 403
    assert client_for(world.support).post(url, payload, content_type="application/json").status_code == 403
    assert Job.objects.get(pk=world.job.pk).paused_at is None
    assert not TimelineEvent.objects.filter(kind="job_paused").exists()
    assert client_for(world.owner).post(url, payload, content_type="application/json").status_code == 200
    assert Job.objects.get(pk=world.job.pk).paused_by == world.owner
    assert TimelineEvent.objects.get(kind="job_paused").actor_user == world.owner


def test_revisions_list_every_generated_section(world: World, draft: Handover) -> None:
    body = client_for(world.support).get(f"{BASE}{draft.public_id}/revisions/").json()
    assert len(body) == HandoverRevision.objects.filter(handover=draft).count() == 6
    assert all(r["is_generated"] and r["created_by"] is None for r in body)


def test_a_personal_api_token_records_its_last_use_at_most_once_a_minute(world: World) -> None:
    token, secret = AuthToken.objects.create(user=world.auditor)
    client = Client(HTTP_AUTHORIZATION=f"Token {secret}")
    assert not ApiTokenUse.objects.exists()
    start = timezone.now()

    with time_machine.travel(start, tick=False):
        assert client.get(BASE).status_code == 200
        assert client.get(BASE).status_code == 200  # within the minute: no second write
    first = ApiTokenUse.objects.get(token=token).last_used_at
    assert first == start
    cache.delete(f"api-token-used:{token.digest}")  # the minute has passed (the cache forgets)
    with time_machine.travel(start + timedelta(minutes=2), tick=False):
        assert client.get(BASE).status_code == 200
    assert ApiTokenUse.objects.get(token=token).last_used_at == start + timedelta(minutes=2)
    # a wrong token records nothing; a revoked token's use goes with it
    assert Client(HTTP_AUTHORIZATION=f"Token {secret[:-2]}xx").get(BASE).status_code == 401
    token.delete()
    assert not ApiTokenUse.objects.exists()
    assert secret not in str(list(ApiTokenUse.objects.values()))

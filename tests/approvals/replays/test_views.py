"""HTML pages: request a replay from the run, the request page, approving with the password, the queue."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from approvals.replays.models import Dispatch, ReplayRequest
from runs.attempts.business_state import run_business_state
from runs.attempts.models import Run
from runs.audit.models import AuditEvent
from runs.timeline.models import TimelineEvent
from tests.approvals.conftest import PASSWORD, Approve, MakeRequest, World
from tests.factories import AttemptFactory

pytestmark = pytest.mark.django_db


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_request_form_lists_absent_items_and_what_would_block(world: World) -> None:
    AttemptFactory(run=world.run, execution_id="exp-a2", number=2, trigger="automatic_retry", status="queued")
    page = client_for(world.support).get(f"/runs/{world.run.public_id}/replays/new/").content.decode()
    for record_id in ("INV-1", "INV-5"):
        assert f'value="{record_id}"' in page
    assert 'value="INV-6"' not in page and 'value="INV-7"' not in page
    assert "Rule 3: an attempt of this run is queued or running" in page and "exp-a2" in page
    assert "bea-business" in page and "tom-technical" in page
    assert "posts invoices to the ledger gateway" in page


def test_requesting_from_the_form_redirects_to_the_request_page(world: World, enqueued: dict[str, list[Any]]) -> None:
    client = client_for(world.support)
    response = client.post(
        f"/runs/{world.run.public_id}/replays/new/",
        {"kind": "absent_items", "record_ids": ["INV-1", "INV-4"], "reason": "gateway outage"},
    )
    request = ReplayRequest.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/replays/{request.public_id}/"
    assert sorted(request.items.values_list("record_id", flat=True)) == ["INV-1", "INV-4"]
    page = client.get(response["Location"]).content.decode()
    assert "Replay requested" in page
    assert "INV-4" in page and request.scope_fingerprint[:14] in page


def test_a_refused_request_shows_why(world: World) -> None:
    AttemptFactory(run=world.run, execution_id="exp-a2", number=2, trigger="automatic_retry", status="running")
    client = client_for(world.support)
    response = client.post(
        f"/runs/{world.run.public_id}/replays/new/",
        {"kind": "absent_items", "all_items": "on", "reason": "gateway outage"},
        follow=True,
    )
    page = response.content.decode()
    assert not ReplayRequest.objects.exists()
    assert "Refused by rule 3 (no attempt queued or running)" in page
    assert AuditEvent.objects.filter(action="replay_refused").count() == 1
    assert not TimelineEvent.objects.filter(kind="replay_refused").exists()  # a refusal did not happen to the run


def test_the_request_page_shows_scope_checks_approvals_side_effects_and_deliveries(
    world: World, make_request: MakeRequest, approve: Approve, django_assert_max_num_queries: Any
) -> None:
    request = make_request()
    approve(request, world.business, "business", comment="customers wait")
    client = client_for(world.technical)
    with django_assert_max_num_queries(25):
        page = client.get(f"/replays/{request.public_id}/").content.decode()
    assert "customers wait" in page and "bea-business" in page
    assert "rule 2 (scope)" in page and "posts invoices to the ledger gateway" in page
    assert "INV-1" in page and "INV-2" in page
    # tom may give the technical approval: the form is there, with the fingerprint
    assert f'value="{request.scope_fingerprint}"' in page and 'name="password"' in page
    # the requester sees no decision form
    assert 'name="password"' not in client_for(world.support).get(f"/replays/{request.public_id}/").content.decode()


def test_approving_from_the_page_needs_the_password(world: World, make_request: MakeRequest) -> None:
    request = make_request()
    client = client_for(world.business)
    form = {"kind": "business", "scope_fingerprint": request.scope_fingerprint, "comment": "ok"}
    page = client.post(f"/replays/{request.public_id}/approve/", form, follow=True).content.decode()
    assert "Re-enter your password" in page
    assert not request.approvals.exists()
    client.post(f"/replays/{request.public_id}/approve/", {**form, "password": PASSWORD})
    assert request.approvals.get().actor == world.business
    # the technical side, by another person
    both = client_for(world.both)
    both.post(f"/replays/{request.public_id}/approve/", {**form, "kind": "technical", "password": PASSWORD})
    assert ReplayRequest.objects.get(pk=request.pk).status == "approved"


def test_approving_from_the_queue_over_htmx_returns_the_row(world: World, make_request: MakeRequest) -> None:
    request = make_request()
    client = client_for(world.business)
    path = f"/replays/{request.public_id}/approve/"
    form = {"kind": "business", "scope_fingerprint": request.scope_fingerprint, "from": "queue"}
    refused = client.post(path, {**form, "password": "wrong"}, HTTP_HX_REQUEST="true").content.decode()
    assert f'id="queue-{request.public_id}"' in refused and "The password is not correct" in refused
    assert '<option value="business">' in refused and '<option value="technical">' not in refused
    response = client.post(path, {**form, "password": PASSWORD}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    text = response.content.decode()
    assert f'id="queue-{request.public_id}"' in text and "decided" in text and "<html" not in text
    assert request.approvals.get().actor == world.business


def test_the_replays_page_lists_the_queue(world: World, make_request: MakeRequest) -> None:
    request = make_request()
    page = client_for(world.both).get("/replays/").content.decode()
    assert f"/replays/{request.public_id}/" in page and "Waiting for me" in page
    # bo may give either side: the inline approval offers both
    assert '<option value="business">' in page and '<option value="technical">' in page
    assert 'hx-post="/replays/' in page


def test_the_run_page_fragment_lists_replays_and_offers_a_request(world: World, make_request: MakeRequest) -> None:
    make_request()
    fragment = client_for(world.support).get(f"/runs/{world.run.public_id}/replays/", HTTP_HX_REQUEST="true")
    text = fragment.content.decode()
    assert "<html" not in text and "Request replay" in text and "pending" in text
    # auditors read it without the request link
    assert (
        "Request replay" not in client_for(world.auditor).get(f"/runs/{world.run.public_id}/replays/").content.decode()
    )
    # the run page itself loads it
    assert (
        f"/runs/{world.run.public_id}/replays/"
        in client_for(world.support).get(f"/runs/{world.run.public_id}/").content.decode()
    )


def test_pages_of_a_run_the_person_cannot_see_are_404(world: World, make_request: MakeRequest) -> None:
    request = make_request()
    client = client_for(world.other_business)
    assert client.get(f"/replays/{request.public_id}/").status_code == 404
    assert client.get(f"/runs/{world.run.public_id}/replays/new/").status_code == 404
    assert client.post(f"/replays/{request.public_id}/cancel/", {"reason": "x"}).status_code == 404


def test_a_person_who_may_not_manage_it_cannot_dispatch_from_the_page(world: World, approved: ReplayRequest) -> None:
    page = client_for(world.auditor).post(f"/replays/{approved.public_id}/dispatch/", follow=True).content.decode()
    assert "requester, support on this tenant or the job" in page
    approved.refresh_from_db()
    assert approved.status == ReplayRequest.Status.APPROVED
    assert not Dispatch.objects.exists()
    assert not TimelineEvent.objects.filter(kind="replay_dispatched").exists()


def test_cancel_dispatch_and_recovery_decision_from_the_pages(world: World, approved: ReplayRequest) -> None:
    client = client_for(world.support)
    client.post(f"/replays/{approved.public_id}/dispatch/")
    assert ReplayRequest.objects.get(pk=approved.pk).status == "dispatched"
    page = client.post(f"/replays/{approved.public_id}/cancel/", {"reason": "too late"}, follow=True).content.decode()
    assert "cannot cancel" in page
    client.post(
        f"/runs/{world.run.public_id}/recovery-decision/",
        {"decision": "dependency_corrected", "note": "gateway certificate renewed"},
    )
    assert TimelineEvent.objects.filter(kind="recovery_decision").count() == 1


def test_within_five_minutes_the_same_session_decides_without_typing_the_password_again(
    world: World, make_request: MakeRequest
) -> None:
    first, second = make_request(["INV-1"]), make_request(["INV-2"])
    client = client_for(world.business)
    client.post(
        f"/replays/{first.public_id}/approve/",
        {"kind": "business", "scope_fingerprint": first.scope_fingerprint, "password": PASSWORD},
    )
    client.post(
        f"/replays/{second.public_id}/approve/", {"kind": "business", "scope_fingerprint": second.scope_fingerprint}
    )
    assert second.approvals.get().actor == world.business


def test_the_admin_shows_replay_records_but_never_changes_them(world: World, make_request: MakeRequest) -> None:
    request = make_request()
    client = client_for(world.admin)
    assert client.get(f"/admin/approvals/replayrequest/{request.pk}/change/").status_code == 200
    assert client.post(f"/admin/approvals/replayrequest/{request.pk}/delete/", {"post": "yes"}).status_code == 403
    assert client.get("/admin/approvals/replayrequest/add/").status_code == 403
    assert ReplayRequest.objects.get(pk=request.pk).status == ReplayRequest.Status.PENDING


def test_the_technical_owner_approves_from_the_queue_accepting_an_unknown_repeat_safety(
    world: World, make_request: MakeRequest
) -> None:
    world.job.side_effects.all().delete()  # a job that lists no side effect: its repeat safety is unknown
    request = make_request()
    client = client_for(world.technical)
    queue = client.get("/replays/").content.decode()
    assert 'name="accepts_unknown_repeat_safety"' in queue and 'name="acceptance_reason"' in queue
    path = f"/replays/{request.public_id}/approve/"
    form = {"kind": "technical", "scope_fingerprint": request.scope_fingerprint, "from": "queue", "password": PASSWORD}

    # without the acceptance: refused by rule 3, the row comes back with the reason and nothing is recorded
    refused = client.post(path, form, HTTP_HX_REQUEST="true").content.decode()
    assert "Refused by rule 3 (repeat safety)" in refused and 'name="accepts_unknown_repeat_safety"' in refused
    # accepting without saying why is refused too (server-side, whatever the browser sent)
    no_reason = client.post(
        path, {**form, "accepts_unknown_repeat_safety": "on"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "needs a reason" in no_reason
    assert not request.approvals.exists()
    # a refusal did not happen to the run: no approval event and no refusal on its timeline
    assert not TimelineEvent.objects.filter(run=world.run, kind__in=["replay_approval", "replay_refused"]).exists()
    assert AuditEvent.objects.filter(action="replay_refused", data__stage="approval").count() == 1

    accepted = client.post(
        path,
        {**form, "accepts_unknown_repeat_safety": "on", "acceptance_reason": "each invoice post carries its key"},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert "decided" in accepted
    approval = request.approvals.get()
    assert (approval.kind, approval.actor) == ("technical", world.technical)
    assert approval.accepts_unknown_repeat_safety and approval.acceptance_reason == "each invoice post carries its key"
    assert TimelineEvent.objects.filter(run=world.run, kind="replay_approval").count() == 1


def test_the_queue_asks_no_acceptance_when_the_repeat_safety_is_known_or_the_side_is_business(
    world: World, make_request: MakeRequest
) -> None:
    make_request()
    assert 'name="accepts_unknown_repeat_safety"' not in client_for(world.technical).get("/replays/").content.decode()
    world.job.side_effects.all().delete()
    assert 'name="accepts_unknown_repeat_safety"' not in client_for(world.business).get("/replays/").content.decode()


def test_a_run_that_is_ok_offers_no_failure_action_and_a_failed_one_does(world: World) -> None:
    client = client_for(world.support)

    def offered() -> dict[str, bool]:
        run_page = client.get(f"/runs/{world.run.public_id}/").content.decode()
        box = client.get(f"/runs/{world.run.public_id}/handover-box/", HTTP_HX_REQUEST="true").content.decode()
        replays = client.get(f"/runs/{world.run.public_id}/replays/", HTTP_HX_REQUEST="true").content.decode()
        return {
            "draft a handover": "Draft a handover" in box,
            "request a replay": "Request replay" in replays,
            "record a recovery route": f"/runs/{world.run.public_id}/recovery-decision/" in replays,
            "load a ledger": "Load record ids" in run_page,
            "confirm a failure class": f"/runs/{world.run.public_id}/items/failure-class/" in run_page,
        }

    assert run_business_state(world.run).state == "failed"
    assert all(offered().values()), offered()

    Run.objects.filter(pk=world.run.pk).update(status=Run.Status.SUCCEEDED, unresolved_count=0)
    world.run.refresh_from_db()
    assert run_business_state(world.run).state == "ok"
    assert not any(offered().values()), offered()

    Run.objects.filter(pk=world.run.pk).update(unresolved_count=2)  # succeeded, but items unresolved: attention
    assert all(offered().values()), offered()

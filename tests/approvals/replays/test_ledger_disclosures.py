"""A replay and the run's ledger: unexplained possible duplicates refuse the request (the form lists them);
items weakened from completed and duplicates explained are shown on the request and both approval screens
(who, why) and bound into the scope fingerprint; a later weakening stops the approvals until re-scoped."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from knox.models import AuthToken

from approvals.replays.models import ReplayRequest
from approvals.replays.rules import ReplayRefused, scope_fingerprint
from runs.audit.models import AuditEvent
from runs.ledger.items import work_item_change, work_item_duplicate_explain
from runs.ledger.models import WorkItem
from runs.ledger.totals import run_totals_refresh
from runs.timeline.models import TimelineEvent
from tests.approvals.conftest import Approve, MakeRequest, World

pytestmark = pytest.mark.django_db


def flag_duplicate(world: World, record_id: str) -> None:
    """The destination holds ``record_id`` twice (what a destination load would flag)."""
    WorkItem.objects.filter(run=world.run, record_id=record_id).update(is_possible_duplicate=True, destination_count=2)
    run_totals_refresh(run=world.run)


def test_an_unexplained_possible_duplicate_refuses_the_request_until_explained(
    world: World, make_request: MakeRequest
) -> None:
    flag_duplicate(world, "INV-6")

    with pytest.raises(ReplayRefused) as refused:
        make_request()

    assert "no_unexplained_possible_duplicate" in refused.value.errors
    assert "INV-6" in refused.value.detail
    assert not ReplayRequest.objects.exists()
    assert AuditEvent.objects.filter(action="replay_refused", data__run=str(world.run.public_id)).count() == 1
    assert not TimelineEvent.objects.filter(run=world.run, kind="replay_refused").exists()

    work_item_duplicate_explain(
        actor=world.support, run=world.run, record_id="INV-6", reason="two legs of one payment", evidence_ref="GW-7"
    )
    request = make_request()
    assert request.status == "pending"
    assert [(d["kind"], d["record_id"], d["by"], d["why"]) for d in request.ledger_disclosures] == [
        ("explained", "INV-6", world.support.get_username(), "two legs of one payment")
    ]


def test_the_request_form_lists_unexplained_duplicates_and_explains_them_in_place(world: World) -> None:
    flag_duplicate(world, "INV-6")
    client = Client()
    client.force_login(world.support)
    form_url = f"/runs/{world.run.public_id}/replays/new/"

    page = client.get(form_url).content.decode()
    assert "1 possible duplicate not explained" in page and "<code>INV-6</code>" in page

    refused = client.post(form_url, {"kind": "absent_items", "record_ids": ["INV-1"], "reason": "gateway down"})
    assert (
        "no_unexplained_possible_duplicate" in refused.content.decode() or "not explained" in refused.content.decode()
    )
    assert not ReplayRequest.objects.exists()

    back = client.post(
        f"/runs/{world.run.public_id}/items/explain-duplicate/",
        {"record_id": "INV-6", "reason": "two legs", "evidence_ref": "GW-7", "next": form_url},
    )
    assert back.status_code == 302 and back["Location"] == form_url
    assert "No possible duplicate of this run is unexplained" in client.get(form_url).content.decode()


def test_weakened_and_explained_items_are_shown_and_bound_into_the_fingerprint(
    world: World, make_request: MakeRequest, approve: Approve, enqueued: dict[str, list[Any]]
) -> None:
    work_item_change(
        actor=world.support, run=world.run, record_id="INV-6", outcome="absent", note="the gateway lost it"
    )
    flag_duplicate(world, "INV-8")
    work_item_duplicate_explain(
        actor=world.support, run=world.run, record_id="INV-8", reason="a test invoice", evidence_ref="T-1"
    )

    request = make_request(record_ids=["INV-1", "INV-6"])

    shown = [(d["kind"], d["record_id"], d["from"], d["to"], d["by"]) for d in request.ledger_disclosures]
    assert shown == [
        ("weakened", "INV-6", "completed", "absent", "sam-support"),
        ("explained", "INV-8", "rejected", "rejected", "sam-support"),
    ]
    bare = scope_fingerprint(run=world.run, kind=request.kind, fix_reference="", record_ids=["INV-1", "INV-6"])
    bound = scope_fingerprint(
        run=world.run,
        kind=request.kind,
        fix_reference="",
        record_ids=["INV-1", "INV-6"],
        disclosures=request.ledger_disclosures,
    )
    assert request.scope_fingerprint == bound != bare

    # the request page (technical approval screen) and the queue (business approval screen) show who and why
    technical = Client()
    technical.force_login(world.technical)
    detail = technical.get(f"/replays/{request.public_id}/").content.decode()
    assert "the gateway lost it" in detail and "a test invoice" in detail and "the requester" in detail
    business = Client()
    business.force_login(world.business)
    queue = business.get("/replays/").content.decode()
    assert "2 weakened or explained ledger items" in queue and "the gateway lost it" in queue
    _, token = AuthToken.objects.create(user=world.business)
    api = Client(HTTP_AUTHORIZATION=f"Token {token}").get(f"/api/v1/replays/{request.public_id}/").json()
    assert [d["record_id"] for d in api["ledger_disclosures"]] == ["INV-6", "INV-8"]
    assert api["ledger_disclosures"][0]["from"] == "completed"

    # weakened again after the request: nobody approves what they were not shown
    work_item_change(actor=world.support, run=world.run, record_id="INV-7", outcome="unverified", note="x")
    work_item_change(actor=world.support, run=world.run, record_id="INV-9", outcome="completed", note="found")
    work_item_change(actor=world.support, run=world.run, record_id="INV-9", outcome="absent", note="lost again")
    with pytest.raises(ReplayRefused) as refused:
        approve(request, world.business, "business")
    assert "ledger_disclosures_current" in refused.value.errors

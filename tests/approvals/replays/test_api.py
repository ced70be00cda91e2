"""``/api/v1/replays/`` for people: the whole road through the API, problem details naming the rule,
visibility (404) versus permission (403), the password re-entry, and query budgets."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.test import Client
from django.utils import timezone

from approvals.replays.models import Dispatch, ReplayRequest
from runs.catalog.services import role_grant
from runs.timeline.models import TimelineEvent
from tests.approvals.conftest import PASSWORD, MakeRequest, World
from tests.factories import AttemptFactory

pytestmark = pytest.mark.django_db


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def post(client: Client, path: str, body: dict[str, Any] | None = None) -> Any:
    return client.post(path, data=body or {}, content_type="application/json")


def approve_body(request: ReplayRequest, kind: str, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "scope_fingerprint": request.scope_fingerprint, "password": PASSWORD, **extra}


def test_the_whole_road_request_approve_approve_dispatched(
    world: World, enqueued: dict[str, list[Any]], django_capture_on_commit_callbacks: Any
) -> None:
    support = client_for(world.support)
    created = post(
        support,
        "/api/v1/replays/",
        {
            "run": str(world.run.public_id),
            "kind": "absent_items",
            "record_ids": ["INV-1", "INV-3"],
            "reason": "gateway down",
        },
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["status"] == "pending" and body["item_count"] == 2
    assert body["eligible_approvers"] == {
        "business": ["bea-business", "bo-both"],
        "technical": ["bo-both", "tom-technical"],
    }
    assert body["scope_sample"] == ["INV-1", "INV-3"]
    assert body["repeat_safety"] == "idempotent_with_key"
    assert body["side_effects"][0]["description"] == "posts invoices to the ledger gateway"
    assert {c["code"] for c in body["checks"]} >= {"scope_outcome", "no_active_attempt", "eligible_approvers"}
    request = ReplayRequest.objects.get(public_id=body["id"])

    business = post(
        client_for(world.business), f"/api/v1/replays/{request.public_id}/approve/", approve_body(request, "business")
    )
    assert business.status_code == 200, business.content
    assert business.json()["status"] == "pending"
    with django_capture_on_commit_callbacks(execute=True):
        technical = post(
            client_for(world.technical),
            f"/api/v1/replays/{request.public_id}/approve/",
            approve_body(request, "technical"),
        )
    assert technical.json()["status"] == "approved"
    assert [a["actor"] for a in technical.json()["approvals"]] == ["bea-business", "tom-technical"]
    assert enqueued["dispatch"] == [request.pk]

    dispatched = post(support, f"/api/v1/replays/{request.public_id}/dispatch/")
    assert dispatched.status_code == 200
    assert dispatched.json()["status"] == "dispatched"
    assert dispatched.json()["dispatch"]["idempotency_key"] == Dispatch.objects.get().idempotency_key
    again = post(support, f"/api/v1/replays/{request.public_id}/dispatch/")
    assert again.json()["dispatch"]["id"] == dispatched.json()["dispatch"]["id"]
    assert TimelineEvent.objects.filter(kind="replay_dispatched").count() == 1

    items = support.get(f"/api/v1/replays/{request.public_id}/items/").json()
    assert [(i["record_id"], i["outcome"]) for i in items["results"]] == [("INV-1", "absent"), ("INV-3", "absent")]


def test_a_refusal_is_problem_details_naming_each_rule(world: World) -> None:
    AttemptFactory(run=world.run, execution_id="exp-a2", number=2, trigger="automatic_retry", status="queued")
    response = post(
        client_for(world.support),
        "/api/v1/replays/",
        {"run": str(world.run.public_id), "kind": "absent_items", "record_ids": ["INV-1", "INV-7"], "reason": "x"},
    )
    assert response.status_code == 409
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert body["type"].endswith("/replay-refused")
    assert set(body["errors"]) == {"scope_verified", "no_active_attempt"}
    assert body["errors"]["no_active_attempt"][0].startswith("rule 3")
    assert "attempt 2 (exp-a2, automatic retry) is queued" in body["detail"]


def test_a_forged_scope_is_400_and_a_run_the_caller_cannot_see_is_404(world: World) -> None:
    support = client_for(world.support)
    forged = post(
        support,
        "/api/v1/replays/",
        {"run": str(world.run.public_id), "kind": "absent_items", "record_ids": ["INV-1", "NOPE-1"], "reason": "x"},
    )
    assert forged.status_code == 400 and "NOPE-1" in forged.json()["detail"]
    hidden = post(
        client_for(world.other_business),
        "/api/v1/replays/",
        {"run": str(world.run.public_id), "kind": "absent_items", "all": True, "reason": "x"},
    )
    assert hidden.status_code == 404
    assert not ReplayRequest.objects.exists()


def test_abuse_support_approving_is_403_naming_rule_4(world: World, make_request: MakeRequest) -> None:
    request = make_request()
    response = post(
        client_for(world.support), f"/api/v1/replays/{request.public_id}/approve/", approve_body(request, "business")
    )
    assert response.status_code == 403
    assert "rule 4" in response.json()["detail"]
    assert not request.approvals.exists()
    assert ReplayRequest.objects.get(pk=request.pk).status == ReplayRequest.Status.PENDING


def test_abuse_a_business_owner_of_another_tenant(world: World, make_request: MakeRequest) -> None:
    request = make_request()
    path = f"/api/v1/replays/{request.public_id}/approve/"
    # cannot see the run: 404, no existence leak
    assert post(client_for(world.other_business), path, approve_body(request, "business")).status_code == 404
    # sees it through another role (auditor here): 403, naming the rule
    role_grant(user=world.other_business, role="auditor", obj=world.tenant)
    response = post(client_for(world.other_business), path, approve_body(request, "business"))
    assert response.status_code == 403
    assert "business owner role on the tenant acme-foods" in response.json()["detail"]
    assert not request.approvals.exists()


def test_abuse_a_forged_fingerprint_is_409(world: World, make_request: MakeRequest) -> None:
    request = make_request()
    body = approve_body(request, "business", scope_fingerprint="f" * 64)
    response = post(client_for(world.business), f"/api/v1/replays/{request.public_id}/approve/", body)
    assert response.status_code == 409
    assert "scope_fingerprint" in response.json()["errors"]
    assert not request.approvals.exists()
    assert ReplayRequest.objects.get(pk=request.pk).status == ReplayRequest.Status.PENDING


def test_abuse_approving_an_expired_request_is_409(world: World, make_request: MakeRequest) -> None:
    request = make_request()
    with time_machine.travel(request.expires_at + timedelta(minutes=1)):
        response = post(
            client_for(world.business),
            f"/api/v1/replays/{request.public_id}/approve/",
            approve_body(request, "business"),
        )
    assert response.status_code == 409 and "expired" in response.json()["detail"]
    assert ReplayRequest.objects.get(pk=request.pk).status == "expired"


def test_abuse_the_requester_approving_is_403(world: World, make_request: MakeRequest) -> None:
    role_grant(user=world.business, role="support", obj=world.tenant)
    request = make_request(actor=world.business)
    response = post(
        client_for(world.business), f"/api/v1/replays/{request.public_id}/approve/", approve_body(request, "business")
    )
    assert response.status_code == 403 and "requester" in response.json()["detail"]
    assert not request.approvals.exists()


def test_the_password_is_needed_and_counts_five_minutes(world: World, make_request: MakeRequest) -> None:
    request = make_request()
    business = client_for(world.business)
    path = f"/api/v1/replays/{request.public_id}/approve/"
    no_password = approve_body(request, "business", password="")
    assert post(business, path, no_password).status_code == 403
    wrong = post(business, path, approve_body(request, "business", password="wrong"))
    assert wrong.status_code == 403 and wrong.json()["type"].endswith("/reauthentication-required")
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        reauth = post(business, "/api/v1/replays/reauthenticate/", {"password": PASSWORD})
        assert reauth.status_code == 200
    # re-entered in another session: does not count here
    assert post(client_for(world.business), path, no_password).status_code == 403
    assert not request.approvals.exists()
    with time_machine.travel(start + timedelta(seconds=299), tick=False):
        assert post(business, path, no_password).status_code == 200
    approval = request.approvals.get()
    assert approval.actor == world.business and approval.kind == "business"


def test_a_password_re_entered_more_than_five_minutes_ago_no_longer_counts(
    world: World, make_request: MakeRequest
) -> None:
    request = make_request()
    business = client_for(world.business)
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        assert post(business, "/api/v1/replays/reauthenticate/", {"password": PASSWORD}).status_code == 200
    with time_machine.travel(start + timedelta(seconds=301), tick=False):
        response = post(
            business, f"/api/v1/replays/{request.public_id}/approve/", approve_body(request, "business", password="")
        )
    assert response.status_code == 403 and "five minutes" in response.json()["detail"]
    assert not request.approvals.exists()


def test_too_many_wrong_passwords_answer_429(world: World) -> None:
    business = client_for(world.business)
    for _ in range(5):
        assert post(business, "/api/v1/replays/reauthenticate/", {"password": "guess"}).status_code == 403
    assert post(business, "/api/v1/replays/reauthenticate/", {"password": PASSWORD}).status_code == 429


def test_reject_scope_cancel_and_settle_through_the_api(world: World, make_request: MakeRequest) -> None:
    request = make_request()
    support = client_for(world.support)
    scoped = post(support, f"/api/v1/replays/{request.public_id}/scope/", {"record_ids": ["INV-4"], "note": "narrowed"})
    assert scoped.status_code == 200 and scoped.json()["scope_revision"] == 2
    request.refresh_from_db()
    rejected = post(
        client_for(world.technical),
        f"/api/v1/replays/{request.public_id}/reject/",
        {
            "kind": "technical",
            "scope_fingerprint": request.scope_fingerprint,
            "comment": "use the repair job",
            "password": PASSWORD,
        },
    )
    assert rejected.json()["status"] == "rejected"
    assert post(support, f"/api/v1/replays/{request.public_id}/cancel/", {"reason": "x"}).status_code == 409
    settle = post(support, f"/api/v1/replays/{request.public_id}/settle/", {"outcome": "failed", "reason": "x"})
    assert settle.status_code == 409


def test_an_auditor_reads_but_may_not_cancel_or_dispatch(world: World, make_request: MakeRequest) -> None:
    request = make_request()
    auditor = client_for(world.auditor)
    assert auditor.get(f"/api/v1/replays/{request.public_id}/").status_code == 200
    assert post(auditor, f"/api/v1/replays/{request.public_id}/cancel/", {"reason": "x"}).status_code == 403
    assert post(auditor, f"/api/v1/replays/{request.public_id}/dispatch/").status_code == 403
    request.refresh_from_db()
    assert request.status == ReplayRequest.Status.PENDING and request.closed_at is None
    assert not Dispatch.objects.exists()
    assert not TimelineEvent.objects.filter(kind__in=["replay_cancelled", "replay_dispatched"]).exists()


def test_an_auditor_may_not_dispatch_an_approved_request(world: World, approved: ReplayRequest) -> None:
    response = post(client_for(world.auditor), f"/api/v1/replays/{approved.public_id}/dispatch/")
    assert response.status_code == 403
    assert "requester, support on this tenant or the job's technical owner" in response.json()["detail"]
    approved.refresh_from_db()
    assert approved.status == ReplayRequest.Status.APPROVED
    assert not Dispatch.objects.exists()
    assert not TimelineEvent.objects.filter(kind="replay_dispatched").exists()


def test_recovery_decision_through_the_api(world: World) -> None:
    response = post(
        client_for(world.support),
        "/api/v1/replays/recovery-decisions/",
        {"run": str(world.run.public_id), "decision": "wait_for_retry", "reference": "exp-a2"},
    )
    assert response.status_code == 201 and response.json()["kind"] == "recovery_decision"
    event = TimelineEvent.objects.get(kind="recovery_decision")
    assert response.json()["id"] == str(event.public_id)
    assert event.run == world.run and event.actor_user == world.support
    assert event.data == {"decision": "wait_for_retry", "reference": "exp-a2", "note": ""}


def test_recovery_decision_on_a_run_the_caller_cannot_see_is_404(world: World) -> None:
    response = post(
        client_for(world.other_business),
        "/api/v1/replays/recovery-decisions/",
        {"run": str(world.run.public_id), "decision": "wait_for_retry", "reference": "exp-a2"},
    )
    assert response.status_code == 404
    assert not TimelineEvent.objects.filter(kind="recovery_decision").exists()


def test_the_queue_lists_what_waits_for_the_caller(world: World, make_request: MakeRequest) -> None:
    request = make_request()
    for person, expected in ((world.business, [str(request.public_id)]), (world.support, []), (world.auditor, [])):
        rows = client_for(person).get("/api/v1/replays/queue/").json()["results"]
        assert [r["id"] for r in rows] == expected


def test_list_query_budget(world: World, make_request: MakeRequest, django_assert_max_num_queries: Any) -> None:
    for ids in (["INV-1"], ["INV-2"], ["INV-3"], ["INV-4"]):
        make_request(ids)
    client = client_for(world.support)
    # session + user, guardian tenant and job lookups for the visibility filter, count, page
    with django_assert_max_num_queries(8):
        response = client.get("/api/v1/replays/")
    assert response.json()["count"] == 4


def test_detail_query_budget(world: World, make_request: MakeRequest, django_assert_max_num_queries: Any) -> None:
    request = make_request(["INV-1", "INV-2", "INV-3"])
    client = client_for(world.support)
    # session + user, visibility (guardian), request, approvals, dispatches, deliveries, side effects, scope sample
    with django_assert_max_num_queries(12):
        response = client.get(f"/api/v1/replays/{request.public_id}/")
    assert response.status_code == 200


def test_the_list_filters_by_run_status_and_open(world: World, make_request: MakeRequest) -> None:
    from approvals.replays.requests import replay_request_cancel

    open_one, closed = make_request(["INV-1"]), make_request(["INV-2"])
    replay_request_cancel(request=closed, actor=world.support, reason="not needed")
    client = client_for(world.support)

    def listed(query: str) -> list[str]:
        return [r["id"] for r in client.get(f"/api/v1/replays/?{query}").json()["results"]]

    assert set(listed(f"run={world.run.public_id}")) == {str(open_one.public_id), str(closed.public_id)}
    assert listed("open=true") == [str(open_one.public_id)]
    assert listed("status=cancelled") == [str(closed.public_id)]
    assert listed("run=00000000-0000-0000-0000-000000000000") == []
    malformed = client.get("/api/v1/replays/?run=not-a-uuid")  # a filter that is not a UUID is a 400, not "none"
    assert malformed.status_code == 400
    assert list(malformed.json()["errors"]) == ["run"]


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        ({}, {"business": [], "technical": []}),
        ({"business": ["bea-business"]}, {"business": ["bea-business"], "technical": []}),
        ({"technical": ["tom-technical"], "business": None}, {"business": [], "technical": ["tom-technical"]}),
        ([], {"business": [], "technical": []}),
    ],
)
def test_a_request_whose_stored_eligible_approvers_lack_a_kind_reads_as_empty_lists(
    world: World, make_request: MakeRequest, stored: Any, expected: dict[str, list[str]]
) -> None:
    # found: the detail answered 500 (KeyError in the serializer) when the JSON column held {} or one kind
    request = make_request()
    ReplayRequest.objects.filter(pk=request.pk).update(eligible_approvers=stored)

    response = client_for(world.support).get(f"/api/v1/replays/{request.public_id}/")

    assert response.status_code == 200, response.content
    assert response.json()["eligible_approvers"] == expected
    assert client_for(world.support).get("/api/v1/replays/").status_code == 200
    assert ReplayRequest.objects.get(pk=request.pk).eligible_approvers == stored  # read, never rewritten

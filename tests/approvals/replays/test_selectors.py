"""Reads: "waiting for me", what needs a person, visibility, eligible approvers -- with query budgets."""

from __future__ import annotations

from typing import Any

import pytest

from approvals.replays.dispatch import dispatch_lapse, replay_request_dispatch
from approvals.replays.models import ReplayRequest
from approvals.replays.selectors import (
    approval_kinds_open_to,
    replay_request_get,
    replay_request_list,
    replay_request_needs_decision,
    replay_request_queue,
)
from runs.catalog.services import role_grant
from runs.permissions import approvers_eligible
from tests.approvals.conftest import Approve, MakeRequest, World
from tests.factories import RunFactory, UserFactory

pytestmark = pytest.mark.django_db


def ids(rows: Any) -> list[str]:
    return [str(r.public_id) for r in rows]


def test_the_queue_shows_each_approver_what_waits_for_them(
    world: World, make_request: MakeRequest, approve: Approve
) -> None:
    first = make_request(["INV-1"])
    second = make_request(["INV-2"])
    approve(first, world.business, "business")
    # bea decided the business side of the first: only the second waits for her
    assert ids(replay_request_queue(user=world.business)) == [str(second.public_id)]
    # tom is technical owner: both still wait for the technical side
    assert set(ids(replay_request_queue(user=world.technical))) == {str(first.public_id), str(second.public_id)}
    # bo holds both roles: the first's business side is taken, its technical side is not
    assert set(ids(replay_request_queue(user=world.both))) == {str(first.public_id), str(second.public_id)}
    approve(second, world.both, "business")
    # bo decided the second already (one person, one approval): not in his queue any more
    assert ids(replay_request_queue(user=world.both)) == [str(first.public_id)]
    for person in (world.support, world.auditor, world.other_business, world.admin):
        assert list(replay_request_queue(user=person)) == []


def test_the_requester_never_waits_for_themselves(world: World, make_request: MakeRequest) -> None:
    role_grant(user=world.business, role="support", obj=world.tenant)
    request = make_request(actor=world.business)
    assert list(replay_request_queue(user=world.business)) == []
    assert str(request.public_id) in ids(replay_request_queue(user=world.both))


def test_approved_and_closed_requests_leave_the_queue(world: World, approved: ReplayRequest) -> None:
    assert list(replay_request_queue(user=world.both)) == []


def test_queue_query_budget(world: World, make_request: MakeRequest, django_assert_max_num_queries: Any) -> None:
    for record_id in ("INV-1", "INV-2", "INV-3", "INV-4", "INV-5"):
        make_request([record_id])
    # one query: the request rows with run, job, tenant, requester; permissions and approvals are subqueries
    with django_assert_max_num_queries(1):
        rows = list(replay_request_queue(user=world.technical))
        _ = [(r.run.job.key, r.run.tenant.slug, r.requested_by.username) for r in rows]
    assert len(rows) == 5


def test_needs_decision_lists_unknown_dispatches_for_those_who_manage_them(
    world: World, approved: ReplayRequest, django_assert_max_num_queries: Any
) -> None:
    dispatch, _ = replay_request_dispatch(request=approved)
    assert list(replay_request_needs_decision(user=world.support)) == []
    dispatch_lapse(dispatch=dispatch, reason="no runner claimed the replay in time")
    with django_assert_max_num_queries(2):
        rows = list(replay_request_needs_decision(user=world.support))
        _ = [d.status for r in rows for d in r.dispatches.all()]
    assert ids(rows) == [str(approved.public_id)]
    assert ids(replay_request_needs_decision(user=world.technical)) == [str(approved.public_id)]
    assert list(replay_request_needs_decision(user=world.auditor)) == []


def test_visibility_follows_the_run(world: World, make_request: MakeRequest) -> None:
    request = make_request()
    assert replay_request_get(user=world.auditor, public_id=request.public_id) is not None
    assert replay_request_get(user=world.other_business, public_id=request.public_id) is None
    assert list(replay_request_list(user=world.other_business)) == []
    assert replay_request_get(user=world.admin, public_id=request.public_id) is not None


def test_eligible_approvers_are_explicit_active_role_holders(world: World) -> None:
    inactive = UserFactory(username="ivy-inactive", is_active=False)
    role_grant(user=inactive, role="business_owner", obj=world.tenant)
    names = [u.username for u in approvers_eligible(run=world.run, kind="business")]
    assert names == ["bea-business", "bo-both"]
    other_run = RunFactory(job=world.job, tenant=world.other_tenant)
    assert [u.username for u in approvers_eligible(run=other_run, kind="business")] == ["oscar-other"]
    assert [u.username for u in approvers_eligible(run=world.run, kind="technical", exclude=world.both)] == [
        "tom-technical"
    ]


def test_detail_selector_query_budget(
    world: World, approved: ReplayRequest, django_assert_max_num_queries: Any
) -> None:
    replay_request_dispatch(request=approved)
    # request (+run, job, tenant, requester, handover), approvals, dispatches, deliveries (+ guardian lookups)
    with django_assert_max_num_queries(6):
        request = replay_request_get(user=world.support, public_id=approved.public_id)
        assert request is not None
        _ = [a.actor.username for a in request.approvals.all()]
        _ = [list(d.webhook_deliveries.all()) for d in request.dispatches.all()]


def test_the_kinds_a_person_may_still_give_on_a_request(
    world: World, make_request: MakeRequest, approve: Approve
) -> None:
    request = make_request()

    def kinds(user: Any) -> list[str]:
        fresh = replay_request_get(user=user, public_id=request.public_id)
        assert fresh is not None
        return approval_kinds_open_to(user=user, request=fresh)

    assert kinds(world.support) == []  # the requester
    assert kinds(world.auditor) == []
    assert kinds(world.business) == ["business"]
    assert kinds(world.technical) == ["technical"]
    assert kinds(world.both) == ["business", "technical"]
    approve(request, world.business, "business")
    assert kinds(world.business) == []  # decided already
    assert kinds(world.both) == ["technical"]  # the business side is taken
    approve(request, world.technical, "technical")
    assert ReplayRequest.objects.get(pk=request.pk).status == ReplayRequest.Status.APPROVED
    assert kinds(world.both) == []  # no longer pending

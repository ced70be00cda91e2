"""The replay rules through the services: each refusal names its rule; each change leaves its records."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.utils import timezone
from guardian.shortcuts import assign_perm

from approvals.replays.decisions import replay_request_reject
from approvals.replays.dispatch import replay_request_dispatch
from approvals.replays.models import Approval, Dispatch, ReplayRequest, ReplayRequestItem
from approvals.replays.requests import (
    ReplayForbidden,
    replay_request_cancel,
    replay_request_rescope,
    run_recovery_decision_record,
)
from approvals.replays.rules import ApprovalNotAllowed, ReauthenticationRequired, ReplayRefused, scope_fingerprint
from handover.core.errors import Conflict, DomainError, InvalidTransition
from handover.notifications.models import Notification
from runs.attempts.corrections import attempt_duplicate_trigger_explain
from runs.attempts.models import Attempt, Run
from runs.audit.models import AuditEvent
from runs.catalog.models import SideEffect
from runs.catalog.pause import job_pause, target_pause
from runs.catalog.services import role_grant
from runs.timeline.models import TimelineEvent
from tests.approvals.conftest import ABSENT, Approve, MakeRequest, World, set_outcome
from tests.factories import AttemptFactory, UserFactory

pytestmark = pytest.mark.django_db


def events(world: World, kind: str) -> list[TimelineEvent]:
    return list(TimelineEvent.objects.filter(run=world.run, kind=kind).order_by("id"))


def refusals(world: World) -> list[AuditEvent]:
    """The audit trail's refused replay requests and approvals of the world's run (not on its timeline)."""
    assert not events(world, "replay_refused")
    return list(AuditEvent.objects.filter(action="replay_refused", data__run=str(world.run.public_id)).order_by("id"))


# --- making a request ----------------------------------------------------------------------------


def test_request_of_absent_items_records_scope_fingerprint_approvers_and_event(
    world: World, make_request: MakeRequest, enqueued: dict[str, list[Any]], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        request = make_request(["INV-2", "INV-1"])

    assert request.status == ReplayRequest.Status.PENDING
    assert request.requested_by == world.support
    assert request.item_count == 2
    assert sorted(request.items.values_list("record_id", flat=True)) == ["INV-1", "INV-2"]
    assert set(request.items.values_list("outcome_at_request", flat=True)) == {"absent"}
    assert request.items.filter(is_open=True).count() == 2
    assert request.scope_fingerprint == scope_fingerprint(
        run=world.run, kind="absent_items", fix_reference="", record_ids=["INV-1", "INV-2"]
    )
    # eligible approvers of each kind are listed, the requester excluded
    assert request.eligible_approvers == {
        "business": ["bea-business", "bo-both"],
        "technical": ["bo-both", "tom-technical"],
    }
    assert all(c["ok"] for c in request.checks)
    assert request.expires_at > timezone.now() + timedelta(days=2)
    [event] = events(world, "replay_requested")
    assert event.actor_user == world.support
    assert event.data["replay_request"] == str(request.public_id)
    assert event.data["item_count"] == 2
    # the eligible approvers are e-mailed after commit
    # the eligible approvers are told in the request's own transaction (notifications), not by a later task
    assert enqueued["notify"] == []
    assert sorted(
        Notification.objects.filter(event="approval_needed", dedup_key=f"replay:{request.public_id}").values_list(
            "recipient__username", flat=True
        )
    ) == ["bea-business", "bo-both", "tom-technical"]


def test_request_all_absent_takes_every_absent_item(world: World, make_request: MakeRequest) -> None:
    request = make_request(all_items=True)
    assert sorted(request.items.values_list("record_id", flat=True)) == ABSENT


@pytest.mark.parametrize(
    ("record_id", "outcome"), [("INV-6", "completed"), ("INV-8", "rejected")], ids=["completed", "rejected"]
)
def test_rule_2_refuses_items_that_are_not_absent(
    world: World, make_request: MakeRequest, record_id: str, outcome: str
) -> None:
    with pytest.raises(ReplayRefused) as caught:
        make_request(["INV-1", record_id])
    assert set(caught.value.errors) == {"scope_outcome"}
    assert f"are {outcome}, not absent ({record_id})" in caught.value.detail
    assert "rule 2" in caught.value.detail
    assert not ReplayRequest.objects.exists()
    # the refusal is in the audit trail, naming the rule, and not on the run's timeline
    [event] = refusals(world)
    assert event.actor == world.support and list(event.tenants.all()) == [world.run.tenant]
    assert "scope_outcome" in event.data["errors"]


@pytest.mark.parametrize("record_id", ["INV-7", "INV-9"], ids=["uncertain", "unverified"])
def test_rule_2_refuses_uncertain_or_unverified_items_in_scope(
    world: World, make_request: MakeRequest, record_id: str
) -> None:
    with pytest.raises(ReplayRefused) as caught:
        make_request(["INV-1", record_id])
    assert "scope_verified" in caught.value.errors
    assert "verify them first" in caught.value.errors["scope_verified"][0]


def test_rejected_items_are_replayed_only_with_a_fix_reference(world: World, make_request: MakeRequest) -> None:
    with pytest.raises(DomainError) as caught:
        make_request(["INV-8"], kind="rejected_fixed")
    assert caught.value.errors == {"fix_reference": ["required for a replay of rejected items"]}

    request = make_request(["INV-8"], kind="rejected_fixed", fix_reference="CHG-4411 tax code mapping fixed")
    assert request.fix_reference == "CHG-4411 tax code mapping fixed"
    with pytest.raises(ReplayRefused) as refused:
        make_request(["INV-1"], kind="rejected_fixed", fix_reference="CHG-4411")
    assert "not rejected" in refused.value.errors["scope_outcome"][0]


def test_whole_batch_needs_a_confirmed_never_committed_run_and_no_completed_item(
    world: World, make_request: MakeRequest
) -> None:
    with pytest.raises(ReplayRefused) as caught:
        make_request(kind="whole_batch", record_ids=[])
    reasons = caught.value.errors["scope_outcome"][0]
    assert "confirmed: none" in reasons and "in the destination: the batch did commit" in reasons

    # a batch the evidence shows never committed: every item absent, class confirmed by a person
    for record_id in ("INV-6", "INV-7", "INV-8", "INV-9"):
        set_outcome(world, record_id, "absent")
    Run.objects.filter(pk=world.run.pk).update(failure_class="never_started", failure_class_confirmed_by=world.support)
    request = make_request(kind="whole_batch", record_ids=[])
    assert request.item_count == 9


def test_whole_batch_refuses_listed_record_ids(world: World, make_request: MakeRequest) -> None:
    with pytest.raises(DomainError) as caught:
        make_request(["INV-1"], kind="whole_batch")
    assert "record_ids" in caught.value.errors


def test_a_forged_scope_naming_items_of_no_such_record_is_refused(world: World, make_request: MakeRequest) -> None:
    with pytest.raises(DomainError) as caught:
        make_request(["INV-1", "INV-404", "../../etc"])
    assert caught.value.status == 400
    assert "INV-404" in caught.value.detail and "../../etc" in caught.value.detail
    assert not ReplayRequest.objects.exists()


def test_a_record_outside_the_eligible_population_is_never_in_scope(world: World, make_request: MakeRequest) -> None:
    from runs.ledger.models import WorkItem

    WorkItem.objects.create(
        run=world.run, record_id="INV-0998", outcome="rejected", is_in_population=False, evidence_kind="runner_report"
    )
    with pytest.raises(DomainError) as caught:
        make_request(["INV-0998"], kind="rejected_fixed", fix_reference="CHG-1")
    assert "eligible population: INV-0998" in caught.value.detail


def test_rule_3_refuses_while_an_attempt_is_queued_and_shows_it(world: World, make_request: MakeRequest) -> None:
    AttemptFactory(run=world.run, execution_id="exp-a2", number=2, trigger="automatic_retry", status="queued")
    with pytest.raises(ReplayRefused) as caught:
        make_request()
    detail = caught.value.errors["no_active_attempt"][0]
    assert "attempt 2 (exp-a2, automatic retry) is queued" in detail
    assert "rule 3" in detail


def test_rule_3_refuses_while_the_job_is_paused(world: World, make_request: MakeRequest) -> None:
    job_pause(job=world.job, actor=world.technical, reason="ledger gateway migration tonight")
    with pytest.raises(ReplayRefused) as caught:
        make_request()
    assert "ledger gateway migration tonight" in caught.value.errors["job_not_paused"][0]


def test_no_open_replay_may_cover_the_same_items(world: World, make_request: MakeRequest) -> None:
    first = make_request(["INV-1", "INV-2"])
    with pytest.raises(ReplayRefused) as caught:
        make_request(["INV-2", "INV-3"])
    assert f"open replay {first.public_id} already covers INV-2" in caught.value.errors["no_overlapping_replay"][0]
    # once the first is closed its items are free again
    replay_request_cancel(request=first, actor=world.support, reason="asked for the wrong window")
    assert not first.items.filter(is_open=True).exists()
    second = make_request(["INV-2", "INV-3"])
    assert second.item_count == 2


@pytest.mark.parametrize("missing", ["business", "technical"])
def test_rule_4_refuses_a_request_nobody_but_the_requester_could_approve(
    world: World, make_request: MakeRequest, missing: str
) -> None:
    from runs.catalog.services import role_revoke

    if missing == "business":
        for person in (world.business, world.both):
            role_revoke(user=person, role="business_owner", obj=world.tenant)
    else:
        for person in (world.technical, world.both):
            role_revoke(user=person, role="technical_owner", obj=world.job)
    with pytest.raises(ReplayRefused) as caught:
        make_request()
    assert f"nobody other than the requester can give the {missing} approval" in caught.value.detail
    assert "rule 4" in caught.value.detail


def test_rule_4_a_requester_who_is_the_only_business_owner_is_not_counted(
    world: World, make_request: MakeRequest
) -> None:
    from runs.catalog.services import role_revoke

    role_revoke(user=world.both, role="business_owner", obj=world.tenant)
    role_grant(user=world.business, role="support", obj=world.tenant)
    with pytest.raises(ReplayRefused) as caught:
        make_request(actor=world.business)
    assert "business approval" in caught.value.errors["eligible_approvers"][0]


def test_superusers_are_not_eligible_approvers_without_the_role(world: World, make_request: MakeRequest) -> None:
    request = make_request()
    assert "root-admin" not in request.eligible_approvers["business"] + request.eligible_approvers["technical"]


def test_only_support_on_the_tenant_may_request(world: World, make_request: MakeRequest) -> None:
    for person in (world.business, world.technical, world.auditor, world.other_business):
        with pytest.raises(ReplayForbidden):
            make_request(actor=person)


def test_request_links_the_open_handover_and_moves_it_to_recovering(world: World, make_request: MakeRequest) -> None:
    from handover.handovers.models import Handover
    from handover.handovers.services import handover_create, handover_hand_over, handover_update

    handover = handover_create(actor=world.support, runs=[world.run])
    handover_update(handover=handover, actor=world.support, fields={"escalation_owner": world.technical})
    handover_hand_over(handover=handover, actor=world.support)
    request = make_request()
    assert request.handover == handover
    assert Handover.objects.get(pk=handover.pk).status == Handover.Status.RECOVERING


# --- approvals -----------------------------------------------------------------------------------


def test_two_approvals_by_two_people_approve_and_enqueue_the_dispatch(
    world: World,
    make_request: MakeRequest,
    approve: Approve,
    enqueued: dict[str, list[Any]],
    django_capture_on_commit_callbacks: Any,
) -> None:
    request = make_request()
    with django_capture_on_commit_callbacks(execute=True):
        after_one = approve(request, world.business, "business", comment="customers are waiting")
    assert after_one.status == ReplayRequest.Status.PENDING
    assert enqueued["dispatch"] == []
    with django_capture_on_commit_callbacks(execute=True):
        after_two = approve(request, world.technical, "technical")
    assert after_two.status == ReplayRequest.Status.APPROVED
    assert after_two.approved_at is not None
    assert enqueued["dispatch"] == [request.pk]
    approvals = list(request.approvals.order_by("decided_at"))
    assert [(a.kind, a.decision, a.actor.username) for a in approvals] == [
        ("business", "approve", "bea-business"),
        ("technical", "approve", "tom-technical"),
    ]
    assert {a.scope_fingerprint for a in approvals} == {request.scope_fingerprint}
    assert len(events(world, "replay_approval")) == 2
    assert len(events(world, "replay_approved")) == 1


def test_rule_4_the_requester_cannot_approve(world: World, make_request: MakeRequest, approve: Approve) -> None:
    role_grant(user=world.business, role="support", obj=world.tenant)
    request = make_request(actor=world.business)
    with pytest.raises(ApprovalNotAllowed) as caught:
        approve(request, world.business, "business")
    assert caught.value.status == 403 and "rule 4" in caught.value.detail
    assert not Approval.objects.exists()


def test_rule_4_one_person_cannot_give_both_approvals(
    world: World, make_request: MakeRequest, approve: Approve
) -> None:
    request = make_request()
    approve(request, world.both, "business")
    with pytest.raises(ApprovalNotAllowed) as caught:
        approve(request, world.both, "technical")
    assert "one person cannot give both approvals" in caught.value.detail
    assert request.approvals.count() == 1


@pytest.mark.parametrize(
    ("who", "kind"),
    [
        ("support", "business"),
        ("auditor", "business"),
        ("technical", "business"),
        ("business", "technical"),
        ("other_business", "business"),
        ("admin", "business"),
        ("admin", "technical"),
    ],
)
def test_rule_4_only_the_explicit_role_on_this_tenant_or_job_may_approve(
    world: World, make_request: MakeRequest, approve: Approve, who: str, kind: str
) -> None:
    request = make_request()
    with pytest.raises(ApprovalNotAllowed) as caught:
        approve(request, getattr(world, who), kind)
    assert "rule 4" in caught.value.detail
    assert not Approval.objects.exists()


def test_a_role_held_through_a_group_counts(world: World, make_request: MakeRequest, approve: Approve) -> None:
    from django.contrib.auth.models import Group

    group = Group.objects.create(name="acme business owners")
    assign_perm("runs.act_as_business_owner", group, world.tenant)
    member = UserFactory(username="gil-group")
    member.groups.add(group)
    request = make_request()
    assert "gil-group" in request.eligible_approvers["business"]
    approve(request, member, "business")


def test_the_same_kind_cannot_be_decided_twice(world: World, make_request: MakeRequest, approve: Approve) -> None:
    request = make_request()
    approve(request, world.business, "business")
    with pytest.raises(Conflict):
        approve(request, world.both, "business")


def test_approvals_are_bound_to_the_scope_fingerprint(
    world: World, make_request: MakeRequest, approve: Approve
) -> None:
    request = make_request()
    with pytest.raises(ReplayRefused) as caught:
        approve(request, world.business, "business", scope_fingerprint="0" * 64)
    assert "scope_fingerprint" in caught.value.errors
    assert not Approval.objects.exists()
    assert refusals(world)[-1].data["stage"] == "approval"


def test_changing_the_scope_voids_the_approvals_and_returns_to_pending(
    world: World, approved: ReplayRequest, approve: Approve
) -> None:
    old = approved.scope_fingerprint
    rescoped = replay_request_rescope(
        request=approved, actor=world.support, record_ids=["INV-1", "INV-3"], note="INV-2 arrived"
    )
    assert rescoped.status == ReplayRequest.Status.PENDING
    assert rescoped.approved_at is None
    assert rescoped.scope_revision == 2 and rescoped.scope_fingerprint != old
    assert sorted(rescoped.items.values_list("record_id", flat=True)) == ["INV-1", "INV-3"]
    voided = list(rescoped.approvals.all())
    assert len(voided) == 2 and all(a.voided_at and a.void_reason == "the scope changed" for a in voided)
    [event] = events(world, "replay_rescoped")
    assert event.data["voided_approvals"] == 2
    # an approval for the old scope is refused; the new scope is approved afresh
    with pytest.raises(ReplayRefused):
        approve(rescoped, world.business, "business", scope_fingerprint=old)
    approve(rescoped, world.business, "business")
    assert approve(rescoped, world.technical, "technical").status == ReplayRequest.Status.APPROVED


def test_an_approval_is_refused_when_the_ledger_changed_under_the_scope(
    world: World, make_request: MakeRequest, approve: Approve
) -> None:
    request = make_request()
    set_outcome(world, "INV-2", "uncertain")
    with pytest.raises(ReplayRefused) as caught:
        approve(request, world.business, "business")
    assert "INV-2" in caught.value.errors["scope_verified"][0]


def test_the_approver_re_enters_their_password_within_five_minutes(
    world: World, make_request: MakeRequest, approve: Approve
) -> None:
    request = make_request()
    with pytest.raises(ReauthenticationRequired):
        approve(request, world.business, "business", reauthenticated_at=None)
    with pytest.raises(ReauthenticationRequired):
        approve(request, world.business, "business", reauthenticated_at=timezone.now() - timedelta(seconds=301))
    approve(request, world.business, "business", reauthenticated_at=timezone.now() - timedelta(seconds=299))


def test_rejecting_needs_a_comment_and_rejects_the_request(world: World, make_request: MakeRequest) -> None:
    request = make_request()
    with pytest.raises(DomainError):
        replay_request_reject(
            request=request,
            actor=world.business,
            kind="business",
            scope_fingerprint=request.scope_fingerprint,
            reauthenticated_at=timezone.now(),
            comment="",
        )
    rejected = replay_request_reject(
        request=request,
        actor=world.business,
        kind="business",
        scope_fingerprint=request.scope_fingerprint,
        reauthenticated_at=timezone.now(),
        comment="credit notes were issued instead",
    )
    assert rejected.status == ReplayRequest.Status.REJECTED
    assert rejected.closed_by == world.business
    assert "credit notes" in rejected.close_reason
    assert not rejected.items.filter(is_open=True).exists()


def test_repeat_safety_unknown_needs_the_technical_approvals_reasoned_acceptance(
    world: World, make_request: MakeRequest, approve: Approve
) -> None:
    SideEffect.objects.create(job=world.job, description="e-mails invoices to customers", repeat_safety="unknown")
    request = make_request()  # not refused at creation: the technical approval may accept it
    check = next(c for c in request.checks if c["code"] == "repeat_safety")
    assert check["ok"] is False and check["blocking"] is False
    approve(request, world.business, "business")  # the business side is not asked about it
    with pytest.raises(ReplayRefused) as caught:
        approve(request, world.technical, "technical")
    assert "rule 3" in caught.value.errors["repeat_safety"][0]
    with pytest.raises(DomainError):
        approve(request, world.technical, "technical", accepts_unknown_repeat_safety=True, acceptance_reason="")
    done = approve(
        request,
        world.technical,
        "technical",
        accepts_unknown_repeat_safety=True,
        acceptance_reason="the mail step is switched off for replays (flag REPLAY_NO_MAIL)",
    )
    assert done.status == ReplayRequest.Status.APPROVED
    technical = done.approvals.get(kind="technical")
    assert technical.accepts_unknown_repeat_safety and "REPLAY_NO_MAIL" in technical.acceptance_reason
    dispatch, created = replay_request_dispatch(request=done)
    assert created and dispatch.request_id == done.pk


def test_approving_an_expired_request_expires_it_and_voids_its_approvals(
    world: World, make_request: MakeRequest, approve: Approve
) -> None:
    request = make_request()
    approve(request, world.business, "business")
    with time_machine.travel(request.expires_at + timedelta(seconds=1)):
        with pytest.raises(InvalidTransition) as caught:
            approve(request, world.technical, "technical")
    assert "expired" in caught.value.detail
    request.refresh_from_db()
    assert request.status == ReplayRequest.Status.EXPIRED and request.closed_at is not None
    assert request.approvals.get().void_reason == "the request expired"
    assert not request.items.filter(is_open=True).exists()
    assert len(events(world, "replay_expired")) == 1


def test_a_request_one_second_before_expiry_is_still_approved(
    world: World, make_request: MakeRequest, approve: Approve
) -> None:
    request = make_request()
    approve(request, world.business, "business")
    with time_machine.travel(request.expires_at - timedelta(seconds=1)):
        assert approve(request, world.technical, "technical").status == ReplayRequest.Status.APPROVED


# --- dispatch ----------------------------------------------------------------------------------


def test_dispatch_happens_once_with_one_key_and_one_event(world: World, approved: ReplayRequest) -> None:
    first, created = replay_request_dispatch(request=approved)
    again, created_again = replay_request_dispatch(request=approved)
    assert created and not created_again
    assert first.pk == again.pk and first.idempotency_key == again.idempotency_key
    assert first.idempotency_key.startswith("rk_")
    assert first.channel == Dispatch.Channel.CLAIM and first.status == Dispatch.Status.PENDING
    approved.refresh_from_db()
    assert approved.status == ReplayRequest.Status.DISPATCHED and approved.dispatched_at is not None
    assert Dispatch.objects.count() == 1
    assert len(events(world, "replay_dispatched")) == 1


def test_only_a_person_who_may_manage_the_request_dispatches_it(world: World, approved: ReplayRequest) -> None:
    with pytest.raises(ReplayForbidden) as caught:
        replay_request_dispatch(request=approved, actor=world.auditor)
    assert "requester, support on this tenant or the job's technical owner" in caught.value.detail
    approved.refresh_from_db()
    assert approved.status == ReplayRequest.Status.APPROVED and approved.dispatched_at is None
    assert not Dispatch.objects.exists()
    assert events(world, "replay_dispatched") == []
    dispatch, created = replay_request_dispatch(request=approved, actor=world.technical)
    assert created and dispatch.dispatched_by == world.technical
    assert [e.actor_user for e in events(world, "replay_dispatched")] == [world.technical]


def test_dispatch_is_held_while_an_attempt_is_running_then_goes_once_it_finished(
    world: World, approved: ReplayRequest
) -> None:
    retry = AttemptFactory(run=world.run, execution_id="exp-a2", number=2, trigger="automatic_retry", status="running")
    for _ in range(3):
        with pytest.raises(ReplayRefused) as caught:
            replay_request_dispatch(request=approved)
        assert "attempt 2 (exp-a2" in caught.value.errors["no_active_attempt"][0]
    approved.refresh_from_db()
    assert approved.status == ReplayRequest.Status.APPROVED
    assert not Dispatch.objects.exists()
    # the hold is recorded once, not at every try
    assert len(events(world, "replay_dispatch_blocked")) == 1
    Attempt.objects.filter(pk=retry.pk).update(status="failed")
    dispatch, created = replay_request_dispatch(request=approved)
    assert created


def test_dispatch_is_held_while_the_job_is_paused(world: World, approved: ReplayRequest) -> None:
    job_pause(job=world.job, actor=world.technical, reason="provider incident")
    with pytest.raises(ReplayRefused) as caught:
        replay_request_dispatch(request=approved)
    assert set(caught.value.errors) == {"job_not_paused"}


def test_dispatch_is_held_while_the_runs_target_is_paused(world: World, approved: ReplayRequest) -> None:
    """Rule 3 for the tenant's part of the job: support paused the target after the approvals."""
    target_pause(target=world.target, actor=world.support, reason="tenant ledger freeze")
    with pytest.raises(ReplayRefused) as caught:
        replay_request_dispatch(request=approved)
    assert set(caught.value.errors) == {"target_not_paused"}
    assert "tenant ledger freeze" in caught.value.errors["target_not_paused"][0]
    assert not Dispatch.objects.exists()


def test_dispatch_rechecks_repeat_safety_that_became_unknown_after_approval(
    world: World, approved: ReplayRequest
) -> None:
    SideEffect.objects.create(job=world.job, description="new: sends a webhook to the ERP", repeat_safety="unknown")
    with pytest.raises(ReplayRefused) as caught:
        replay_request_dispatch(request=approved)
    assert "repeat_safety" in caught.value.errors


@pytest.mark.parametrize("status", ["pending", "rejected", "cancelled", "expired"])
def test_only_an_approved_request_is_dispatched(world: World, make_request: MakeRequest, status: str) -> None:
    request = make_request()
    ReplayRequest.objects.filter(pk=request.pk).update(
        status=status,
        closed_at=None if status == "pending" else timezone.now(),
        closed_by=world.support if status in ("rejected", "cancelled") else None,
        close_reason="x" if status in ("rejected", "cancelled") else "",
    )
    with pytest.raises(InvalidTransition):
        replay_request_dispatch(request=request)


def test_cancel_needs_a_person_who_may_manage_it_and_a_reason(world: World, make_request: MakeRequest) -> None:
    request = make_request()
    with pytest.raises(ReplayForbidden):
        replay_request_cancel(request=request, actor=world.auditor, reason="no")
    with pytest.raises(DomainError):
        replay_request_cancel(request=request, actor=world.support, reason=" ")
    cancelled = replay_request_cancel(request=request, actor=world.technical, reason="handled by a credit note")
    assert cancelled.status == ReplayRequest.Status.CANCELLED and cancelled.closed_by == world.technical
    # idempotent
    assert replay_request_cancel(request=request, actor=world.support, reason="again").status == "cancelled"


def test_recovery_decisions_are_recorded_on_the_run_timeline_without_a_dispatch(world: World) -> None:
    event = run_recovery_decision_record(
        run=world.run, actor=world.support, decision="wait_for_retry", reference="exp-a2 at 02:30"
    )
    assert event.kind == "recovery_decision" and "wait for the automatic retry (exp-a2 at 02:30)" in event.summary
    with pytest.raises(DomainError):
        run_recovery_decision_record(run=world.run, actor=world.support, decision="wait_for_retry")
    with pytest.raises(DomainError):
        run_recovery_decision_record(run=world.run, actor=world.support, decision="dependency_corrected")
    run_recovery_decision_record(
        run=world.run, actor=world.technical, decision="dependency_corrected", note="gateway certificate renewed"
    )
    with pytest.raises(ReplayForbidden):
        run_recovery_decision_record(run=world.run, actor=world.auditor, decision="dependency_corrected", note="x")
    assert not Dispatch.objects.exists()
    assert ReplayRequestItem.objects.count() == 0


def test_free_text_is_redacted_before_it_is_stored(world: World, make_request: MakeRequest, approve: Approve) -> None:
    request = make_request(reason="customer anna.berg@example.com is waiting")
    approved = approve(request, world.business, "business", comment="call me at bea@example.com")
    assert "anna.berg@example.com" not in request.reason and "‹redacted:" in request.reason
    assert "bea@example.com" not in approved.approvals.get().comment
    assert "anna.berg@example.com" not in events(world, "replay_requested")[0].summary


# --- rule 3: an unexplained duplicate trigger ----------------------------------------------------


def test_rule_3_an_unexplained_duplicate_trigger_holds_approval_until_a_person_explains_it(
    world: World, make_request: MakeRequest, approve: Approve
) -> None:
    duplicate = AttemptFactory(
        run=world.run, execution_id="exp-dup", number=2, status="succeeded", is_duplicate_trigger=True
    )
    request = make_request()  # shown at creation, not blocking: the explanation may still come
    [check] = [c for c in request.checks if c["code"] == "no_unexplained_duplicate_trigger"]
    assert not check["ok"] and "attempt 2 (exp-dup)" in check["detail"]
    with pytest.raises(ReplayRefused) as caught:
        approve(request, world.business, "business")
    message = caught.value.errors["no_unexplained_duplicate_trigger"][0]
    assert message.startswith("rule 3 (no unexplained duplicate trigger)") and "attempt 2 (exp-dup)" in message
    assert not request.approvals.exists()

    attempt_duplicate_trigger_explain(
        attempt=duplicate, actor=world.technical, reason="cron moved hosts twice", evidence_ref="CHG-77"
    )
    approve(request, world.business, "business")
    assert approve(request, world.technical, "technical").status == ReplayRequest.Status.APPROVED


def test_rule_3_an_approved_replay_is_not_dispatched_while_a_duplicate_trigger_is_unexplained(
    world: World, approved: ReplayRequest
) -> None:
    duplicate = AttemptFactory(
        run=world.run, execution_id="exp-dup", number=2, status="succeeded", is_duplicate_trigger=True
    )
    with pytest.raises(ReplayRefused) as caught:
        replay_request_dispatch(request=approved)
    assert set(caught.value.errors) == {"no_unexplained_duplicate_trigger"}
    assert not Dispatch.objects.exists()
    attempt_duplicate_trigger_explain(
        attempt=duplicate, actor=world.support, reason="second scheduler, now stopped", evidence_ref="INC-12"
    )
    _, created = replay_request_dispatch(request=approved)
    assert created

"""Handover services: the transition matrix, closing conditions refusing then allowing, reopen, history."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from handover.core.errors import Conflict, DomainError, Forbidden, InvalidTransition
from handover.handovers.check_follow_ups import next_run_check_notify_failed
from handover.handovers.checks import handover_reopen_for_failed_check, handover_sweep_verifying
from handover.handovers.closing import handover_closing_conditions
from handover.handovers.models import Handover, HandoverRevision, HandoverRun
from handover.handovers.selectors import handover_revision_list
from handover.handovers.services import (
    handover_close,
    handover_create,
    handover_hand_over,
    handover_reopen,
    handover_start_recovery,
    handover_transition,
    handover_update,
    handover_verify,
    residual_exception_create,
    residual_exception_update,
)
from runs.checks.decisions import next_run_check_waive
from runs.checks.models import NextRunCheck
from runs.timeline.models import TimelineEvent
from tests.factories import RunFactory
from tests.handover.helpers import LedgerLoader, World, force_status, settle_check

pytestmark = pytest.mark.django_db

STATUSES = ["draft", "handed_over", "recovering", "verifying", "resolved", "closed"]
ACTIONS = ["hand_over", "start_recovery", "verify", "resolve", "close", "reopen"]
TARGET = {
    "hand_over": "handed_over",
    "start_recovery": "recovering",
    "verify": "verifying",
    "resolve": "resolved",
    "close": "closed",
    "reopen": "recovering",
}
ALLOWED = {
    ("draft", "hand_over"),
    ("handed_over", "start_recovery"),
    ("recovering", "verify"),
    ("verifying", "resolve"),
    ("verifying", "close"),
    ("resolved", "close"),
    ("verifying", "reopen"),
    ("resolved", "reopen"),
    ("closed", "reopen"),
}


@pytest.mark.parametrize("source", STATUSES)
@pytest.mark.parametrize("action", ACTIONS)
def test_transition_matrix(world: World, draft: Handover, source: str, action: str) -> None:
    handover = force_status(draft, source, world.support)
    events_before = TimelineEvent.objects.filter(run=world.run).count()

    if (source, action) in ALLOWED:
        moved, changed = handover_transition(handover=handover, action=action, actor=world.support, reason="matrix")
        assert changed and moved.status == TARGET[action]
        event = TimelineEvent.objects.filter(run=world.run).latest("id")
        assert event.actor_user == world.support
        assert event.data["from"] == source and event.data["to"] == TARGET[action]
        assert TimelineEvent.objects.filter(run=world.run).count() == events_before + 1
        link = HandoverRun.objects.get(handover=handover)
        assert link.is_open is (TARGET[action] != "closed")
        if action == "close":
            assert moved.closed_at and moved.closed_by == world.support
        if action == "reopen":
            assert moved.reopen_count == 1 and moved.closed_at is None and moved.resolved_at is None
    elif source == TARGET[action]:
        same, changed = handover_transition(handover=handover, action=action, actor=world.support, reason="x")
        assert same.status == source and not changed
        assert TimelineEvent.objects.filter(run=world.run).count() == events_before  # idempotent
    else:
        with pytest.raises(InvalidTransition):
            handover_transition(handover=handover, action=action, actor=world.support, reason="matrix")
        assert Handover.objects.get(pk=handover.pk).status == source
        assert TimelineEvent.objects.filter(run=world.run).count() == events_before


def test_create_links_the_latest_execution_and_writes_the_timeline(world: World, draft: Handover) -> None:
    link = HandoverRun.objects.get(handover=draft)
    assert link.run == world.run and link.attempt == world.retry and link.is_open
    assert draft.status == "draft" and draft.created_by == world.support and draft.job == world.job
    event = TimelineEvent.objects.get(run=world.run, kind="handover_created")
    assert event.actor_user == world.support and event.data["handover"] == str(draft.public_id)


def test_at_most_one_open_handover_per_run(world: World, draft: Handover) -> None:
    with pytest.raises(Conflict, match="already has an open handover"):
        handover_create(actor=world.support, runs=[world.run])
    # the database holds the rule too (a partial unique constraint on the open flag)
    second = Handover.objects.create(
        job=world.job, title="x", created_by=world.support, status_changed_at=timezone.now()
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        HandoverRun.objects.create(handover=second, run=world.run, is_open=True, created_at=timezone.now())


def test_a_closed_handover_frees_the_run_for_a_new_one(world: World, draft: Handover) -> None:
    force_status(draft, "closed", world.support)

    again = handover_create(actor=world.support, runs=[world.run])

    assert again.pk != draft.pk and HandoverRun.objects.filter(run=world.run, is_open=True).get().handover == again


def test_hand_over_needs_an_escalation_owner(world: World, draft: Handover) -> None:
    with pytest.raises(InvalidTransition) as refused:
        handover_hand_over(handover=draft, actor=world.support)
    assert "escalation_owner" in refused.value.errors

    handover_update(handover=draft, actor=world.support, fields={"escalation_owner": world.owner})
    moved = handover_hand_over(handover=draft, actor=world.support)

    assert moved.status == "handed_over" and moved.handed_over_by == world.support and moved.handed_over_at


def _verifying(world: World, draft: Handover) -> Handover:
    handover_update(handover=draft, actor=world.support, fields={"escalation_owner": world.owner})
    handover_hand_over(handover=draft, actor=world.support)
    handover_start_recovery(handover=draft, actor=world.support)
    return handover_verify(handover=draft, actor=world.support)


def test_verify_schedules_the_next_run_check_of_each_run(world: World, draft: Handover) -> None:
    handover = _verifying(world, draft)

    assert handover.status == "verifying" and handover.verifying_at
    link = HandoverRun.objects.select_related("next_run_check").get(handover=handover)
    check = link.next_run_check
    assert check is not None and check.status == "scheduled" and check.target == world.target
    assert check.recovered_run == world.run
    assert check.requested_by_kind == "handover" and check.requested_by_ref == str(handover.public_id)
    assert check.expected_at > timezone.now()
    assert TimelineEvent.objects.filter(run=world.run, kind="next_run_check_scheduled").count() == 1


def test_verify_refuses_a_run_without_a_job_target(world: World) -> None:
    orphan = RunFactory(job=world.job, tenant=world.tenant, status="failed", target=None)
    handover = handover_create(actor=world.support, runs=[orphan])
    force_status(handover, "recovering", world.support)

    with pytest.raises(InvalidTransition, match="No job target expects a next run"):
        handover_verify(handover=handover, actor=world.support)

    assert Handover.objects.get(pk=handover.pk).status == "recovering"  # nothing half-done
    assert not NextRunCheck.objects.exists()


def _missing(handover: Handover) -> dict[str, list[str]]:
    return {c.key: c.missing for c in handover_closing_conditions(handover=handover)}


def test_each_closing_condition_refuses_then_allows_the_close(
    world: World, draft: Handover, load_ledger: LedgerLoader
) -> None:
    handover = _verifying(world, draft)

    # everything is missing: no ledger, the check has not passed yet
    with pytest.raises(InvalidTransition) as refused:
        handover_close(handover=handover, actor=world.support)
    missing = refused.value.errors["closing_conditions"]
    assert any(line.startswith("No work ledger") for line in missing)
    assert any("has not passed yet" in line for line in missing)

    # 1. the ledger shows unresolved items: listed by id
    load_ledger(world.run, completed=["INV-1001", "INV-1002"], absent=["INV-1003"], uncertain=["INV-1004"])
    assert _missing(handover)["reconciled"] == [
        "2 item(s) unverified, absent or uncertain (INV-1003, INV-1004): settle them, or record them as a "
        "residual exception with an owner."
    ]
    # ... covered by a residual exception, but one without an owner: condition 4 now refuses
    exception = residual_exception_create(
        handover=handover,
        actor=world.support,
        description="INV-1003/1004: the gateway cannot say; Finance re-issues by hand",
        record_ids=["INV-1003", "INV-1004"],
    )
    assert _missing(handover)["reconciled"] == []
    assert _missing(handover)["exceptions_owned"] == [
        "Residual exception “INV-1003/1004: the gateway cannot say; Finance re-issues by hand” has no named owner.",
        "Residual exception “INV-1003/1004: the gateway cannot say; Finance re-issues by hand” has no due date.",
    ]
    residual_exception_update(
        exception=exception, actor=world.support, owner=world.owner, due_date=timezone.now().date()
    )
    assert _missing(handover)["exceptions_owned"] == []

    # 2. a possible duplicate is unexplained until an exception explains it
    load_ledger(world.run, duplicates=["INV-1002"])
    assert "1 possible duplicate(s) unexplained" in _missing(handover)["duplicates_explained"][0]
    residual_exception_create(
        handover=handover,
        actor=world.support,
        description="INV-1002 twice: the gateway de-duplicates by invoice number",
        record_ids=["INV-1002"],
        owner=world.owner,
        due_date=timezone.now().date(),
    )
    assert _missing(handover)["duplicates_explained"] == []

    # 3. the next-run check: still scheduled → refused; waived with checkpoint and owner → allowed
    with pytest.raises(InvalidTransition) as refused:
        handover_close(handover=handover, actor=world.support)
    assert refused.value.errors["closing_conditions"] == [
        line for line in refused.value.errors["closing_conditions"] if "next-run check" in line
    ]
    check = HandoverRun.objects.get(handover=handover).next_run_check
    next_run_check_waive(
        check=check,
        actor=world.support,
        owner=world.owner,
        checkpoint=timezone.now().date() + timedelta(days=7),
        reason="next run is after the holiday freeze",
    )

    closed = handover_close(handover=handover, actor=world.support)

    assert closed.status == "closed" and closed.closed_by == world.support and closed.closed_at
    assert not HandoverRun.objects.get(handover=handover).is_open
    event = TimelineEvent.objects.filter(run=world.run, kind="handover_closed").get()
    assert event.actor_user == world.support and event.data["from"] == "verifying"


def test_a_passed_check_resolves_the_handover_through_the_sweep(
    world: World, draft: Handover, load_ledger: LedgerLoader
) -> None:
    handover = _verifying(world, draft)
    load_ledger(world.run, completed=["INV-1"])
    check = HandoverRun.objects.get(handover=handover).next_run_check
    settle_check(check, "passed", evidence_attempt=world.retry)

    result = handover_sweep_verifying()

    assert result.resolved == 1
    resolved = Handover.objects.get(pk=handover.pk)
    assert resolved.status == "resolved" and resolved.resolved_at
    event = TimelineEvent.objects.filter(run=world.run, kind="handover_resolved").get()
    assert event.actor_kind == "system"
    assert handover_sweep_verifying().resolved == 0  # a second tick changes nothing
    assert handover_close(handover=resolved, actor=world.support).status == "closed"


def test_a_failed_check_reopens_the_handover(world: World, draft: Handover) -> None:
    handover = _verifying(world, draft)
    check = HandoverRun.objects.get(handover=handover).next_run_check
    check = settle_check(check, "failed", result_summary="no run was reported by the deadline")

    # the check's follow-up (swept from the outbox) reopens the handover
    assert next_run_check_notify_failed(check_ids=[check.pk]) == 1

    handover = Handover.objects.get(pk=handover.pk)
    assert handover.status == "recovering" and handover.reopen_count == 1 and handover.reopened_by is None
    assert "no run was reported by the deadline" in handover.reopen_reason
    event = TimelineEvent.objects.filter(run=world.run, kind="handover_reopened").get()
    assert event.actor_kind == "system"
    assert handover_reopen_for_failed_check(check=check) == []  # idempotent: the task may run twice
    # moving to verifying again schedules a new check (the next fire time after now)
    again = handover_verify(handover=handover, actor=world.support)
    assert again.status == "verifying"


def test_reopen_a_closed_handover(world: World, draft: Handover) -> None:
    handover = force_status(draft, "closed", world.support)

    with pytest.raises(DomainError, match="Say why"):
        handover_reopen(handover=handover, actor=world.support, reason="  ")
    with pytest.raises(DomainError, match="Say why"):  # the rule holds on the generic path too
        handover_transition(handover=handover, action="reopen", actor=world.support, reason=" \n")
    assert Handover.objects.get(pk=handover.pk).status == "closed"
    assert not TimelineEvent.objects.filter(kind="handover_reopened").exists()
    reopened = handover_reopen(handover=handover, actor=world.support, reason="INV-1004 turned up twice after all")

    assert reopened.status == "recovering" and reopened.closed_at is None and reopened.closed_by is None
    assert reopened.reopened_by == world.support and reopened.reopen_reason == "INV-1004 turned up twice after all"
    assert HandoverRun.objects.get(handover=handover).is_open
    assert handover_reopen(handover=reopened, actor=world.support, reason="again").status == "recovering"
    assert Handover.objects.get(pk=handover.pk).reopen_count == 1


def test_reopen_is_refused_while_another_handover_is_open_for_the_run(world: World, draft: Handover) -> None:
    force_status(draft, "closed", world.support)
    handover_create(actor=world.support, runs=[world.run])

    with pytest.raises(Conflict):
        handover_reopen(handover=draft, actor=world.support, reason="wrong one")
    assert Handover.objects.get(pk=draft.pk).status == "closed"


def test_every_edit_keeps_the_previous_text_retrievable(world: World, draft: Handover) -> None:
    generated = draft.business_impact
    handover_update(handover=draft, actor=world.support, sections={"business_impact": "Acme cannot invoice."})
    handover_update(handover=draft, actor=world.owner, sections={"business_impact": "Acme cannot invoice 2 customers."})
    handover_update(handover=draft, actor=world.owner, sections={"business_impact": "Acme cannot invoice 2 customers."})

    texts = [(r.text, r.created_by) for r in handover_revision_list(handover=draft, section="business_impact")]

    assert generated == ""  # not generated: a person writes the impact
    assert texts == [("Acme cannot invoice.", world.support), ("Acme cannot invoice 2 customers.", world.owner)]
    assert Handover.objects.get(pk=draft.pk).business_impact == "Acme cannot invoice 2 customers."
    assert TimelineEvent.objects.filter(run=world.run, kind="handover_edited").count() == 2  # no-op edit: no event
    generated_first = HandoverRevision.objects.filter(handover=draft, section="next_action").order_by("id")
    assert generated_first.count() == 1 and generated_first[0].is_generated


def test_field_edits_record_old_and_new_values(world: World, draft: Handover) -> None:
    handover_update(
        handover=draft,
        actor=world.support,
        fields={"escalation_owner": world.owner, "defect_ref": "https://tickets.example/PRB-1"},
    )

    event = TimelineEvent.objects.filter(run=world.run, kind="handover_edited").get()
    assert event.data["fields"] == {
        "escalation_owner": {"from": None, "to": "olga-owner"},
        "defect_ref": {"from": "", "to": "https://tickets.example/PRB-1"},
    }
    assert "escalation owner: — → olga-owner" in event.summary


def test_a_closed_handover_is_not_edited(world: World, draft: Handover) -> None:
    force_status(draft, "closed", world.support)

    with pytest.raises(InvalidTransition, match="reopen it"):
        handover_update(handover=draft, actor=world.support, sections={"deadlines": "Friday"})
    with pytest.raises(InvalidTransition):
        residual_exception_create(handover=draft, actor=world.support, description="late")


def test_residual_exception_refuses_unknown_record_ids_and_owners_without_a_role(
    world: World, draft: Handover, load_ledger: LedgerLoader
) -> None:
    load_ledger(world.run, absent=["INV-1"])

    with pytest.raises(DomainError, match="INV-404"):
        residual_exception_create(handover=draft, actor=world.support, description="x", record_ids=["INV-1", "INV-404"])
    with pytest.raises(DomainError, match="may not see every run"):
        residual_exception_create(handover=draft, actor=world.support, description="x", owner=world.stranger)
    exception = residual_exception_create(
        handover=draft, actor=world.support, description="x", record_ids=["INV-1"], owner=world.auditor
    )
    assert [i.record_id for i in exception.work_items.all()] == ["INV-1"]
    assert TimelineEvent.objects.filter(run=world.run, kind="residual_exception_added").count() == 1


def test_the_writing_services_refuse_a_reader_and_write_nothing(world: World, draft: Handover) -> None:
    """Issue #15: the services refuse (pages and the API only relay it): an auditor of the tenant reads
    the handover but may not draft, edit, move or reopen it, nor add a residual exception."""
    events = TimelineEvent.objects.count()
    before = Handover.objects.values().get(pk=draft.pk)
    handovers = Handover.objects.count()
    for actor in (world.auditor, world.stranger):
        with pytest.raises(Forbidden):
            handover_create(actor=actor, runs=[world.run])
        with pytest.raises(Forbidden):
            handover_update(handover=draft, actor=actor, sections={"summary": "not mine to write"})
        with pytest.raises(Forbidden):
            handover_hand_over(handover=draft, actor=actor)
        with pytest.raises(Forbidden):
            handover_close(handover=draft, actor=actor)
        with pytest.raises(Forbidden):
            handover_reopen(handover=draft, actor=actor, reason="not mine")
    assert TimelineEvent.objects.count() == events and Handover.objects.count() == handovers
    assert Handover.objects.values().get(pk=draft.pk) == before
    assert not draft.residual_exceptions.exists()

"""Pre-fill rules: facts under "definitely", unknowns under "may have", the next action from repeat safety
and run state, and the "generated" mark until a person confirms."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from handover.handovers.evidence import handover_evidence
from handover.handovers.models import Handover, HandoverRevision
from handover.handovers.prefill import GENERATED_SECTIONS, handover_prefill
from handover.handovers.services import handover_create, handover_refresh_generated, handover_update
from runs.catalog.models import Job, SideEffect
from runs.catalog.pause import job_pause
from runs.timeline.models import TimelineEvent
from runs.timeline.services import timeline_event_record
from tests.factories import AttemptFactory, JobTargetFactory, RunFactory, TenantFactory
from tests.handover.helpers import LedgerLoader, World

pytestmark = pytest.mark.django_db


def _prefill(world: World) -> dict[str, str]:
    job, runs = handover_evidence(runs=[world.run])
    return handover_prefill(job=job, runs=runs)


def test_definitely_lists_attempts_events_and_confirmed_ledger_facts(world: World, load_ledger: LedgerLoader) -> None:
    load_ledger(world.run, completed=["INV-1001", "INV-1002"], absent=["INV-1003"])
    timeline_event_record(job=world.job, run=world.run, kind="retries_exhausted", summary="Retries exhausted (3 of 3)")

    text = _prefill(world)["definitely_happened"]

    assert "Attempt 1 (scheduled, execution exp-a1) started 2026-11-28 01:03:11Z and failed at" in text
    assert "Timeout waiting for acknowledgement from ledger gateway" in text
    assert "Attempt 2 (automatic retry, execution exp-a2)" in text and "Ledger gateway returned 503" in text
    assert "Retries exhausted (3 of 3)" in text
    assert "Confirmed in the destination: 2 of 3 eligible records (INV-1001, INV-1002)." in text
    assert "Confirmed absent from the destination: 1 (INV-1003)." in text


def test_may_have_lists_uncertain_unverified_and_duplicates_with_ids(world: World, load_ledger: LedgerLoader) -> None:
    load_ledger(
        world.run,
        completed=["INV-1"],
        uncertain=["INV-3", "INV-4"],
        unverified=["INV-5"],
        duplicates=["INV-2"],
    )

    text = _prefill(world)["may_have_happened"]

    assert "may have reached the destination (a timeout is not a 'no'): 2 (INV-3, INV-4)." in text
    assert "Not verified yet: 1 (INV-5)." in text
    assert "Possible duplicates in the destination: 1 (INV-2)." in text
    assert "INV-3" not in _prefill(world)["definitely_happened"]


def test_without_a_ledger_the_runner_report_is_a_claim_not_evidence(world: World) -> None:
    world.first.runner_reports.create(
        attempted_ids=["A", "B", "C", "D"], completed_ids=["A", "B"], reported_at=timezone.now()
    )

    text = _prefill(world)["may_have_happened"]

    assert "No work ledger loaded: which records reached the destination is not known." in text
    assert "The job runner reported 4 attempted, 2 claimed completed, 0 failed — a report, not evidence" in text


def test_many_ids_are_cut_to_a_sample_with_a_count(world: World, load_ledger: LedgerLoader) -> None:
    load_ledger(world.run, uncertain=[f"INV-{n:03}" for n in range(25)])

    text = _prefill(world)["may_have_happened"]

    assert "INV-009 and 15 more)" in text and "INV-010" not in text


NEXT_ACTION_CASES = [
    # (repeat safety, ledger, attempt queued?, expected start of the proposal)
    ("not_idempotent", None, True, "Wait: an automatic retry is on its way (attempt 3 is queued)"),
    ("unknown", {"absent": ["X"]}, False, "Escalate to the technical owner; do not rerun."),
    ("not_idempotent", {"completed": ["A"], "duplicates": ["B"]}, False, "Explain the 1 possible duplicate(s) first"),
    ("not_idempotent", {"uncertain": ["X"], "absent": ["Y"]}, False, "Verify first: 1 record(s) are uncertain"),
    ("not_idempotent", None, False, "Reconcile first: load the eligible population and the destination export"),
    ("not_idempotent", {"absent": ["X", "Y"]}, False, "Request a replay of the 2 absent record(s) only"),
    ("idempotent_with_key", {"absent": ["X"]}, False, "Request a replay of the 1 absent record(s); the side effects"),
    ("idempotent", {"completed": ["A"]}, False, "Nothing to replay: every eligible record is confirmed"),
]


@pytest.mark.parametrize(("safety", "ledger", "queued", "expected"), NEXT_ACTION_CASES)
def test_next_action_follows_repeat_safety_and_run_state(
    world: World,
    load_ledger: LedgerLoader,
    safety: str,
    ledger: dict[str, list[str]] | None,
    queued: bool,
    expected: str,
) -> None:
    SideEffect.objects.filter(job=world.job).update(repeat_safety=safety)
    if ledger:
        load_ledger(world.run, **ledger)
    if queued:
        AttemptFactory(run=world.run, number=3, status="queued", trigger="automatic_retry")

    text = _prefill(world)["next_action"]

    assert text.startswith(expected), text
    if safety == "not_idempotent" and ledger == {"absent": ["X", "Y"]}:
        assert "Never rerun the whole batch: the job is not idempotent." in text


def test_a_job_without_side_effects_has_unknown_repeat_safety(world: World) -> None:
    SideEffect.objects.filter(job=world.job).delete()

    texts = _prefill(world)

    assert texts["next_action"].startswith("Escalate to the technical owner; do not rerun.")
    assert "no side effect is recorded" in texts["next_action"]
    assert "Side effects: none recorded" in texts["expected_output"]


def test_a_paused_job_is_said_first(world: World) -> None:
    job_pause(job=world.job, actor=world.owner, reason="ledger gateway maintenance")
    world.run.job = Job.objects.get(pk=world.job.pk)

    texts = _prefill(world)

    assert texts["next_action"].splitlines()[0].startswith("The job is paused (ledger gateway maintenance)")
    assert "The job is paused since" in texts["definitely_happened"]


def test_recent_changes_names_a_configuration_change_between_attempts(world: World) -> None:
    text = _prefill(world)["recent_changes"]

    assert (
        "Configuration changed between attempts: export-cfg@40 → export-cfg@41 (attempt 2 ran export-cfg@41)." in text
    )
    assert "check the deploy log for the hours before 2026-11-28 01:03:11Z" in text


def test_several_runs_get_one_block_each(world: World, load_ledger: LedgerLoader) -> None:
    other = RunFactory(
        job=world.job,
        tenant=world.other_tenant,
        target=JobTargetFactory(job=world.job, tenant=world.other_tenant),
        window_start=world.run.window_start,
        window_end=world.run.window_end,
        status="failed",
    )
    load_ledger(world.run, absent=["INV-1"])
    load_ledger(other, absent=["INV-9"])

    handover = handover_create(actor=world.owner, runs=[world.run, other])

    assert handover.title == "nightly-invoice-export · acme-foods, borealis-retail · prod · window 2026-11-27"
    assert "acme-foods / prod:\n" in handover.definitely_happened
    assert "borealis-retail / prod:\n" in handover.definitely_happened
    assert "(acme-foods / prod, borealis-retail / prod)" in handover.next_action
    assert "Acme Foods (acme-foods) in prod; Borealis Retail (borealis-retail) in prod." in handover.affected


def test_generated_text_is_marked_until_a_person_confirms_or_edits_it(world: World, draft: Handover) -> None:
    assert sorted(draft.generated_sections) == sorted(GENERATED_SECTIONS)
    first = HandoverRevision.objects.filter(handover=draft)
    assert first.count() == len(GENERATED_SECTIONS) and all(r.is_generated and r.created_by is None for r in first)

    edited = handover_update(
        handover=draft,
        actor=world.support,
        sections={"next_action": "Escalate to Olga; nothing is rerun tonight."},
        confirm=["definitely_happened"],
    )

    assert "next_action" not in edited.generated_sections
    assert "definitely_happened" not in edited.generated_sections
    assert "may_have_happened" in edited.generated_sections
    event = TimelineEvent.objects.filter(run=world.run, kind="handover_edited").get()
    assert event.actor_user == world.support
    assert event.data["sections"] == ["next_action"] and event.data["confirmed"] == ["definitely_happened"]


def test_refresh_regenerates_only_what_is_still_generated(
    world: World, draft: Handover, load_ledger: LedgerLoader
) -> None:
    handover_update(handover=draft, actor=world.support, sections={"next_action": "Mine, not the machine's."})
    load_ledger(world.run, completed=["INV-1"], uncertain=["INV-2"])

    refreshed = handover_refresh_generated(handover=draft, actor=world.support)

    assert refreshed.next_action == "Mine, not the machine's."
    assert "Uncertain — may have reached the destination" in refreshed.may_have_happened
    assert HandoverRevision.objects.filter(handover=draft, section="may_have_happened").count() == 2
    assert TimelineEvent.objects.filter(run=world.run, kind="handover_regenerated").count() == 1
    # nothing new: a second refresh writes nothing
    handover_refresh_generated(handover=draft, actor=world.support)
    assert TimelineEvent.objects.filter(run=world.run, kind="handover_regenerated").count() == 1


def test_pre_filled_text_is_redacted(world: World) -> None:
    world.first.error_summary = "mail to alice@example.com failed, card 4111 1111 1111 1111"
    world.first.save()

    handover = handover_create(actor=world.support, runs=[world.run])

    assert "alice@example.com" not in handover.definitely_happened
    assert "4111 1111 1111 1111" not in handover.definitely_happened
    assert "‹redacted:" in handover.definitely_happened


def test_a_run_of_another_tenant_in_its_own_job_is_not_mixed_in(world: World) -> None:
    other = RunFactory(tenant=TenantFactory(), status="failed")

    with pytest.raises(Exception, match="runs of one job"):
        handover_create(actor=world.support, runs=[world.run, other])


def test_evidence_is_loaded_in_a_fixed_number_of_queries(
    world: World, load_ledger: LedgerLoader, django_assert_max_num_queries: Any
) -> None:
    load_ledger(world.run, completed=[f"C-{n}" for n in range(30)], uncertain=["U-1", "U-2"], duplicates=["D-1"])
    for number in range(3, 8):
        attempt = AttemptFactory(run=world.run, number=number, status="failed")
        attempt.runner_reports.create(attempted_ids=["C-1"], reported_at=timezone.now())

    # runs (job, tenant, target, confirmer joined), attempts, runner reports, notable events,
    # ledger samples, duplicate samples, side effects
    with django_assert_max_num_queries(7):
        job, runs = handover_evidence(runs=[world.run])
        handover_prefill(job=job, runs=runs)
    assert runs[0].samples["completed"] == sorted(f"C-{n}" for n in range(30))[:10]

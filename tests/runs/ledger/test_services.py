"""The work ledger's services: every outcome path, reconciliation edge cases, verification, changes,
totals, failure-class suggestions, permissions and the atomicity of a failed load."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import override_settings

from handover.core.errors import DomainError, InvalidTransition, NotFound
from runs.attempts.models import Attempt, Run
from runs.ledger.common import LedgerPermissionDenied
from runs.ledger.confirmations import work_item_load_confirm
from runs.ledger.failure_class import failure_class_for, run_failure_class_confirm, run_failure_class_suggest
from runs.ledger.files import LedgerInputError
from runs.ledger.items import work_item_change, work_item_verify
from runs.ledger.loads import work_item_load_retry
from runs.ledger.models import WorkItem, WorkItemChange, WorkItemLoad
from runs.ledger.selectors import LOAD_PROGRESS_KEY
from runs.ledger.totals import RunTotals, run_totals_refresh
from runs.timeline.models import TimelineEvent
from tests.concurrency import run_concurrently
from tests.runs.ledger_support import POPULATION, LedgerWorld, csv, ledger_world, load, outcomes

pytestmark = pytest.mark.django_db
__all__ = ["ledger_world"]  # the fixture, used by name


def item(world: LedgerWorld, record_id: str) -> WorkItem:
    return WorkItem.objects.get(run=world.run, record_id=record_id)


def events(world: LedgerWorld, kind: str) -> list[TimelineEvent]:
    return list(TimelineEvent.objects.filter(run=world.run, kind=kind).order_by("id"))


# --- every outcome path -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("population", "runner", "destination", "complete", "timed_out", "expected"),
    [
        # eligible, nothing else known
        ("A", None, None, False, False, ("unverified", "", False)),
        # not eligible by rule
        ("A,credit note", None, None, False, False, ("skipped", "", False)),
        # the runner reported a failure: the destination refused it
        ("A", "A,failed", None, False, False, ("rejected", "runner_report", False)),
        # the runner claims it done, the destination cannot confirm it
        ("A", "A,completed", None, False, False, ("uncertain", "runner_report", False)),
        ("A", "A,completed", "B,r", False, False, ("uncertain", "runner_report", False)),
        # ... but a destination export declared complete says it is not there
        ("A", "A,completed", "B,r", True, False, ("absent", "destination_query", False)),
        ("A", None, "B,r", True, False, ("absent", "destination_query", False)),
        # attempted, and the attempt timed out after sending
        ("A", "A,attempted", None, False, True, ("uncertain", "runner_report", False)),
        ("A", "A,attempted", None, False, False, ("unverified", "", False)),
        # confirmed in the destination, whatever the runner said
        ("A", None, "A,r", False, False, ("completed", "destination_query", False)),
        ("A", "A,failed", "A,r", True, False, ("completed", "destination_query", False)),
        # in the destination twice: a possible duplicate
        ("A", None, "A,r\nA,r2", False, False, ("completed", "destination_query", True)),
        # skipped by rule, yet in the destination: a possible duplicate
        ("A,credit note", None, "A,r", False, False, ("skipped", "", True)),
    ],
)
def test_outcome_of_an_item(
    ledger_world: LedgerWorld,
    population: str,
    runner: str | None,
    destination: str | None,
    complete: bool,
    timed_out: bool,
    expected: tuple[str, str, bool],
) -> None:
    if timed_out:
        Attempt.objects.filter(pk=ledger_world.attempt.pk).update(status=Attempt.Status.TIMED_OUT)
    files = {"population": csv("record_id,skip_reason", population)}
    if runner:
        files["runner_report"] = csv("record_id,status", runner)
    if destination:
        files["destination"] = csv("record_id,reference", destination)

    load(ledger_world, complete=complete, **files)

    a = item(ledger_world, "A")
    assert (a.outcome, a.evidence_kind, a.is_possible_duplicate) == expected
    if a.evidence_kind:
        assert (a.evidence_by, a.evidence_at is not None) == (ledger_world.support, True)


@pytest.mark.parametrize("together", [True, False], ids=["one upload", "one upload per file"])
def test_files_loaded_together_or_one_by_one_reconcile_alike(ledger_world: LedgerWorld, together: bool) -> None:
    files = {
        "population": csv("record_id,skip_reason", "A1,", "A2,", "A3,", "A4,", "A5,rule"),
        "runner_report": csv("record_id,status", "A1,completed", "A2,completed", "A3,failed", "A4,attempted"),
        "destination": csv("record_id,reference", "A1,g1", "A1,g1b", "X9,gx"),
    }
    if together:
        load(ledger_world, complete=True, **files)
    else:
        for kind, content in files.items():
            load(ledger_world, complete=kind == "destination", **{kind: content})

    assert outcomes(ledger_world.run) == {
        "A1": "completed",
        "A2": "absent",
        "A3": "rejected",
        "A4": "absent",
        "A5": "skipped",
        "X9": "completed",
    }
    x9 = item(ledger_world, "X9")
    assert (x9.is_in_population, x9.is_possible_duplicate, x9.evidence_summary) == (
        False,
        True,
        "in the destination but not in the eligible population",
    )
    assert item(ledger_world, "A1").evidence_summary == "in the destination export 2 times"
    run = Run.objects.get(pk=ledger_world.run.pk)
    assert (
        run.eligible_count,
        run.attempted_count,
        run.completed_count,
        run.skipped_count,
        run.rejected_count,
        run.unresolved_count,
        run.absent_count,
        run.possible_duplicate_count,
    ) == (4, 4, 1, 1, 1, 2, 2, 2)
    assert run.ledger_updated_at is not None


# --- reconciliation edge cases -------------------------------------------------------------------------


def test_a_second_destination_export_adds_to_the_first_and_deletes_nothing(ledger_world: LedgerWorld) -> None:
    load(ledger_world, population=POPULATION, runner_report=csv("record_id,status", "A1,completed", "A2,completed"))
    (first,) = load(ledger_world, destination=csv("record_id,reference", "A1,g1", "A2,g2", "X9,gx"))
    assert outcomes(ledger_world.run)["A2"] == "completed"

    (second,) = load(ledger_world, destination=csv("record_id,reference", "A3,g3"))

    assert (first.number, second.number, second.status) == (1, 2, "committed")
    found = outcomes(ledger_world.run)
    assert (found["A1"], found["A2"], found["A3"], found["X9"]) == ("completed",) * 4  # the union of the exports
    assert item(ledger_world, "X9").is_possible_duplicate
    assert item(ledger_world, "A3").destination_load_id == second.pk
    assert item(ledger_world, "A1").destination_load_id == first.pk
    assert second.counts["no_longer_present"] == 0


def test_a_complete_export_lacking_completed_records_waits_for_a_person(ledger_world: LedgerWorld) -> None:
    load(ledger_world, population=POPULATION, runner_report=csv("record_id,status", "A1,completed", "A2,completed"))
    load(ledger_world, destination=csv("record_id,reference", "A1,g1", "A2,g2", "X9,gx"))
    before = list(WorkItem.objects.filter(run=ledger_world.run).order_by("record_id").values())
    version = Run.objects.get(pk=ledger_world.run.pk).ledger_version

    (second,) = load(ledger_world, complete=True, destination=csv("record_id,reference", "A1,g1"))

    assert second.status == "awaiting_confirmation"
    assert list(WorkItem.objects.filter(run=ledger_world.run).order_by("record_id").values()) == before
    assert second.preview_version == version
    assert second.preview["total"] == 2  # A2 completed → absent, X9's flag cleared
    assert second.preview["counts"] == {"completed → absent": 1, "possible duplicate cleared": 1}
    assert [i["record_id"] for i in second.preview["items"]] == ["A2", "X9"]


def test_a_later_attempted_never_downgrades_claimed_done(ledger_world: LedgerWorld) -> None:
    load(ledger_world, population=POPULATION, runner_report=csv("record_id,status", "A1,completed", "A2,failed"))
    (report,) = load(
        ledger_world, runner_report=csv("record_id,status", "A1,attempted", "A2,completed", "A3,attempted")
    )
    # rejected → uncertain weakens the ledger: it waits for a person
    assert report.status == "awaiting_confirmation"
    assert item(ledger_world, "A2").outcome == "rejected"
    work_item_load_confirm(
        actor=ledger_world.support, load=report, reason="retried by the runner", ledger_version=report.preview_version
    )

    a1, a2, a3 = (item(ledger_world, r) for r in ("A1", "A2", "A3"))
    assert (a1.runner_status, a1.outcome) == ("completed", "uncertain")
    assert (a2.runner_status, a2.outcome) == ("completed", "uncertain")  # a retry's word wins
    assert (a3.runner_status, a3.is_attempted, a3.outcome) == ("attempted", True, "unverified")
    change = WorkItemChange.objects.get(work_item=a2)
    assert (change.kind, change.from_outcome, change.to_outcome, change.note, change.changed_by) == (
        "weaken",
        "rejected",
        "uncertain",
        "retried by the runner",
        ledger_world.support,
    )


def test_runner_ids_outside_the_population_are_counted_not_added(ledger_world: LedgerWorld) -> None:
    load(ledger_world, population=POPULATION)

    (report,) = load(ledger_world, runner_report=csv("record_id,status", "A1,completed", "Z1,completed"))

    assert report.counts["not_in_population"] == 1
    assert not WorkItem.objects.filter(record_id="Z1").exists()
    assert "1 not in the population" in events(ledger_world, "work_items_loaded")[-1].summary


def test_loading_the_same_files_again_changes_nothing(ledger_world: LedgerWorld) -> None:
    files = {
        "population": POPULATION,
        "runner_report": csv("record_id,status", "A1,completed"),
        "destination": csv("record_id,reference", "A2,g2"),
    }
    load(ledger_world, **files)
    before = list(WorkItem.objects.filter(run=ledger_world.run).order_by("record_id").values())

    loads = load(ledger_world, **files)

    assert list(WorkItem.objects.filter(run=ledger_world.run).order_by("record_id").values()) == before
    assert [ld.counts.get("updated", 0) for ld in loads] == [0, 0, 0]
    assert loads[0].counts["added"] == 0


def test_a_population_reload_adds_ids_updates_rules_and_adopts_destination_records(ledger_world: LedgerWorld) -> None:
    load(ledger_world, population=POPULATION, destination=csv("record_id,reference", "X9,gx"))
    assert item(ledger_world, "X9").is_possible_duplicate

    (reload,) = load(ledger_world, population=csv("record_id,skip_reason", "A1,now skipped", "A6,", "X9,"))
    # adopting X9 would clear its possible-duplicate flag: a person must confirm (and so explain) it
    assert reload.status == "awaiting_confirmation"
    assert item(ledger_world, "X9").is_possible_duplicate
    reload = work_item_load_confirm(
        actor=ledger_world.support,
        load=reload,
        reason="X9 was eligible after all",
        ledger_version=reload.preview_version,
    )

    assert reload.counts["added"] == 1
    assert item(ledger_world, "A1").outcome == "skipped"
    x9 = item(ledger_world, "X9")
    assert (x9.is_in_population, x9.is_possible_duplicate, x9.outcome) == (True, False, "completed")
    assert (x9.duplicate_explanation, x9.duplicate_explained_by) == ("X9 was eligible after all", ledger_world.support)
    assert set(outcomes(ledger_world.run)) == {"A1", "A2", "A3", "A4", "A5", "A6", "X9"}


def test_population_attributes_are_kept(ledger_world: LedgerWorld) -> None:
    load(ledger_world, population=csv("record_id,customer,amount", "A1,acme,10"))

    assert item(ledger_world, "A1").attributes == {"customer": "acme", "amount": "10"}


# --- verification -------------------------------------------------------------------------------------


def uncertain_world(world: LedgerWorld) -> None:
    load(world, population=POPULATION, runner_report=csv("record_id,status", "A1,completed", "A2,completed"))


def test_verify_found_completes_an_uncertain_item_with_its_history(ledger_world: LedgerWorld) -> None:
    uncertain_world(ledger_world)

    a1 = work_item_verify(
        actor=ledger_world.support, run=ledger_world.run, record_id="A1", found=True, reference="op-7"
    )

    assert (a1.outcome, a1.evidence_kind, a1.evidence_ref, a1.evidence_by) == (
        "completed",
        "provider_lookup",
        "op-7",
        ledger_world.support,
    )
    change = WorkItemChange.objects.get(work_item=a1)
    assert (change.kind, change.from_outcome, change.to_outcome, change.changed_by) == (
        "verify",
        "uncertain",
        "completed",
        ledger_world.support,
    )
    (event,) = events(ledger_world, "work_item_verified")
    assert event.actor_user == ledger_world.support and "A1" in event.summary and "op-7" in event.summary
    run = Run.objects.get(pk=ledger_world.run.pk)
    assert (run.completed_count, run.uncertain_count) == (1, 1)


def test_verify_not_found_makes_it_absent(ledger_world: LedgerWorld) -> None:
    uncertain_world(ledger_world)

    a2 = work_item_verify(actor=ledger_world.support, run=ledger_world.run, record_id="A2", found=False)

    assert (a2.outcome, a2.evidence_kind) == ("absent", "provider_lookup")
    assert Run.objects.get(pk=ledger_world.run.pk).absent_count == 1


def test_verify_refusals(ledger_world: LedgerWorld) -> None:
    uncertain_world(ledger_world)
    load(ledger_world, destination=csv("record_id,reference", "A3,g3"))

    with pytest.raises(DomainError, match="reference"):
        work_item_verify(actor=ledger_world.support, run=ledger_world.run, record_id="A1", found=True)
    with pytest.raises(InvalidTransition, match="A3 is completed"):
        work_item_verify(actor=ledger_world.support, run=ledger_world.run, record_id="A3", found=False)
    with pytest.raises(NotFound):
        work_item_verify(actor=ledger_world.support, run=ledger_world.run, record_id="nope", found=False)
    assert not WorkItemChange.objects.exists()


def test_a_verification_survives_later_runner_reports_but_yields_to_the_destination(ledger_world: LedgerWorld) -> None:
    uncertain_world(ledger_world)
    work_item_verify(actor=ledger_world.support, run=ledger_world.run, record_id="A1", found=False)

    load(ledger_world, runner_report=csv("record_id,status", "A1,completed"))
    assert (item(ledger_world, "A1").outcome, item(ledger_world, "A1").evidence_kind) == ("absent", "provider_lookup")

    load(ledger_world, destination=csv("record_id,reference", "A1,late"))
    assert (item(ledger_world, "A1").outcome, item(ledger_world, "A1").evidence_kind) == (
        "completed",
        "destination_query",
    )


def test_bulk_verification_from_a_provider_export(ledger_world: LedgerWorld) -> None:
    uncertain_world(ledger_world)
    load(ledger_world, destination=csv("record_id,reference", "A3,g3"))
    before = TimelineEvent.objects.filter(run=ledger_world.run).count()

    (lookup,) = load(
        ledger_world,
        provider_lookup=csv("record_id,found,reference", "A1,yes,op-1", "A2,no,", "A3,no,", "A4,yes,op-4"),
    )

    found = outcomes(ledger_world.run)
    assert (found["A1"], found["A2"], found["A3"], found["A4"]) == ("completed", "absent", "completed", "completed")
    assert lookup.counts == {
        "rows": 4,
        "verified": 3,
        "found": 2,
        "not_found": 1,
        "not_verified": 1,
        "reconciled": 0,
    }
    assert WorkItemChange.objects.filter(load=lookup).count() == 3
    assert set(WorkItemChange.objects.values_list("work_item__record_id", "from_outcome", "to_outcome")) == {
        ("A1", "uncertain", "completed"),
        ("A2", "uncertain", "absent"),
        ("A4", "unverified", "completed"),
    }
    new_events = TimelineEvent.objects.filter(run=ledger_world.run).count() - before
    assert new_events in (1, 2)  # the bulk event, plus a changed failure-class suggestion at most
    (event,) = events(ledger_world, "work_items_verified")
    assert event.data["loads"][0]["counts"]["verified"] == 3


# --- a person's change ---------------------------------------------------------------------------------


def test_a_person_changes_an_item_keeping_history_timeline_and_totals(ledger_world: LedgerWorld) -> None:
    uncertain_world(ledger_world)

    a1 = work_item_change(
        actor=ledger_world.tech_owner,
        run=ledger_world.run,
        record_id="A1",
        outcome="rejected",
        note="gateway refused it: ticket OPS-12",
        evidence_ref="OPS-12",
    )

    assert (a1.outcome, a1.evidence_kind, a1.evidence_note, a1.evidence_by) == (
        "rejected",
        "manual",
        "gateway refused it: ticket OPS-12",
        ledger_world.tech_owner,
    )
    change = WorkItemChange.objects.get(work_item=a1)
    assert (change.kind, change.from_outcome, change.to_outcome, change.note) == (
        "change",
        "uncertain",
        "rejected",
        "gateway refused it: ticket OPS-12",
    )
    (event,) = events(ledger_world, "work_item_changed")
    assert event.summary.startswith("A1: uncertain → rejected") and event.actor_user == ledger_world.tech_owner
    assert Run.objects.get(pk=ledger_world.run.pk).rejected_count == 1
    # a later reconciliation keeps a person's decision
    load(ledger_world, runner_report=csv("record_id,status", "A1,completed"))
    assert item(ledger_world, "A1").outcome == "rejected"


def test_a_change_needs_a_reason_and_a_different_outcome(ledger_world: LedgerWorld) -> None:
    uncertain_world(ledger_world)

    with pytest.raises(DomainError, match="why"):
        work_item_change(actor=ledger_world.support, run=ledger_world.run, record_id="A1", outcome="absent", note=" ")
    with pytest.raises(InvalidTransition):
        work_item_change(
            actor=ledger_world.support, run=ledger_world.run, record_id="A1", outcome="uncertain", note="x"
        )
    with pytest.raises(DomainError):
        work_item_change(actor=ledger_world.support, run=ledger_world.run, record_id="A1", outcome="gone", note="x")


# --- one timeline event per load, with its counts --------------------------------------------------------


def test_a_load_writes_one_event_with_counts_and_stores_the_totals(ledger_world: LedgerWorld) -> None:
    loads = load(
        ledger_world,
        population=POPULATION,
        runner_report=csv("record_id,status", "A1,completed", "A2,failed"),
        destination=csv("record_id,reference", "A1,g1"),
    )

    (event,) = events(ledger_world, "work_items_loaded")
    assert event.actor_user == ledger_world.support
    assert [entry["kind"] for entry in event.data["loads"]] == ["population", "runner_report", "destination"]
    assert event.data["loads"][0]["counts"]["added"] == 5
    assert event.data["totals"]["eligible"] == 5 and event.data["totals"]["completed"] == 1
    assert "eligible population: 5 records" in event.summary and "1 claimed done" in event.summary
    assert {ld.status for ld in loads} == {"committed"}
    assert all(ld.batch == loads[0].batch and ld.finished_at for ld in loads)
    assert WorkItemLoad.objects.filter(content=b"").count() == 3  # the bytes are dropped once loaded


# --- atomicity: a failed load changes nothing ------------------------------------------------------------


def test_a_bad_file_in_an_upload_changes_nothing(ledger_world: LedgerWorld) -> None:
    with pytest.raises(LedgerInputError) as caught:
        load(ledger_world, population=POPULATION, destination=csv("record_id,reference", "A1,g1", ",g2"))

    assert caught.value.detail == "destination.csv: Line 3, column 'record_id': the record id is empty."
    assert not WorkItem.objects.exists()
    assert not TimelineEvent.objects.filter(run=ledger_world.run).exists()
    population = WorkItemLoad.objects.get(kind="population")
    destination = WorkItemLoad.objects.get(kind="destination")
    assert (destination.status, destination.error_line, destination.error_column) == ("failed", 3, "record_id")
    assert population.status == "failed" and population.error.startswith("Not loaded: destination.csv")
    assert Run.objects.get(pk=ledger_world.run.pk).ledger_updated_at is None


def test_a_failed_load_leaves_the_ledger_and_totals_as_they_were(ledger_world: LedgerWorld) -> None:
    load(ledger_world, population=POPULATION, runner_report=csv("record_id,status", "A1,completed"))
    before = list(WorkItem.objects.order_by("record_id").values())
    totals = Run.objects.filter(pk=ledger_world.run.pk).values().get()

    with pytest.raises(LedgerInputError, match="Line 3: mixed line endings"):
        load(ledger_world, destination=csv("record_id,reference", "A1,g1", "A2,g2\r"))
    with pytest.raises(LedgerInputError, match="duplicate record id 'A2', already on line 2"):
        load(ledger_world, runner_report=csv("record_id,status", "A2,completed", "A2,failed"))

    assert list(WorkItem.objects.order_by("record_id").values()) == before
    assert Run.objects.filter(pk=ledger_world.run.pk).values().get() == totals
    assert len(events(ledger_world, "work_items_loaded")) == 1


@pytest.mark.parametrize("existing", [False, True], ids=["fresh run", "known run"])
def test_duplicate_ids_in_a_population_name_both_lines(ledger_world: LedgerWorld, existing: bool) -> None:
    if existing:
        load(ledger_world, population=csv("record_id", "B1"))

    with pytest.raises(LedgerInputError) as caught:
        load(ledger_world, population=csv("record_id", "A1", "A2", "A1", "A2"))

    assert caught.value.line == 4
    assert "duplicate record id 'A1', already on line 2 (2 ids appear more than once)" in caught.value.detail
    assert set(outcomes(ledger_world.run)) == ({"B1"} if existing else set())


@pytest.mark.parametrize(
    ("report", "line"),
    [
        (csv("record_id,status", "A1,completed", "A2,failed", "A1,failed"), 4),
        (csv("record_id,status", "A1,completed", "Z9,failed", "Z9,completed"), 4),
    ],
    ids=["repeat in the population", "repeat outside the population"],
)
def test_a_fresh_runs_repeated_runner_id_is_refused_before_the_populations_and_destinations_errors(
    ledger_world: LedgerWorld, report: bytes, line: int
) -> None:
    # A fresh run's runner report is not grouped as it is staged: its repeats are found by the
    # insert (an id of the population) or by the counts (one outside it), and still come first.
    population = csv("record_id", "A1", "A2", "A3", "A1")
    for files in (
        {"population": POPULATION, "runner_report": report},
        {"population": population, "runner_report": report},
        {"population": POPULATION, "runner_report": report, "destination": csv("record_id,reference", ",g1")},
    ):
        with pytest.raises(LedgerInputError) as caught:
            load(ledger_world, **files)

        assert caught.value.detail.startswith("runner_report.csv: ") and caught.value.line == line
        assert "duplicate record id" in caught.value.detail
        runner = WorkItemLoad.objects.filter(kind="runner_report").latest("id")
        assert (runner.status, runner.error_line) == ("failed", line)
        assert not WorkItem.objects.exists()
    assert not TimelineEvent.objects.filter(run=ledger_world.run, kind="work_items_loaded").exists()


def test_a_fresh_runs_not_eligible_ids_come_with_its_population(ledger_world: LedgerWorld) -> None:
    load(
        ledger_world,
        complete=True,
        population=POPULATION,
        runner_report=csv("record_id,status", "A1,completed", "A2,failed", "Z8,completed"),
        destination=csv("record_id,reference", "A1,g1", "Z9,g9", "Z9,g9b", "A3,g3"),
    )

    (event,) = events(ledger_world, "work_items_loaded")
    runner, destination = event.data["loads"][1]["counts"], event.data["loads"][2]["counts"]
    assert (runner["updated"], runner["not_in_population"]) == (2, 1)
    assert (destination["present"], destination["not_eligible"], destination["present_more_than_once"]) == (3, 1, 1)
    z9 = item(ledger_world, "Z9")
    assert (z9.is_in_population, z9.outcome, z9.destination_count, z9.destination_ref) == (False, "completed", 2, "g9b")
    assert (z9.is_possible_duplicate, z9.is_attempted, z9.evidence_kind) == (True, False, "destination_query")
    assert not WorkItem.objects.filter(record_id="Z8").exists()
    assert outcomes(ledger_world.run) == {
        "A1": "completed",
        "A2": "rejected",
        "A3": "completed",
        "A4": "absent",
        "A5": "absent",
        "Z9": "completed",
    }


def test_empty_files_and_evidence_before_the_population_are_refused(ledger_world: LedgerWorld) -> None:
    with pytest.raises(LedgerInputError, match="no records"):
        load(ledger_world, population=csv("record_id"))
    with pytest.raises(LedgerInputError, match="load the population first"):
        load(ledger_world, destination=csv("record_id,reference", "A1,g1"))
    assert not WorkItem.objects.exists()


@override_settings(HANDOVER_LEDGER_MAX_UPLOAD_BYTES=20)
def test_a_file_over_the_limit_is_refused_before_anything_is_stored(ledger_world: LedgerWorld) -> None:
    with pytest.raises(LedgerInputError) as caught:
        load(ledger_world, population=POPULATION)

    assert caught.value.status == 413 and "population.csv: the file is" in caught.value.detail
    assert not WorkItemLoad.objects.exists()


def test_an_unexpected_failure_keeps_the_bytes_for_a_retry(
    ledger_world: LedgerWorld, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    from runs.ledger import reconciliation as ledger

    load(ledger_world, population=POPULATION)

    def broken(*args: Any) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(ledger.APPLY, WorkItemLoad.Kind.DESTINATION, broken)
    with pytest.raises(RuntimeError):
        load(ledger_world, destination=csv("record_id,reference", "A1,g1"))
    failed = WorkItemLoad.objects.get(kind="destination")
    assert failed.status == "failed" and "unexpectedly" in failed.error and failed.content != b""
    assert outcomes(ledger_world.run)["A1"] == "unverified"

    monkeypatch.undo()
    queued: list[int] = []
    monkeypatch.setattr("runs.ledger.tasks.work_item_load_run.delay", queued.append)
    with django_capture_on_commit_callbacks(execute=True):
        retried = work_item_load_retry(actor=ledger_world.support, load=failed)
    assert (retried.status, queued) == ("pending", [failed.pk])

    from runs.ledger import tasks as ledger_tasks

    assert ledger_tasks.work_item_load_run(failed.pk) == "committed"
    assert outcomes(ledger_world.run)["A1"] == "completed"
    with pytest.raises(InvalidTransition):
        work_item_load_retry(actor=ledger_world.support, load=failed)


# --- large loads: a Celery task, progress through the cache ------------------------------------------------


@override_settings(HANDOVER_LEDGER_SYNC_MAX_BYTES=10)
def test_a_large_upload_is_queued_on_commit_and_the_task_is_idempotent(
    ledger_world: LedgerWorld, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    queued: list[int] = []
    monkeypatch.setattr("runs.ledger.tasks.work_item_load_run.delay", queued.append)

    with django_capture_on_commit_callbacks(execute=True):
        loads = load(ledger_world, population=POPULATION, destination=csv("record_id,reference", "A1,g"))

    assert [ld.status for ld in loads] == ["pending", "pending"]
    assert queued == [loads[0].pk]  # one task for the whole upload
    assert not WorkItem.objects.exists()
    assert cache.get(LOAD_PROGRESS_KEY.format(loads[0].public_id))["phase"] == "queued"

    from runs.ledger import tasks as ledger_tasks

    assert ledger_tasks.work_item_load_run(queued[0]) == "committed"
    assert ledger_tasks.work_item_load_run(queued[0]) == "committed"  # a redelivered message changes nothing
    assert outcomes(ledger_world.run)["A1"] == "completed"
    assert len(events(ledger_world, "work_items_loaded")) == 1
    assert cache.get(LOAD_PROGRESS_KEY.format(loads[1].public_id)) == {
        "phase": "committed",
        "percent": 100,
        "message": "loaded",
    }


@override_settings(HANDOVER_LEDGER_SYNC_MAX_BYTES=10)
def test_a_queued_load_with_bad_input_ends_failed_with_its_line(
    ledger_world: LedgerWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("runs.ledger.tasks.work_item_load_run.delay", lambda load_id: None)
    (queued,) = load(ledger_world, population=csv("record_id", "A1", "", "A1"))

    from runs.ledger import tasks as ledger_tasks

    assert ledger_tasks.work_item_load_run(queued.pk) == "failed"
    queued.refresh_from_db()
    assert (queued.status, queued.error_line) == ("failed", 4)
    assert cache.get(LOAD_PROGRESS_KEY.format(queued.public_id))["phase"] == "failed"
    assert ledger_tasks.work_item_load_run(queued.pk) == "failed"


def test_a_missing_load_is_logged_and_ignored(db: None) -> None:
    from runs.ledger import tasks as ledger_tasks

    assert ledger_tasks.work_item_load_run(987654) == "missing"


# --- who may load and change -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("who", "error"),
    [
        ("support", None),
        ("tech_owner", None),
        ("admin", None),
        ("auditor", LedgerPermissionDenied),
        ("business_owner", LedgerPermissionDenied),
        ("outsider", NotFound),
    ],
)
def test_who_may_load_into_a_run(ledger_world: LedgerWorld, who: str, error: type[Exception] | None) -> None:
    user = getattr(ledger_world, who)
    if error is None:
        load(ledger_world, user=user, population=POPULATION)
        assert WorkItem.objects.count() == 5
        return
    with pytest.raises(error):
        load(ledger_world, user=user, population=POPULATION)
    assert not WorkItemLoad.objects.exists() and not WorkItem.objects.exists()


@pytest.mark.parametrize("who", ["auditor", "outsider"])
def test_readers_and_strangers_cannot_change_verify_or_confirm(ledger_world: LedgerWorld, who: str) -> None:
    uncertain_world(ledger_world)
    user = getattr(ledger_world, who)
    error = LedgerPermissionDenied if who == "auditor" else NotFound

    with pytest.raises(error):
        work_item_change(actor=user, run=ledger_world.run, record_id="A1", outcome="absent", note="x")
    with pytest.raises(error):
        work_item_verify(actor=user, run=ledger_world.run, record_id="A1", found=False)
    with pytest.raises(error):
        run_failure_class_confirm(actor=user, run=ledger_world.run, failure_class="undetermined", note="x")
    assert not WorkItemChange.objects.exists()


# --- failure class -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "totals", "attempts", "has_report", "expected"),
    [
        ("failed", {}, [], False, "never_started"),
        ("missed", {"eligible": 5}, [("failed", False)], True, "never_started"),
        ("failed", {"eligible": 5, "completed": 5}, [("failed", True)], True, "completed_ack_lost"),
        ("failed", {"eligible": 5, "completed": 5, "attempted": 5}, [("timed_out", True)], False, "completed_ack_lost"),
        ("failed", {"eligible": 5}, [("failed", True)], True, "failed_in_preparation"),
        ("failed", {"eligible": 5, "completed": 2, "attempted": 4}, [("failed", True)], True, "partially_committed"),
        ("failed", {"eligible": 5, "attempted": 3, "uncertain": 3}, [("failed", True)], True, "undetermined"),
        ("failed", {"eligible": 5}, [("failed", True)], False, "undetermined"),
        ("succeeded", {"eligible": 5, "completed": 5}, [("succeeded", True)], True, ""),
    ],
)
def test_failure_class_suggestion(
    status: str, totals: dict[str, int], attempts: list[tuple[str, bool]], has_report: bool, expected: str
) -> None:
    suggested, reason = failure_class_for(
        run_status=status, totals=RunTotals(**totals), attempts=attempts, has_runner_report=has_report
    )

    assert suggested == expected
    assert reason


def test_suggestion_without_totals_reads_the_totals_stored_on_the_run(ledger_world: LedgerWorld) -> None:
    load(ledger_world, population=POPULATION, runner_report=csv("record_id,status", "A1,completed", "A2,completed"))
    load(ledger_world, destination=csv("record_id,reference", "A1,g1"))
    run = Run.objects.get(pk=ledger_world.run.pk)
    stored = RunTotals.stored_on(run)
    assert stored == run_totals_refresh(run=run)  # every stored column, read back
    assert (stored.eligible, stored.completed) == (5, 1)
    Run.objects.filter(pk=run.pk).update(failure_class_suggested="")
    run = Run.objects.get(pk=run.pk)

    run_failure_class_suggest(run=run)

    assert Run.objects.get(pk=run.pk).failure_class_suggested == "partially_committed"
    assert "1 of 5 eligible" in events(ledger_world, "failure_class_suggested")[-1].summary


def test_suggestion_and_confirmation_are_on_the_timeline(ledger_world: LedgerWorld) -> None:
    load(ledger_world, population=POPULATION, runner_report=csv("record_id,status", "A1,completed", "A2,completed"))
    load(ledger_world, destination=csv("record_id,reference", "A1,g1"))

    run = Run.objects.get(pk=ledger_world.run.pk)
    assert run.failure_class_suggested == "partially_committed"
    suggested = events(ledger_world, "failure_class_suggested")
    assert [e.data["suggested"] for e in suggested] == ["undetermined", "partially_committed"]
    assert suggested[-1].actor_kind == "system" and "1 of 5 eligible" in suggested[-1].summary

    with pytest.raises(DomainError, match="say why"):
        run_failure_class_confirm(actor=ledger_world.support, run=run, failure_class="completed_ack_lost")
    run_failure_class_confirm(actor=ledger_world.support, run=run, failure_class="partially_committed")

    run.refresh_from_db()
    assert (run.failure_class, run.failure_class_confirmed_by) == ("partially_committed", ledger_world.support)
    assert run.failure_class_confirmed_at is not None
    (confirmed,) = events(ledger_world, "failure_class_confirmed")
    assert confirmed.actor_user == ledger_world.support and confirmed.summary == (
        "Failure class confirmed: partially committed"
    )


def test_a_confirmation_other_than_the_suggestion_says_why(ledger_world: LedgerWorld) -> None:
    load(ledger_world, population=POPULATION)

    run_failure_class_confirm(
        actor=ledger_world.support, run=ledger_world.run, failure_class="completed_ack_lost", note="gateway log"
    )

    (confirmed,) = events(ledger_world, "failure_class_confirmed")
    assert "(suggested: undetermined) — gateway log" in confirmed.summary


# --- the demo ----------------------------------------------------------------------------------------------


def test_the_demo_run_shows_every_outcome(story_tenants: Any, make_key: Any, post_alert: Any) -> None:
    from runs.catalog.services import role_grant
    from runs.demo.loader import demo_ledger_load
    from tests.conftest import fixture_files
    from tests.factories import UserFactory

    key = make_key("generic", tenants=[story_tenants[s] for s in ("acme-foods", "borealis-retail", "cedar-health")])
    for path in fixture_files("generic"):
        post_alert("generic", path, key)
    role_grant(user=UserFactory(username="support"), role="support", obj=story_tenants["acme-foods"])

    assert demo_ledger_load() is True
    assert demo_ledger_load() is False  # idempotent

    run = Run.objects.get(tenant__slug="acme-foods", window_start__day=26)
    found = outcomes(run)
    assert set(found.values()) == set(WorkItem.Outcome.values)
    assert found["INV-1007"] == "absent" and found["INV-1010"] == "uncertain" and found["INV-1011"] == "skipped"
    assert (run.eligible_count, run.unresolved_count, run.possible_duplicate_count) == (11, 6, 2)


# --- PostgreSQL: two runners of one upload -----------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks of concurrent runners need PostgreSQL")
def test_two_runners_of_one_upload_commit_it_once(monkeypatch: pytest.MonkeyPatch, request: Any) -> None:
    world = request.getfixturevalue("ledger_world")
    monkeypatch.setattr("runs.ledger.tasks.work_item_load_run.delay", lambda load_id: None)
    with override_settings(HANDOVER_LEDGER_SYNC_MAX_BYTES=10):
        loads = load(world, population=POPULATION, destination=csv("record_id,reference", "A1,g"))
    from runs.ledger.batches import work_item_load_run

    results = run_concurrently([lambda: work_item_load_run(load_id=loads[0].pk).status] * 2)

    assert sorted(results) == ["committed", "committed"]
    assert WorkItem.objects.filter(run=world.run).count() == 5
    assert TimelineEvent.objects.filter(run=world.run, kind="work_items_loaded").count() == 1
    assert set(WorkItemLoad.objects.values_list("status", flat=True)) == {"committed"}


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks of concurrent runners need PostgreSQL")
def test_a_runner_that_waited_for_the_other_to_commit_answers_the_load_as_committed(
    monkeypatch: pytest.MonkeyPatch, request: Any
) -> None:
    # The flake of the test above, forced: runner B reads the load while A holds the batch's row
    # locks, B's claim waits for A's commit and then claims nothing -- and B answered the load as it
    # had read it ("running"), not as A left it ("committed").
    import time

    from runs.ledger import batches as ledger  # where work_item_load_run looks up _batch_apply

    world = request.getfixturevalue("ledger_world")
    monkeypatch.setattr("runs.ledger.tasks.work_item_load_run.delay", lambda load_id: None)
    with override_settings(HANDOVER_LEDGER_SYNC_MAX_BYTES=10):
        loads = load(world, population=POPULATION)
    locked = threading.Event()
    real_apply = ledger._batch_apply

    def slow_apply(*args: Any, **kwargs: Any) -> Any:
        locked.set()  # A holds the load rows FOR UPDATE now
        time.sleep(1.0)  # long enough for B's claim UPDATE to block on them
        return real_apply(*args, **kwargs)

    monkeypatch.setattr(ledger, "_batch_apply", slow_apply)
    results: dict[str, str] = {}

    def runner(name: str) -> None:
        try:
            if name == "B":
                assert locked.wait(10)
            results[name] = ledger.work_item_load_run(load_id=loads[0].pk).status
        finally:
            connection.close()

    threads = [threading.Thread(target=runner, args=(name,)) for name in ("A", "B")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert results == {"A": "committed", "B": "committed"}
    assert TimelineEvent.objects.filter(run=world.run, kind="work_items_loaded").count() == 1
    assert WorkItem.objects.filter(run=world.run).count() == 5

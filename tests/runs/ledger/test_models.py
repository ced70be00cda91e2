"""The work ledger's constraints hold when rows are written directly through the ORM."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from runs.attempts.models import Run
from runs.ledger.models import WorkItem, WorkItemChange, WorkItemLoad
from tests.factories import RunFactory, UserFactory

pytestmark = pytest.mark.django_db


def refused(**fields: Any) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        WorkItem.objects.create(**fields)


def test_a_record_id_is_unique_per_run_but_not_across_runs() -> None:
    run, other = RunFactory(), RunFactory()
    WorkItem.objects.create(run=run, record_id="INV-1")
    WorkItem.objects.create(run=other, record_id="INV-1")

    refused(run=run, record_id="INV-1")


@pytest.mark.parametrize(
    "fields",
    [
        {"outcome": "lost"},  # not an outcome
        {"record_id": ""},  # an id is required
        {"evidence_kind": "hearsay", "outcome": "completed"},  # not an evidence kind
        {"runner_status": "maybe"},  # not a runner status
        {"outcome": "completed"},  # a confirmed outcome carries its evidence
        {"outcome": "uncertain"},
        {"outcome": "skipped"},  # skipped needs its rule or a person's evidence
    ],
)
def test_work_item_constraints(fields: dict[str, Any]) -> None:
    refused(**{"run": RunFactory(), "record_id": "INV-1", **fields})


def test_valid_work_items() -> None:
    run = RunFactory()
    WorkItem.objects.create(run=run, record_id="A", outcome="completed", evidence_kind="destination_query")
    WorkItem.objects.create(run=run, record_id="B", outcome="skipped", skip_reason="credit note")
    WorkItem.objects.create(run=run, record_id="C", outcome="unverified")

    assert WorkItem.objects.count() == 3


def test_a_manual_change_says_why() -> None:
    run = RunFactory()
    item = WorkItem.objects.create(run=run, record_id="A")
    person = UserFactory()
    fields = dict(
        work_item=item,
        run=run,
        kind="change",
        from_outcome="unverified",
        to_outcome="absent",
        evidence_kind="manual",
        changed_by=person,
        changed_at=timezone.now(),
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        WorkItemChange.objects.create(**fields)
    with pytest.raises(IntegrityError), transaction.atomic():
        WorkItemChange.objects.create(**{**fields, "note": "x", "to_outcome": "gone"})
    WorkItemChange.objects.create(**{**fields, "note": "the gateway has no trace"})


def test_a_failed_load_carries_its_error_and_kinds_are_checked() -> None:
    run, person = RunFactory(), UserFactory()
    fields = dict(run=run, kind="population", created_by=person, created_at=timezone.now())
    with pytest.raises(IntegrityError), transaction.atomic():
        WorkItemLoad.objects.create(**fields, status="failed")
    with pytest.raises(IntegrityError), transaction.atomic():
        WorkItemLoad.objects.create(**{**fields, "kind": "rumour"})
    WorkItemLoad.objects.create(**fields, status="failed", error="Line 3: the record id is empty.")


def test_a_confirmed_failure_class_names_who_confirmed_it() -> None:
    run = RunFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.filter(pk=run.pk).update(failure_class="never_started")
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.filter(pk=run.pk).update(failure_class_suggested="bad_luck")
    Run.objects.filter(pk=run.pk).update(failure_class="never_started", failure_class_confirmed_by=UserFactory())


def test_evidence_summary_words_the_derived_evidence() -> None:
    item = WorkItem(record_id="A", outcome="uncertain", evidence_kind="runner_report", runner_status="attempted")
    assert item.evidence_summary == "attempted, and an attempt of the run timed out after sending"
    item.evidence_note = "a person's words"
    assert item.evidence_summary == "a person's words"
    assert WorkItem(record_id="B", outcome="unverified").evidence_summary == "nothing confirmed yet"

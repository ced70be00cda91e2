"""Versioned ledger loads: numbered and kept, destination facts as the union of the exports, no load deletes
an item or clears a possible duplicate unseen; a weakening load waits for a person's confirmation against
the ledger version of its preview, on the page and over the API; possible duplicates cleared only by an
explanation."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, override_settings
from knox.models import AuthToken

from handover.core.errors import DomainError, InvalidTransition
from runs.attempts.models import Run
from runs.ledger import tasks as ledger_tasks
from runs.ledger.confirmations import (
    LedgerVersionConflict,
    work_item_load_confirm,
    work_item_load_discard,
)
from runs.ledger.items import work_item_change, work_item_duplicate_explain, work_item_verify
from runs.ledger.models import WorkItem, WorkItemChange, WorkItemLoad
from runs.timeline.models import TimelineEvent
from tests.runs.ledger_support import LedgerWorld, csv, ledger_world, load, outcomes

pytestmark = pytest.mark.django_db
__all__ = ["ledger_world"]

ELIGIBLE = [f"INV-{n}" for n in range(1, 11)]


def eleven_items(world: LedgerWorld) -> None:
    """The run of the report: 11 items — 5 completed, 2 absent, 3 unverified, 2 possible duplicates.

    INV-1..5 are in the first destination export (INV-5 twice), X-1 is there though not eligible;
    a provider lookup confirmed INV-6 and INV-7 absent.
    """
    load(
        world,
        population=csv("record_id", *ELIGIBLE),
        destination=csv(
            "record_id,reference", "INV-1,d1", "INV-2,d2", "INV-3,d3", "INV-4,d4", "INV-5,d5", "INV-5,d5b", "X-1,dx"
        ),
    )
    load(world, provider_lookup=csv("record_id,found,reference", "INV-6,no,", "INV-7,no,"))
    assert sorted(outcomes(world.run).values()) == ["absent"] * 2 + ["completed"] * 6 + ["unverified"] * 3
    assert WorkItem.objects.filter(run=world.run, is_possible_duplicate=True).count() == 2


def run_of(world: LedgerWorld) -> Run:
    return Run.objects.get(pk=world.run.pk)


def test_a_second_export_with_only_the_replayed_records_loses_nothing(ledger_world: LedgerWorld) -> None:
    eleven_items(ledger_world)
    before = run_of(ledger_world)

    (second,) = load(ledger_world, destination=csv("record_id,reference", "INV-6,r6", "INV-7,r7"))

    assert (second.kind, second.number, second.status) == ("destination", 2, "committed")
    found = outcomes(ledger_world.run)
    assert len(found) == 11  # no item removed
    assert [found[f"INV-{n}"] for n in range(1, 8)] == ["completed"] * 7
    assert [found[f"INV-{n}"] for n in range(8, 11)] == ["unverified"] * 3
    assert set(
        WorkItem.objects.filter(run=ledger_world.run, is_possible_duplicate=True).values_list("record_id", flat=True)
    ) == {"INV-5", "X-1"}
    after = run_of(ledger_world)
    assert (after.completed_count, after.unresolved_count, after.possible_duplicate_count) == (7, 3, 2)
    assert after.ledger_version == before.ledger_version + 1
    # both exports are kept, numbered, with who, when, counts and hash
    kept = list(WorkItemLoad.objects.filter(run=ledger_world.run, kind="destination").order_by("number"))
    assert [(ld.number, ld.status, ld.created_by, len(ld.sha256)) for ld in kept] == [
        (1, "committed", ledger_world.support, 64),
        (2, "committed", ledger_world.support, 64),
    ]
    assert kept[1].counts["present"] == 2


def test_a_complete_second_export_waits_with_its_preview_and_applies_on_confirmation(
    ledger_world: LedgerWorld,
) -> None:
    eleven_items(ledger_world)
    version = run_of(ledger_world).ledger_version
    before = list(WorkItem.objects.filter(run=ledger_world.run).order_by("record_id").values())

    (second,) = load(ledger_world, complete=True, destination=csv("record_id,reference", "INV-6,r6", "INV-7,r7"))

    # nothing applied, the preview says what would be lost
    assert second.status == "awaiting_confirmation"
    assert list(WorkItem.objects.filter(run=ledger_world.run).order_by("record_id").values()) == before
    assert run_of(ledger_world).ledger_version == version
    assert second.preview_version == version
    assert second.preview["counts"] == {"completed → absent": 5, "possible duplicate cleared": 2}
    assert second.preview["total"] == 6  # INV-1..5 and X-1 (INV-5 both weakened and cleared)
    assert [row["record_id"] for row in second.preview["items"]] == ["INV-1", "INV-2", "INV-3", "INV-4", "INV-5", "X-1"]
    event = TimelineEvent.objects.filter(run=ledger_world.run, kind="work_items_load_awaiting_confirmation").get()
    assert "would weaken 6 records" in event.summary and event.actor_user == ledger_world.support

    with pytest.raises(DomainError):
        work_item_load_confirm(actor=ledger_world.support, load=second, reason=" ", ledger_version=version)
    applied = work_item_load_confirm(
        actor=ledger_world.tech_owner, load=second, reason="the export is the full day", ledger_version=version
    )

    assert (applied.status, applied.confirmed_by, applied.confirm_reason) == (
        "committed",
        ledger_world.tech_owner,
        "the export is the full day",
    )
    found = outcomes(ledger_world.run)
    assert len(found) == 11  # still no item removed
    assert [found[f"INV-{n}"] for n in range(1, 6)] == ["absent"] * 5
    weakened = WorkItemChange.objects.filter(run=ledger_world.run, kind="weaken", load=second)
    assert sorted(weakened.values_list("work_item__record_id", "from_outcome", "to_outcome")) == [
        (f"INV-{n}", "completed", "absent") for n in range(1, 6)
    ]
    assert set(weakened.values_list("changed_by", flat=True)) == {ledger_world.tech_owner.pk}
    explained = WorkItem.objects.filter(run=ledger_world.run, duplicate_explained_by=ledger_world.tech_owner)
    assert sorted(explained.values_list("record_id", flat=True)) == ["INV-5", "X-1"]
    loaded = TimelineEvent.objects.filter(run=ledger_world.run, kind="work_items_loaded").order_by("id").last()
    assert loaded is not None and "confirmed by" in loaded.summary and loaded.data["confirmed"]["reason"]


def test_a_confirmation_on_a_stale_version_is_refused_with_a_new_preview(ledger_world: LedgerWorld) -> None:
    eleven_items(ledger_world)
    (second,) = load(ledger_world, complete=True, destination=csv("record_id,reference", "INV-6,r6"))
    seen = second.preview_version
    # meanwhile someone explains X-1: the ledger moved on
    work_item_duplicate_explain(
        actor=ledger_world.admin, run=ledger_world.run, record_id="X-1", reason="a test record", evidence_ref="T-1"
    )

    with pytest.raises(LedgerVersionConflict) as refused:
        work_item_load_confirm(actor=ledger_world.support, load=second, reason="full export", ledger_version=seen)

    fresh = refused.value.load
    assert refused.value.status == 409
    assert fresh.status == "awaiting_confirmation"
    assert fresh.preview_version == run_of(ledger_world).ledger_version > seen
    assert fresh.preview["counts"] == {"completed → absent": 5, "possible duplicate cleared": 1}
    assert outcomes(ledger_world.run)["INV-1"] == "completed"  # nothing applied
    assert not WorkItemChange.objects.filter(kind="weaken").exists()


def test_a_discarded_load_is_kept_and_applies_nothing(ledger_world: LedgerWorld) -> None:
    eleven_items(ledger_world)
    (second,) = load(ledger_world, complete=True, destination=csv("record_id,reference", "INV-6,r6"))

    discarded = work_item_load_discard(actor=ledger_world.support, load=second, reason="wrong file")

    assert (discarded.status, discarded.confirm_reason) == ("discarded", "wrong file")
    assert outcomes(ledger_world.run)["INV-1"] == "completed"
    with pytest.raises(InvalidTransition):
        work_item_load_confirm(actor=ledger_world.support, load=second, reason="x", ledger_version=0)
    assert TimelineEvent.objects.filter(run=ledger_world.run, kind="work_items_load_discarded").count() == 1


def test_a_possible_duplicate_is_cleared_only_by_an_explanation(ledger_world: LedgerWorld) -> None:
    eleven_items(ledger_world)
    with pytest.raises(DomainError) as missing:
        work_item_duplicate_explain(actor=ledger_world.support, run=ledger_world.run, record_id="X-1", reason="ok")
    assert missing.value.errors == {"evidence_ref": ["required"]}
    with pytest.raises(DomainError) as long:
        work_item_duplicate_explain(
            actor=ledger_world.support, run=ledger_world.run, record_id="X-1", reason="ok", evidence_ref="r" * 301
        )
    assert "300" in long.value.errors["evidence_ref"][0]

    item = work_item_duplicate_explain(
        actor=ledger_world.support, run=ledger_world.run, record_id="X-1", reason="test record", evidence_ref="T-9"
    )

    assert (item.is_possible_duplicate, item.duplicate_explained_by, item.duplicate_evidence_ref) == (
        False,
        ledger_world.support,
        "T-9",
    )
    assert run_of(ledger_world).possible_duplicate_count == 1
    change = WorkItemChange.objects.get(work_item=item)
    assert (change.kind, change.note, change.evidence_ref) == ("explain", "test record", "T-9")
    # a later export listing it again does not raise the flag again
    load(ledger_world, destination=csv("record_id,reference", "X-1,dx", "X-1,dx2"))
    assert not WorkItem.objects.get(run=ledger_world.run, record_id="X-1").is_possible_duplicate
    with pytest.raises(InvalidTransition):
        work_item_duplicate_explain(
            actor=ledger_world.support, run=ledger_world.run, record_id="INV-8", reason="x", evidence_ref="y"
        )


def test_every_ledger_write_raises_the_version(ledger_world: LedgerWorld) -> None:
    eleven_items(ledger_world)
    start = run_of(ledger_world).ledger_version
    work_item_change(actor=ledger_world.support, run=ledger_world.run, record_id="INV-8", outcome="absent", note="x")
    work_item_verify(actor=ledger_world.support, run=ledger_world.run, record_id="INV-9", found=True, reference="p")
    assert run_of(ledger_world).ledger_version == start + 2


@override_settings(HANDOVER_LEDGER_SYNC_MAX_BYTES=1)
def test_a_large_weakening_load_waits_in_the_worker_and_its_confirmation_is_queued(
    ledger_world: LedgerWorld, django_capture_on_commit_callbacks: Any
) -> None:
    with override_settings(HANDOVER_LEDGER_SYNC_MAX_BYTES=10**6):
        eleven_items(ledger_world)
    with django_capture_on_commit_callbacks(execute=False) as queued:
        (second,) = load(ledger_world, complete=True, destination=csv("record_id,reference", "INV-6,r6"))
    assert second.status == "pending" and len(queued) == 1
    assert ledger_tasks.work_item_load_run(second.pk) == "awaiting_confirmation"
    assert ledger_tasks.work_item_load_run(second.pk) == "awaiting_confirmation"  # a repeated message changes nothing
    second.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=False) as queued:
        confirmed = work_item_load_confirm(
            actor=ledger_world.support, load=second, reason="complete", ledger_version=second.preview_version
        )
    assert (confirmed.status, len(queued)) == ("pending", 1)
    assert ledger_tasks.work_item_load_run(second.pk) == "committed"
    assert outcomes(ledger_world.run)["INV-1"] == "absent"


# --- the API: the same two steps ---------------------------------------------------------------------


def client_for(user: Any) -> Client:
    _, token = AuthToken.objects.create(user=user)
    return Client(HTTP_AUTHORIZATION=f"Token {token}")


def test_the_api_uploads_previews_refuses_a_stale_confirmation_and_applies(ledger_world: LedgerWorld) -> None:
    eleven_items(ledger_world)
    client = client_for(ledger_world.support)
    base = f"/api/v1/runs/{ledger_world.run.public_id}/items/"
    upload = SimpleUploadedFile("d2.csv", csv("record_id,reference", "INV-6,r6"), content_type="text/csv")

    answer = client.post(base + "loads/", data={"destination": upload, "is_destination_complete": "true"})

    assert answer.status_code == 202  # accepted, not applied
    (waiting,) = answer.json()["loads"]
    assert (waiting["status"], waiting["number"], waiting["preview"]["total"]) == ("awaiting_confirmation", 2, 6)
    assert len(waiting["preview"]["items"]) == 6 and waiting["preview"]["items"][0]["from"] == "completed"
    confirm = base + f"loads/{waiting['id']}/confirm/"

    stale = client.post(
        confirm, {"reason": "full", "ledger_version": waiting["preview_version"] - 1}, content_type="application/json"
    )
    assert stale.status_code == 409
    assert stale["Content-Type"] == "application/problem+json"
    body = stale.json()
    assert body["type"].endswith("ledger-version-conflict")
    assert body["load"]["status"] == "awaiting_confirmation"
    assert outcomes(ledger_world.run)["INV-1"] == "completed"

    done = client.post(
        confirm,
        {"reason": "full", "ledger_version": body["load"]["preview_version"]},
        content_type="application/json",
    )
    assert done.status_code == 200, done.json()
    assert (done.json()["status"], done.json()["confirmed_by"]) == ("committed", ledger_world.support.get_username())
    assert outcomes(ledger_world.run)["INV-1"] == "absent"
    again = client.post(confirm, {"reason": "full", "ledger_version": 0}, content_type="application/json")
    assert again.status_code == 409


def test_the_api_explains_a_duplicate_and_readers_may_not(ledger_world: LedgerWorld) -> None:
    eleven_items(ledger_world)
    url = f"/api/v1/runs/{ledger_world.run.public_id}/items/explain-duplicate/"
    data = {"record_id": "X-1", "reason": "test record", "evidence_ref": "T-1"}

    assert client_for(ledger_world.auditor).post(url, data, content_type="application/json").status_code == 403
    answer = client_for(ledger_world.support).post(url, data, content_type="application/json")

    assert answer.status_code == 200
    assert (answer.json()["is_possible_duplicate"], answer.json()["duplicate_explained_by"]) == (
        False,
        ledger_world.support.get_username(),
    )
    long = client_for(ledger_world.support).post(
        url, {**data, "record_id": "INV-5", "evidence_ref": "x" * 301}, content_type="application/json"
    )
    assert long.status_code == 400 and "evidence_ref" in long.json()["errors"]


# --- the page ------------------------------------------------------------------------------------------


def test_the_page_shows_the_waiting_load_its_list_and_confirms_it(ledger_world: LedgerWorld) -> None:
    eleven_items(ledger_world)
    client = Client()
    client.force_login(ledger_world.support)
    run_url = f"/runs/{ledger_world.run.public_id}/"
    upload = SimpleUploadedFile("d2.csv", csv("record_id,reference", "INV-6,r6"), content_type="text/csv")

    answer = client.post(
        run_url + "items/loads/", {"destination": upload, "is_destination_complete": "on"}, follow=True
    )

    html = answer.content.decode()
    assert "would weaken 6 records" in html and "ledger-awaiting" in html
    assert "Destination export #2" in html and "completed → absent" in html
    waiting = WorkItemLoad.objects.get(run=ledger_world.run, kind="destination", number=2)
    listing = client.get(run_url + f"items/loads/{waiting.public_id}/weakened.csv")
    assert listing["Content-Type"].startswith("text/csv")
    assert listing.content.decode().splitlines()[1:3] == ["INV-1,completed,absent,no", "INV-2,completed,absent,no"]

    client.post(
        run_url + f"items/loads/{waiting.public_id}/confirm/",
        {"reason": "the export is complete", "ledger_version": waiting.preview_version},
    )

    waiting.refresh_from_db()
    assert (waiting.status, waiting.confirm_reason) == ("committed", "the export is complete")
    assert "ledger-awaiting" not in client.get(run_url).content.decode()

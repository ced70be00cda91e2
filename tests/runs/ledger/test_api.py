"""The work ledger's API: items paged by key, uploads with line-naming errors, changes, verification,
totals and failure class, search across runs; visibility (404), read-only roles (403), query budgets."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, override_settings
from knox.models import AuthToken

from runs.attempts.models import Run
from runs.catalog.services import role_grant
from runs.ledger.models import WorkItem, WorkItemLoad
from runs.timeline.models import TimelineEvent
from tests.factories import RunFactory
from tests.runs.ledger_support import POPULATION, LedgerWorld, csv, ledger_world, load

pytestmark = pytest.mark.django_db
__all__ = ["ledger_world"]


def client_for(user: Any) -> Client:
    _, token = AuthToken.objects.create(user=user)
    return Client(HTTP_AUTHORIZATION=f"Token {token}")


def base(world: LedgerWorld) -> str:
    return f"/api/v1/runs/{world.run.public_id}/items/"


def upload(client: Client, world: LedgerWorld, **files: Any) -> Any:
    data: dict[str, Any] = {
        kind: SimpleUploadedFile(f"{kind}.csv", content, content_type="text/csv")
        for kind, content in files.items()
        if isinstance(content, bytes)
    }
    data.update({k: v for k, v in files.items() if not isinstance(v, bytes)})
    return client.post(base(world) + "loads/", data=data)


def many_items(world: LedgerWorld, count: int = 120) -> None:
    ids = [f"INV-{n:04d}" for n in range(count)]
    load(
        world,
        population=csv("record_id", *ids),
        runner_report=csv("record_id,status", *(f"{i},completed" for i in ids[::3])),
    )


def test_items_are_paged_by_key_with_cursor_links(ledger_world: LedgerWorld) -> None:
    many_items(ledger_world)
    client = client_for(ledger_world.auditor)  # a reader may read

    first = client.get(base(ledger_world) + "?page_size=50").json()
    assert set(first) == {"next", "previous", "results"}
    assert [r["record_id"] for r in first["results"]][:2] == ["INV-0000", "INV-0001"]
    assert first["next"].startswith("http://testserver/api/v1/runs/") and "cursor=" in first["next"]
    second = client.get(first["next"]).json()
    third = client.get(second["next"]).json()

    seen = [r["record_id"] for page in (first, second, third) for r in page["results"]]
    assert seen == [f"INV-{n:04d}" for n in range(120)]
    assert third["next"] is None
    row = first["results"][0]
    assert (row["outcome"], row["runner_status"], row["evidence_kind"], row["is_eligible"]) == (
        "uncertain",
        "completed",
        "runner_report",
        True,
    )
    assert row["evidence_summary"] == "the runner claims it done; the destination cannot confirm it"


def test_item_filters(ledger_world: LedgerWorld) -> None:
    many_items(ledger_world, 30)
    load(ledger_world, destination=csv("record_id,reference", "INV-0001,g", "X-1,gx"))
    client = client_for(ledger_world.support)

    uncertain = client.get(base(ledger_world) + "?outcome=uncertain").json()["results"]
    duplicates = client.get(base(ledger_world) + "?possible_duplicate=true").json()["results"]
    one = client.get(base(ledger_world) + "?record_id=INV-0001").json()["results"]

    assert {r["outcome"] for r in uncertain} == {"uncertain"} and len(uncertain) == 10
    assert [r["record_id"] for r in duplicates] == ["X-1"]
    assert [(r["record_id"], r["outcome"], r["destination_ref"]) for r in one] == [("INV-0001", "completed", "g")]


def test_item_list_query_budget(ledger_world: LedgerWorld, django_assert_max_num_queries: Any) -> None:
    many_items(ledger_world)
    client = client_for(ledger_world.support)

    # token and user; the run (visibility inline: tenant roles, owned jobs); the page of items
    with django_assert_max_num_queries(6):
        response = client.get(base(ledger_world))
    assert len(response.json()["results"]) == 50


def test_upload_loads_at_once_and_answers_with_the_batch(ledger_world: LedgerWorld) -> None:
    response = upload(
        client_for(ledger_world.support),
        ledger_world,
        population=POPULATION,
        destination=csv("ref,invoice", "g1,A1"),
        destination_id_column="invoice",
        ref_column="ref",
        is_destination_complete="true",
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert [ld["kind"] for ld in body["loads"]] == ["population", "destination"]
    assert {ld["status"] for ld in body["loads"]} == {"committed"}
    assert body["loads"][1]["is_destination_complete"] is True
    assert body["loads"][0]["progress"] == {"phase": "committed", "percent": 100, "message": "loaded"}
    run = Run.objects.get(pk=ledger_world.run.pk)
    assert (run.eligible_count, run.completed_count, run.absent_count) == (5, 1, 4)


def test_a_bad_upload_is_a_problem_naming_line_and_column(ledger_world: LedgerWorld) -> None:
    response = upload(client_for(ledger_world.support), ledger_world, population=csv("record_id,amount", "A1,1", ",2"))

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert (body["line"], body["column"]) == (3, "record_id")
    assert body["detail"] == "Line 3, column 'record_id': the record id is empty."
    assert body["errors"] == {"file": [body["detail"]]}
    assert not WorkItem.objects.exists()
    assert WorkItemLoad.objects.get().status == "failed"


def test_an_upload_without_files_is_invalid(ledger_world: LedgerWorld) -> None:
    response = upload(client_for(ledger_world.support), ledger_world, id_column="record_id")

    assert response.status_code == 400 and "file" in response.json()["errors"]
    assert not WorkItemLoad.objects.exists() and not WorkItem.objects.exists()


@override_settings(HANDOVER_LEDGER_MAX_UPLOAD_BYTES=10)
def test_an_upload_over_the_limit_is_413(ledger_world: LedgerWorld) -> None:
    response = upload(client_for(ledger_world.support), ledger_world, population=POPULATION)

    assert response.status_code == 413
    assert "the limit is 10 bytes" in response.json()["detail"]
    assert not WorkItemLoad.objects.exists()


@override_settings(HANDOVER_LEDGER_SYNC_MAX_BYTES=10)
def test_a_large_upload_is_accepted_and_its_progress_polled(
    ledger_world: LedgerWorld, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    queued: list[int] = []
    monkeypatch.setattr("runs.ledger.tasks.work_item_load_run.delay", queued.append)
    client = client_for(ledger_world.support)

    with django_capture_on_commit_callbacks(execute=True):
        response = upload(client, ledger_world, population=POPULATION)

    assert response.status_code == 202
    (pending,) = response.json()["loads"]
    assert (pending["status"], pending["progress"]["phase"]) == ("pending", "queued")
    from runs.ledger import tasks as ledger_tasks

    ledger_tasks.work_item_load_run(queued[0])
    polled = client.get(base(ledger_world) + f"loads/{pending['id']}/").json()
    assert (polled["status"], polled["row_count"], polled["progress"]["percent"]) == ("committed", 5, 100)
    listed = client.get(base(ledger_world) + "loads/").json()
    assert listed["count"] == 1 and listed["results"][0]["id"] == pending["id"]


@pytest.mark.parametrize("who", ["auditor", "business_owner"])
def test_readers_get_403_on_every_write(ledger_world: LedgerWorld, who: str) -> None:
    load(ledger_world, population=POPULATION, runner_report=csv("record_id,status", "A1,completed"))
    client = client_for(getattr(ledger_world, who))

    responses = [
        upload(client, ledger_world, population=POPULATION),
        client.post(base(ledger_world) + "change/", {"record_id": "A1", "outcome": "absent", "note": "x"}),
        client.post(base(ledger_world) + "verify/", {"record_id": "A1", "found": False}),
        client.post(base(ledger_world) + "failure-class/", {"failure_class": "undetermined", "note": "x"}),
    ]

    assert [r.status_code for r in responses] == [403, 403, 403, 403]
    assert client.get(base(ledger_world)).status_code == 200
    assert WorkItemLoad.objects.count() == 2 and not WorkItem.objects.filter(evidence_kind="manual").exists()


@pytest.mark.parametrize("who", ["auditor", "business_owner", "outsider"])
def test_permission_is_checked_before_the_body_so_a_bad_body_is_403_or_404_not_400(
    ledger_world: LedgerWorld, who: str
) -> None:
    # found: a reader posting an invalid body got the 400 (naming the fields a write needs), not the 403
    load(ledger_world, population=POPULATION)
    client = client_for(getattr(ledger_world, who))
    load_id = WorkItemLoad.objects.get().public_id
    events = TimelineEvent.objects.count()

    responses = [
        client.post(base(ledger_world) + "loads/", {}),  # no file at all
        client.post(base(ledger_world) + "change/", {"outcome": "no-such-outcome"}),
        client.post(base(ledger_world) + "verify/", {"found": "perhaps"}),
        client.post(base(ledger_world) + "failure-class/", {"failure_class": 7}, content_type="application/json"),
        client.post(base(ledger_world) + f"loads/{load_id}/retry/"),
    ]

    expected = 404 if who == "outsider" else 403  # may not see the run at all / may see it but not change it
    assert [r.status_code for r in responses] == [expected] * 5
    assert all(r["Content-Type"] == "application/problem+json" for r in responses)
    assert all("errors" not in r.json() for r in responses), "nothing about the body is told"
    assert WorkItemLoad.objects.count() == 1 and not WorkItem.objects.filter(evidence_kind="manual").exists()
    assert TimelineEvent.objects.count() == events


def test_a_writer_still_gets_400_for_a_bad_body(ledger_world: LedgerWorld) -> None:
    events = TimelineEvent.objects.count()
    response = client_for(ledger_world.support).post(base(ledger_world) + "change/", {"outcome": "no-such-outcome"})
    assert response.status_code == 400 and set(response.json()["errors"]) >= {"record_id", "outcome", "note"}
    assert TimelineEvent.objects.count() == events and not WorkItem.objects.filter(evidence_kind="manual").exists()


def test_another_tenants_run_is_404_for_every_ledger_path(ledger_world: LedgerWorld) -> None:
    load(ledger_world, population=POPULATION)
    client = client_for(ledger_world.outsider)
    load_id = WorkItemLoad.objects.get().public_id

    responses = [
        client.get(base(ledger_world)),
        client.get(base(ledger_world) + "summary/"),
        client.get(base(ledger_world) + "changes/"),
        client.get(base(ledger_world) + "loads/"),
        client.get(base(ledger_world) + f"loads/{load_id}/"),
        upload(client, ledger_world, population=POPULATION),
        client.post(base(ledger_world) + "change/", {"record_id": "A1", "outcome": "absent", "note": "x"}),
        client.post(base(ledger_world) + "verify/", {"record_id": "A1", "found": False}),
    ]

    assert {r.status_code for r in responses} == {404}
    assert WorkItemLoad.objects.count() == 1


def test_change_and_verify_through_the_api(ledger_world: LedgerWorld) -> None:
    load(ledger_world, population=POPULATION, runner_report=csv("record_id,status", "A1,completed", "A2,completed"))
    client = client_for(ledger_world.support)

    changed = client.post(
        base(ledger_world) + "change/",
        {"record_id": "A1", "outcome": "rejected", "note": "refused", "evidence_ref": "T-1"},
    )
    verified = client.post(base(ledger_world) + "verify/", {"record_id": "A2", "found": True, "reference": "op-2"})
    again = client.post(base(ledger_world) + "verify/", {"record_id": "A2", "found": False})
    history = client.get(base(ledger_world) + "changes/").json()["results"]

    assert changed.status_code == 200 and changed.json()["outcome"] == "rejected"
    assert changed.json()["evidence_by"] == ledger_world.support.username
    assert verified.json()["outcome"] == "completed" and verified.json()["evidence_ref"] == "op-2"
    assert again.status_code == 409
    assert [(h["record_id"], h["kind"], h["to_outcome"]) for h in history] == [
        ("A2", "verify", "completed"),
        ("A1", "change", "rejected"),
    ]


def test_summary_is_never_reconciled_while_anything_is_unresolved(ledger_world: LedgerWorld) -> None:
    client = client_for(ledger_world.support)
    assert client.get(base(ledger_world) + "summary/").json()["is_reconciled"] is False  # no ledger yet

    load(ledger_world, population=csv("record_id", "A1", "A2"), destination=csv("record_id,reference", "A1,g"))
    summary = client.get(base(ledger_world) + "summary/").json()
    assert (summary["is_reconciled"], summary["unresolved_count"], summary["unverified_count"]) == (False, 1, 1)

    load(ledger_world, complete=True, destination=csv("record_id,reference", "A1,g", "A2,g"))
    summary = client.get(base(ledger_world) + "summary/").json()
    assert (summary["is_reconciled"], summary["completed_count"]) == (True, 2)
    assert summary["failure_class_suggested"] == "completed_ack_lost"


def test_failure_class_confirmation_through_the_api(ledger_world: LedgerWorld) -> None:
    load(ledger_world, population=POPULATION)
    client = client_for(ledger_world.support)

    refused = client.post(base(ledger_world) + "failure-class/", {"failure_class": "never_started"})
    confirmed = client.post(base(ledger_world) + "failure-class/", {"failure_class": "never_started", "note": "no log"})

    assert refused.status_code == 400 and "note" in refused.json()["errors"]
    assert confirmed.status_code == 200
    assert (confirmed.json()["failure_class"], confirmed.json()["failure_class_confirmed_by"]) == (
        "never_started",
        ledger_world.support.username,
    )
    assert TimelineEvent.objects.filter(run=ledger_world.run, kind="failure_class_confirmed").count() == 1


def test_search_finds_a_record_in_every_visible_run_only(ledger_world: LedgerWorld) -> None:
    load(ledger_world, population=csv("record_id", "INV-1003", "INV-1004"))
    sibling = RunFactory(job=ledger_world.run.job, tenant=ledger_world.run.tenant)
    hidden = RunFactory()
    for run in (sibling, hidden):
        WorkItem.objects.create(run=run, record_id="INV-1003")
    role_grant(user=ledger_world.auditor, role="auditor", obj=ledger_world.run.tenant)

    found = client_for(ledger_world.auditor).get("/api/v1/items/?record_id=INV-1003").json()
    nothing = client_for(ledger_world.outsider).get("/api/v1/items/?record_id=INV-1004").json()

    assert found["count"] == 2
    assert {r["run"]["id"] for r in found["results"]} == {str(ledger_world.run.public_id), str(sibling.public_id)}
    assert found["results"][0]["run"]["tenant"] == ledger_world.run.tenant.slug
    assert nothing["count"] == 0


def test_the_schema_documents_the_ledger_paths() -> None:
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    paths = [p for p in schema["paths"] if "items" in p]

    assert "/api/v1/runs/{id}/items/" in paths and "/api/v1/items/" in paths
    upload_op = schema["paths"]["/api/v1/runs/{id}/items/loads/"]["post"]
    assert set(upload_op["responses"]) >= {"201", "202", "400", "403", "404", "413"}

"""The run page's work ledger and its forms: honest totals and bar, prominent possible duplicates,
uploads with line-naming errors, items paged by key, read-only roles, query budget, progress polling."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, override_settings

from runs.ledger.models import WorkItem, WorkItemLoad
from runs.timeline.models import TimelineEvent
from tests.factories import RunFactory
from tests.runs.ledger_support import POPULATION, LedgerWorld, csv, ledger_world, load, outcomes

pytestmark = pytest.mark.django_db
__all__ = ["ledger_world"]


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def page(world: LedgerWorld, user: Any, query: str = "") -> Any:
    return logged_in(user).get(f"/runs/{world.run.public_id}/{query}")


def demo_like(world: LedgerWorld) -> None:
    load(
        world,
        population=csv("record_id,skip_reason", "A1,", "A2,", "A3,", "A4,", "A5,credit note"),
        runner_report=csv("record_id,status", "A1,completed", "A2,completed", "A3,failed"),
        destination=csv("record_id,reference", "A1,g1", "A1,g1b", "X9,gx"),
    )


def test_run_page_shows_totals_bar_and_is_not_fine_while_unresolved(ledger_world: LedgerWorld) -> None:
    demo_like(ledger_world)

    response = page(ledger_world, ledger_world.auditor)

    html = response.content.decode()
    assert response.status_code == 200
    ledger = response.context["ledger"]
    assert ledger["headline_class"] == "bad"
    assert ledger["headline"] == "Not reconciled: 2 of 4 eligible records unresolved (1 uncertain, 1 unverified)."
    assert [(s["outcome"], s["count"]) for s in ledger["segments"]] == [
        ("completed", 1),
        ("rejected", 1),
        ("uncertain", 1),
        ("unverified", 1),
        ("skipped", 1),
    ]
    # one fifth of the bar (SVG geometry: the CSP refuses inline style attributes)
    assert '<rect class="seg seg-completed" x="0.0" y="0" width="200.0" height="18">' in html
    assert "Reconciled:" not in html
    # possible duplicates, prominently, before the totals
    assert html.index("2 possible duplicates") < html.index("ledger-totals")
    assert "<code>X9</code> — in the destination but not in the eligible population" in html
    assert "<code>A1</code> — in the destination export 2 times" in html
    # a reader sees no forms
    assert ledger["writable"] is False and "Load record ids" not in html and "Change an item" not in html


def test_a_run_without_ledger_says_so_and_a_reconciled_one_says_that(ledger_world: LedgerWorld) -> None:
    assert page(ledger_world, ledger_world.support).context["ledger"]["headline"].startswith("No work ledger yet")

    load(ledger_world, complete=True, population=csv("record_id", "A1"), destination=csv("record_id,reference", "A1,g"))

    ledger = page(ledger_world, ledger_world.support).context["ledger"]
    assert (ledger["headline_class"], ledger["headline"]) == (
        "ok",
        "Reconciled: every eligible record is confirmed in the destination or skipped.",
    )


def test_support_uploads_through_the_form(ledger_world: LedgerWorld) -> None:
    client = logged_in(ledger_world.support)
    assert "Load record ids" in page(ledger_world, ledger_world.support).content.decode()

    response = client.post(
        f"/runs/{ledger_world.run.public_id}/items/loads/",
        {
            "population": SimpleUploadedFile("pop.csv", POPULATION),
            "destination": SimpleUploadedFile("gw.csv", csv("invoice,reference", "A1,g1")),
            "destination_id_column": "invoice",
            "id_column": "record_id",
            "file_format": "auto",
            "is_destination_complete": "on",
        },
        follow=True,
    )

    assert response.redirect_chain[-1][0].endswith(f"/runs/{ledger_world.run.public_id}/#ledger")
    assert "Loaded: Eligible population #1 (5), Destination export #1 (1)" in response.content.decode()
    assert outcomes(ledger_world.run) == {
        "A1": "completed",
        "A2": "absent",
        "A3": "absent",
        "A4": "absent",
        "A5": "absent",
    }


def test_a_bad_upload_shows_the_line_and_loads_nothing(ledger_world: LedgerWorld) -> None:
    response = logged_in(ledger_world.support).post(
        f"/runs/{ledger_world.run.public_id}/items/loads/",
        {"population": SimpleUploadedFile("pop.csv", b"record_id\r\nA1\nA2\r\n"), "id_column": "record_id"},
        follow=True,
    )

    html = response.content.decode()
    assert "Nothing was loaded. Line 2: mixed line endings" in html
    assert not WorkItem.objects.exists()
    assert WorkItemLoad.objects.get().error_line == 2


@pytest.mark.parametrize(("who", "status"), [("auditor", 403), ("business_owner", 403), ("outsider", 404)])
def test_readers_get_403_and_strangers_404_on_the_forms(ledger_world: LedgerWorld, who: str, status: int) -> None:
    load(ledger_world, population=POPULATION, runner_report=csv("record_id,status", "A1,completed"))
    client = logged_in(getattr(ledger_world, who))
    prefix = f"/runs/{ledger_world.run.public_id}/items/"

    responses = [
        client.post(
            prefix + "loads/", {"population": SimpleUploadedFile("p.csv", POPULATION), "id_column": "record_id"}
        ),
        client.post(prefix + "change/", {"record_id": "A1", "outcome": "absent", "note": "x"}),
        client.post(prefix + "verify/", {"record_id": "A1", "found": "no"}),
        client.post(prefix + "failure-class/", {"failure_class": "undetermined", "note": "x"}),
    ]

    assert [r.status_code for r in responses] == [status] * 4
    assert WorkItemLoad.objects.count() == 2 and outcomes(ledger_world.run)["A1"] == "uncertain"
    ledger_world.run.refresh_from_db()
    assert ledger_world.run.failure_class_confirmed_at is None
    assert not TimelineEvent.objects.filter(
        run=ledger_world.run, kind__in=["work_item_changed", "work_item_verified", "failure_class_confirmed"]
    ).exists()


def test_verify_change_and_confirm_from_the_page(ledger_world: LedgerWorld) -> None:
    load(ledger_world, population=POPULATION, runner_report=csv("record_id,status", "A1,completed", "A2,completed"))
    client = logged_in(ledger_world.support)
    prefix = f"/runs/{ledger_world.run.public_id}/items/"

    client.post(prefix + "verify/", {"record_id": "A1", "found": "yes", "reference": "op-1"})
    client.post(prefix + "change/", {"record_id": "A2", "outcome": "absent", "note": "gateway says no"})
    response = client.post(prefix + "failure-class/", {"failure_class": "partially_committed"}, follow=True)

    assert outcomes(ledger_world.run)["A1"] == "completed" and outcomes(ledger_world.run)["A2"] == "absent"
    assert "Failure class confirmed." in response.content.decode()
    assert "Partially committed" in response.content.decode()
    ledger_world.run.refresh_from_db()
    assert ledger_world.run.failure_class == "partially_committed"
    assert ledger_world.run.failure_class_confirmed_by == ledger_world.support
    kinds = set(TimelineEvent.objects.filter(run=ledger_world.run).values_list("kind", flat=True))
    assert {"work_item_verified", "work_item_changed", "failure_class_confirmed"} <= kinds


def test_items_page_by_key_and_filter_by_outcome(ledger_world: LedgerWorld) -> None:
    ids = [f"INV-{n:03d}" for n in range(120)]
    load(ledger_world, population=csv("record_id", *ids), runner_report=csv("record_id,status", "INV-007,failed"))

    first = page(ledger_world, ledger_world.support).context["ledger"]["page"]
    second = page(ledger_world, ledger_world.support, f"?after={first.last_key}").context["ledger"]["page"]
    back = page(ledger_world, ledger_world.support, f"?before={second.first_key}").context["ledger"]["page"]
    rejected = page(ledger_world, ledger_world.support, "?outcome=rejected").context["ledger"]["page"]
    none = page(ledger_world, ledger_world.support, "?outcome=absent").context["ledger"]["page"]

    assert [i.record_id for i in first.items] == ids[:50] and first.has_next and not first.has_previous
    assert [i.record_id for i in second.items] == ids[50:100] and second.has_previous
    assert [i.record_id for i in back.items] == ids[:50]
    assert [i.record_id for i in rejected.items] == ["INV-007"]
    assert none is None  # the stored count says there are none: no query
    html = page(ledger_world, ledger_world.support).content.decode()
    assert f"after={first.last_key}#ledger-items" in html


def test_run_page_query_budget_with_a_ledger(ledger_world: LedgerWorld, django_assert_max_num_queries: Any) -> None:
    demo_like(ledger_world)
    ids = [f"INV-{n:03d}" for n in range(120)]
    load(ledger_world, population=csv("record_id", *ids))
    client = logged_in(ledger_world.support)

    # session, user, preference; run; attempts; runner reports; timeline; checks; two permission
    # checks (support on the tenant: user and group permissions); loads; possible duplicates; items;
    # the slot rules' flags (unexplained re-fires, the target's recent durations)
    with django_assert_max_num_queries(16):
        response = client.get(f"/runs/{ledger_world.run.public_id}/")
    assert len(response.context["ledger"]["page"].items) == 50


@override_settings(HANDOVER_LEDGER_SYNC_MAX_BYTES=10)
def test_the_progress_bar_polls_until_the_load_is_done(
    ledger_world: LedgerWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("runs.ledger.tasks.work_item_load_run.delay", lambda load_id: None)
    (pending,) = load(ledger_world, population=POPULATION)
    client = logged_in(ledger_world.support)
    url = f"/runs/{ledger_world.run.public_id}/items/loads/{pending.public_id}/progress/?polling=1"

    running = client.get(url, HTTP_HX_REQUEST="true")
    assert 'hx-trigger="every 1s"' in running.content.decode() and "<progress" in running.content.decode()
    assert 'hx-trigger="every 1s"' in page(ledger_world, ledger_world.support).content.decode()

    from runs.ledger import tasks as ledger_tasks

    ledger_tasks.work_item_load_run(pending.pk)
    done = client.get(url, HTTP_HX_REQUEST="true")
    assert done["HX-Refresh"] == "true" and "every 1s" not in done.content.decode()
    assert logged_in(ledger_world.outsider).get(url).status_code == 404


def test_search_page_finds_a_record_across_visible_runs(ledger_world: LedgerWorld) -> None:
    load(ledger_world, population=csv("record_id", "INV-1003"))
    other = RunFactory()
    WorkItem.objects.create(run=other, record_id="INV-1003")

    response = logged_in(ledger_world.support).get("/items/search/?record_id=INV-1003")

    assert [i.run for i in response.context["items"]] == [ledger_world.run]
    assert ledger_world.run.job.key in response.content.decode()
    assert logged_in(ledger_world.outsider).get("/items/search/?record_id=INV-1003").context["items"] == []

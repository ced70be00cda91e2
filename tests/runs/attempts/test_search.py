"""Prefix search on the lists, in any case: runs (job key or name, tenant slug or name, execution id,
correlation reference), handovers (title) and records (record id); served by prefix indexes, with a
query count that does not grow with the matches."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from handover.handovers.selectors import handover_list
from handover.handovers.services import handover_create
from runs.attempts.selectors import run_list
from runs.ledger.models import WorkItem
from runs.ledger.selectors import work_item_search
from tests.factories import AttemptFactory, JobFactory, RunFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def runs() -> dict[str, Any]:
    invoice = RunFactory(job=JobFactory(key="nightly-invoice-export", name="Invoice export"), tenant=TenantFactory())
    pricing = RunFactory(job=JobFactory(key="pricing-refresh", name="Cache"), tenant=TenantFactory(slug="acme-foods"))
    other = RunFactory(job=JobFactory(key="ledger-close", name="Ledger"), tenant=TenantFactory(slug="borealis"))
    AttemptFactory(run=other, execution_id="LG-7f3b11-0002", correlation_ref="corr-991")
    return {"invoice": invoice, "pricing": pricing, "other": other}


@pytest.mark.parametrize(
    ("term", "found"),
    [
        ("NIGHTLY-inv", {"invoice"}),  # job key, any case
        ("invoice", {"invoice"}),  # job name
        ("ACME", {"pricing"}),  # tenant slug
        ("lg-7F3B", {"other"}),  # execution id
        ("CORR-99", {"other"}),  # correlation reference
        ("export", set()),  # a prefix, not a substring
        ("7f3b", set()),
    ],
)
def test_run_search_is_a_case_insensitive_prefix_match(runs: dict[str, Any], term: str, found: set[str]) -> None:
    admin = UserFactory(admin=True)

    listed = {run.pk for run in run_list(user=admin, search=term)}

    assert listed == {runs[name].pk for name in found}


def test_run_search_on_the_page_and_the_api_and_its_query_count_does_not_grow(runs: dict[str, Any]) -> None:
    admin = UserFactory(admin=True)
    client = logged_in(admin)
    client.get("/runs/")

    def page_queries() -> tuple[int, str]:
        with CaptureQueriesContext(connection) as ctx:
            html = client.get("/runs/?q=Nightly").content.decode()
        return len(ctx.captured_queries), html

    few, html = page_queries()
    for _ in range(6):
        RunFactory(job=runs["invoice"].job, tenant=TenantFactory())
    many, html_many = page_queries()

    assert "nightly-invoice-export" in html and "pricing-refresh" not in html
    assert html_many.count('href="/runs/') >= 7
    assert many == few
    assert client.get("/api/v1/runs/?search=ACME").json()["count"] == 1


def test_handover_search_finds_titles_by_prefix_in_any_case(runs: dict[str, Any]) -> None:
    admin = UserFactory(admin=True)
    first = handover_create(actor=admin, runs=[runs["invoice"]])
    handover_create(actor=admin, runs=[runs["pricing"]])

    found = list(handover_list(user=admin, search=first.title[:10].upper()))
    html = logged_in(admin).get("/handovers/", {"q": first.title[:10].lower()}).content.decode()

    assert [h.pk for h in found] == [first.pk]
    assert first.title in html and "pricing-refresh" not in html


def test_record_search_finds_record_ids_by_prefix_exact_match_first(runs: dict[str, Any]) -> None:
    admin = UserFactory(admin=True)
    run = runs["invoice"]
    for record_id in ("INV-1003", "INV-10030", "INV-2000"):
        WorkItem.objects.create(run=run, record_id=record_id)

    found = [item.record_id for item in work_item_search(user=admin, record_id="inv-1003")]

    assert found == ["INV-1003", "INV-10030"]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the expression indexes and their plans are PostgreSQL's")
def test_prefix_searches_use_the_prefix_indexes_on_postgresql(runs: dict[str, Any]) -> None:
    from runs.attempts.models import Attempt

    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        for queryset, index in (
            (Attempt.objects.filter(execution_id__istartswith="lg-7f"), "runs_attempt_exec_prefix_idx"),
            (WorkItem.objects.filter(record_id__istartswith="inv-1"), "runs_workitem_rec_prefix_idx"),
        ):
            assert index in queryset.explain()
        cursor.execute("RESET enable_seqscan")

"""Capped list counts: pages and API lists count at most ``LIST_COUNT_CAP + 1`` rows ("10,000+"),
further only as deep as the page asked for; tested with the cap patched down to 5."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.paginator import EmptyPage
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from handover.core.pagination import CappedPaginator, CountedApart, capped_label, count_at_most, counts_at_most
from runs.attempts.models import Run
from runs.catalog.models import Tenant
from tests.factories import JobFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture
def cap5(settings: Any) -> int:
    settings.LIST_COUNT_CAP = 5
    return 5


def bulk_runs(count: int) -> list[Run]:
    """``count`` failed runs of one job and tenant, one hourly window each (newest last)."""
    job, tenant = JobFactory(), TenantFactory()
    return Run.objects.bulk_create(
        Run(
            job=job,
            tenant=tenant,
            environment="prod",
            window_start=T0 + timedelta(hours=n),
            window_end=T0 + timedelta(hours=n + 1),
            scheduled_for=T0 + timedelta(hours=n + 1),
            status=Run.Status.FAILED,
        )
        for n in range(count)
    )


def test_a_count_past_the_cap_stops_one_row_after_it_and_says_so(cap5: int) -> None:
    for n in range(8):
        TenantFactory(slug=f"t-{n}")
    paginator = CappedPaginator(Tenant.objects.order_by("pk"), 2)

    with CaptureQueriesContext(connection) as queries:
        count = paginator.count

    assert count == 6 and paginator.count_capped and paginator.shown_count == 5
    assert paginator.count_label == "5+" and paginator.num_pages_label == "2+"
    assert len(queries) == 1 and "LIMIT 6" in queries[0]["sql"].upper()


def test_a_count_under_the_cap_is_exact(cap5: int) -> None:
    for n in range(3):
        TenantFactory(slug=f"t-{n}")
    paginator = CappedPaginator(Tenant.objects.order_by("pk"), 2)

    assert paginator.count == 3 and not paginator.count_capped
    assert paginator.count_label == "3" and paginator.num_pages_label == "2" and paginator.shown_count == 3


def test_every_page_past_the_cap_is_reached_and_the_last_has_no_next(cap5: int) -> None:
    slugs = [f"t-{n}" for n in range(8)]
    for slug in slugs:
        TenantFactory(slug=slug)
    paginator = CappedPaginator(Tenant.objects.order_by("slug"), 2)

    walked: list[str] = []
    number = 1
    while True:
        page = paginator.page(number)
        walked.extend(t.slug for t in page)
        if not page.has_next():
            break
        number += 1

    assert walked == slugs and number == 4
    assert paginator.count == 8 and not paginator.count_capped  # counted again as far as page 4 reaches
    third = CappedPaginator(Tenant.objects.order_by("slug"), 2).page(3)
    assert [t.slug for t in third] == slugs[4:6] and third.has_next()
    assert third.paginator.count_label == "6+"  # counted to the end of page 3, and one more


def test_get_page_past_the_end_falls_back_to_the_last_page(cap5: int) -> None:
    for n in range(7):
        TenantFactory(slug=f"t-{n}")

    page = CappedPaginator(Tenant.objects.order_by("slug"), 2).get_page(99)

    assert page.number == 4 and [t.slug for t in page] == ["t-6"]


def test_a_page_number_past_any_database_limit_is_a_page_past_the_end(cap5: int) -> None:
    # a count's LIMIT grew with the page asked for, past a 64-bit integer: "bigint out of range" (the API fuzzer)
    for n in range(7):
        TenantFactory(slug=f"t-{n}")
    huge = 958814109908491648859373568

    page = CappedPaginator(Tenant.objects.order_by("slug"), 50).get_page(huge)

    assert page.number == 1 and len(page) == 7
    with pytest.raises(EmptyPage):
        CappedPaginator(Tenant.objects.order_by("slug"), 50).page(huge)
    client = Client()
    client.force_login(UserFactory(is_superuser=True, is_staff=True))
    assert client.get("/api/v1/jobs/", {"page": 1}).status_code == 200
    assert client.get("/api/v1/jobs/", {"page": huge}).status_code == 404


def test_counts_at_most_counts_several_lists_in_one_query(cap5: int) -> None:
    for n in range(7):
        TenantFactory(slug=f"t-{n}", name="even" if n % 2 == 0 else "odd")
    tenants = Tenant.objects.all()

    with CaptureQueriesContext(connection) as queries:
        counts = counts_at_most(
            {"even": tenants.filter(name="even"), "odd": tenants.filter(name="odd"), "none": tenants.none()}, 3
        )

    assert counts == {"even": 3, "odd": 3, "none": 0}
    assert len(queries) == 1
    assert count_at_most(tenants.filter(name="odd"), 10) == 3 and count_at_most([1, 2, 3], 2) == 2
    assert counts_at_most({}, 3) == {}


def test_counted_apart_pages_its_rows_and_counts_its_parts_in_turn_up_to_the_cap(cap5: int) -> None:
    for n in range(8):
        TenantFactory(slug=f"t-{n}", name="even" if n % 2 == 0 else "odd")
    tenants = Tenant.objects.order_by("slug")
    listed = CountedApart(rows=tenants, parts=[tenants.filter(name="even"), tenants.filter(name="odd")])
    paginator = CappedPaginator(listed, 3)

    with CaptureQueriesContext(connection) as queries:
        count = paginator.count
    with CaptureQueriesContext(connection) as reached:
        three = listed.count_at_most(3)
    second = paginator.page(2)

    assert count == 6 and paginator.count_capped  # 4, then 2 of 4: the cap and one more
    assert [q["sql"].upper().count("LIMIT 6") + 2 * q["sql"].upper().count("LIMIT 2") for q in queries] == [1, 2]
    assert three == 3 and len(reached) == 1  # the first part reached it: the second is not counted
    assert [t.slug for t in second] == ["t-3", "t-4", "t-5"] and listed.ordered
    assert listed.count() == len(listed) == 8 and listed[7].slug == "t-7"
    assert [t.slug for t in listed] == [f"t-{n}" for n in range(8)] and listed[6:20] == list(tenants[6:])


def test_capped_label_formats_past_the_cap(cap5: int) -> None:
    assert capped_label(5) == "5" and capped_label(6) == "5+" and capped_label(10_001, 10_000) == "10,000+"


def test_the_runs_api_gives_the_capped_count_and_count_capped(cap5: int) -> None:
    bulk_runs(7)
    client = Client()
    client.force_login(UserFactory(admin=True))

    first = client.get("/api/v1/runs/?page_size=2").json()
    third = client.get("/api/v1/runs/?page_size=2&page=3").json()
    fourth = client.get("/api/v1/runs/?page_size=2&page=4").json()
    everything = client.get("/api/v1/runs/?page_size=50").json()

    assert (first["count"], first["count_capped"], len(first["results"])) == (5, True, 2)
    assert list(first) == ["count", "count_capped", "next", "previous", "results"]
    assert (third["count"], third["count_capped"], third["next"] is not None) == (6, True, True)
    assert (fourth["count"], fourth["count_capped"], fourth["next"], len(fourth["results"])) == (7, False, None, 1)
    assert (everything["count"], everything["count_capped"]) == (7, False)


def test_the_runs_page_says_how_many_runs_past_the_cap(cap5: int) -> None:
    bulk_runs(52)  # page 1 of 50 reaches past the cap of 5: counted to 50, and one more
    client = Client()
    client.force_login(UserFactory(admin=True))

    html = client.get("/runs/").content.decode()
    last = client.get("/runs/?page=2").content.decode()

    assert "page 1 of 1+ · 50+ runs" in html and "older →" in html
    assert "page 2 of 2 · 52 runs" in last and "older →" not in last

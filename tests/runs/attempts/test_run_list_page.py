"""The runs list reads at a glance: business state, unresolved items, the last attempt and its trigger,
the open handover, one distinct link per run, and a query count that does not grow with the rows."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from handover.handovers.services import handover_create
from runs.attempts.models import Attempt, Run
from runs.attempts.selectors import run_list
from tests.factories import AttemptFactory, JobFactory, RunFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 27, 23, 0, tzinfo=UTC)


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def make_runs(count: int, job: Any = None, tenants: str = "acme") -> list[Run]:
    job = job or JobFactory(key="nightly-invoice-export")
    runs = []
    for n in range(count):
        run = RunFactory(
            job=job,
            tenant=TenantFactory(slug=f"{tenants}-{n}"),
            status=Run.Status.FAILED,
            window_start=T0 + timedelta(days=n),
            window_end=T0 + timedelta(days=n + 1),
            scheduled_for=T0 + timedelta(days=n + 1, hours=2),
            unresolved_count=n,
        )
        AttemptFactory(run=run, number=1, status=Attempt.Status.FAILED, started_at=run.scheduled_for)
        AttemptFactory(
            run=run,
            number=2,
            status=Attempt.Status.FAILED,
            trigger=Attempt.Trigger.MANUAL_REPLAY,
            started_at=run.scheduled_for + timedelta(hours=1),
        )
        runs.append(run)
    return runs


def test_run_list_annotates_the_last_attempt_and_the_open_handover() -> None:
    admin = UserFactory(admin=True)
    run = make_runs(1)[0]
    # a third attempt reported later but started earlier is not the last one
    AttemptFactory(
        run=run, number=3, status=Attempt.Status.SUCCEEDED, started_at=run.scheduled_for - timedelta(hours=1)
    )
    handover = handover_create(actor=admin, runs=[run])

    listed = run_list(user=admin).get(pk=run.pk)

    assert (listed.last_attempt_number, listed.last_attempt_trigger, listed.last_attempt_status) == (  # type: ignore[attr-defined]
        2,
        "manual_replay",
        "failed",
    )
    assert listed.last_attempt_started_at == run.scheduled_for + timedelta(hours=1)  # type: ignore[attr-defined]
    assert listed.open_handover_id == handover.public_id  # type: ignore[attr-defined]


def test_run_list_page_shows_state_unresolved_last_attempt_handover_and_distinct_link_text() -> None:
    admin = UserFactory(admin=True)
    runs = make_runs(3)
    handover = handover_create(actor=admin, runs=[runs[2]])

    html = logged_in(admin).get("/runs/").content.decode()

    links = re.findall(r'<a href="/runs/[0-9a-f-]{36}/">(.*?)</a>', html, re.S)
    texts = [re.sub(r"<[^>]+>", "", text) for text in links]
    assert len(texts) == 3 and len(set(texts)) == 3
    # job · tenant · environment · slot (the job's zone, Europe/Berlin: 01:00 UTC is 02:00 CET)
    assert "nightly-invoice-export · acme-2 · prod · 2026-12-01 02:00:00 CET" in texts
    assert "Manual replay" in html and "#2" in html
    assert f'href="/handovers/{handover.public_id}/"' in html
    assert "<strong>2</strong>" in html  # acme-2's two unresolved items
    assert "2026-11-28 00:00 – 2026-11-29 00:00 CET" in re.sub(r"<[^>]+>", "", html)


def test_run_list_page_query_count_does_not_grow_with_rows(django_assert_num_queries: Any) -> None:
    admin = UserFactory(admin=True)
    job = JobFactory()
    make_runs(2, job=job)
    client = logged_in(admin)
    client.get("/runs/")  # warm the session and content-type caches

    def count() -> int:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as ctx:
            assert client.get("/runs/").status_code == 200
        return len(ctx.captured_queries)

    few = count()
    make_runs(8, job=JobFactory(), tenants="cedar")
    # session, user, nav counts, the page's count and rows (attempts, last attempt, handover as subqueries),
    # the tenant filter's options: the same number for 2 rows and for 10
    assert count() == few
    assert few <= 10


def test_job_page_lists_its_latest_runs_with_the_same_columns_in_constant_queries() -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    admin = UserFactory(admin=True)
    job = JobFactory(key="nightly-invoice-export")
    make_runs(2, job=job)
    client = logged_in(admin)
    client.get(f"/jobs/{job.public_id}/")

    def fetch() -> tuple[int, str]:
        with CaptureQueriesContext(connection) as ctx:
            html = client.get(f"/jobs/{job.public_id}/").content.decode()
        return len(ctx.captured_queries), html

    few, html = fetch()
    make_runs(5, job=job, tenants="cedar")
    many, html_many = fetch()

    assert "nightly-invoice-export · acme-1 · prod · 2026-11-30 02:00:00 CET" in re.sub(r"<[^>]+>", "", html)
    assert "Manual replay" in html and 'id="recent-runs"' in html
    assert html_many.count("Manual replay") == 7
    # the page's queries do not follow the number of runs listed
    assert many == few

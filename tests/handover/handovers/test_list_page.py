"""The handovers list reads at a glance (each run's business state, unresolved items, window in the
job's zone) in a query count that does not grow with the rows; "needs attention" shows backticks as
code, escaped first."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from handover.handovers.models import Handover
from handover.handovers.services import handover_create
from runs.attempts.models import Run
from tests.factories import JobFactory, RunFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 27, 23, 0, tzinfo=UTC)


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def write_handovers(admin: Any, count: int, prefix: str) -> list[Handover]:
    job = JobFactory(key=f"{prefix}-export")
    return [
        handover_create(
            actor=admin,
            runs=[
                RunFactory(
                    job=job,
                    tenant=TenantFactory(slug=f"{prefix}-{n}"),
                    status=Run.Status.FAILED,
                    window_start=T0 + timedelta(days=n),
                    window_end=T0 + timedelta(days=n + 1),
                    unresolved_count=3,
                )
            ],
        )
        for n in range(count)
    ]


def test_handovers_list_shows_each_runs_state_and_window_in_constant_queries() -> None:
    admin = UserFactory(admin=True)
    write_handovers(admin, 2, "acme")
    client = logged_in(admin)
    client.get("/handovers/")

    def fetch() -> tuple[int, str]:
        with CaptureQueriesContext(connection) as ctx:
            html = client.get("/handovers/").content.decode()
        return len(ctx.captured_queries), html

    few, html = fetch()
    write_handovers(admin, 6, "cedar")
    many, html_many = fetch()

    text = re.sub(r"<[^>]+>", "", html)
    assert "acme-0 · prod · 2026-11-28 00:00 – 2026-11-29 00:00 CET" in text
    assert "3 ledger items unresolved" in text and "<strong>3</strong> unresolved" in html
    assert html_many.count('class="business-state"') == 8
    assert many == few


def test_needs_attention_shows_backticks_as_code_and_nothing_else_as_markup() -> None:
    admin = UserFactory(admin=True)
    handover = write_handovers(admin, 1, "acme")[0]
    Handover.objects.filter(pk=handover.pk).update(title="Rerun `nightly-x` <b>now</b>")

    html = logged_in(admin).get("/handovers/attention/").content.decode()

    assert "Rerun <code>nightly-x</code> &lt;b&gt;now&lt;/b&gt;" in html

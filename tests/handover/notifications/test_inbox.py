"""The inbox (/notifications/): filters by read state, kind, job and tenant; what it is about is kept
with each notification; backticks in subjects and bodies show as code, escaped first."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from handover.notifications.models import Notification
from handover.notifications.services import notify
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def inbox() -> Any:
    bea = UserFactory()
    notify(
        event="approval_needed",
        recipients=[bea],
        dedup_key="replay:1",
        link="/replays/",
        subject="Replay waiting: `nightly-invoice-export` · acme",
        body="Run `nightly-invoice-export` <b>failed</b>",
        job_key="nightly-invoice-export",
        tenant_slug="acme",
    )
    notify(
        event="check_failed",
        recipients=[bea],
        dedup_key="check:1",
        link="/checks/",
        subject="Next-run check failed: pricing-refresh",
        job_key="pricing-refresh",
        tenant_slug="borealis",
    )
    notify(
        event="handed_over",
        recipients=[bea],
        dedup_key="handover:1",
        subject="Handed over to you: two tenants",
        link="/handovers/",
    )
    Notification.objects.filter(dedup_key="check:1").update(
        read_at=Notification.objects.get(dedup_key="check:1").created_at
    )
    return bea


def subjects(client: Client, query: dict[str, str]) -> list[str]:
    html = client.get("/notifications/", query).content.decode()
    table = html[html.index('data-testid="notification-list"') :]
    return sorted(
        re.sub(r"<[^>]+>", "", row).split(":")[0].strip() for row in re.findall(r'<a href="/[^"]*">(.*?)</a>', table)
    )


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, ["Handed over to you", "Next-run check failed", "Replay waiting"]),
        ({"show": "unread"}, ["Handed over to you", "Replay waiting"]),
        ({"show": "read"}, ["Next-run check failed"]),
        ({"event": "check_failed"}, ["Next-run check failed"]),
        ({"job": "nightly-invoice-export"}, ["Replay waiting"]),
        ({"tenant": "borealis"}, ["Next-run check failed"]),
        ({"tenant": "borealis", "show": "unread"}, []),
        ({"event": "not-a-kind"}, ["Handed over to you", "Next-run check failed", "Replay waiting"]),
    ],
)
def test_inbox_filters_by_read_state_kind_job_and_tenant(
    inbox: Any, query: dict[str, str], expected: list[str]
) -> None:
    assert subjects(logged_in(inbox), query) == expected


def test_inbox_offers_the_kinds_jobs_and_tenants_it_holds_and_renders_backticks_as_code(inbox: Any) -> None:
    html = logged_in(inbox).get("/notifications/").content.decode()

    assert '<option value="check_failed">' in html and '<option value="pricing-refresh">' in html
    assert '<option value="borealis">' in html and '<option value="">any tenant</option>' in html
    assert "Replay waiting: <code>nightly-invoice-export</code> · acme" in html
    assert "Run <code>nightly-invoice-export</code> &lt;b&gt;failed&lt;/b&gt;" in html


def test_notifications_about_one_job_and_tenant_keep_them() -> None:
    bea = UserFactory()
    notify(event="approval_needed", recipients=[bea], dedup_key="r:2", subject="s", job_key="j", tenant_slug="t")

    row = Notification.objects.get(recipient=bea)

    assert (row.job_key, row.tenant_slug) == ("j", "t")

"""Lists that poll: htmx asks for the list's fragment with a conditional GET; an unchanged list answers
304 with the same ETag, a changed one 200 with a new ETag; full pages are never 304, and the fragment
shows when it was rendered."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from handover.handovers.services import handover_create
from handover.notifications.models import Notification
from handover.notifications.services import notification_mark_read, notify
from runs.attempts.models import Run
from tests.factories import RunFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def poll(client: Client, url: str, etag: str | None = None) -> Any:
    headers = dict(HTMX, **({"HTTP_IF_NONE_MATCH": etag} if etag else {}))
    return client.get(url, **headers)


def assert_unchanged_then_changed(client: Client, url: str, change: Any, marker: str) -> None:
    first = poll(client, url)
    assert first.status_code == 200
    assert marker in first.content.decode() and "<html" not in first.content.decode()  # the fragment alone
    assert "updated <time" in first.content.decode()
    etag = first["ETag"]
    assert first["Cache-Control"] == "private, no-cache" and "HX-Request" in first["Vary"]

    again = poll(client, url, etag)
    assert again.status_code == 304 and again["ETag"] == etag and again.content == b""

    change()
    changed = poll(client, url, etag)
    assert changed.status_code == 200 and changed["ETag"] != etag
    assert poll(client, url, changed["ETag"]).status_code == 304


def test_runs_list_answers_304_until_a_run_changes() -> None:
    admin = UserFactory(admin=True)
    run = RunFactory()
    client = logged_in(admin)

    def change() -> None:  # as the attempt service moves a run's status
        Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED, updated_at=timezone.now())

    assert_unchanged_then_changed(client, "/runs/", change, 'id="run-list-rows"')


def test_runs_list_etag_differs_per_viewer_and_per_filter() -> None:
    admin, other = UserFactory(admin=True), UserFactory(admin=True)
    RunFactory()
    etag = poll(logged_in(admin), "/runs/")["ETag"]

    assert poll(logged_in(other), "/runs/", etag).status_code == 200
    assert poll(logged_in(admin), "/runs/?status=failed", etag).status_code == 200


def test_handovers_list_answers_304_until_a_handover_is_written() -> None:
    admin = UserFactory(admin=True)
    run = RunFactory(status=Run.Status.FAILED)

    assert_unchanged_then_changed(
        logged_in(admin), "/handovers/", lambda: handover_create(actor=admin, runs=[run]), 'id="handover-list-rows"'
    )


def test_needs_attention_answers_304_until_a_run_fails() -> None:
    admin = UserFactory(admin=True)
    RunFactory()

    assert_unchanged_then_changed(
        logged_in(admin),
        "/handovers/attention/",
        lambda: RunFactory(status=Run.Status.FAILED, tenant=TenantFactory()),
        'id="attention-sections"',
    )


def test_inbox_answers_304_until_a_notification_arrives_or_is_read() -> None:
    bea = UserFactory()
    client = logged_in(bea)

    def tell() -> None:
        notify(event="approval_needed", recipients=[bea], dedup_key="replay:1", subject="Replay waiting")

    assert_unchanged_then_changed(client, "/notifications/", tell, 'id="notification-rows"')
    etag = poll(client, "/notifications/")["ETag"]
    notification_mark_read(user=bea)
    assert poll(client, "/notifications/", etag).status_code == 200
    assert Notification.objects.get(recipient=bea).read_at is not None


def test_full_pages_are_never_answered_304_and_carry_the_polling_attributes() -> None:
    admin = UserFactory(admin=True)
    client = logged_in(admin)
    etag = poll(client, "/runs/")["ETag"]

    page = client.get("/runs/", HTTP_IF_NONE_MATCH=etag)

    html = page.content.decode()
    assert page.status_code == 200 and "HX-Request" in page["Vary"]
    assert 'hx-get="/runs/" hx-trigger="every 30s" hx-swap="outerHTML"' in html

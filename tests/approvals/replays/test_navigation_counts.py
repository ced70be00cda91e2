"""The navigation's counts: needs attention, replays waiting for my approval, unread notifications —
their values for each person, one query for all three, computed once per request."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext

from handover.handovers.services import handover_create
from handover.notifications.context_processors import navigation_counts
from handover.notifications.models import Notification
from runs.attempts.models import Run
from tests.approvals.conftest import MakeRequest, World
from tests.factories import RunFactory

pytestmark = pytest.mark.django_db


def counts_for(user: Any) -> dict[str, int]:
    request = RequestFactory().get("/")
    request.user = user
    return navigation_counts(request)


def test_navigation_counts_are_each_persons_own(world: World, make_request: MakeRequest) -> None:
    Run.objects.filter(pk=world.run.pk).update(status=Run.Status.FAILED)
    make_request()  # by support: waits for the business owner and the technical owner
    Notification.objects.filter(recipient=world.business).update(read_at=None)
    unread_business = Notification.objects.filter(recipient=world.business, in_app=True, read_at__isnull=True).count()

    business, support, technical = counts_for(world.business), counts_for(world.support), counts_for(world.technical)

    assert business["approvals_waiting"] == 1 and technical["approvals_waiting"] == 1
    assert support["approvals_waiting"] == 0  # a requester never approves their own request
    assert business["unread_notifications"] == unread_business >= 1
    # the failed run has no handover yet: it waits for someone, for everyone who sees it
    assert support["attention_count"] == 1
    assert counts_for(world.other_business)["attention_count"] == 0

    handover_create(actor=world.support, runs=[world.run])  # covered now, but the draft names no owner
    assert counts_for(world.support)["attention_count"] == 1
    Notification.objects.filter(recipient=world.business).update(read_at=world.run.created_at)
    assert counts_for(world.business)["unread_notifications"] == 0


def test_navigation_counts_cost_one_query_once_per_request(world: World) -> None:
    request = RequestFactory().get("/")
    request.user = world.support
    with CaptureQueriesContext(connection) as ctx:
        first = navigation_counts(request)
        again = navigation_counts(request)
    assert first == again
    assert len(ctx.captured_queries) == 1


def test_navigation_shows_the_counts(world: World, make_request: MakeRequest) -> None:
    make_request()
    client = Client()
    client.force_login(world.business)

    html = client.get("/runs/").content.decode()

    assert 'data-testid="approvals-count" title="replay requests waiting for your approval">1<' in html


def test_needs_attention_counts_failed_runs_no_further_than_the_cap(world: World, settings: Any) -> None:
    settings.LIST_COUNT_CAP = 2
    for _ in range(3):  # with the world's run: four failed runs, none covered by a handover
        RunFactory(job=world.job, tenant=world.tenant, target=world.target, status=Run.Status.FAILED)
    client = Client()
    client.force_login(world.support)

    counts = counts_for(world.support)
    html = client.get("/runs/").content.decode()

    assert Run.objects.filter(tenant=world.tenant, status=Run.Status.FAILED).count() == 4
    assert counts["attention_count"] == 3  # counted to the cap and one more
    assert counts["attention_label"] == "2+"
    assert 'data-testid="attention-count"' in html and ">2+</span>" in html
    settings.LIST_COUNT_CAP = 10
    assert counts_for(world.support)["attention_label"] == "4"

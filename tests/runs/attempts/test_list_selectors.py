"""The list selectors' read shapes: the runs list's attempt count and the inbox's parts, order,
counts and paging (both grew with history), with the pages' query budgets."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.paginator import Paginator
from django.test import Client
from django.utils import timezone

from handover.core.pagination import CappedPaginator, count_reach
from runs.alerts.models import Alert
from runs.alerts.selectors import alert_inbox
from runs.attempts.models import Run
from runs.attempts.selectors import run_list, run_list_state
from runs.catalog.models import Integration
from runs.catalog.services import role_grant
from runs.timeline.models import TimelineEvent, TimelineEventKind
from runs.timeline.services import timeline_event_record
from tests.factories import AttemptFactory, RunFactory, TenantFactory, UserFactory
from tests.runs.attempts.helpers import make_alerts

pytestmark = pytest.mark.django_db


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_run_list_counts_attempts_per_run_including_none() -> None:
    admin = UserFactory(admin=True)
    empty = RunFactory()
    one = RunFactory()
    three = RunFactory()
    AttemptFactory(run=one)
    for number in (1, 2, 3):
        AttemptFactory(run=three, number=number, correlation_ref="corr-shared")

    counts = {run.pk: run.attempt_count for run in run_list(user=admin)}

    assert counts == {empty.pk: 0, one.pk: 1, three.pk: 3}


def test_run_list_search_matching_several_attempts_lists_the_run_once_with_all_its_attempts() -> None:
    admin = UserFactory(admin=True)
    run = RunFactory()
    for number in (1, 2):
        AttemptFactory(run=run, number=number, correlation_ref="corr-shared")
    AttemptFactory(run=run, number=3)
    RunFactory()

    found = list(run_list(user=admin, search="corr-shared"))

    assert [(r.pk, r.attempt_count) for r in found] == [(run.pk, 3)]
    assert run_list(user=admin, search="corr-shared").count() == 1


def test_run_list_pages_newest_window_first_with_filters_and_visibility() -> None:
    person = UserFactory()
    mine, other = TenantFactory(), TenantFactory()
    role_grant(user=person, role="support", obj=mine)
    runs = [RunFactory(tenant=mine, status=Run.Status.FAILED if n % 2 else Run.Status.SUCCEEDED) for n in range(7)]
    RunFactory(tenant=other)

    paginator = Paginator(run_list(user=person), 3)
    listed = [run.pk for number in paginator.page_range for run in paginator.page(number)]
    failed = run_list(user=person, status=Run.Status.FAILED)

    assert paginator.count == 7
    assert listed == [run.pk for run in sorted(runs, key=lambda r: r.window_start, reverse=True)]
    assert {run.pk for run in failed} == {run.pk for run in runs if run.status == Run.Status.FAILED}


def test_run_list_state_fingerprints_the_runs_a_page_reaches_and_counts_no_further(settings: Any) -> None:
    settings.LIST_COUNT_CAP = 3
    admin = UserFactory(admin=True)
    runs = [RunFactory() for _ in range(6)]  # the newest window last
    newest, oldest = runs[-1], runs[0]
    listed = run_list(user=admin)
    reach = count_reach(None, 2)  # page 1 of 2 a page: the cap and one more

    before = run_list_state(runs=listed, reach=reach)
    Run.objects.filter(pk=oldest.pk).update(updated_at=timezone.now())  # past the reach: not on any page counted
    unchanged = run_list_state(runs=listed, reach=reach)
    timeline_event_record(
        job=newest.job,
        tenant=newest.tenant,
        run=newest,
        kind=TimelineEventKind.FAILURE_CLASS_SUGGESTED,
        summary="Failure class suggested",
    )
    changed = run_list_state(runs=listed, reach=reach)
    deeper = run_list_state(runs=listed, reach=count_reach("3", 2))  # page 3 reaches the 6th run

    assert reach == 4 and count_reach("x", 2) == 4 and count_reach("3", 2) == 7
    assert before[0] == 4  # 6 runs, counted to the cap and one more: the pages say "3+"
    assert before[1] == max(r.updated_at for r in runs[2:])
    assert unchanged == before
    newest_event = TimelineEvent.objects.get(run=newest).pk
    assert changed[2] == newest_event and changed != before
    assert deeper[0] == 6 and deeper[1] == Run.objects.get(pk=oldest.pk).updated_at


@pytest.fixture
def integration() -> Integration:
    return Integration.objects.create(source="generic", name="test-generic")


def expected_inbox_order(alerts: list[Alert]) -> list[int]:
    """The old shape's order, computed in Python: unmatched, pending, the rest; newest first in each."""
    rank = {Alert.Outcome.UNMATCHED: 0, Alert.Outcome.PENDING: 1}
    originals = [a for a in alerts if a.duplicate_of_id is None]
    originals.sort(key=lambda a: (-a.created_at.timestamp(), -a.pk))
    originals.sort(key=lambda a: rank.get(a.outcome, 2))
    return [a.pk for a in originals]


def test_inbox_lists_unmatched_then_pending_then_the_rest_newest_first_across_pages(integration: Integration) -> None:
    admin = UserFactory(admin=True)
    run = RunFactory()
    outcomes = ["accepted", "unmatched", "pending", "accepted", "duplicate", "rejected", "unmatched", "ignored"]
    specs = [(outcome, minutes, run if outcome == "accepted" else None, "") for minutes, outcome in enumerate(outcomes)]
    specs += [("pending", 20, None, ""), ("accepted", 20, run, ""), ("unmatched", 3, None, "")]  # ties and old ones
    alerts = make_alerts(integration, specs)

    listed, counts = alert_inbox(user=admin)
    paginator = Paginator(listed, 2)  # small pages, so pages start and end inside and across the parts
    paged = [alert.pk for number in paginator.page_range for alert in paginator.page(number)]

    assert counts == {"accepted": 3, "unmatched": 3, "pending": 2, "duplicate": 1, "rejected": 1, "ignored": 1}
    assert paginator.count == 10 and paginator.num_pages == 5
    assert paged == expected_inbox_order(alerts)
    assert [a.pk for a in listed] == paged
    assert [a.pk for a in listed[3:7]] == paged[3:7]
    assert listed[40:50] == []


def test_inbox_of_nothing_is_an_empty_first_page(integration: Integration) -> None:
    listed, counts = alert_inbox(user=UserFactory(admin=True))

    page = Paginator(listed, 50).get_page(1)

    assert counts == {} and page.paginator.count == 0 and list(page) == []


def test_inbox_shows_a_support_person_only_their_tenants_alerts(integration: Integration) -> None:
    person = UserFactory()
    mine, other = TenantFactory(slug="mine"), TenantFactory(slug="other")
    role_grant(user=person, role="support", obj=mine)
    alerts = make_alerts(
        integration,
        [
            ("accepted", 0, RunFactory(tenant=mine), ""),
            ("accepted", 1, RunFactory(tenant=other), ""),
            ("unmatched", 2, None, "mine"),
            ("unmatched", 3, None, "other"),
            ("duplicate", 4, None, "mine"),
        ],
    )

    listed, counts = alert_inbox(user=person)

    assert [a.pk for a in listed] == [alerts[2].pk, alerts[0].pk]
    assert counts == {"accepted": 1, "unmatched": 1, "duplicate": 1}


def test_inbox_counts_a_support_persons_alerts_with_and_without_a_run_together_up_to_the_cap(
    integration: Integration, settings: Any
) -> None:
    settings.LIST_COUNT_CAP = 2
    person = UserFactory()
    mine, other = TenantFactory(slug="mine"), TenantFactory(slug="other")
    role_grant(user=person, role="support", obj=mine)
    run = RunFactory(tenant=mine)
    make_alerts(
        integration,
        [
            ("accepted", 0, run, ""),
            ("duplicate", 1, run, ""),  # linked duplicates: two visible
            ("duplicate", 2, run, ""),
            ("unmatched", 3, None, "mine"),
            ("duplicate", 4, None, "mine"),  # unlinked duplicates: two visible, one not
            ("duplicate", 5, None, "mine"),
            ("duplicate", 6, None, "other"),
            ("unmatched", 7, None, "mine"),
            ("accepted", 8, RunFactory(tenant=other), ""),
        ],
    )

    listed, counts = alert_inbox(user=person)
    paginator = CappedPaginator(listed, 1)  # 3 originals seen: counted to the cap and one more
    html = logged_in(person).get("/inbox/").content.decode()

    assert counts == {"accepted": 1, "unmatched": 2, "duplicate": 3}  # 4 duplicates seen: 2 + 2, capped at 3
    assert paginator.count == 3 and paginator.count_capped and paginator.count_label == "2+"
    assert '<span class="n">2+</span>' in html  # the duplicates' count


def test_inbox_page_query_count_does_not_grow_with_alerts(
    integration: Integration, django_assert_max_num_queries: Any
) -> None:
    admin = UserFactory(admin=True)
    specs: list[tuple[str, int, Run | None, str]] = []
    for n in range(35):  # 35 accepted, 23 unmatched, 12 duplicates: 58 originals, two pages
        specs.append(("accepted", n, AttemptFactory().run, ""))
        specs.append(("unmatched" if n % 3 else "duplicate", n, None, "t"))
    make_alerts(integration, specs)
    client = logged_in(admin)

    # session, user, preference, unread notifications; outcome counts (grouped); unmatched part of the
    # page; the rest part (the page crosses into it); rejected posts and their count (admins only)
    with django_assert_max_num_queries(9):
        response = client.get("/inbox/")
    assert len(response.context["page"]) == 50
    assert dict(response.context["counts"])["unmatched"] == 23

    # the polled rows, page 2 (all in the rest part): the same less the unmatched part
    with django_assert_max_num_queries(7):
        response = client.get("/inbox/?page=2", HTTP_HX_REQUEST="true")
    assert len(response.context["page"]) == 8 and b"<html" not in response.content


def test_inbox_counts_stop_past_the_cap_and_pages_still_reach_every_alert(
    integration: Integration, settings: Any
) -> None:
    settings.LIST_COUNT_CAP = 3
    admin = UserFactory(admin=True)
    run = RunFactory()
    outcomes = ["unmatched"] * 5 + ["accepted"] * 4 + ["pending"] * 2 + ["duplicate"]
    specs = [(outcome, minutes, run if outcome == "accepted" else None, "") for minutes, outcome in enumerate(outcomes)]
    alerts = make_alerts(integration, specs)

    listed, counts = alert_inbox(user=admin)
    paginator = CappedPaginator(listed, 2)  # 11 originals; page 1 counts to 3 and one more
    first = paginator.page(1)

    assert counts == {"unmatched": 4, "accepted": 4, "pending": 2, "duplicate": 1}  # 4 = the cap and one more
    assert paginator.count_capped and paginator.count_label == "3+"
    assert [a.pk for a in first] == expected_inbox_order(alerts)[:2]
    paged = [alert.pk for number in range(1, 7) for alert in CappedPaginator(listed, 2).page(number)]
    assert paged == expected_inbox_order(alerts)
    last = CappedPaginator(listed, 2).page(6)
    assert not last.has_next() and last.paginator.count == 11 and not last.paginator.count_capped
    assert listed.count() == 11 and [a.pk for a in listed] == expected_inbox_order(alerts)


def test_inbox_page_says_past_the_cap(integration: Integration, settings: Any) -> None:
    settings.LIST_COUNT_CAP = 2
    make_alerts(integration, [("unmatched", n, None, "t") for n in range(3)])

    html = logged_in(UserFactory(admin=True)).get("/inbox/").content.decode()

    assert '<span class="n">2+</span>' in html  # the unmatched count
    assert "page 1 of 1 · 3 alerts" in html  # the page of 50 counts as far as it reaches

"""The read API: runs and alerts, visibility per tenant, pagination, problem details, query budgets."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from knox.models import AuthToken

from runs.alerts.models import Alert
from runs.alerts.selectors import alert_list
from runs.attempts.models import Run
from runs.catalog.models import Integration, IntegrationKey
from runs.catalog.services import role_grant
from tests.conftest import fixture_files
from tests.factories import AttemptFactory, JobFactory, RunFactory, TenantFactory, UserFactory
from tests.runs.attempts.helpers import make_alerts

pytestmark = pytest.mark.django_db


@pytest.fixture
def loaded(story_tenants: Any, make_key: Any, post_alert: Any) -> dict[str, Any]:
    key = make_key("generic", tenants=[story_tenants[s] for s in ("acme-foods", "borealis-retail", "cedar-health")])
    for path in fixture_files("generic"):
        post_alert("generic", path, key)
    return story_tenants


def token_client(user: Any) -> Client:
    _, token = AuthToken.objects.create(user=user)
    return Client(HTTP_AUTHORIZATION=f"Token {token}")


def test_runs_list_is_paginated_and_shows_only_the_tenants_a_person_holds_a_role_on(loaded: Any) -> None:
    person = UserFactory()
    role_grant(user=person, role="support", obj=loaded["acme-foods"])

    body = token_client(person).get("/api/v1/runs/").json()

    assert set(body) == {"count", "count_capped", "next", "previous", "results"}
    assert body["count"] == 2
    assert {r["tenant"] for r in body["results"]} == {"acme-foods"}
    newest = body["results"][0]
    assert newest["window_start"] > body["results"][1]["window_start"]
    assert newest["id"] == str(Run.objects.get(public_id=newest["id"]).public_id)


def test_runs_list_filters(loaded: Any) -> None:
    admin = UserFactory(admin=True)
    client = token_client(admin)

    assert client.get("/api/v1/runs/?tenant=cedar-health").json()["count"] == 1
    assert client.get("/api/v1/runs/?environment=staging").json()["results"][0]["tenant"] == "cedar-health"
    assert client.get("/api/v1/runs/?status=succeeded").json()["count"] == 2
    assert client.get("/api/v1/runs/?job=nightly-invoice-export").json()["count"] == 4
    assert client.get("/api/v1/runs/?search=lg-7f3b11").json()["count"] == 1


def test_run_detail_nests_attempts_and_the_timeline_in_order(loaded: Any) -> None:
    admin = UserFactory(admin=True)
    run = Run.objects.get(tenant__slug="acme-foods", status=Run.Status.FAILED)

    body = token_client(admin).get(f"/api/v1/runs/{run.public_id}/").json()

    assert [a["number"] for a in body["attempts"]] == [1, 2, 3]
    assert [a["trigger"] for a in body["attempts"]] == ["scheduled", "automatic_retry", "manual_rerun"]
    times = [e["occurred_at"] for e in body["timeline"]]
    assert times == sorted(times)
    assert "manual_replay_unapproved" in [e["kind"] for e in body["timeline"]]
    assert body["attempts"][0]["runner_reports"][0]["completed_ids"] == ["INV-1001", "INV-1002"]


def test_a_run_of_another_tenant_answers_404_in_problem_details(loaded: Any) -> None:
    person = UserFactory()
    role_grant(user=person, role="auditor", obj=loaded["borealis-retail"])
    hidden = Run.objects.get(tenant__slug="acme-foods", status=Run.Status.FAILED)

    response = token_client(person).get(f"/api/v1/runs/{hidden.public_id}/")

    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["status"] == 404


def test_technical_owner_sees_every_tenant_of_their_job(loaded: Any, story_job: Any) -> None:
    owner = UserFactory()
    role_grant(user=owner, role="technical_owner", obj=story_job)

    assert token_client(owner).get("/api/v1/runs/").json()["count"] == 4


def test_anonymous_gets_401_and_expired_tokens_do_not_work(loaded: Any) -> None:
    assert Client().get("/api/v1/runs/").status_code == 401
    person = UserFactory()
    instance, token = AuthToken.objects.create(user=person)
    AuthToken.objects.filter(pk=instance.pk).update(expiry="2000-01-01T00:00:00Z")
    assert Client(HTTP_AUTHORIZATION=f"Token {token}").get("/api/v1/runs/").status_code == 401


def test_alerts_list_filters_by_outcome_and_source(loaded: Any) -> None:
    client = token_client(UserFactory(admin=True))

    unmatched = client.get("/api/v1/alerts/?outcome=unmatched").json()
    every = client.get("/api/v1/alerts/?source=generic&page_size=200").json()

    assert unmatched["count"] == 1 and unmatched["results"][0]["job_key"] == "quarterly-vat-filing"
    assert every["count"] == Alert.objects.count()
    assert {a["outcome"] for a in every["results"]} == {"accepted", "duplicate", "unmatched"}


def test_alert_detail_route_and_ingest_route_do_not_collide(loaded: Any) -> None:
    client = token_client(UserFactory(admin=True))
    alert = Alert.objects.first()

    assert client.get(f"/api/v1/alerts/{alert.public_id}/").json()["id"] == str(alert.public_id)
    assert client.get("/api/v1/alerts/generic/").status_code == 405


def test_reprocess_endpoint_is_admin_only_and_409_when_not_unmatched(loaded: Any) -> None:
    unmatched = Alert.objects.get(outcome=Alert.Outcome.UNMATCHED)
    accepted = Alert.objects.filter(outcome=Alert.Outcome.ACCEPTED).first()
    support = UserFactory()
    role_grant(user=support, role="support", obj=loaded["acme-foods"])

    assert token_client(support).post(f"/api/v1/alerts/{unmatched.public_id}/reprocess/").status_code == 403
    admin = token_client(UserFactory(admin=True))
    conflict = admin.post(f"/api/v1/alerts/{accepted.public_id}/reprocess/")
    assert conflict.status_code == 409 and conflict.json()["type"].endswith("invalid-transition")
    still = admin.post(f"/api/v1/alerts/{unmatched.public_id}/reprocess/")
    assert still.status_code == 200 and still.json()["outcome"] == "unmatched"


def test_runs_list_query_count_does_not_grow_with_rows(django_assert_max_num_queries: Any) -> None:
    person = UserFactory()
    tenant = TenantFactory()
    role_grant(user=person, role="support", obj=tenant)
    for _ in range(30):
        AttemptFactory(run=RunFactory(tenant=tenant))
    client = token_client(person)

    # session-less token auth: token lookup, user; count; page (with job, tenant, target, attempt count);
    # guardian's visible tenants/jobs are subqueries of the page queries.
    with django_assert_max_num_queries(6):
        body = client.get("/api/v1/runs/?page_size=50").json()
    assert body["count"] == 30


def test_run_detail_query_count_does_not_grow_with_attempts(django_assert_max_num_queries: Any) -> None:
    admin = UserFactory(admin=True)
    run = RunFactory()
    for number in range(1, 21):
        AttemptFactory(run=run, number=number)
    client = token_client(admin)

    # token, user; run; attempts; runner reports; timeline
    with django_assert_max_num_queries(7):
        body = client.get(f"/api/v1/runs/{run.public_id}/").json()
    assert len(body["attempts"]) == 20


def test_integrations_api_is_for_admins_and_never_shows_secrets(loaded: Any) -> None:

    support = UserFactory()
    role_grant(user=support, role="support", obj=loaded["acme-foods"])
    assert token_client(support).get("/api/v1/integrations/").status_code == 403

    admin = token_client(UserFactory(admin=True))
    listing = admin.get("/api/v1/integrations/").json()
    generic = next(i for i in listing["results"] if i["source"] == "generic")
    detail = admin.get(f"/api/v1/integrations/{generic['id']}/").json()

    key = IntegrationKey.objects.get(integration__source="generic")
    assert detail["keys"][0]["prefix"] == key.prefix and "secret_hash" not in detail["keys"][0]
    assert detail["settings_in_force"]["default_environment"] == "prod"
    assert {d["outcome"] for d in detail["recent_deliveries"]} == {"processed", "rejected"}
    assert len(detail["recent_deliveries"]) == 9


# --- the alerts list as a support person sees it (counted per visibility branch) --------------------


@pytest.fixture
def seen() -> dict[str, Any]:
    """A person with support on ``mine`` and technical owner of one job, and alerts they see or not.

    ``alerts`` in the order made; ``visible``: the indexes of those the person sees, newest first
    (created_at, then id): linked to a run of ``mine`` or of their job (in ``other``), or unlinked
    naming ``mine``. Hidden: linked to a run of ``other``, unlinked naming ``other`` or no tenant. The
    first alert has an attempt, the last is a duplicate.
    """
    person = UserFactory()
    mine, other = TenantFactory(slug="mine"), TenantFactory(slug="other")
    owned = JobFactory()
    role_grant(user=person, role="support", obj=mine)
    role_grant(user=person, role="technical_owner", obj=owned)
    mine_run = RunFactory(tenant=mine)
    alerts = make_alerts(
        Integration.objects.create(source="generic", name="test-generic"),
        [
            ("accepted", 0, mine_run, ""),  # 0 seen
            ("accepted", 1, RunFactory(tenant=other), ""),  # 1 another tenant's run
            ("unmatched", 2, None, "mine"),  # 2 seen
            ("unmatched", 3, None, "other"),  # 3 unlinked, names another tenant
            ("accepted", 4, mine_run, ""),  # 4 seen (same minute as 5: by id)
            ("unmatched", 4, None, "mine"),  # 5 seen
            ("unmatched", 5, None, ""),  # 6 unlinked, names no tenant
            ("accepted", 6, RunFactory(tenant=other, job=owned), ""),  # 7 seen: their job
            ("pending", 7, None, "mine"),  # 8 seen
            ("duplicate", 8, None, "mine"),  # 9 seen (a duplicate of 8)
        ],
        attempt_on_first=True,
    )
    return {"person": person, "alerts": alerts, "visible": [9, 8, 7, 5, 4, 2, 0]}


def listed_ids(client: Client, url: str) -> tuple[list[str], list[dict[str, Any]]]:
    """Every alert id of a list, page after page (following ``next``), and each page's body."""
    ids: list[str] = []
    bodies: list[dict[str, Any]] = []
    next_url: str | None = url
    while next_url:
        body = client.get(next_url).json()
        bodies.append(body)
        ids.extend(a["id"] for a in body["results"])
        next_url = body["next"]
    return ids, bodies


def test_alerts_list_shows_a_support_person_exactly_their_alerts_newest_first(seen: dict[str, Any]) -> None:
    client = token_client(seen["person"])
    expected = [str(seen["alerts"][n].public_id) for n in seen["visible"]]

    body = client.get("/api/v1/alerts/").json()
    paged, pages = listed_ids(client, "/api/v1/alerts/?page_size=4")

    assert [a["id"] for a in body["results"]] == expected
    assert (body["count"], body["count_capped"], body["next"]) == (7, False, None)
    assert paged == expected and [(p["count"], p["count_capped"]) for p in pages] == [(7, False), (7, False)]
    assert body["results"][0]["duplicate_of"] == str(seen["alerts"][8].public_id)
    assert body["results"][-1]["attempt"] == str(seen["alerts"][0].attempt.public_id)
    assert expected == [str(a.public_id) for a in alert_list(user=seen["person"])]  # the selector's rows


def test_alerts_list_filters_a_support_persons_alerts_by_outcome_and_source(seen: dict[str, Any]) -> None:
    client = token_client(seen["person"])
    alerts = seen["alerts"]

    unmatched = client.get("/api/v1/alerts/?outcome=unmatched").json()
    generic = client.get("/api/v1/alerts/?source=generic").json()
    none = client.get("/api/v1/alerts/?source=alertmanager").json()

    assert [a["id"] for a in unmatched["results"]] == [str(alerts[n].public_id) for n in (5, 2)]
    assert (unmatched["count"], unmatched["count_capped"]) == (2, False)
    assert generic["count"] == 7 and (none["count"], none["results"]) == (0, [])


def test_alerts_list_count_is_capped_across_both_branches_and_pages_still_reach_every_alert(
    seen: dict[str, Any],
) -> None:
    client = token_client(seen["person"])
    expected = [str(seen["alerts"][n].public_id) for n in seen["visible"]]  # three with a run, four without

    # pages of one, so the first page counts up to the cap (a page of 50 counts as far as it reaches)
    with override_settings(LIST_COUNT_CAP=5):  # each branch under the cap, together past it
        five = client.get("/api/v1/alerts/?page_size=1").json()
    with override_settings(LIST_COUNT_CAP=7):
        seven = client.get("/api/v1/alerts/?page_size=1").json()
    with override_settings(LIST_COUNT_CAP=2):  # each branch past the cap
        two = client.get("/api/v1/alerts/?page_size=1").json()
        paged, pages = listed_ids(client, "/api/v1/alerts/?page_size=1")

    assert (five["count"], five["count_capped"], [a["id"] for a in five["results"]]) == (5, True, expected[:1])
    assert (seven["count"], seven["count_capped"]) == (7, False)
    assert (two["count"], two["count_capped"]) == (2, True)
    assert paged == expected
    assert [(p["count"], p["count_capped"]) for p in pages] == [(2, True)] + [(n, True) for n in range(2, 7)] + [
        (7, False)
    ]


def test_alerts_list_shows_staff_every_unlinked_alert_and_admins_every_alert(seen: dict[str, Any]) -> None:
    alerts = seen["alerts"]
    staff = token_client(UserFactory(is_staff=True)).get("/api/v1/alerts/").json()
    admin = token_client(UserFactory(admin=True)).get("/api/v1/alerts/").json()

    assert [a["id"] for a in staff["results"]] == [str(alerts[n].public_id) for n in (9, 8, 6, 5, 3, 2)]
    assert staff["count"] == 6
    newest_first = sorted(alerts, key=lambda a: (a.created_at, a.pk), reverse=True)
    assert [a["id"] for a in admin["results"]] == [str(a.public_id) for a in newest_first]
    assert (admin["count"], admin["count_capped"]) == (10, False)


def test_alerts_list_counts_each_branch_apart_without_exists(
    seen: dict[str, Any], django_assert_max_num_queries: Any
) -> None:
    client = token_client(seen["person"])

    # the token with its user, the person's tokens, the token's last use; visible tenants' slugs, their
    # ids, owned jobs; two counts (without a run, then with one, as far as the cap leaves); the page
    # (with the delivery, original, run and attempt)
    with django_assert_max_num_queries(9), CaptureQueriesContext(connection) as queries:
        body = client.get("/api/v1/alerts/").json()

    assert body["count"] == 7
    counts = [q["sql"].upper() for q in queries if "COUNT(" in q["sql"].upper()]
    assert len(counts) == 2 and "IS NULL" in counts[0] and "LIMIT 10001" in counts[0]
    assert "INNER JOIN" in counts[1] and "LIMIT 9997" in counts[1]  # 4 without a run counted
    assert not any("EXISTS" in q["sql"].upper() for q in queries if "runs_alert" in q["sql"])

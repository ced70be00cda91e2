"""The read API: runs and alerts, visibility per tenant, pagination, problem details, query budgets."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from knox.models import AuthToken

from runs.alerts.models import Alert
from runs.attempts.models import Run
from runs.catalog.services import role_grant
from tests.conftest import fixture_files
from tests.factories import AttemptFactory, RunFactory, TenantFactory, UserFactory

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
    from runs.catalog.models import IntegrationKey

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

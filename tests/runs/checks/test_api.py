"""``/api/v1/checks/``: list, create, waive and confirm, with visibility, roles and problem details."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.test import Client
from knox.models import AuthToken

from runs.attempts.models import Run
from runs.catalog.models import JobTarget
from runs.catalog.services import role_grant
from runs.checks.models import NextRunCheck
from runs.checks.sweep import next_run_check_sweep
from runs.timeline.models import TimelineEvent
from tests.factories import JobTargetFactory, NextRunCheckFactory, UserFactory

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)
EXPECTED = datetime(2026, 11, 29, 1, 0, tzinfo=UTC)


def token_client(user: Any) -> Client:
    _, token = AuthToken.objects.create(user=user)
    return Client(HTTP_AUTHORIZATION=f"Token {token}")


@pytest.fixture
def acme(story_tenants: Any) -> JobTarget:
    return JobTarget.objects.get(tenant=story_tenants["acme-foods"], environment="prod")


@pytest.fixture
def support(acme: JobTarget) -> Any:
    person = UserFactory(username="support-sam")
    role_grant(user=person, role="support", obj=acme.tenant)
    return person


def test_create_schedules_the_next_fire_time_then_returns_the_same_check(acme: JobTarget, support: Any) -> None:
    client = token_client(support)
    with time_machine.travel(NOW, tick=False):
        first = client.post("/api/v1/checks/", {"target": str(acme.public_id)}, content_type="application/json")
        again = client.post("/api/v1/checks/", {"target": str(acme.public_id)}, content_type="application/json")

    assert (first.status_code, again.status_code) == (201, 200)
    body = first.json()
    assert body["id"] == again.json()["id"]
    assert (body["job"], body["tenant"], body["environment"]) == ("nightly-invoice-export", "acme-foods", "prod")
    assert body["expected_at"] == "2026-11-29T01:00:00Z"
    assert body["deadline_at"] == "2026-11-29T01:30:00Z"
    assert (body["status"], body["requested_by_kind"], body["created_by"]) == ("scheduled", "person", "support-sam")
    check = NextRunCheck.objects.get()
    assert check.created_by == support
    assert TimelineEvent.objects.get(kind="next_run_check_scheduled").actor_user == support


def test_create_for_a_failed_run_uses_its_target_and_records_the_recovered_run(
    acme: JobTarget, support: Any, make_key: Any, post_alert: Any
) -> None:
    key = make_key("generic", tenants=[acme.tenant])
    post_alert(
        "generic",
        {
            "schema": "handover.alert/v1",
            "job": "nightly-invoice-export",
            "tenant": "acme-foods",
            "scheduled_for": "2026-11-28T02:00:00+01:00",
            "execution_id": "exp-1",
            "status": "failed",
        },
        key,
    )
    run = Run.objects.get()

    with time_machine.travel(NOW, tick=False):
        response = token_client(support).post(
            "/api/v1/checks/", {"run": str(run.public_id)}, content_type="application/json"
        )

    assert response.status_code == 201
    assert response.json()["recovered_run"] == str(run.public_id)
    assert NextRunCheck.objects.get().recovered_run == run


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "target"),
        ({"target": "not-a-uuid"}, "target"),
        ({"target": "0b5c0a77-62b1-4b2e-9a55-3f0e0d1f0a11"}, "target"),
        ({"run": "0b5c0a77-62b1-4b2e-9a55-3f0e0d1f0a11"}, "run"),
        ({"target": "{acme}", "after": "yesterday"}, "after"),
    ],
    ids=["nothing", "bad-uuid", "unknown-target", "unknown-run", "bad-after"],
)
def test_create_validation_errors_are_problem_details(
    acme: JobTarget, support: Any, body: dict[str, str], field: str
) -> None:
    if body.get("target") == "{acme}":
        body = {**body, "target": str(acme.public_id)}
    response = token_client(support).post("/api/v1/checks/", body, content_type="application/json")

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert field in response.json()["errors"]
    assert NextRunCheck.objects.count() == 0


def test_create_is_forbidden_to_an_auditor_and_hidden_from_strangers(acme: JobTarget) -> None:
    auditor = UserFactory()
    role_grant(user=auditor, role="auditor", obj=acme.tenant)

    forbidden = token_client(auditor).post(
        "/api/v1/checks/", {"target": str(acme.public_id)}, content_type="application/json"
    )
    hidden = token_client(UserFactory()).post(
        "/api/v1/checks/", {"target": str(acme.public_id)}, content_type="application/json"
    )

    assert forbidden.status_code == 403 and forbidden.json()["status"] == 403
    assert hidden.status_code == 400 and "target" in hidden.json()["errors"]
    assert not NextRunCheck.objects.exists()
    assert Client().get("/api/v1/checks/").status_code == 401


def test_list_shows_only_visible_checks_with_filters_and_a_query_budget(
    acme: JobTarget, support: Any, story_tenants: Any, django_assert_max_num_queries: Any
) -> None:
    for _ in range(4):
        NextRunCheckFactory(target=JobTargetFactory(tenant=acme.tenant, environment="qa"))
    NextRunCheckFactory(target=JobTargetFactory(tenant=acme.tenant, environment="uat"), failed=True)
    NextRunCheckFactory(target=JobTargetFactory(tenant=acme.tenant, environment="dev"), waived=True)
    NextRunCheckFactory(target=JobTarget.objects.get(tenant=story_tenants["borealis-retail"]))
    client = token_client(support)

    # token auth (2: token, user) + the token's last use (1: written at most once a minute per token)
    # + guardian visibility subqueries inside the count and the page (2)
    with django_assert_max_num_queries(5):
        body = client.get("/api/v1/checks/").json()

    assert body["count"] == 6
    assert {r["tenant"] for r in body["results"]} == {"acme-foods"}
    assert client.get("/api/v1/checks/?status=failed").json()["count"] == 1
    waived = client.get("/api/v1/checks/?status=waived").json()["results"][0]
    assert waived["waiver_owner"] and waived["waiver_checkpoint"]
    assert client.get("/api/v1/checks/?tenant=ACME-FOODS").json()["count"] == 6
    assert client.get("/api/v1/checks/?target=nope").status_code == 400


def test_retrieve_answers_404_for_a_check_the_caller_cannot_see(story_tenants: Any, support: Any) -> None:
    other = NextRunCheckFactory(target=JobTarget.objects.get(tenant=story_tenants["borealis-retail"]))

    response = token_client(support).get(f"/api/v1/checks/{other.public_id}/")

    assert response.status_code == 404 and response["Content-Type"] == "application/problem+json"


def test_waive_through_the_api(acme: JobTarget, support: Any) -> None:
    check = NextRunCheckFactory(target=acme, expected_at=EXPECTED, deadline_at=EXPECTED + timedelta(minutes=30))
    owner = UserFactory(username="owner-olga")
    role_grant(user=owner, role="support", obj=acme.tenant)
    client = token_client(support)
    url = f"/api/v1/checks/{check.public_id}/waive/"

    with time_machine.travel(NOW, tick=False):
        bad = client.post(url, {"checkpoint": "2026-01-01", "reason": "x", "owner": "nobody"}, "application/json")
        ok = client.post(
            url, {"checkpoint": "2027-03-01", "reason": "Quarterly job", "owner": "owner-olga"}, "application/json"
        )

    assert bad.status_code == 400
    assert set(bad.json()["errors"]) == {"checkpoint", "owner"}
    assert ok.status_code == 200
    body = ok.json()
    assert (body["status"], body["waiver_owner"], body["waived_by"]) == ("waived", "owner-olga", "support-sam")
    assert body["waiver_checkpoint"] == "2027-03-01"
    check.refresh_from_db()
    assert check.waiver_checkpoint == date(2027, 3, 1)


def test_waive_conflicts_on_a_failed_check_and_is_forbidden_to_an_auditor(acme: JobTarget, support: Any) -> None:
    failed = NextRunCheckFactory(target=acme, failed=True)
    auditor = UserFactory()
    role_grant(user=auditor, role="auditor", obj=acme.tenant)
    body = {"checkpoint": "2099-01-01", "reason": "later", "owner": "support-sam"}

    conflict = token_client(support).post(f"/api/v1/checks/{failed.public_id}/waive/", body, "application/json")
    forbidden = token_client(auditor).post(f"/api/v1/checks/{failed.public_id}/waive/", body, "application/json")

    assert conflict.status_code == 409
    assert conflict.json()["type"].endswith("/invalid-transition")
    assert forbidden.status_code == 403


def test_confirm_through_the_api(acme: JobTarget, support: Any, make_key: Any, post_alert: Any) -> None:
    with time_machine.travel(NOW, tick=False):
        created = token_client(support).post(
            "/api/v1/checks/", {"target": str(acme.public_id)}, content_type="application/json"
        )
    check_id = created.json()["id"]
    client = token_client(support)
    early = client.post(f"/api/v1/checks/{check_id}/confirm/", {"note": "checked"}, "application/json")
    key = make_key("generic", tenants=[acme.tenant])
    post_alert(
        "generic",
        {
            "schema": "handover.alert/v1",
            "job": "nightly-invoice-export",
            "tenant": "acme-foods",
            "scheduled_for": "2026-11-29T02:00:00+01:00",
            "execution_id": "exp-next",
            "status": "succeeded",
            "ended_at": "2026-11-29T02:10:00+01:00",
        },
        key,
    )
    with time_machine.travel(EXPECTED + timedelta(minutes=11), tick=False):
        next_run_check_sweep()
    awaiting = client.get(f"/api/v1/checks/{check_id}/").json()
    missing_note = client.post(f"/api/v1/checks/{check_id}/confirm/", {}, "application/json")
    done = client.post(f"/api/v1/checks/{check_id}/confirm/", {"note": "Destination queried"}, "application/json")

    assert early.status_code == 409
    assert (awaiting["is_awaiting_confirmation"], awaiting["duplicate_check"]) == (True, "no_ledger")
    assert missing_note.status_code == 400 and "note" in missing_note.json()["errors"]
    assert done.status_code == 200
    assert (done.json()["status"], done.json()["confirmed_by"]) == ("passed", "support-sam")
    assert done.json()["evidence_attempt"] is not None


def test_schema_declares_every_error_response_of_the_check_actions(client: Client) -> None:
    schema = client.get("/api/schema/?format=json").json()
    paths = schema["paths"]

    assert set(paths["/api/v1/checks/{id}/waive/"]["post"]["responses"]) == {"200", "400", "401", "403", "404", "409"}
    assert set(paths["/api/v1/checks/{id}/confirm/"]["post"]["responses"]) == {
        "200",
        "400",
        "401",
        "403",
        "404",
        "409",
    }
    assert set(paths["/api/v1/checks/"]["post"]["responses"]) == {"200", "201", "400", "401", "403"}

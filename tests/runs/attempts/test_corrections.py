"""A person's corrections to attempts: explaining a duplicate trigger (service, API, run page)."""

from __future__ import annotations

import pytest
from django.test import Client
from knox.models import AuthToken

from handover.core.errors import DomainError, InvalidTransition, NotFound
from runs.attempts.corrections import AttemptCorrectionDenied, attempt_duplicate_trigger_explain
from runs.attempts.models import Attempt, Run
from runs.catalog.services import role_grant
from runs.timeline.models import TimelineEvent
from tests.factories import AttemptFactory, RunFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def run() -> Run:
    run = RunFactory(status="succeeded")
    AttemptFactory(run=run, execution_id="exp-a1", number=1, status="succeeded")
    return run


@pytest.fixture
def duplicate(run: Run) -> Attempt:
    return AttemptFactory(run=run, execution_id="exp-b1", number=2, status="succeeded", is_duplicate_trigger=True)


def person(run: Run, role: str) -> object:
    user = UserFactory()
    role_grant(user=user, role=role, obj=run.job if role == "technical_owner" else run.tenant)
    return user


def token_client(user: object) -> Client:
    _, token = AuthToken.objects.create(user=user)
    return Client(HTTP_AUTHORIZATION=f"Token {token}")


def test_explaining_a_duplicate_trigger_records_who_why_and_the_evidence(run: Run, duplicate: Attempt) -> None:
    owner = person(run, "technical_owner")
    explained = attempt_duplicate_trigger_explain(
        attempt=duplicate, actor=owner, reason="  the old cron host kept its crontab ", evidence_ref="CHG-4711"
    )
    assert explained.duplicate_explained_by == owner and explained.duplicate_explained_at is not None
    assert (explained.duplicate_explanation, explained.duplicate_evidence_ref) == (
        "the old cron host kept its crontab",
        "CHG-4711",
    )
    assert not explained.is_duplicate_unexplained
    [event] = TimelineEvent.objects.filter(run=run, kind="duplicate_trigger_explained")
    assert event.attempt == duplicate and event.actor_user == owner
    assert "the old cron host kept its crontab" in event.summary and event.data == {"evidence_ref": "CHG-4711"}
    run.refresh_from_db()
    assert run.status == "succeeded"


def test_explaining_is_refused_for_an_attempt_that_is_not_a_duplicate_or_already_explained(
    run: Run, duplicate: Attempt
) -> None:
    support = person(run, "support")
    first = run.attempts.get(number=1)
    with pytest.raises(InvalidTransition, match="not a duplicate trigger"):
        attempt_duplicate_trigger_explain(attempt=first, actor=support, reason="x", evidence_ref="y")
    attempt_duplicate_trigger_explain(attempt=duplicate, actor=support, reason="second scheduler", evidence_ref="T-1")
    with pytest.raises(InvalidTransition, match="already explained"):
        attempt_duplicate_trigger_explain(attempt=duplicate, actor=support, reason="again", evidence_ref="T-2")
    assert TimelineEvent.objects.filter(kind="duplicate_trigger_explained").count() == 1


def test_explaining_needs_a_reason_an_evidence_reference_and_the_right_person(run: Run, duplicate: Attempt) -> None:
    support = person(run, "support")
    with pytest.raises(DomainError) as caught:
        attempt_duplicate_trigger_explain(attempt=duplicate, actor=support, reason=" ", evidence_ref="")
    assert set(caught.value.errors) == {"reason", "evidence_ref"}
    with pytest.raises(AttemptCorrectionDenied):
        attempt_duplicate_trigger_explain(attempt=duplicate, actor=person(run, "auditor"), reason="r", evidence_ref="e")
    with pytest.raises(NotFound):
        attempt_duplicate_trigger_explain(attempt=duplicate, actor=UserFactory(), reason="r", evidence_ref="e")
    duplicate.refresh_from_db()
    assert duplicate.is_duplicate_unexplained


def test_explain_duplicate_api(run: Run, duplicate: Attempt) -> None:
    url = f"/api/v1/runs/{run.public_id}/attempts/{duplicate.public_id}/explain-duplicate/"
    body = {"reason": "a second scheduler was left running", "evidence_ref": "INC-9"}

    auditor = token_client(person(run, "auditor"))
    assert auditor.post(url, {}, content_type="application/json").status_code == 403
    assert token_client(UserFactory()).post(url, body, content_type="application/json").status_code == 404
    support = token_client(person(run, "support"))
    response = support.post(url, {"reason": ""}, content_type="application/json")
    assert response.status_code == 400 and set(response.json()["errors"]) == {"reason", "evidence_ref"}
    other = run.attempts.get(number=1)
    wrong = f"/api/v1/runs/{run.public_id}/attempts/{other.public_id}/explain-duplicate/"
    assert support.post(wrong, body, content_type="application/json").status_code == 409

    response = support.post(url, body, content_type="application/json")
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["id"] == str(duplicate.public_id) and data["duplicate_explained_at"]
    assert (data["duplicate_explanation"], data["duplicate_evidence_ref"]) == (body["reason"], "INC-9")
    assert support.post(url, body, content_type="application/json").status_code == 409


def test_the_run_page_offers_the_form_next_to_the_flagged_attempt_and_records_the_explanation(
    client: Client, run: Run, duplicate: Attempt
) -> None:
    page = f"/runs/{run.public_id}/"
    action = f"/runs/{run.public_id}/attempts/{duplicate.public_id}/explain-duplicate/"
    client.force_login(person(run, "auditor"))
    assert action not in client.get(page).content.decode()
    assert client.post(action, {"reason": "r", "evidence_ref": "e"}).status_code == 403

    client.force_login(person(run, "support"))
    assert action in client.get(page).content.decode()
    response = client.post(action, {"reason": "cron moved hosts", "evidence_ref": "CHG-1"}, follow=True)
    assert "Duplicate trigger of attempt 2 explained." in response.content.decode()
    duplicate.refresh_from_db()
    assert duplicate.duplicate_explanation == "cron moved hosts"
    assert action not in client.get(page).content.decode()

"""The replay's attempt and its request link each other, on the pages and in the API; an approved replay and an
unapproved manual re-run are labelled apart."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from knox.models import AuthToken

from approvals.replays.models import ReplayRequest
from runs.attempts.models import Attempt
from tests.approvals.conftest import World
from tests.factories import AttemptFactory

pytestmark = pytest.mark.django_db


def runner_start(request: ReplayRequest, key: str) -> Attempt:
    client = Client()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    claimed = client.post(f"/api/v1/replays/{request.public_id}/claim/", **auth).json()
    client.post(
        f"/api/v1/replays/{request.public_id}/runner-report/",
        data={"idempotency_key": claimed["idempotency_key"], "execution_id": "replay-1", "status": "running"},
        content_type="application/json",
        **auth,
    )
    return Attempt.objects.get(execution_id="replay-1")


def test_the_replay_attempt_links_to_its_request_and_back(world: World, approved: ReplayRequest) -> None:
    attempt = runner_start(approved, world.credential_key)
    AttemptFactory(run=world.run, execution_id="by-hand", number=3, trigger="manual_rerun", status="running")
    person = Client()
    person.force_login(world.support)

    run_page = person.get(f"/runs/{world.run.public_id}/").content.decode()
    request_page = person.get(f"/replays/{approved.public_id}/").content.decode()

    assert f'href="/replays/{approved.public_id}/"' in run_page and "from replay request" in run_page
    assert f'#attempt-{attempt.public_id}"' in request_page and f'id="attempt-{attempt.public_id}"' in run_page
    assert "Manual replay" in run_page and "Manual re-run (outside approval)" in run_page
    assert "started outside the approval process" in run_page

    _, token = AuthToken.objects.create(user=world.support)
    api = Client(HTTP_AUTHORIZATION=f"Token {token}")
    attempts: list[dict[str, Any]] = api.get(f"/api/v1/runs/{world.run.public_id}/").json()["attempts"]
    by_id = {a["execution_id"]: a for a in attempts}
    assert by_id["replay-1"]["replay_request"] == str(approved.public_id)
    assert by_id["by-hand"]["replay_request"] is None and by_id["by-hand"]["trigger"] == "manual_rerun"
    detail = api.get(f"/api/v1/replays/{approved.public_id}/").json()
    assert detail["dispatch"]["attempt"] == str(attempt.public_id)

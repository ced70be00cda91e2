"""The runner's side: claim (a lease, idempotent), report the replay's attempt (rule 7), completion,
lapsed leases and a person's settling -- through ``/api/v1/replays/<id>/claim/`` and ``runner-report/``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.test import Client
from django.utils import timezone

from approvals.replays.delivery import replay_sweep
from approvals.replays.models import Dispatch, ReplayRequest
from approvals.replays.requests import ReplayForbidden, replay_request_settle
from approvals.replays.rules import ReplayRefused
from handover.core.errors import InvalidTransition
from runs.attempts.models import Attempt, Run
from runs.catalog.models import RunnerCredential
from runs.catalog.services import runner_credential_create
from runs.checks.models import NextRunCheck
from runs.timeline.models import TimelineEvent
from tests.approvals.conftest import MakeRequest, World, set_outcome
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db


def runner(key: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {key}"}


def claim(client: Client, request: ReplayRequest, key: str) -> Any:
    return client.post(f"/api/v1/replays/{request.public_id}/claim/", **runner(key))


def report(client: Client, request: ReplayRequest, key: str, **body: Any) -> Any:
    return client.post(
        f"/api/v1/replays/{request.public_id}/runner-report/", data=body, content_type="application/json", **runner(key)
    )


def kinds(world: World) -> list[str]:
    return list(TimelineEvent.objects.filter(run=world.run, kind__startswith="replay_").values_list("kind", flat=True))


def test_claim_dispatches_an_approved_request_and_leases_it(world: World, approved: ReplayRequest) -> None:
    client = Client()
    response = claim(client, approved, world.credential_key)
    assert response.status_code == 200, response.content
    body = response.json()
    dispatch = Dispatch.objects.get()
    assert body["dispatch"] == str(dispatch.public_id)
    assert body["idempotency_key"] == dispatch.idempotency_key
    assert body["claimed_now"] is True
    assert body["replay"]["record_ids"] == ["INV-1", "INV-2"]
    assert body["replay"]["run"]["job"] == "nightly-invoice-export"
    assert body["replay"]["report_url"].endswith(f"/api/v1/replays/{approved.public_id}/runner-report/")
    assert dispatch.status == Dispatch.Status.LEASED and dispatch.claimed_by == world.credential
    assert dispatch.lease_expires_at > timezone.now() + timedelta(minutes=14)
    assert kinds(world).count("replay_dispatched") == 1 and kinds(world).count("replay_claimed") == 1


def test_the_claim_answers_urls_of_the_host_it_was_asked_on(
    world: World, approved: ReplayRequest, settings: Any
) -> None:
    settings.ALLOWED_HOSTS = ["handover.internal.example"]
    settings.HANDOVER_BASE_URL = "https://configured.example"
    client = Client(HTTP_HOST="handover.internal.example")
    body = claim(client, approved, world.credential_key).json()
    base = f"http://handover.internal.example/api/v1/replays/{approved.public_id}"
    assert body["replay"]["claim_url"] == f"{base}/claim/"
    assert body["replay"]["report_url"] == f"{base}/runner-report/"
    # the stored payload (the webhook's body, built outside a request) uses the configured base URL
    stored = Dispatch.objects.get().payload
    assert f"https://configured.example/api/v1/replays/{approved.public_id}/claim/" in stored
    world.credential.refresh_from_db()
    assert world.credential.last_used_at is not None


def test_a_second_claim_returns_the_same_dispatch_and_writes_nothing(world: World, approved: ReplayRequest) -> None:
    client = Client()
    first = claim(client, approved, world.credential_key).json()
    second = claim(client, approved, world.credential_key).json()
    assert second["dispatch"] == first["dispatch"] and second["idempotency_key"] == first["idempotency_key"]
    assert second["claimed_now"] is False
    assert Dispatch.objects.count() == 1
    assert kinds(world).count("replay_claimed") == 1


def test_another_credential_of_the_job_cannot_take_a_held_lease(world: World, approved: ReplayRequest) -> None:
    _, other_key = runner_credential_create(job=world.job, label="second runner")
    client = Client()
    claim(client, approved, world.credential_key)
    response = claim(client, approved, other_key)
    assert response.status_code == 409
    assert response["Content-Type"] == "application/problem+json"


def test_a_credential_of_another_job_does_not_see_the_request(world: World, approved: ReplayRequest) -> None:
    _, foreign_key = runner_credential_create(job=JobFactory(key="pricing-cache-refresh"))
    client = Client()
    assert claim(client, approved, foreign_key).status_code == 404
    assert (
        report(client, approved, foreign_key, idempotency_key="x", execution_id="e", status="running").status_code
        == 404
    )
    assert not Dispatch.objects.exists()


def test_no_or_a_revoked_credential_is_401(world: World, approved: ReplayRequest) -> None:
    client = Client()
    assert client.post(f"/api/v1/replays/{approved.public_id}/claim/").status_code == 401
    RunnerCredential.objects.filter(pk=world.credential.pk).update(revoked_at=timezone.now())
    response = claim(client, approved, world.credential_key)
    assert response.status_code == 401 and "Bearer" in response["WWW-Authenticate"]
    # a person's session is not a runner credential
    client.force_login(world.support)
    assert client.post(f"/api/v1/replays/{approved.public_id}/claim/").status_code == 401


def test_a_pending_request_cannot_be_claimed(world: World, make_request: MakeRequest) -> None:
    request = make_request()
    response = claim(Client(), request, world.credential_key)
    assert response.status_code == 409
    assert not Dispatch.objects.exists()


def test_claimable_lists_the_jobs_approved_requests(world: World, approved: ReplayRequest) -> None:
    client = Client()
    response = client.get("/api/v1/replays/claimable/", **runner(world.credential_key))
    assert [r["id"] for r in response.json()] == [str(approved.public_id)]
    claim(client, approved, world.credential_key)
    assert client.get("/api/v1/replays/claimable/", **runner(world.credential_key)).json() == []


def test_rule_7_a_report_without_the_replays_key_is_refused(world: World, approved: ReplayRequest) -> None:
    client = Client()
    claim(client, approved, world.credential_key)
    response = report(
        client, approved, world.credential_key, idempotency_key="rk_guess", execution_id="r-1", status="running"
    )
    assert response.status_code == 403 and "rule 7" in response.json()["detail"]
    assert not Attempt.objects.filter(execution_id="r-1").exists()


def test_the_replays_attempt_is_linked_as_a_manual_replay_and_completes_with_the_ledger(
    world: World, approved: ReplayRequest
) -> None:
    client = Client()
    key = claim(client, approved, world.credential_key).json()["idempotency_key"]
    started = report(
        client, approved, world.credential_key, idempotency_key=key, execution_id="replay-1", status="running"
    )
    assert started.status_code == 200, started.content
    assert started.json()["dispatch_status"] == "started" and started.json()["replay_status"] == "dispatched"
    attempt = Attempt.objects.get(execution_id="replay-1")
    assert (attempt.trigger, attempt.number, attempt.replay_key, attempt.status) == ("manual_replay", 2, key, "running")
    dispatch = Dispatch.objects.get()
    assert dispatch.attempt == attempt and dispatch.started_at is not None
    assert Run.objects.get(pk=world.run.pk).status == Run.Status.RUNNING
    # linked with the credential and the key: no "outside the approval process" flag
    assert not TimelineEvent.objects.filter(kind="manual_replay_unapproved").exists()

    # succeeded, but the ledger does not confirm the scope yet: the request waits
    done = report(
        client, approved, world.credential_key, idempotency_key=key, execution_id="replay-1", status="succeeded"
    )
    assert done.json() | {"attempt": None} == {
        "dispatch": str(dispatch.public_id),
        "dispatch_status": "succeeded",
        "replay_status": "dispatched",
        "attempt": None,
        "attempt_status": "succeeded",
    }
    assert Run.objects.get(pk=world.run.pk).status == Run.Status.SUCCEEDED
    assert replay_sweep().completed == 0

    # the destination export confirms both items: the sweep completes it and schedules the next-run check
    set_outcome(world, "INV-1", "completed")
    set_outcome(world, "INV-2", "completed")
    result = replay_sweep()
    assert result.completed == 1
    approved.refresh_from_db()
    assert approved.status == ReplayRequest.Status.COMPLETED and approved.closed_at is not None
    assert not approved.items.filter(is_open=True).exists()
    check = NextRunCheck.objects.get(target=world.target)
    assert check.requested_by_kind == "replay_request" and check.requested_by_ref == str(approved.public_id)
    assert check.recovered_run_id == world.run.pk
    completed = TimelineEvent.objects.get(kind="replay_completed")
    assert completed.data["next_run_check"] == str(check.public_id)
    # a repeated report changes nothing
    again = report(
        client, approved, world.credential_key, idempotency_key=key, execution_id="replay-1", status="succeeded"
    )
    assert again.status_code == 200
    assert TimelineEvent.objects.filter(kind="replay_completed").count() == 1


def test_a_success_with_the_scope_already_confirmed_completes_at_once(world: World, approved: ReplayRequest) -> None:
    client = Client()
    key = claim(client, approved, world.credential_key).json()["idempotency_key"]
    set_outcome(world, "INV-1", "completed")
    set_outcome(world, "INV-2", "completed")
    response = report(
        client, approved, world.credential_key, idempotency_key=key, execution_id="replay-1", status="succeeded"
    )
    assert response.json()["replay_status"] == "completed"


@pytest.mark.parametrize("status", ["failed", "timed_out"])
def test_a_failed_replay_attempt_fails_the_request_and_releases_its_items(
    world: World, approved: ReplayRequest, make_request: MakeRequest, status: str
) -> None:
    client = Client()
    key = claim(client, approved, world.credential_key).json()["idempotency_key"]
    response = report(
        client,
        approved,
        world.credential_key,
        idempotency_key=key,
        execution_id="replay-1",
        status=status,
        error_summary="gateway 503, paged ops@example.com",
    )
    assert response.json()["replay_status"] == "failed"
    # rule 8: personal data in the runner's words is redacted before it is stored
    assert "ops@example.com" not in Attempt.objects.get(execution_id="replay-1").error_summary
    approved.refresh_from_db()
    assert approved.status == ReplayRequest.Status.FAILED and "gateway 503" in approved.close_reason
    assert not approved.items.filter(is_open=True).exists()
    # a re-send is a new request with new approvals
    assert make_request().status == ReplayRequest.Status.PENDING


def test_the_runner_cannot_claim_another_attempt_as_the_replays(world: World, approved: ReplayRequest) -> None:
    client = Client()
    key = claim(client, approved, world.credential_key).json()["idempotency_key"]
    response = report(
        client, approved, world.credential_key, idempotency_key=key, execution_id="exp-a1", status="succeeded"
    )
    assert response.status_code == 409
    assert Attempt.objects.get(execution_id="exp-a1").status == "failed"
    report(client, approved, world.credential_key, idempotency_key=key, execution_id="replay-1", status="running")
    other = report(
        client, approved, world.credential_key, idempotency_key=key, execution_id="replay-2", status="running"
    )
    assert other.status_code == 409


def test_a_report_before_dispatch_is_refused(world: World, approved: ReplayRequest) -> None:
    response = report(
        Client(), approved, world.credential_key, idempotency_key="rk_x", execution_id="r", status="running"
    )
    assert response.status_code == 409
    assert not Dispatch.objects.exists()
    assert not Attempt.objects.filter(execution_id="r").exists()
    assert ReplayRequest.objects.get(pk=approved.pk).status == ReplayRequest.Status.APPROVED


def test_a_lapsed_lease_makes_the_dispatch_unknown_and_never_redispatches(
    world: World, approved: ReplayRequest
) -> None:
    client = Client()
    claim(client, approved, world.credential_key)
    dispatch = Dispatch.objects.get()
    with time_machine.travel(dispatch.lease_expires_at - timedelta(seconds=1)):
        assert replay_sweep().lapsed == 0
    with time_machine.travel(dispatch.lease_expires_at + timedelta(seconds=1)):
        result = replay_sweep()
        assert result.lapsed == 1
        assert replay_sweep().lapsed == 0  # overlapping ticks are harmless
    dispatch.refresh_from_db()
    assert dispatch.status == Dispatch.Status.UNKNOWN
    assert "did not report the replay's attempt as started" in dispatch.unknown_reason
    assert Dispatch.objects.count() == 1
    assert TimelineEvent.objects.filter(kind="replay_dispatch_unknown").count() == 1
    # the runner cannot re-claim it (it stays leased to the same credential: same dispatch, no new lease)
    assert claim(client, approved, world.credential_key).json()["status"] == "unknown"
    _, other_key = runner_credential_create(job=world.job)
    assert claim(client, approved, other_key).status_code == 409


def test_an_unclaimed_dispatch_becomes_unknown_after_the_claim_window(world: World, approved: ReplayRequest) -> None:
    from approvals.replays.dispatch import replay_request_dispatch

    dispatch, _ = replay_request_dispatch(request=approved)
    with time_machine.travel(dispatch.lease_expires_at + timedelta(seconds=1)):
        replay_sweep()
    dispatch.refresh_from_db()
    assert dispatch.status == "unknown" and dispatch.unknown_reason == "no runner claimed the replay in time"


def test_a_late_start_after_the_lease_lapsed_is_recorded(world: World, approved: ReplayRequest) -> None:
    client = Client()
    key = claim(client, approved, world.credential_key).json()["idempotency_key"]
    dispatch = Dispatch.objects.get()
    with time_machine.travel(dispatch.lease_expires_at + timedelta(seconds=1)):
        replay_sweep()
    response = report(
        client, approved, world.credential_key, idempotency_key=key, execution_id="replay-1", status="running"
    )
    assert response.json()["dispatch_status"] == "started"
    assert "after its lease had lapsed" in TimelineEvent.objects.get(kind="replay_attempt_started").summary


def test_a_person_settles_an_unknown_dispatch(world: World, approved: ReplayRequest, make_request: MakeRequest) -> None:
    client = Client()
    claim(client, approved, world.credential_key)
    dispatch = Dispatch.objects.get()
    with time_machine.travel(dispatch.lease_expires_at + timedelta(seconds=1)):
        replay_sweep()
    approved.refresh_from_db()
    with pytest.raises(ReplayForbidden):
        replay_request_settle(request=approved, actor=world.auditor, outcome="failed", reason="looked")
    with pytest.raises(ReplayRefused):
        replay_request_settle(request=approved, actor=world.support, outcome="completed", reason="the export has them")
    settled = replay_request_settle(
        request=approved, actor=world.support, outcome="failed", reason="the runner was down; nothing was sent"
    )
    assert settled.status == ReplayRequest.Status.FAILED and settled.closed_by == world.support
    assert make_request().status == "pending"


def test_settling_completed_needs_the_ledgers_confirmation(world: World, approved: ReplayRequest) -> None:
    client = Client()
    claim(client, approved, world.credential_key)
    dispatch = Dispatch.objects.get()
    with time_machine.travel(dispatch.lease_expires_at + timedelta(seconds=1)):
        replay_sweep()
    set_outcome(world, "INV-1", "completed")
    set_outcome(world, "INV-2", "completed")
    approved.refresh_from_db()
    settled = replay_request_settle(
        request=approved, actor=world.technical, outcome="completed", reason="runner logs show it ran"
    )
    assert settled.status == ReplayRequest.Status.COMPLETED
    assert NextRunCheck.objects.filter(requested_by_ref=str(approved.public_id)).exists()


def test_settling_is_only_for_an_unknown_or_unconfirmed_dispatch(world: World, approved: ReplayRequest) -> None:
    with pytest.raises(InvalidTransition):
        replay_request_settle(request=approved, actor=world.support, outcome="failed", reason="not dispatched yet")

"""A person's corrections to attempts: explaining a duplicate trigger, re-placing a flagged attempt (service,
API, run page)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone
from knox.models import AuthToken

from handover.core.errors import DomainError, InvalidTransition, NotFound
from runs.alerts.identity import slot_window
from runs.attempts.corrections import (
    AttemptCorrectionDenied,
    attempt_duplicate_trigger_explain,
    attempt_replace_slot,
    run_conflicting_report_explain,
    run_refire_explain,
)
from runs.attempts.models import Attempt, Run
from runs.catalog.services import role_grant
from runs.ledger.models import WorkItemLoad
from runs.timeline.models import TimelineEvent
from tests.factories import AttemptFactory, JobFactory, JobTargetFactory, RunFactory, UserFactory

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


# --- re-placing a flagged attempt ----------------------------------------------------------------

SLOT_28 = datetime(2026, 11, 28, 1, 0, tzinfo=UTC)  # 02:00 CET, "0 2 * * *" Europe/Berlin
SLOT_29 = datetime(2026, 11, 29, 1, 0, tzinfo=UTC)


@pytest.fixture
def late() -> Attempt:
    """The 28th's run holds one attempt placed late: it really started on the 29th's slot."""
    job = JobFactory(schedule="0 2 * * *", timezone="Europe/Berlin", window_alignment="day")
    target = JobTargetFactory(job=job)
    start, end = slot_window(job=job, target=target, slot=SLOT_28)
    run = RunFactory(
        job=job, tenant=target.tenant, target=target, window_start=start, window_end=end, scheduled_for=SLOT_28
    )
    return AttemptFactory(
        run=run,
        execution_id="exp-29",
        status="succeeded",
        started_at=SLOT_29 + timedelta(minutes=1),
        slot_offset_seconds=86460,
        is_slot_late=True,
    )


def test_replacing_moves_a_late_attempt_to_the_run_of_its_slot_and_records_it_on_both_runs(late: Attempt) -> None:
    source = late.run
    Run.objects.filter(pk=source.pk).update(status="succeeded")
    owner = person(source, "technical_owner")

    moved = attempt_replace_slot(attempt=late, slot=SLOT_29, actor=owner, reason="the scheduler host was down")

    destination = moved.run
    assert destination != source and destination.scheduled_for == SLOT_29
    assert (destination.window_start, destination.window_end) == slot_window(
        job=source.job, target=source.target, slot=SLOT_29
    )
    assert destination.target == source.target and destination.status == "succeeded"
    assert moved.number == 1 and not moved.is_slot_late and moved.slot_offset_seconds == 60
    source.refresh_from_db()
    assert source.status == "expected" and not source.attempts.exists()
    events = list(TimelineEvent.objects.filter(kind="attempt_replaced").order_by("run_id"))
    assert {e.run for e in events} == {source, destination}
    assert all(e.actor_user == owner and "the scheduler host was down" in e.summary for e in events)
    assert events[0].data["to_slot"] == SLOT_29.isoformat() and events[0].data["old_number"] == 1


def test_replacing_joins_an_existing_run_with_the_next_number(late: Attempt) -> None:
    source = late.run
    start, end = slot_window(job=source.job, target=source.target, slot=SLOT_29)
    existing = RunFactory(
        job=source.job,
        tenant=source.tenant,
        target=source.target,
        window_start=start,
        window_end=end,
        scheduled_for=SLOT_29,
    )
    AttemptFactory(run=existing, execution_id="exp-29-a", number=1, status="failed", started_at=SLOT_29)
    moved = attempt_replace_slot(attempt=late, slot=SLOT_29, actor=person(source, "support"), reason="late start")
    assert (moved.run, moved.number) == (existing, 2)
    existing.refresh_from_db()
    assert existing.status == "succeeded"  # the moved attempt started last


def test_replacing_is_refused_unless_flagged_onto_a_fire_time_and_before_a_load_or_replay(late: Attempt) -> None:
    source = late.run
    support = person(source, "support")
    with pytest.raises(DomainError, match="not a fire time"):
        attempt_replace_slot(attempt=late, slot=SLOT_29 + timedelta(minutes=5), actor=support, reason="r")
    with pytest.raises(InvalidTransition, match="already on the slot"):
        attempt_replace_slot(attempt=late, slot=SLOT_28, actor=support, reason="r")
    with pytest.raises(AttemptCorrectionDenied):
        attempt_replace_slot(attempt=late, slot=SLOT_29, actor=person(source, "auditor"), reason="r")
    plain = AttemptFactory(run=source, execution_id="exp-28", number=2, status="failed")
    with pytest.raises(InvalidTransition, match="not flagged"):
        attempt_replace_slot(attempt=plain, slot=SLOT_29, actor=support, reason="r")
    WorkItemLoad.objects.create(
        run=source,
        kind=WorkItemLoad.Kind.POPULATION,
        status=WorkItemLoad.Status.FAILED,
        error="line 2: not a record id",
        created_by=support,
        created_at=timezone.now(),
    )
    with pytest.raises(InvalidTransition, match="ledger load"):
        attempt_replace_slot(attempt=late, slot=SLOT_29, actor=support, reason="r")
    late.refresh_from_db()
    assert late.run == source and late.is_slot_late
    assert not Run.objects.filter(scheduled_for=SLOT_29).exists()
    assert not TimelineEvent.objects.filter(kind="attempt_replaced").exists()


def test_replace_slot_api_and_run_page_form(client: Client, late: Attempt) -> None:
    source = late.run
    url = f"/api/v1/runs/{source.public_id}/attempts/{late.public_id}/replace-slot/"
    assert token_client(person(source, "auditor")).post(url, {}, content_type="application/json").status_code == 403
    support_user = person(source, "support")
    support = token_client(support_user)
    response = support.post(url, {"slot": "2026-11-29T01:05:00Z", "reason": "r"}, content_type="application/json")
    assert response.status_code == 400 and "slot" in response.json()["errors"]

    page = f"/runs/{source.public_id}/"
    action = f"/runs/{source.public_id}/attempts/{late.public_id}/replace-slot/"
    client.force_login(support_user)
    html = client.get(page).content.decode()
    assert action in html and SLOT_29.isoformat() in html
    response = client.post(action, {"slot": SLOT_29.isoformat(), "reason": "started a day late"}, follow=True)
    assert "Attempt moved to the run of 2026-11-29 01:00Z." in response.content.decode()
    late.refresh_from_db()
    assert late.run.scheduled_for == SLOT_29

    # the API answers the moved attempt; a second move of an attempt no longer flagged is refused
    url = f"/api/v1/runs/{late.run.public_id}/attempts/{late.public_id}/replace-slot/"
    response = support.post(url, {"slot": SLOT_28.isoformat(), "reason": "r"}, content_type="application/json")
    assert response.status_code == 409


def test_abandon_api_records_who_and_why_and_the_run_follows() -> None:
    run = RunFactory(status="running")
    attempt = AttemptFactory(run=run, execution_id="exp-z1", number=1, status="running")
    url = f"/api/v1/runs/{run.public_id}/attempts/{attempt.public_id}/abandon/"
    body = {"reason": "the worker node was deleted; it will never report"}

    assert token_client(person(run, "auditor")).post(url, body, content_type="application/json").status_code == 403
    assert token_client(UserFactory()).post(url, body, content_type="application/json").status_code == 404
    assert Attempt.objects.get(pk=attempt.pk).status == "running"
    owner = person(run, "technical_owner")
    client = token_client(owner)
    assert client.post(url, {"reason": ""}, content_type="application/json").status_code == 400

    response = client.post(url, body, content_type="application/json")
    assert response.status_code == 200, response.content
    attempt.refresh_from_db()
    assert (attempt.status, attempt.abandoned_by, attempt.abandon_reason) == ("abandoned", owner, body["reason"])
    assert Run.objects.get(pk=run.pk).status == Run.Status.FAILED
    event = TimelineEvent.objects.get(attempt=attempt, kind=TimelineEvent.Kind.ATTEMPT_ABANDONED)
    assert event.actor_user == owner and body["reason"] in event.summary
    assert client.post(url, body, content_type="application/json").status_code == 200  # already abandoned: as it is
    assert TimelineEvent.objects.filter(attempt=attempt, kind=TimelineEvent.Kind.ATTEMPT_ABANDONED).count() == 1


def test_admin_action_abandons_with_a_reason_asked_first() -> None:
    """The admin's "Abandon" action: an intermediate page asks for the reason, then the service records it."""
    run = RunFactory(status="running")
    attempt = AttemptFactory(run=run, execution_id="exp-adm1", number=1, status="running")
    admin = UserFactory(admin=True)
    client = Client()
    client.force_login(admin)
    url = "/admin/runs/attempt/"
    asked = client.post(url, {"action": "abandon", "_selected_action": [attempt.pk]})
    assert asked.status_code == 200 and b"Why they will never report" in asked.content
    assert Attempt.objects.get(pk=attempt.pk).status == "running"

    done = client.post(
        url, {"action": "abandon", "_selected_action": [attempt.pk], "apply": "Abandon", "reason": "node deleted"}
    )
    assert done.status_code == 302
    attempt.refresh_from_db()
    assert (attempt.status, attempt.abandoned_by, attempt.abandon_reason) == ("abandoned", admin, "node deleted")
    event = TimelineEvent.objects.get(attempt=attempt, kind=TimelineEvent.Kind.ATTEMPT_ABANDONED)
    assert event.actor_user == admin


def test_run_explanations_refuse_a_reader_and_an_outsider_and_write_nothing(run: Run, duplicate: Attempt) -> None:
    """Issue #15: the explaining services refuse themselves (the run page only relays their refusal)."""
    before = TimelineEvent.objects.count()
    for actor, error in ((person(run, "auditor"), AttemptCorrectionDenied), (UserFactory(), NotFound)):
        for explain in (run_refire_explain, run_conflicting_report_explain):
            with pytest.raises(error):
                explain(run=run, actor=actor, reason="flapping monitor", evidence_ref="OPS-1")
        with pytest.raises(error):
            attempt_duplicate_trigger_explain(attempt=duplicate, actor=actor, reason="r", evidence_ref="e")
    assert TimelineEvent.objects.count() == before
    duplicate.refresh_from_db()
    assert duplicate.is_duplicate_unexplained and duplicate.duplicate_explained_by is None

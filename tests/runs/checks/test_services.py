"""Next-run checks: scheduling, evaluation outcomes, the sweep, waivers, confirmation and follow-ups.

The story: ``nightly-invoice-export`` (``0 2 * * *`` Europe/Berlin, grace 30 min) failed for
acme-foods on the 2026-11-28 run; the check expects the next run at 2026-11-29T02:00+01:00
(01:00Z) with its deadline at 01:30Z. Alerts are posted through the generic endpoint with a key
bound to acme-foods, so the evidence is what ingestion really records.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.apps import apps
from django.core import mail
from django.db import IntegrityError, transaction

from handover.core.errors import DomainError, Forbidden, InvalidTransition, NotFound
from handover.handovers.check_follow_ups import next_run_check_notify_failed
from runs.attempts.corrections import attempt_duplicate_trigger_explain
from runs.attempts.models import Attempt, Run
from runs.catalog.models import JobTarget
from runs.catalog.services import role_grant
from runs.checks import tasks as check_tasks
from runs.checks.decisions import next_run_check_confirm, next_run_check_waive
from runs.checks.evaluation import CheckFacts, next_run_check_evaluate
from runs.checks.facts import next_run_check_facts
from runs.checks.models import NextRunCheck
from runs.checks.scheduling import CheckRequester, next_run_check_schedule
from runs.checks.sweep import next_run_check_sweep
from runs.checks.transitions import CheckChange, next_run_check_transition
from runs.timeline.models import TimelineEvent
from tests.conftest import is_postgres
from tests.factories import AttemptFactory, JobTargetFactory, NextRunCheckFactory, UserFactory

pytestmark = pytest.mark.django_db

FAILED_RUN_AT = datetime(2026, 11, 28, 1, 0, tzinfo=UTC)  # 02:00 CET
EXPECTED = datetime(2026, 11, 29, 1, 0, tzinfo=UTC)  # the next fire time, 02:00 CET
DEADLINE = EXPECTED + timedelta(minutes=30)
RECOVERED = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)  # replay completed, handover verifying


def generic(**fields: Any) -> dict[str, Any]:
    """A generic-format alert about acme-foods' nightly export; ``fields`` override the defaults."""
    body = {
        "schema": "handover.alert/v1",
        "job": "nightly-invoice-export",
        "tenant": "acme-foods",
        "environment": "prod",
        "scheduled_for": "2026-11-29T02:00:00+01:00",
        "execution_id": "exp-20261129-0200-a1",
        "attempt": 1,
        "trigger": "scheduled",
        "status": "succeeded",
        "started_at": "2026-11-29T02:00:04+01:00",
        "ended_at": "2026-11-29T02:12:55+01:00",
    }
    body.update(fields)
    return body


@pytest.fixture
def world(story_tenants: Any, make_key: Any, post_alert: Any) -> dict[str, Any]:
    """The failed run of 2026-11-28, its target, a bound key, and a ``post(**fields)`` helper."""
    key = make_key("generic", tenants=[story_tenants["acme-foods"]])

    def post(**fields: Any) -> Any:
        response = post_alert("generic", generic(**fields), key)
        assert response.status_code == 202, response.content
        return response.json()["alerts"][0]

    post(
        scheduled_for="2026-11-28T02:00:00+01:00",
        execution_id="exp-20261128-0200-a1",
        status="failed",
        started_at="2026-11-28T02:03:11+01:00",
        ended_at="2026-11-28T02:19:40+01:00",
    )
    failed_run = Run.objects.get(scheduled_for=FAILED_RUN_AT)
    target = JobTarget.objects.get(job__key="nightly-invoice-export", tenant__slug="acme-foods")
    return {"post": post, "failed_run": failed_run, "target": target, "tenants": story_tenants, "key": key}


@pytest.fixture
def check(world: dict[str, Any]) -> NextRunCheck:
    with time_machine.travel(RECOVERED, tick=False):
        created, _ = next_run_check_schedule(
            target=world["target"],
            after=RECOVERED,
            recovered_run=world["failed_run"],
            requested_by=CheckRequester.handover("8f1d3c1e-0000-4000-8000-000000000001"),
        )
    return created


def add_ledger(run: Run, *, possible_duplicates: int = 0) -> None:
    """Give ``run`` a ledger (one work item) and its possible-duplicate total, as a load would."""
    work_item = apps.get_model("runs", "WorkItem")
    work_item.objects.create(run=run, record_id="INV-1010")
    Run.objects.filter(pk=run.pk).update(possible_duplicate_count=possible_duplicates)


def sweep_at(instant: datetime) -> Any:
    with time_machine.travel(instant, tick=False):
        return next_run_check_sweep()


def events(kind: str) -> list[TimelineEvent]:
    return list(TimelineEvent.objects.filter(kind=kind).order_by("id"))


# --- scheduling ---------------------------------------------------------------------------------


def test_schedule_creates_the_check_of_the_next_fire_time_with_deadline_and_window(
    world: dict[str, Any], check: NextRunCheck
) -> None:
    assert (check.expected_at, check.deadline_at) == (EXPECTED, DEADLINE)
    assert (check.window_start, check.window_end) == (
        datetime(2026, 11, 27, 23, 0, tzinfo=UTC),
        datetime(2026, 11, 28, 23, 0, tzinfo=UTC),
    )
    assert check.status == NextRunCheck.Status.SCHEDULED
    assert (check.requested_by_kind, check.requested_by_ref) == ("handover", "8f1d3c1e-0000-4000-8000-000000000001")
    assert check.recovered_run == world["failed_run"]
    event = TimelineEvent.objects.get(kind="next_run_check_scheduled")
    assert event.run == world["failed_run"] and event.tenant == world["target"].tenant
    assert event.data["check"] == str(check.public_id)


def test_schedule_is_idempotent_per_target_and_fire_time(world: dict[str, Any], check: NextRunCheck) -> None:
    again, created = next_run_check_schedule(
        target=world["target"], after=RECOVERED + timedelta(hours=3), requested_by=CheckRequester.replay_request("r1")
    )

    assert not created and again.pk == check.pk
    assert NextRunCheck.objects.count() == 1
    assert TimelineEvent.objects.filter(kind="next_run_check_scheduled").count() == 1


def test_schedule_uses_the_dst_correct_fire_time_and_target_overrides(story_tenants: Any) -> None:
    target = JobTargetFactory(
        job__schedule="30 2 * * *",
        job__grace_seconds=600,
        tenant=story_tenants["borealis-retail"],
        dst_gap_override="skip",
    )
    after = datetime(2027, 3, 27, 1, 30, tzinfo=UTC)  # 02:30 CET, the day before the spring gap

    check, _ = next_run_check_schedule(target=target, after=after)

    # 02:30 does not exist on 2027-03-28; an executor that skips runs next on the 29th (C01.A).
    assert check.expected_at == datetime(2027, 3, 29, 0, 30, tzinfo=UTC)
    assert check.deadline_at == check.expected_at + timedelta(minutes=10)


def test_schedule_refuses_an_inactive_target_and_a_run_of_another_target(world: dict[str, Any]) -> None:
    other = JobTargetFactory(job=world["target"].job, tenant=world["tenants"]["borealis-retail"], environment="qa")
    with pytest.raises(DomainError, match="another job, tenant or environment"):
        next_run_check_schedule(target=other, after=RECOVERED, recovered_run=world["failed_run"])
    JobTarget.objects.filter(pk=other.pk).update(is_active=False)
    other.refresh_from_db()
    with pytest.raises(DomainError, match="not active"):
        next_run_check_schedule(target=other, after=RECOVERED)


def test_check_unique_per_target_and_expected_time_holds_in_the_database() -> None:
    first = NextRunCheckFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        NextRunCheck.objects.create(target=first.target, expected_at=first.expected_at, deadline_at=first.deadline_at)


@pytest.mark.parametrize(
    "values",
    [
        {"status": "passed", "passed_at": EXPECTED},  # never passed without the attempt that ran
        {"status": "failed", "failed_at": EXPECTED},  # a failure names its reason
        {"status": "waived", "waived_at": EXPECTED, "waiver_reason": "far away"},  # no owner, no checkpoint
        {"deadline_at": EXPECTED - timedelta(seconds=1)},  # deadline before the fire time
        {"status": "done"},
    ],
    ids=["passed-without-evidence", "failed-without-reason", "waiver-incomplete", "deadline-order", "bad-status"],
)
def test_check_constraints_refuse_inconsistent_rows(values: dict[str, Any]) -> None:
    target = JobTargetFactory()
    row = {"target": target, "expected_at": EXPECTED, "deadline_at": DEADLINE, **values}
    with pytest.raises(IntegrityError), transaction.atomic():
        NextRunCheck.objects.create(**row)


# --- evaluation, pure ---------------------------------------------------------------------------


def facts(**values: Any) -> CheckFacts:
    base: dict[str, Any] = {"now": DEADLINE, "expected_at": EXPECTED, "deadline_at": DEADLINE}
    base.update(values)
    return CheckFacts(**base)


IN_TIME = {"next_run_id": 7, "success_attempt_id": 70, "success_at": DEADLINE - timedelta(seconds=1)}


@pytest.mark.parametrize(
    ("given", "action", "reason", "duplicate_check"),
    [
        ({"now": DEADLINE - timedelta(seconds=1)}, "wait", "", "not_yet"),
        ({**IN_TIME, "now": DEADLINE - timedelta(minutes=5), "has_ledger": True}, "pass", "", "checked"),
        ({**IN_TIME, "has_ledger": False}, "await_confirmation", "", "no_ledger"),
        ({**IN_TIME, "has_ledger": False, "is_confirmed": True}, "pass", "", "no_ledger"),
        ({"now": DEADLINE}, "fail", "deadline_passed", "not_yet"),
        (
            {"next_run_id": 7, "success_attempt_id": 70, "success_at": DEADLINE, "has_ledger": True},
            "fail",
            "deadline_passed",
            "checked",
        ),
        ({**IN_TIME, "has_ledger": True, "possible_duplicate_count": 2}, "fail", "duplicate_reemitted", "checked"),
        ({**IN_TIME, "has_ledger": True, "stale_retry_queued": True}, "fail", "stale_retry_queued", "checked"),
        ({"now": DEADLINE, "stale_retry_queued": True}, "fail", "stale_retry_queued", "not_yet"),
        ({**IN_TIME, "has_ledger": True, "next_run_duplicate_trigger": 2}, "wait", "", "checked"),
        ({**IN_TIME, "has_ledger": True, "recovered_run_duplicate_trigger": 3}, "wait", "", "checked"),
        ({"now": DEADLINE, "next_run_duplicate_trigger": 2}, "fail", "deadline_passed", "not_yet"),
    ],
    ids=[
        "before-deadline-waits",
        "in-time-with-ledger-passes",
        "in-time-no-ledger-awaits-a-person",
        "in-time-no-ledger-confirmed-passes",
        "no-run-by-deadline-fails",
        "success-at-the-deadline-is-late",
        "duplicates-in-ledger-fail",
        "stale-retry-fails",
        "stale-retry-and-no-run",
        "unexplained-duplicate-trigger-on-the-next-run-holds",
        "unexplained-duplicate-trigger-on-the-recovered-run-holds",
        "duplicate-trigger-without-success-still-fails-at-the-deadline",
    ],
)
def test_evaluate_outcomes(given: dict[str, Any], action: str, reason: str, duplicate_check: str) -> None:
    verdict = next_run_check_evaluate(facts(**given))

    assert (verdict.action, verdict.failure_reason, verdict.duplicate_check) == (action, reason, duplicate_check)


def test_evaluate_keeps_a_late_success_as_evidence_and_lists_every_reason() -> None:
    late = DEADLINE + timedelta(minutes=7)
    verdict = next_run_check_evaluate(
        facts(now=late, next_run_id=7, success_attempt_id=70, success_at=late, stale_retry_queued=True)
    )

    assert verdict.action == "fail"
    assert verdict.reasons == ("stale_retry_queued", "deadline_passed")
    assert (verdict.late_success_attempt_id, verdict.late_success_at) == (70, late)
    assert verdict.evidence_attempt_id is None
    assert "after the deadline" in verdict.summary and "still queued" in verdict.summary


# --- the sweep: evaluation outcomes on real records ---------------------------------------------


def test_next_run_success_with_a_clean_ledger_passes(world: dict[str, Any], check: NextRunCheck) -> None:
    world["post"]()
    next_run = Run.objects.get(scheduled_for=EXPECTED)
    add_ledger(next_run)

    result = sweep_at(EXPECTED + timedelta(minutes=13))

    check.refresh_from_db()
    assert (result.due, result.passed) == (1, 1)
    assert check.status == NextRunCheck.Status.PASSED
    assert check.passed_at == EXPECTED + timedelta(minutes=13)
    assert check.next_run == next_run
    assert check.evidence_attempt == next_run.attempts.get()
    assert check.evidence_at == datetime(2026, 11, 29, 1, 12, 55, tzinfo=UTC)
    assert check.duplicate_check == NextRunCheck.DuplicateCheck.CHECKED
    event = TimelineEvent.objects.get(kind="next_run_check_passed")
    assert event.run == world["failed_run"] and event.actor_kind == TimelineEvent.ActorKind.SYSTEM


def test_next_run_without_ledger_passes_only_with_a_persons_confirmation(
    world: dict[str, Any], check: NextRunCheck
) -> None:
    world["post"]()
    result = sweep_at(EXPECTED + timedelta(minutes=13))

    check.refresh_from_db()
    assert result.awaiting_confirmation == 1
    assert check.status == NextRunCheck.Status.SCHEDULED and check.is_awaiting_confirmation
    assert check.duplicate_check == NextRunCheck.DuplicateCheck.NO_LEDGER
    assert check.evidence_attempt is not None
    # neither a later sweep nor the deadline changes it: a person decides
    assert sweep_at(DEADLINE + timedelta(hours=2)).due == 0
    assert len(events("next_run_check_awaiting_confirmation")) == 1

    person = UserFactory()
    reader = UserFactory()
    role_grant(user=reader, role="auditor", obj=check.target.tenant)
    with pytest.raises(Forbidden):  # auditors read the check; only support or a technical owner confirms it
        next_run_check_confirm(check=check, actor=reader, note="looked")
    assert NextRunCheck.objects.get(pk=check.pk).status == NextRunCheck.Status.SCHEDULED
    role_grant(user=person, role="support", obj=check.target.tenant)
    with time_machine.travel(DEADLINE + timedelta(hours=3), tick=False):
        confirmed = next_run_check_confirm(check=check, actor=person, note="Queried the ledger API: no INV repeated")

    assert confirmed.status == NextRunCheck.Status.PASSED
    assert (confirmed.confirmed_by, confirmed.confirmed_at) == (person, DEADLINE + timedelta(hours=3))
    assert confirmed.confirmation_note == "Queried the ledger API: no INV repeated"
    assert [e.kind for e in TimelineEvent.objects.filter(kind__startswith="next_run_check").order_by("id")] == [
        "next_run_check_scheduled",
        "next_run_check_awaiting_confirmation",
        "next_run_check_confirmed",
        "next_run_check_passed",
    ]
    assert events("next_run_check_confirmed")[0].actor_user == person


def test_confirm_needs_a_check_awaiting_confirmation_and_a_note(world: dict[str, Any], check: NextRunCheck) -> None:
    person = UserFactory()
    role_grant(user=person, role="technical_owner", obj=check.target.job)
    with pytest.raises(InvalidTransition, match="no success of the next run found yet"):
        next_run_check_confirm(check=check, actor=person, note="checked")
    with pytest.raises(DomainError, match="how duplicates were checked"):
        next_run_check_confirm(check=check, actor=person, note="  ")


def test_no_run_by_the_deadline_fails_the_check_and_leaves_it_in_the_follow_up_outbox(
    world: dict[str, Any],
    check: NextRunCheck,
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> None:
    assert sweep_at(DEADLINE - timedelta(seconds=1)).due == 0  # one second early: not due

    with django_capture_on_commit_callbacks() as callbacks:
        result = sweep_at(DEADLINE)

    check.refresh_from_db()
    assert (result.due, result.failed) == (1, 1)
    assert check.status == NextRunCheck.Status.FAILED
    assert check.failure_reason == NextRunCheck.FailureReason.DEADLINE_PASSED
    assert check.failed_at == DEADLINE and check.next_run is None
    assert "no run was reported" in check.result_summary
    event = TimelineEvent.objects.get(kind="next_run_check_failed")
    assert event.run == world["failed_run"] and event.data["reasons"] == ["deadline_passed"]
    assert callbacks == []  # nothing enqueued: the failed check is the handover app's outbox entry
    assert check.failure_notified_at is None


def test_late_success_is_recorded_as_evidence_and_the_check_stays_failed(
    world: dict[str, Any], check: NextRunCheck
) -> None:
    sweep_at(DEADLINE + timedelta(minutes=1))
    world["post"](started_at="2026-11-29T02:20:00+01:00", ended_at="2026-11-29T02:41:00+01:00")

    result = sweep_at(DEADLINE + timedelta(minutes=12))
    again = sweep_at(DEADLINE + timedelta(minutes=13))

    check.refresh_from_db()
    assert (result.late_successes, again.late_successes) == (1, 0)
    assert check.status == NextRunCheck.Status.FAILED
    assert check.late_success_at == datetime(2026, 11, 29, 1, 41, tzinfo=UTC)
    assert check.late_success_attempt == Run.objects.get(scheduled_for=EXPECTED).attempts.get()
    assert check.evidence_attempt is None
    assert len(events("next_run_check_late_success")) == 1


def test_late_success_known_at_the_sweep_fails_with_the_evidence(world: dict[str, Any], check: NextRunCheck) -> None:
    world["post"](ended_at="2026-11-29T02:30:00+01:00")  # exactly the deadline: late

    sweep_at(DEADLINE + timedelta(minutes=5))

    check.refresh_from_db()
    assert check.status == NextRunCheck.Status.FAILED
    assert check.failure_reason == NextRunCheck.FailureReason.DEADLINE_PASSED
    assert check.late_success_at == DEADLINE


def test_next_run_that_re_emits_recovered_records_fails_the_check(world: dict[str, Any], check: NextRunCheck) -> None:
    world["post"]()
    add_ledger(Run.objects.get(scheduled_for=EXPECTED), possible_duplicates=2)

    sweep_at(EXPECTED + timedelta(minutes=15))

    check.refresh_from_db()
    assert check.status == NextRunCheck.Status.FAILED
    assert check.failure_reason == NextRunCheck.FailureReason.DUPLICATE_REEMITTED
    assert (check.duplicate_check, check.possible_duplicate_count) == ("checked", 2)
    assert check.evidence_attempt is not None  # it did succeed in time: kept as evidence


def test_an_unexplained_duplicate_trigger_on_the_next_run_holds_the_check_until_explained(
    world: dict[str, Any], check: NextRunCheck
) -> None:
    world["post"]()
    world["post"](  # a second scheduler started the same slot again after the first success
        execution_id="exp-20261129-0200-b1",
        started_at="2026-11-29T02:14:00+01:00",
        ended_at="2026-11-29T02:20:00+01:00",
    )
    next_run = Run.objects.get(scheduled_for=EXPECTED)
    duplicate = next_run.attempts.get(execution_id="exp-20261129-0200-b1")
    assert duplicate.is_duplicate_trigger
    add_ledger(next_run)

    result = sweep_at(EXPECTED + timedelta(minutes=25))
    assert (result.passed, result.waiting) == (0, 1)
    facts = next_run_check_facts(check=check, now=EXPECTED + timedelta(minutes=25))
    verdict = next_run_check_evaluate(facts)
    assert verdict.action == "wait"
    assert f"attempt {duplicate.number} of the next run is a duplicate trigger" in verdict.summary
    # still held after the deadline: the success came in time, the explanation is what is missing
    assert sweep_at(DEADLINE + timedelta(hours=2)).waiting == 1
    check.refresh_from_db()
    assert check.status == NextRunCheck.Status.SCHEDULED

    person = UserFactory()
    role_grant(user=person, role="support", obj=world["tenants"]["acme-foods"])
    attempt_duplicate_trigger_explain(
        attempt=duplicate, actor=person, reason="the old cron host was not drained", evidence_ref="CHG-4711"
    )
    sweep_at(DEADLINE + timedelta(hours=3))
    check.refresh_from_db()
    assert check.status == NextRunCheck.Status.PASSED


def test_stale_queued_retry_of_the_failed_run_fails_the_check(world: dict[str, Any], check: NextRunCheck) -> None:
    world["post"](
        scheduled_for="2026-11-28T02:00:00+01:00",
        execution_id="exp-20261128-0200-a3",
        attempt=3,
        trigger="automatic_retry",
        status="queued",
        started_at=None,
        ended_at=None,
    )
    world["post"]()
    add_ledger(Run.objects.get(scheduled_for=EXPECTED))

    sweep_at(EXPECTED + timedelta(minutes=15))

    check.refresh_from_db()
    assert check.status == NextRunCheck.Status.FAILED
    assert check.failure_reason == NextRunCheck.FailureReason.STALE_RETRY_QUEUED
    assert "still queued" in check.result_summary


@pytest.mark.parametrize(
    "change",
    ["retry_trigger", "unbound_key", "no_alert"],
    ids=["success-of-a-retry-not-the-schedule", "key-no-longer-bound-to-tenant", "attempt-without-a-report"],
)
def test_only_a_scheduled_success_reported_through_a_bound_key_counts(
    world: dict[str, Any], check: NextRunCheck, change: str
) -> None:
    if change == "retry_trigger":
        world["post"](attempt=2, trigger="automatic_retry")
    elif change == "unbound_key":
        world["post"]()
        key = TimelineEvent.objects.get(kind="attempt_succeeded").alert.delivery.key
        key.tenants.clear()
    else:
        next_run = Run.objects.create(
            job=world["target"].job,
            tenant=world["target"].tenant,
            environment="prod",
            window_start=check.window_start,
            window_end=check.window_end,
            scheduled_for=EXPECTED,
        )
        AttemptFactory(run=next_run, status=Attempt.Status.SUCCEEDED, ended_at=EXPECTED + timedelta(minutes=5))

    sweep_at(DEADLINE)

    check.refresh_from_db()
    assert check.status == NextRunCheck.Status.FAILED
    assert check.failure_reason == NextRunCheck.FailureReason.DEADLINE_PASSED
    assert check.next_run is not None and check.evidence_attempt is None


def test_sweep_twice_settles_each_check_once(world: dict[str, Any], check: NextRunCheck) -> None:
    first = sweep_at(DEADLINE + timedelta(minutes=1))
    second = sweep_at(DEADLINE + timedelta(minutes=2))

    assert (first.failed, second.due, second.failed) == (1, 0, 0)
    assert len(events("next_run_check_failed")) == 1


def test_sweep_task_runs_twice_without_effect_the_second_time(world: dict[str, Any], check: NextRunCheck) -> None:
    with time_machine.travel(DEADLINE, tick=False):
        assert check_tasks.next_run_check_sweep()["failed"] == 1
        assert check_tasks.next_run_check_sweep() == {
            "due": 0,
            "passed": 0,
            "failed": 0,
            "awaiting_confirmation": 0,
            "skipped": 0,
            "late_successes": 0,
        }


def test_sweep_writes_each_batch_with_a_constant_number_of_queries(
    story_tenants: Any, django_assert_num_queries: Any
) -> None:
    for _ in range(12):
        NextRunCheckFactory(target=JobTargetFactory(tenant=story_tenants["acme-foods"]))
    with time_machine.travel(datetime(2026, 12, 31, tzinfo=UTC), tick=False):
        # checks on slots skipped by policy (1) + due ids (1) + the batch's claim transaction (a
        # savepoint inside the test's transaction: 2; on PostgreSQL also its SET LOCAL
        # synchronous_commit: 1) + claim with facts (1 per batch of
        # 100) + the batch's targets (1) + one guarded UPDATE and one timeline INSERT for the
        # batch's failures (2) + the late-success query (1): the same for 12 checks as for 100
        # (the failures' follow-ups are the handover app's outbox: no query here)
        with django_assert_num_queries(1 + 1 + 2 + (1 if is_postgres() else 0) + 1 + 1 + 2 + 1):
            result = next_run_check_sweep()
    assert result.failed == 12


# --- follow-ups: e-mail and the handover hook -------------------------------------------------


def test_failed_check_tells_its_creator_and_the_technical_owners_once(world: dict[str, Any]) -> None:
    from handover.notifications import tasks as notification_tasks
    from handover.notifications.models import Notification, NotificationDelivery

    creator = UserFactory(email="sam@example.com")
    owner = UserFactory(email="tech@example.com")
    role_grant(user=owner, role="technical_owner", obj=world["target"].job)
    role_grant(user=creator, role="support", obj=world["target"].tenant)
    check, _ = next_run_check_schedule(target=world["target"], after=RECOVERED, actor=creator)
    sweep_at(DEADLINE)

    assert next_run_check_notify_failed(check_ids=[check.pk]) == 1
    assert next_run_check_notify_failed(check_ids=[check.pk]) == 0  # it may run twice; one notification each

    notes = Notification.objects.filter(event="check_failed", dedup_key=f"check:{check.public_id}")
    assert sorted(n.recipient.email for n in notes) == ["sam@example.com", "tech@example.com"]
    for delivery in NotificationDelivery.objects.filter(channel="email"):
        assert notification_tasks.notification_deliver(delivery.pk) == "sent"
    assert sorted(m.to[0] for m in mail.outbox) == ["sam@example.com", "tech@example.com"]
    message = mail.outbox[0]
    assert "nightly-invoice-export / acme-foods / prod" in message.subject
    assert "2026-11-29 02:00 CET" in message.body and str(check.public_id) in message.body
    check.refresh_from_db()
    assert check.failure_notified_at is not None


def test_follow_up_releases_its_claim_when_telling_fails(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    creator = UserFactory(email="sam@example.com")
    role_grant(user=creator, role="support", obj=world["target"].tenant)
    check, _ = next_run_check_schedule(target=world["target"], after=RECOVERED, actor=creator)
    sweep_at(DEADLINE)

    def broken(**kwargs: Any) -> None:
        raise OSError("database hiccup")

    monkeypatch.setattr("handover.handovers.check_follow_ups._tell_check_failed", broken)
    with pytest.raises(OSError):
        next_run_check_notify_failed(check_ids=[check.pk])
    check.refresh_from_db()
    assert check.failure_notified_at is None  # a retry will try again


# --- transitions and waivers --------------------------------------------------------------------

TRANSITION_MATRIX = [
    ("scheduled", "pass", "passed"),
    ("scheduled", "fail", "failed"),
    ("scheduled", "waive", "waived"),
    ("passed", "pass", "passed"),
    ("passed", "fail", InvalidTransition),
    ("passed", "waive", InvalidTransition),
    ("failed", "pass", InvalidTransition),
    ("failed", "fail", "failed"),
    ("failed", "waive", InvalidTransition),
    ("waived", "pass", InvalidTransition),
    ("waived", "fail", InvalidTransition),
    ("waived", "waive", "waived"),
]


@pytest.mark.parametrize(("source", "action", "expected"), TRANSITION_MATRIX)
def test_transition_matrix(source: str, action: str, expected: Any) -> None:
    traits = {} if source == "scheduled" else {source: True}
    check = NextRunCheckFactory(**traits)
    person = UserFactory()
    values = {
        "pass": {"evidence_attempt_id": AttemptFactory(status="succeeded").pk, "duplicate_check": "checked"},
        "fail": {"failure_reason": "deadline_passed"},
        "waive": {
            "waived_by": person,
            "waiver_owner": person,
            "waiver_checkpoint": date(2027, 1, 1),
            "waiver_reason": "far away",
        },
    }[action]
    before = TimelineEvent.objects.count()

    change = CheckChange(check=check, summary="x", values=values)

    if expected is InvalidTransition:
        with pytest.raises(InvalidTransition):
            next_run_check_transition(action=action, changes=[change])
        check.refresh_from_db()
        assert check.status == source
        assert TimelineEvent.objects.count() == before
        return
    [result] = next_run_check_transition(action=action, changes=[change])
    assert result.status == expected
    assert NextRunCheck.objects.get(pk=check.pk).status == expected
    assert TimelineEvent.objects.count() == before + (1 if source == "scheduled" else 0)


@pytest.fixture
def waiver_people(world: dict[str, Any]) -> dict[str, Any]:
    actor = UserFactory(username="support-sam")
    owner = UserFactory(username="owner-olga")
    role_grant(user=actor, role="support", obj=world["target"].tenant)
    role_grant(user=owner, role="support", obj=world["target"].tenant)
    return {"actor": actor, "owner": owner}


def test_waive_records_checkpoint_reason_and_named_owner(check: NextRunCheck, waiver_people: dict[str, Any]) -> None:
    with time_machine.travel(RECOVERED, tick=False):
        waived = next_run_check_waive(
            check=check,
            actor=waiver_people["actor"],
            owner=waiver_people["owner"],
            checkpoint=date(2027, 3, 1),
            reason="Quarterly job: the next run is in March",
        )

    assert waived.status == NextRunCheck.Status.WAIVED
    assert (waived.waived_by, waived.waiver_owner) == (waiver_people["actor"], waiver_people["owner"])
    assert (waived.waiver_checkpoint, waived.waived_at) == (date(2027, 3, 1), RECOVERED)
    assert waived.passed_at is None  # a waiver is never a pass
    event = TimelineEvent.objects.get(kind="next_run_check_waived")
    assert event.actor_user == waiver_people["actor"] and "owner-olga" in event.summary
    # the sweep leaves a waived check alone, even past its deadline
    assert sweep_at(DEADLINE + timedelta(days=1)).due == 0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"reason": "   "}, "reason"),
        ({"checkpoint": date(2026, 11, 27)}, "checkpoint"),
        ({"checkpoint": None}, "checkpoint"),
        ({"owner": None}, "owner"),
        ({"owner": "inactive"}, "owner"),
        ({"owner": "stranger"}, "owner"),
    ],
    ids=["blank-reason", "checkpoint-in-the-past", "no-checkpoint", "no-owner", "inactive-owner", "owner-without-role"],
)
def test_waiver_rules(check: NextRunCheck, waiver_people: dict[str, Any], change: dict[str, Any], field: str) -> None:
    values: dict[str, Any] = {"reason": "far away", "checkpoint": date(2027, 3, 1), "owner": waiver_people["owner"]}
    values.update(change)
    if values["owner"] == "inactive":
        waiver_people["owner"].is_active = False
        waiver_people["owner"].save()
        values["owner"] = waiver_people["owner"]
    elif values["owner"] == "stranger":
        values["owner"] = UserFactory()

    with time_machine.travel(RECOVERED, tick=False), pytest.raises(DomainError) as raised:
        next_run_check_waive(check=check, actor=waiver_people["actor"], **values)

    assert field in raised.value.errors
    check.refresh_from_db()
    assert check.status == NextRunCheck.Status.SCHEDULED


def test_only_support_or_a_technical_owner_waives(check: NextRunCheck, waiver_people: dict[str, Any]) -> None:
    business_owner = UserFactory()
    role_grant(user=business_owner, role="business_owner", obj=check.target.tenant)
    with time_machine.travel(RECOVERED, tick=False), pytest.raises(Forbidden):
        next_run_check_waive(
            check=check, actor=business_owner, owner=waiver_people["owner"], checkpoint=date(2027, 3, 1), reason="far"
        )
    assert NextRunCheck.objects.get(pk=check.pk).status == NextRunCheck.Status.SCHEDULED
    assert not TimelineEvent.objects.filter(kind=TimelineEvent.Kind.NEXT_RUN_CHECK_WAIVED).exists()


def test_a_failed_or_passed_check_cannot_be_waived(waiver_people: dict[str, Any], world: dict[str, Any]) -> None:
    for trait in ("failed", "passed"):
        check = NextRunCheckFactory(target=world["target"], **{trait: True})
        with pytest.raises(InvalidTransition, match=f"is {trait}"):
            next_run_check_waive(
                check=check,
                actor=waiver_people["actor"],
                owner=waiver_people["owner"],
                checkpoint=date(2099, 1, 1),
                reason="too late for that",
            )


# --- the services refuse (issue #15: every refusal comes from a service) ------------------------


def test_check_services_refuse_a_reader_and_an_outsider_and_write_nothing(
    world: dict[str, Any], check: NextRunCheck
) -> None:
    reader, outsider = UserFactory(), UserFactory()
    role_grant(user=reader, role="auditor", obj=check.target.tenant)
    owner = UserFactory()
    role_grant(user=owner, role="support", obj=check.target.tenant)
    before_events = TimelineEvent.objects.count()
    before_checks = list(NextRunCheck.objects.values().order_by("pk"))
    for actor, error in ((reader, Forbidden), (outsider, NotFound)):
        with pytest.raises(error):
            next_run_check_waive(
                check=check, actor=actor, owner=owner, checkpoint=date(2099, 1, 1), reason="next run far away"
            )
        with pytest.raises(error):
            next_run_check_confirm(check=check, actor=actor, note="looked")
        with pytest.raises(error):
            next_run_check_schedule(target=check.target, after=EXPECTED + timedelta(days=3), actor=actor)
    assert TimelineEvent.objects.count() == before_events
    assert list(NextRunCheck.objects.values().order_by("pk")) == before_checks

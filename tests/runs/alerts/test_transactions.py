"""How ingestion uses the database: one transaction per alert (per chunk of a batch), the statements a
post costs, and the sweep that finishes a delivery a crash left ``received``."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.db import OperationalError, connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runs.alerts import bulk as bulk_module
from runs.alerts import (
    context as context_module,  # PRIME_COMBINATIONS  # the set-based path: fast_candidate, segment_apply
)
from runs.alerts import receive as receive_module  # the post's loop: _alert_receive, _alert_apply, CHUNK_ALERTS
from runs.alerts.models import Alert, Delivery
from runs.alerts.receive import delivery_sweep_received
from runs.alerts.triage import alert_sweep_pending
from runs.attempts.models import Attempt, Run, RunnerReport
from runs.catalog.models import IntegrationKey
from runs.timeline.models import TimelineEvent
from tests.conftest import fixture_path, is_postgres

pytestmark = pytest.mark.django_db
TIMES = ("window_start", "window_end", "scheduled_for", "started_at", "ended_at", "sent_at")


@pytest.fixture
def key(story_tenants: dict[str, Any], make_key: Any) -> str:
    return make_key("generic", tenants=[story_tenants["acme-foods"]])


def first_failure(days_later: int = 0) -> dict[str, Any]:
    """The first-failure fixture moved ``days_later`` days on: its own window, run and attempt."""
    item = json.loads(fixture_path("generic", "01-first-failure.json").read_text())
    for name in TIMES:
        item[name] = (datetime.fromisoformat(item[name]) + timedelta(days=days_later)).isoformat()
    item["execution_id"] += f"-{days_later}"
    return item


def batch(count: int) -> dict[str, Any]:
    return {"alerts": [first_failure(n) for n in range(count)]}


def world() -> tuple[int, ...]:
    """Row counts of everything a post writes (a second sweep must change none of them)."""
    return tuple(m.objects.count() for m in (Delivery, Alert, Run, Attempt, RunnerReport, TimelineEvent))


class SimulatedCrash(BaseException):
    """A process dying mid-request: no ``except Exception`` catches it (a failed processing, which
    ingestion does catch and counts as a try, is ``tests/runs/alerts/test_rule9.py``'s)."""


def crash_at(monkeypatch: pytest.MonkeyPatch, index: int) -> None:
    """Make applying the alert at ``index`` of a post raise, as a process dying mid-request would stop it."""
    apply = receive_module.alert_apply_in_transaction

    def crashing(alert: Alert, record: Any, ctx: Any) -> Alert:
        if alert.index == index:
            raise SimulatedCrash("simulated crash")
        return apply(alert, record, ctx)

    monkeypatch.setattr(receive_module, "alert_apply_in_transaction", crashing)
    candidate = bulk_module.fast_candidate

    def crashing_candidate(delivery: Delivery, at: int, record: Any, ctx: Any) -> Any:
        if at == index:  # the set-based path (PostgreSQL) dies at the same record
            raise SimulatedCrash("simulated crash")
        return candidate(delivery, at, record, ctx)

    monkeypatch.setattr(bulk_module, "fast_candidate", crashing_candidate)


def post_through_crash(post_alert: Any, body: dict[str, Any], key: str) -> None:
    """Post while ``crash_at`` is in force: the request dies with the process."""
    with pytest.raises(SimulatedCrash, match="simulated crash"):
        post_alert("generic", body, key)


# --- statements per post ------------------------------------------------------------------------


def test_one_generic_post_costs_a_fixed_handful_of_statements(
    key: str, post_alert: Any, django_assert_max_num_queries: Any
) -> None:
    # key; delivery INSERT (committed before parsing); the key's last use (once a minute); then ONE
    # transaction: job+tenant+target, then the set-based path's savepoint with the run, attempt, alert
    # (inserted accepted) and timeline event (runs/alerts/bulk.py), the runner report and the delivery's
    # outcome with the response, before it commits: 14 on PostgreSQL (15 row by row, 33 before that).
    # SQLite applies row by row: a savepoint around each get-or-create INSERT, the run's row lock and one
    # read of its attempts.
    with django_assert_max_num_queries(14 if is_postgres() else 20):
        response = post_alert("generic", first_failure(), key)

    assert [a["outcome"] for a in response.json()["alerts"]] == ["accepted"]
    run = Run.objects.get()
    assert run.status == Run.Status.FAILED and run.status_changed_at is not None
    assert (Attempt.objects.count(), RunnerReport.objects.count(), TimelineEvent.objects.count()) == (1, 1, 1)
    delivery = Delivery.objects.get()
    assert (delivery.outcome, delivery.response_status) == (Delivery.Outcome.PROCESSED, 202)


def test_a_batch_of_100_costs_a_bounded_number_of_statements(
    key: str, post_alert: Any, django_assert_max_num_queries: Any
) -> None:
    # PostgreSQL, set-based: the same 14 statements as one alert -- one INSERT per table for the whole
    # chunk (runs, attempts, alerts, timeline events, runner reports) inside one savepoint (710 row by
    # row: about seven per alert). SQLite, row by row: alert INSERT, run, attempt,
    # timeline event, alert outcome, a savepoint around each of the first three, the run's row lock and
    # one read of its attempts.
    with django_assert_max_num_queries(14 if is_postgres() else 1310):
        response = post_alert("generic", batch(100), key)

    assert response.status_code == 202
    assert {a["outcome"] for a in response.json()["alerts"]} == {"accepted"}
    assert world()[1:] == (100, 100, 100, 100, 100)
    assert set(Run.objects.values_list("status", flat=True)) == {Run.Status.FAILED}
    assert RunnerReport.objects.filter(alert__isnull=False, attempt__isnull=False).count() == 100
    alerts = list(Alert.objects.select_related("attempt__run").order_by("index"))
    assert [a.attempt.execution_id for a in alerts] == [a.execution_id for a in alerts]
    assert all(a.run_id == a.attempt.run_id and a.attempt.number == 1 for a in alerts)


def target_reads(captured: Any) -> int:
    """How many statements of ``captured`` read job targets (``PostContext.prime_many``'s one query)."""
    return sum(1 for query in captured if 'FROM "runs_jobtarget"' in query["sql"] and query["sql"].startswith("SELECT"))


@pytest.mark.parametrize("combinations", [1000, 1])
def test_a_batch_naming_several_tenants_reads_their_targets_together(
    story_tenants: dict[str, Any],
    make_key: Any,
    post_alert: Any,
    monkeypatch: pytest.MonkeyPatch,
    combinations: int,
) -> None:
    # Three bound tenants and one the key does not hold, each named by two alerts of one post: the
    # chunk's targets are read in one query (or, past PRIME_COMBINATIONS, one query per target named);
    # the unbound tenant is refused exactly as when read alone.
    monkeypatch.setattr(context_module, "PRIME_COMBINATIONS", combinations)
    bound = ["acme-foods", "borealis-retail", "cedar-health"]
    key = make_key("generic", tenants=[story_tenants[slug] for slug in bound])
    slugs = [*bound, "dunmore-pharmacy"]
    body = {"alerts": [{**first_failure(n), "tenant": slugs[n % 4]} for n in range(8)]}

    with CaptureQueriesContext(connection) as captured:
        response = post_alert("generic", body, key)

    assert target_reads(captured.captured_queries) == (1 if combinations > 1 else 4)
    outcomes = [a["outcome"] for a in response.json()["alerts"]]
    assert outcomes == ["accepted", "accepted", "accepted", "unmatched"] * 2
    assert sorted(Run.objects.values_list("tenant__slug", flat=True)) == sorted(bound * 2)
    assert all(run.target is not None and run.target.tenant_id == run.tenant_id for run in Run.objects.all())
    refused = Alert.objects.filter(outcome=Alert.Outcome.UNMATCHED)
    assert refused.count() == 2 and all("dunmore-pharmacy" in alert.reason for alert in refused)


def test_a_chunk_that_fails_on_a_database_error_is_redone_alert_by_alert(
    key: str, post_alert: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    receive_one = receive_module._alert_receive
    failed: list[int] = []

    def deadlock_once(delivery: Delivery, index: int, record: Any, ctx: Any) -> Alert:
        alert = receive_one(delivery, index, record, ctx)
        if index == 2 and not failed:
            failed.append(index)
            raise OperationalError("deadlock detected")  # after alerts 0-2 were written in the chunk
        return alert

    monkeypatch.setattr(receive_module, "_alert_receive", deadlock_once)
    segment_apply = bulk_module.segment_apply

    def segment_deadlock_once(delivery: Delivery, segment: list[Any], ctx: Any, receive: Any) -> list[Alert]:
        alerts = segment_apply(delivery, segment, ctx, receive)
        if any(fast.index == 2 for fast in segment) and not failed:
            failed.append(2)
            raise OperationalError("deadlock detected")  # on the set-based path: after the segment was written
        return alerts

    monkeypatch.setattr(bulk_module, "segment_apply", segment_deadlock_once)

    response = post_alert("generic", batch(4), key)

    assert failed == [2]
    assert [a["outcome"] for a in response.json()["alerts"]] == ["accepted"] * 4
    assert world()[1:] == (4, 4, 4, 4, 4)
    assert sorted(Alert.objects.values_list("index", flat=True)) == [0, 1, 2, 3]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("count", [1, 3])
def test_the_outcome_and_the_answer_are_written_in_the_apply_transaction(
    key: str, post_alert: Any, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    # rule 9's two commits: the stored delivery, then the apply transaction, which also keeps the outcome
    # and the answer (no third commit for them)
    write = receive_module._delivery_write
    writes: list[tuple[bool, Any]] = []

    def noting(delivery: Delivery, **response: Any) -> None:
        writes.append((connection.in_atomic_block, response.get("response_status")))
        write(delivery, **response)

    monkeypatch.setattr(receive_module, "_delivery_write", noting)
    response = post_alert("generic", batch(count), key)

    assert writes == [(True, 202)]
    delivery = Delivery.objects.get()
    assert (delivery.outcome, delivery.response_status) == (Delivery.Outcome.PROCESSED, 202)
    assert delivery.response_body == response.json()
    assert [a["outcome"] for a in delivery.response_body["alerts"]] == ["accepted"] * count
    assert world()[1:] == (count,) * 5


@pytest.mark.parametrize("count", [1, 3])
def test_an_apply_transaction_that_fails_after_the_outcome_was_written_loses_nothing(
    key: str, post_alert: Any, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    # The last chunk fails on a database error after its outcome UPDATE (a deadlock at commit): everything
    # of it is rolled back. Several alerts are redone one per transaction and the outcome written after
    # them; a lone alert is a failed processing (rule 9: kept ``received`` for the sweep, answered 202).
    writer = receive_module._OutcomeWriter.__call__
    failed: list[bool] = []

    def fail_once(self: Any, alerts: list[Alert]) -> None:
        writer(self, alerts)
        if not failed:
            failed.append(True)
            raise OperationalError("deadlock detected")

    monkeypatch.setattr(receive_module._OutcomeWriter, "__call__", fail_once)
    response = post_alert("generic", batch(count), key)

    assert failed == [True] and response.status_code == 202
    delivery = Delivery.objects.get()
    assert delivery.response_status == 202 and delivery.response_body == response.json()
    if count == 1:
        assert (delivery.outcome, delivery.try_count) == (Delivery.Outcome.RECEIVED, 1)
        assert world()[1:] == (0, 0, 0, 0, 0)
        assert "retried" in response.json()["detail"]
    else:
        assert delivery.outcome == Delivery.Outcome.PROCESSED
        assert [a["outcome"] for a in response.json()["alerts"]] == ["accepted"] * count
        assert world()[1:] == (count,) * 5


def test_the_key_last_use_is_written_at_most_once_a_minute(key: str, post_alert: Any) -> None:
    record = IntegrationKey.objects.get(prefix=key[:12])
    post_alert("generic", first_failure(0), key)
    first = IntegrationKey.objects.get(pk=record.pk).last_used_at
    assert first == Delivery.objects.get().received_at

    post_alert("generic", first_failure(1), key)
    assert IntegrationKey.objects.get(pk=record.pk).last_used_at == first

    with time_machine.travel(timezone.now() + timedelta(seconds=61)):
        post_alert("generic", first_failure(2), key)
    assert IntegrationKey.objects.get(pk=record.pk).last_used_at == Delivery.objects.latest("id").received_at


# --- crash recovery: the sweep of deliveries left `received` --------------------------------------


def test_a_delivery_left_received_by_a_crash_is_finished_by_the_sweep_exactly_once(
    key: str, post_alert: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    crash_at(monkeypatch, 0)
    post_through_crash(post_alert, first_failure(), key)
    monkeypatch.undo()

    # Stored first, then the alert's transaction rolled back: the delivery and nothing else.
    delivery = Delivery.objects.get()
    assert delivery.outcome == Delivery.Outcome.RECEIVED
    assert world() == (1, 0, 0, 0, 0, 0)
    assert Client().get("/healthz").json()["unfinished_deliveries"] == 1
    assert alert_sweep_pending() == 0  # a request may still be at work on it: too young to sweep

    assert alert_sweep_pending(older_than_seconds=0) == 1

    delivery.refresh_from_db()
    assert delivery.outcome == Delivery.Outcome.PROCESSED
    alert = Alert.objects.get()
    assert (alert.index, alert.outcome, alert.duplicate_of) == (0, Alert.Outcome.ACCEPTED, None)
    attempt = Attempt.objects.get()
    assert alert.attempt == attempt and alert.run == attempt.run
    assert attempt.run.status == Run.Status.FAILED
    assert TimelineEvent.objects.get().kind == "attempt_failed"
    after = world()
    assert after == (1, 1, 1, 1, 1, 1)
    assert Client().get("/healthz").json()["unfinished_deliveries"] == 0

    # A second sweep (or a concurrent one) finds nothing to do.
    assert alert_sweep_pending(older_than_seconds=0) == 0
    assert delivery_sweep_received(older_than_seconds=0) == 0
    assert world() == after


def test_the_sweep_skips_the_alerts_of_a_batch_committed_before_the_crash(
    key: str, post_alert: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(receive_module, "CHUNK_ALERTS", 2)
    crash_at(monkeypatch, 3)  # chunk [0, 1] commits; chunk [2, 3] is rolled back; [4] never starts
    post_through_crash(post_alert, batch(5), key)
    monkeypatch.undo()
    monkeypatch.setattr(receive_module, "CHUNK_ALERTS", 2)
    recorded = {a.index: (a.public_id, a.attempt_id) for a in Alert.objects.all()}
    assert sorted(recorded) == [0, 1]
    assert Delivery.objects.get().outcome == Delivery.Outcome.RECEIVED

    assert delivery_sweep_received(older_than_seconds=0) == 1

    alerts = list(Alert.objects.order_by("index"))
    assert [(a.index, a.outcome) for a in alerts] == [(n, Alert.Outcome.ACCEPTED) for n in range(5)]
    assert {a.index: (a.public_id, a.attempt_id) for a in alerts[:2]} == recorded  # untouched
    assert world() == (1, 5, 5, 5, 5, 5)
    assert Delivery.objects.get().outcome == Delivery.Outcome.PROCESSED

    after = world()
    assert delivery_sweep_received(older_than_seconds=0) == 0
    assert world() == after


def test_the_sweep_keeps_a_post_that_no_longer_parses_rejected(key: str) -> None:
    integration_key = IntegrationKey.objects.get(prefix=key[:12])
    Delivery.objects.create(
        integration=integration_key.integration,
        key=integration_key,
        received_at=timezone.now() - timedelta(minutes=5),
        size_bytes=7,
        sha256="0" * 64,
        body="{broken",
    )

    assert delivery_sweep_received() == 1

    delivery = Delivery.objects.get()
    assert delivery.outcome == Delivery.Outcome.REJECTED and delivery.reason
    assert not Alert.objects.exists()

"""Concurrent posts of one alert on PostgreSQL: one attempt, one timeline event, the rest duplicates."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection  # noqa: F401 - read by the skipif condition
from django.test import Client

from runs.alerts.models import Alert
from runs.attempts.models import Attempt, Run
from runs.timeline.models import TimelineEvent
from tests.concurrency import run_concurrently
from tests.conftest import fixture_path

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif("connection.vendor != 'postgresql'", reason="real row locks and unique indexes need PostgreSQL"),
]
THREADS = 20


def poster(key: str, body: bytes) -> Callable[[], Any]:
    """One generic post of ``body``, with a client of its own (one per thread); returns the response."""
    client = Client()
    return lambda: client.post(
        "/api/v1/alerts/generic/", data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
    )


def test_twenty_concurrent_posts_of_one_alert_create_one_attempt(story_tenants: Any, make_key: Any) -> None:
    key = make_key("generic", tenants=[story_tenants["acme-foods"]])
    body = fixture_path("generic", "01-first-failure.json").read_bytes()

    responses = run_concurrently([poster(key, body) for _ in range(THREADS)])

    results = [(response.status_code, response.json()["alerts"][0]["outcome"]) for response in responses]
    assert sorted(results) == [(202, "accepted")] + [(202, "duplicate")] * (THREADS - 1)
    assert Run.objects.count() == 1
    assert Attempt.objects.count() == 1
    assert TimelineEvent.objects.count() == 1
    original = Alert.objects.get(duplicate_of__isnull=True)
    assert original.outcome == Alert.Outcome.ACCEPTED and original.repeat_count == THREADS - 1
    # the losing path really ran: every loser is a stored duplicate pointing at the original
    assert Alert.objects.filter(duplicate_of=original, outcome=Alert.Outcome.DUPLICATE).count() == THREADS - 1


def test_concurrent_posts_of_different_states_of_one_execution_create_one_attempt(
    story_tenants: Any, make_key: Any
) -> None:
    key = make_key("generic", tenants=[story_tenants["borealis-retail"]])
    items = json.loads(fixture_path("generic", "05-batch-two-tenants.json").read_bytes())["alerts"][:2]
    bodies = [json.dumps(item).encode() for item in items] * 5

    run_concurrently([poster(key, body) for body in bodies])

    attempt = Attempt.objects.get()
    assert attempt.status == Attempt.Status.SUCCEEDED
    assert Run.objects.get().status == Run.Status.SUCCEEDED
    assert Alert.objects.filter(outcome=Alert.Outcome.ACCEPTED).count() == 2
    assert Alert.objects.filter(outcome=Alert.Outcome.DUPLICATE).count() == 8


def test_two_scheduler_instances_posting_one_slot_at_once_give_one_run_numbered_attempts_one_duplicate(
    story_tenants: Any, make_key: Any
) -> None:
    """Two scheduler instances trigger the same slot (as in https://github.com/apache/airflow-site/issues/217,
    a scheduled DAG run twice within a minute) and both report at the same instant. Decided under the
    run's row lock: one run, attempts numbered 1 and 2 (never both 1), exactly the later one flagged."""
    key = make_key("generic", tenants=[story_tenants["acme-foods"]])
    base = json.loads(fixture_path("generic", "01-first-failure.json").read_bytes())
    bodies = []
    for instance in ("scheduler-a", "scheduler-b"):
        item = {k: v for k, v in base.items() if k not in ("attempt", "trigger", "items", "ended_at", "error")}
        item.update(execution_id=f"{instance}-20261128", status="running", started_at="2026-11-28T02:00:05+01:00")
        bodies.append(json.dumps(item).encode())

    responses = run_concurrently([poster(key, body) for body in bodies])

    assert [response.json()["alerts"][0]["outcome"] for response in responses] == ["accepted", "accepted"]
    run = Run.objects.get()
    rows = list(run.attempts.order_by("number").values_list("number", "trigger", "is_duplicate_trigger"))
    assert rows == [(1, "scheduled", False), (2, "scheduled", True)]
    assert run.status == Run.Status.RUNNING
    assert TimelineEvent.objects.filter(kind="duplicate_trigger", attempt__number=2).count() == 1


def test_concurrent_batches_naming_the_same_new_runs_give_one_run_each_and_numbered_attempts(
    story_tenants: Any, make_key: Any
) -> None:
    """Four posts of 30 alerts at once, each naming the same 30 new runs with executions of its own: the
    set-based path races on every run's INSERT; the losers apply row by row on the run that won."""
    key = make_key("generic", tenants=[story_tenants["acme-foods"]])
    item = json.loads(fixture_path("generic", "01-first-failure.json").read_text())
    posts = 4

    def batch(post: int) -> bytes:
        alerts = []
        for day in range(30):
            alert = dict(item)
            for name in ("window_start", "window_end", "scheduled_for", "started_at", "ended_at", "sent_at"):
                alert[name] = (datetime.fromisoformat(item[name]) + timedelta(days=day)).isoformat()
            alert["execution_id"] = f"{item['execution_id']}-d{day}-p{post}"
            alerts.append(alert)
        return json.dumps({"alerts": alerts}).encode()

    responses = run_concurrently([poster(key, batch(number)) for number in range(posts)])

    assert [response.status_code for response in responses] == [202] * posts
    for response in responses:
        assert {a["outcome"] for a in response.json()["alerts"]} == {"accepted"}
    assert Run.objects.count() == 30
    assert Attempt.objects.count() == 30 * posts
    for run in Run.objects.all():
        assert sorted(run.attempts.values_list("number", flat=True)) == list(range(1, posts + 1))
    assert Alert.objects.filter(outcome=Alert.Outcome.ACCEPTED).count() == 30 * posts
    assert TimelineEvent.objects.filter(kind="attempt_failed").count() == 30 * posts

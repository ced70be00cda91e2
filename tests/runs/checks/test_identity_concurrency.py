"""Alert instances decided at once on PostgreSQL: HA peers posting the same failure at the same instant."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection  # noqa: F401 - read by the skipif condition
from django.test import Client

from runs.alerts.models import Alert
from runs.attempts.models import Attempt, Run
from runs.timeline.models import TimelineEvent
from tests.concurrency import run_concurrently

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif("connection.vendor != 'postgresql'", reason="real row locks need PostgreSQL"),
]


def peer_body(starts_at: str) -> bytes:
    alert = {
        "status": "firing",
        "labels": {
            "alertname": "JobFailed",
            "job_name": "nightly-invoice-export",
            "tenant": "acme-foods",
            "env": "prod",
            "execution_id": "exp-20261128-0200-a1",
        },
        "annotations": {"scheduled_for": "2026-11-28T02:00:00+01:00", "error": "timeout"},
        "startsAt": starts_at,
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "",
        "fingerprint": "a3f1c09e7b2d4e58",
    }
    return json.dumps({"version": "4", "status": "firing", "groupKey": "{}", "alerts": [alert]}).encode()


def test_two_ha_peers_posting_one_failure_at_once_make_one_attempt(story_tenants: Any, make_key: Any) -> None:
    """https://github.com/prometheus/alertmanager/issues/2222 — each node of an Alertmanager cluster
    sometimes notified the same firing alert; with two Prometheus replicas the peers' startsAt differ
    (01:20:15 and 01:20:45 here), so the dedup keys differ too. Posted at the same instant, the two
    are decided one after the other under the run's row lock: one run, one attempt, one
    ``attempt_failed`` event, both alerts pointing at that attempt."""
    key = make_key("alertmanager", tenants=[story_tenants["acme-foods"]])
    bodies = [peer_body("2026-11-28T01:20:15Z"), peer_body("2026-11-28T01:20:45Z")]

    def poster(body: bytes) -> Callable[[], Any]:
        client = Client()  # one per thread
        return lambda: client.post(
            "/api/v1/alerts/alertmanager/",
            data=body,
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {key}",
        )

    responses = run_concurrently([poster(body) for body in bodies])

    outcomes = [response.json()["alerts"][0]["outcome"] for response in responses]
    assert sorted(outcomes) in (["accepted", "accepted"], ["accepted", "duplicate"])
    run = Run.objects.get()
    attempt = Attempt.objects.get()
    assert attempt.run == run and attempt.number == 1
    assert TimelineEvent.objects.filter(kind="attempt_failed").count() == 1
    assert set(Alert.objects.values_list("attempt_id", flat=True)) == {attempt.pk}

"""The set-based apply path (``runs/alerts/bulk.py``, PostgreSQL) writes exactly what the row-by-row path writes.

One mixed batch -- new runs, a retry of a run the batch itself created, a re-send, a running attempt, a
tenant the key does not hold, a manual re-run, an unstorable identity, a secret in an error, runner
items, an invalid item -- is posted twice (the second post: every alert a re-send) with the set-based
path on and then, rolled back to the same start, with it off. Every business record is compared with
its ids replaced by what it is about: the answers, the alerts, the runs, the attempts, the timeline,
the runner reports. On PostgreSQL a spy on ``segment_write`` proves the set-based path really ran: it
wrote exactly the records the batch sends that way (``SET_BASED``) and, with it off, nothing. On SQLite
both posts take the row-by-row path (the comparison then holds trivially, and the spy proves the set
path never ran; the PostgreSQL pass of CI is the one that compares the two paths).
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.db import transaction
from django.test import override_settings

from runs.alerts import bulk as bulk_module  # segment_write, spied on
from runs.alerts.bulk import FastRecord
from runs.alerts.context import PostContext
from runs.alerts.models import Alert, Delivery
from runs.attempts.models import Attempt, Run, RunnerReport
from runs.timeline.models import TimelineEvent
from tests.conftest import fixture_path, is_postgres

pytestmark = pytest.mark.django_db
TIMES = ("window_start", "window_end", "scheduled_for", "started_at", "ended_at", "sent_at")
RECEIVED = datetime.fromisoformat("2026-12-10T09:00:00+00:00")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def ids_out(text: str) -> str:
    """``text`` with the public ids it quotes (a duplicate's original) replaced: they differ per post."""
    return UUID.sub("<id>", text)


@pytest.fixture
def key(story_tenants: dict[str, Any], make_key: Any) -> str:
    return make_key("generic", tenants=[story_tenants["acme-foods"], story_tenants["borealis-retail"]])


def fixture(name: str, days_later: int = 0, **changes: Any) -> dict[str, Any]:
    """A generic fixture file moved ``days_later`` days on (its own window and run), with ``changes``."""
    item = json.loads(fixture_path("generic", name).read_text())
    for field in TIMES:
        if field in item:
            item[field] = (datetime.fromisoformat(item[field]) + timedelta(days=days_later)).isoformat()
    if days_later:
        item["execution_id"] += f"-{days_later}"
    item.update(changes)
    return {k: v for k, v in item.items() if v is not None}


def mixed_batch() -> dict[str, Any]:
    return {
        "alerts": [
            fixture("01-first-failure.json"),  # a new run: set-based
            fixture("01-first-failure.json", 1, tenant="borealis-retail"),  # another new run: same segment
            fixture("02-retry-failure.json"),  # a retry on the run alert 0 created: row by row
            fixture("03-duplicate-redelivery.json"),  # a re-send of alert 0: a duplicate
            fixture("01-first-failure.json", 2, status="running", ended_at=None),  # running: row by row
            fixture("01-first-failure.json", 3, tenant="nowhere-ltd"),  # a tenant the key lacks: unmatched
            fixture("01-first-failure.json", 4, trigger="manual_rerun"),  # around the approvals: row by row
            # a secret in the error, then one cut to its column with a mend note: set-based (stored redacted, cut)
            fixture("01-first-failure.json", 5, error="ledger said Authorization: Bearer abcdefghijklmnop0123456789"),
            fixture("01-first-failure.json", 6, error="x" * 9000),
            fixture("01-first-failure.json", 7, execution_id="e" * 400),  # an identity too long: rejected
            {"schema": "handover.alert/v1", "job": 7},  # an invalid item
            fixture("04-next-run-ok.json"),  # a success on the next night: a new run, set-based
            fixture("01-first-failure.json", 8, status="succeeded", error=None),  # set-based again
        ]
    }


# The indexes of mixed_batch() the set-based path writes on a first post (PostgreSQL); a re-send goes row by row.
SET_BASED = {0, 1, 7, 8, 11, 12}
SegmentCall = tuple[int, set[int] | None]  # a delivery's pk, and what segment_write answered for it


def written_per_post(calls: list[SegmentCall]) -> list[set[int]]:
    """The indexes ``segment_write`` wrote, one set per post in post order (a None answer -- the segment
    rolled back and applied row by row -- wrote none)."""
    posts: dict[int, set[int]] = {}
    for delivery_pk, indexes in calls:
        posts.setdefault(delivery_pk, set()).update(indexes or ())
    return list(posts.values())


def snapshot() -> dict[str, Any]:
    """Every record a post writes, its ids replaced by what they point at (run identity, execution id)."""

    def run_of(run: Run | None) -> tuple[Any, ...] | None:
        if run is None:
            return None
        return (run.job.key, run.tenant.slug, run.environment, run.window_start, run.window_end)

    def attempt_of(attempt: Attempt | None) -> tuple[Any, ...] | None:
        return None if attempt is None else (run_of(attempt.run), attempt.execution_id)

    alert_fields = ("index", "kind", "outcome", "is_stale", "repeat_count", "job_key", "tenant_slug")
    alerts = [
        (
            alert.delivery.sha256,
            *(getattr(alert, name) for name in alert_fields),
            ids_out(alert.reason),
            alert.mend_notes,
            alert.fields,
            alert.summary,
            run_of(alert.run),
            attempt_of(alert.attempt),
            alert.duplicate_of.index if alert.duplicate_of else None,
        )
        for alert in Alert.objects.select_related("delivery", "run__job", "run__tenant", "duplicate_of").order_by(
            "delivery_id", "index"
        )
    ]
    runs = sorted(
        (run_of(run), run.status, run.scheduled_for, run.target_id is not None)
        for run in Run.objects.select_related("job", "tenant")
    )
    skip = {"id", "created_at", "updated_at", "public_id", "run", "status_changed_at"}
    attempts = sorted(
        (
            attempt_of(attempt),
            tuple(
                (f.name, getattr(attempt, f.attname))
                for f in Attempt._meta.concrete_fields
                if f.name not in skip and not f.name.endswith("_by")
            ),
        )
        for attempt in Attempt.objects.select_related("run__job", "run__tenant")
    )
    events = sorted(
        (
            run_of(event.run),
            attempt_of(event.attempt),
            event.alert.index if event.alert else None,
            event.kind,
            event.summary,
            event.occurred_at,
            event.actor_kind,
            json.dumps(event.data, sort_keys=True),
        )
        for event in TimelineEvent.objects.select_related("run__job", "run__tenant", "attempt__run", "alert")
    )
    reports = sorted(
        (attempt_of(r.attempt), r.alert.index, r.attempted_ids, r.completed_ids, r.failed_ids, r.reported_at)
        for r in RunnerReport.objects.select_related("attempt__run__job", "attempt__run__tenant", "alert")
    )
    return {"alerts": alerts, "runs": runs, "attempts": attempts, "events": events, "reports": reports}


def post_twice(post_alert: Any, key: str) -> tuple[list[Any], dict[str, Any]]:
    answers = []
    with time_machine.travel(RECEIVED, tick=False):
        for _ in range(2):
            response = post_alert("generic", mixed_batch(), key)
            assert response.status_code == 202
            answers.append(
                [
                    (a["outcome"], ids_out(a["reason"]), bool(a["run"]), bool(a["attempt"]))
                    for a in response.json()["alerts"]
                ]
            )
    return answers, snapshot()


def test_the_set_based_path_writes_what_the_row_by_row_path_writes(
    post_alert: Any, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    segment_write = bulk_module.segment_write
    calls: list[SegmentCall] = []

    def spy(delivery: Delivery, todo: list[FastRecord], ctx: PostContext) -> set[int] | None:
        indexes = segment_write(delivery, todo, ctx)
        calls.append((delivery.pk, indexes))
        return indexes

    monkeypatch.setattr(bulk_module, "segment_write", spy)
    results, written = {}, {}
    for set_path in (True, False):
        point = transaction.savepoint()
        with override_settings(HANDOVER_INGEST_SET_PATH=set_path):
            results[set_path] = post_twice(post_alert, key)
        transaction.savepoint_rollback(point)
        written[set_path] = written_per_post(calls)
        calls.clear()
    (set_answers, set_records), (row_answers, row_records) = results[True], results[False]

    assert set_answers == row_answers
    for table in set_records:
        assert set_records[table] == row_records[table], table
    # The batch says what it should: the comparison is about real rows, not two empty snapshots.
    first, second = set_answers
    assert [row[0] for row in first].count("accepted") == 9
    assert [row[0] for row in second] == ["duplicate"] * 10 + ["rejected"] + ["duplicate"] * 2
    assert len(set_records["runs"]) == 8 and len(set_records["attempts"]) == 9
    assert any("Bearer" in str(a) and "abcdefghijklmnop0123456789" not in str(a) for a in set_records["alerts"])
    # The set-based path was taken where it exists: on PostgreSQL it wrote the first post's records of the
    # common shape and none of the re-sends (its segments reached, every run there already); never off.
    assert written[True] == ([SET_BASED, set()] if is_postgres() else [])
    assert written[False] == []


@pytest.mark.skipif(not is_postgres(), reason="the set-based path runs on PostgreSQL only")
def test_a_chunk_of_new_runs_costs_one_statement_per_table(post_alert: Any, key: str) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    body = {"alerts": [fixture("01-first-failure.json", n) for n in range(50)]}
    with time_machine.travel(RECEIVED, tick=False), CaptureQueriesContext(connection) as captured:
        response = post_alert("generic", body, key)

    assert {a["outcome"] for a in response.json()["alerts"]} == {"accepted"}
    inserts = [q["sql"].split('"')[1] for q in captured.captured_queries if q["sql"].startswith("INSERT")]
    assert sorted(inserts) == sorted(
        ["runs_delivery", "runs_alert", "runs_run", "runs_attempt", "runs_timelineevent", "runs_runnerreport"]
    )
    assert (Run.objects.count(), Attempt.objects.count(), TimelineEvent.objects.count()) == (50, 50, 50)

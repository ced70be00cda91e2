"""The benchmark's floor endpoint: the least any ingestion design keeping rule 9 must do for a failed run.

``bench/ingest.py --floor`` serves it beside the app and the baseline (``bench/baseline_urls.py``) and
prints its throughput against the baseline's in the same run. It answers one question: can *any*
implementation of the product's ingestion, on this stack and this schema, reach the issue's target
of 70 % of the baseline's throughput? If the floor cannot, no trimming of the app can, and the target
is out of reach of the design, not of the code.

What it does, per post to ``POST /api/v1/alerts/<source>/`` (generic alert documents only, one or
``{"alerts": [...]}``; each must be a new failed attempt of a new run of a registered target):

1. exactly the baseline's steps: the same DRF ``APIView`` base, raw-body parser and body reading,
   the same integration-key authentication, and the raw body stored as a ``Delivery`` row in
   autocommit -- rule 9 of the design: the delivery commits before anything is parsed;
2. ``json.loads`` of the body and, per alert, the values the product stores (the dedup key and its
   SHA-256, the timestamps, four random public ids, the alert's fields as JSON);
3. **one** SQL statement, in autocommit (so one transaction, the second commit of rule 9; it checks
   its own counts and raises, so rolls back whole, when it wrote fewer rows than records): a chain
   of data-modifying CTEs that looks up the job targets the key may post for, and inserts the run,
   the attempt, the alert, its ``attempt_failed`` timeline event and its runner report -- the same
   five rows, with the same columns and so the same indexes, constraints and foreign-key checks as
   the app's post of a new failed run -- and marks the delivery processed with its answer.

What it leaves out is everything the product needs beyond writing those rows: no redaction, no
mending or validation of the record, no schedule placement (slot, early/late, duplicate trigger),
no dedup of a repeated alert, no existing run or attempt, no savepoint per record, no rate limit.
So its throughput bounds the product's from above. Frozen like the baseline: its file's SHA-256 is
printed with the figures (``bench/ingest.py``).

Answers 202 with the delivery's and the alerts' public ids; 401 without a valid key; 422 when a
record is not a new failed run of a target the key may post for (the statement finds it wrote fewer
alerts than were posted and raises: nothing of the apply is kept, the delivery stays ``received``).
"""

from __future__ import annotations

import hashlib
import json
import uuid
import weakref
from datetime import datetime
from typing import Any

import psycopg
from django.db import connection
from django.urls import path
from django.utils import timezone
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from bench.baseline_urls import ready
from handover.core.errors import problem, problem_response
from runs.alerts.models import Delivery
from runs.alerts.receive_api import RawBodyParser, read_body
from runs.catalog.authentication import bearer_from_request, integration_key_authenticate

# One row per alert in ``src``; every later CTE joins back to it by the public ids chosen in Python.
APPLY = """
WITH src AS (
    SELECT * FROM unnest(
        %(index)s::int[], %(job)s::text[], %(tenant)s::text[], %(environment)s::text[],
        %(window_start)s::timestamptz[], %(window_end)s::timestamptz[], %(scheduled_for)s::timestamptz[],
        %(execution_id)s::text[], %(number)s::int[], %(trigger)s::text[], %(started_at)s::timestamptz[],
        %(ended_at)s::timestamptz[], %(error)s::text[], %(correlation)s::text[], %(log_url)s::text[],
        %(config_version)s::text[], %(dedup_key)s::text[], %(dedup_hash)s::text[], %(fields)s::text[],
        %(run_pid)s::uuid[], %(attempt_pid)s::uuid[], %(alert_pid)s::uuid[], %(event_pid)s::uuid[],
        %(summary)s::text[], %(attempted)s::text[], %(completed)s::text[], %(failed)s::text[]
    ) AS s("index", job, tenant, environment, window_start, window_end, scheduled_for, execution_id, number,
           "trigger", started_at, ended_at, error, correlation, log_url, config_version, dedup_key,
           dedup_hash, fields, run_pid, attempt_pid, alert_pid, event_pid, summary, attempted, completed,
           failed)
),
target AS (
    SELECT s.*, t.id AS target_id, t.job_id, t.tenant_id
    FROM src s
    JOIN runs_job j ON j.key = s.job
    JOIN runs_tenant n ON n.slug_key = s.tenant
    JOIN runs_jobtarget t ON t.job_id = j.id AND t.tenant_id = n.id AND t.environment = s.environment
    WHERE t.is_active AND EXISTS (
        SELECT 1 FROM runs_integrationkey_tenants b WHERE b.tenant_id = n.id AND b.integrationkey_id = %(key)s
    )
),
run AS (
    INSERT INTO runs_run (
        created_at, updated_at, public_id, job_id, tenant_id, environment, target_id, window_start,
        window_end, scheduled_for, status, status_changed_at, eligible_count, attempted_count,
        completed_count, skipped_count, rejected_count, unresolved_count, possible_duplicate_count,
        unverified_count, absent_count, uncertain_count, ledger_updated_at, ledger_version,
        failure_class_suggested, failure_class, failure_class_confirmed_by_id, failure_class_confirmed_at)
    SELECT %(now)s, %(now)s, run_pid, job_id, tenant_id, environment, target_id, window_start, window_end,
        scheduled_for, 'failed', %(now)s, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, 0, '', '', NULL, NULL
    FROM target
    ON CONFLICT DO NOTHING
    RETURNING id, public_id
),
attempt AS (
    INSERT INTO runs_attempt (
        created_at, updated_at, public_id, run_id, execution_id, number, source_number, "trigger",
        is_trigger_inferred, is_duplicate_trigger, duplicate_explained_at, duplicate_explained_by_id,
        duplicate_explanation, duplicate_evidence_ref, slot_offset_seconds, slot_tolerance_seconds,
        is_slot_late, is_slot_inferred, slot_hint, status, scheduled_at, started_at, ended_at,
        status_changed_at, error_summary, correlation_ref, log_url, config_version, replay_key,
        abandon_reason, abandoned_by_id)
    SELECT %(now)s, %(now)s, t.attempt_pid, run.id, t.execution_id, t.number, t.number, t."trigger", false,
        false, NULL, NULL, '', '', NULL, NULL, false, false, '', 'failed', NULL, t.started_at, t.ended_at,
        %(now)s, t.error, t.correlation, t.log_url, t.config_version, '', '', NULL
    FROM target t JOIN run ON run.public_id = t.run_pid
    RETURNING id, public_id, run_id
),
alert AS (
    INSERT INTO runs_alert (
        created_at, updated_at, public_id, delivery_id, integration_id, index, source, kind, dedup_key,
        dedup_hash, duplicate_of_id, repeat_count, outcome, reason, is_stale, fields, mend_notes, job_key,
        tenant_slug, environment, execution_id, summary, group_ref, correlation_key, run_id, attempt_id,
        outcome_at, ignored_by_id)
    SELECT %(now)s, %(now)s, t.alert_pid, %(delivery)s, %(integration)s, t."index", 'generic', 'attempt',
        t.dedup_key, t.dedup_hash, NULL, 0, 'accepted', '', false, t.fields::jsonb, '{}'::jsonb, t.job,
        t.tenant, t.environment, t.execution_id, t.summary, '', t.correlation, a.run_id, a.id, %(now)s, NULL
    FROM target t JOIN attempt a ON a.public_id = t.attempt_pid
    RETURNING id, public_id, run_id, attempt_id
),
event AS (
    INSERT INTO runs_timelineevent (
        public_id, job_id, tenant_id, run_id, attempt_id, alert_id, kind, occurred_at, recorded_at,
        actor_kind, actor_user_id, actor_integration_id, summary, data)
    SELECT t.event_pid, t.job_id, t.tenant_id, a.run_id, a.attempt_id, a.id, 'attempt_failed', t.ended_at,
        %(now)s, 'integration', NULL, %(integration)s, t.summary, '{}'::jsonb
    FROM target t JOIN alert a ON a.public_id = t.alert_pid
    RETURNING 1
),
report AS (
    INSERT INTO runs_runnerreport (
        created_at, updated_at, attempt_id, alert_id, attempted_ids, completed_ids, failed_ids, reported_at)
    SELECT %(now)s, %(now)s, a.attempt_id, a.id, t.attempted::jsonb, t.completed::jsonb, t.failed::jsonb,
        t.ended_at
    FROM target t JOIN alert a ON a.public_id = t.alert_pid
    RETURNING 1
),
delivery AS (
    UPDATE runs_delivery SET outcome = 'processed', response_status = 202, response_body = %(answer)s::jsonb
    WHERE id = %(delivery)s
    RETURNING 1
)
SELECT CASE WHEN w.alerts = %(count)s AND w.events = %(count)s AND w.reports = %(count)s AND w.deliveries = 1
    THEN w.alerts
    -- not a constant, so raised when run (not when planned): the whole statement, every CTE, rolls back
    ELSE ('floor: wrote ' || w.alerts || ' of ' || %(count)s || ' alerts')::int END
FROM (SELECT (SELECT count(*) FROM alert) AS alerts, (SELECT count(*) FROM event) AS events,
    (SELECT count(*) FROM report) AS reports, (SELECT count(*) FROM delivery) AS deliveries) AS w
"""

COLUMNS = (
    "index", "job", "tenant", "environment", "window_start", "window_end", "scheduled_for", "execution_id",
    "number", "trigger", "started_at", "ended_at", "error", "correlation", "log_url", "config_version",
    "dedup_key", "dedup_hash", "fields", "run_pid", "attempt_pid", "alert_pid", "event_pid", "summary",
    "attempted", "completed", "failed",
)  # fmt: skip


# The connections set up to prepare ``APPLY`` once and keep its one generic plan.
_PREPARING: weakref.WeakSet[psycopg.Connection] = weakref.WeakSet()


class RecordRefused(Exception):
    """A record the floor does not write (not a new failed run of a target the key may post for)."""


def _columns(records: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """The ``src`` arrays of ``APPLY``: one value per record per column (timestamps UTC, aware)."""
    columns: dict[str, list[Any]] = {name: [] for name in COLUMNS}
    for index, record in enumerate(records):
        job, tenant, environment = record["job"], record["tenant"], record["environment"]
        execution_id, status = record["execution_id"], record["status"]
        dedup_key = f"{job}{tenant}{environment}{execution_id}{status}"
        items = record.get("items") or {}
        number = int(record.get("attempt") or 1)
        values = {
            "index": index,
            "job": job,
            "tenant": tenant.lower(),
            "environment": environment,
            "window_start": datetime.fromisoformat(record["window_start"]),
            "window_end": datetime.fromisoformat(record["window_end"]),
            "scheduled_for": datetime.fromisoformat(record["scheduled_for"]),
            "execution_id": execution_id,
            "number": number,
            "trigger": record.get("trigger") or "scheduled",
            "started_at": datetime.fromisoformat(record["started_at"]),
            "ended_at": datetime.fromisoformat(record["ended_at"]),
            "error": record.get("error") or "",
            "correlation": record.get("correlation_id") or "",
            "log_url": record.get("log_url") or "",
            "config_version": record.get("config_version") or "",
            "dedup_key": dedup_key,
            "dedup_hash": hashlib.sha256(dedup_key.encode()).hexdigest(),
            "fields": json.dumps(record),
            "run_pid": uuid.uuid4(),
            "attempt_pid": uuid.uuid4(),
            "alert_pid": uuid.uuid4(),
            "event_pid": uuid.uuid4(),
            "summary": f"Attempt {number} ({execution_id}) failed: {record.get('error') or ''}"[:300],
            "attempted": json.dumps(items.get("attempted") or []),
            "completed": json.dumps(items.get("completed") or []),
            "failed": json.dumps(items.get("failed") or []),
        }
        if status != "failed":
            raise RecordRefused(f"record {index}: status {status!r}, not 'failed'")
        for name in COLUMNS:
            columns[name].append(values[name])
    return columns


class FloorIngestView(APIView):
    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    parser_classes = [RawBodyParser]

    def post(self, request: Request, source: str) -> Response:
        read = read_body(request)
        body, size = read.body, read.size
        key = integration_key_authenticate(bearer_from_request(request._request))
        if key is None:
            return problem_response(problem(401, "Not authenticated", "Send a valid integration key."))
        delivery = Delivery.objects.create(
            integration=key.integration,
            key=key,
            received_at=timezone.now(),
            content_type="application/json",
            size_bytes=size,
            sha256=hashlib.sha256(body).hexdigest(),
            body=body.decode("utf-8", errors="replace"),
        )
        document = json.loads(body)
        records = document["alerts"] if isinstance(document, dict) and "alerts" in document else [document]
        try:
            params: dict[str, Any] = _columns(records)
        except (RecordRefused, KeyError, ValueError, TypeError) as exc:
            return problem_response(problem(422, "Record not written", str(exc)))
        answer = {
            "delivery": str(delivery.public_id),
            "alerts": [
                {"id": str(alert), "outcome": "accepted", "run": str(run), "attempt": str(attempt)}
                for alert, run, attempt in zip(
                    params["alert_pid"], params["run_pid"], params["attempt_pid"], strict=True
                )
            ],
        }
        params.update(
            key=key.pk,
            integration=key.integration_id,
            delivery=delivery.pk,
            now=timezone.now(),
            answer=json.dumps(answer),
            count=len(records),
        )
        try:
            connection.ensure_connection()
            # autocommit: the statement is the apply's one transaction. Prepared (server-side binding, kept
            # per connection): planning the chain of CTEs anew for every post would cost more than running it.
            raw = connection.connection
            with psycopg.Cursor(raw) as cursor:
                if raw not in _PREPARING:
                    # Django turns psycopg's preparation off (``prepare_threshold`` None); its own cursors bind
                    # client-side and never prepare, so turning it on here prepares this statement only.
                    raw.prepare_threshold = 0
                    # one plan for any number of alerts: the arrays' lengths do not change the plan that suits them
                    cursor.execute("SET plan_cache_mode = force_generic_plan")
                    _PREPARING.add(raw)
                cursor.execute(APPLY, params, prepare=True)
            if connection.queries_logged:  # psycopg's own cursor bypasses Django's log: the probe counts it
                connection.queries_log.append({"sql": APPLY, "time": "0.000"})
        except psycopg.errors.InvalidTextRepresentation as exc:  # its own check: fewer rows, nothing kept
            return problem_response(problem(422, "Record not written", str(exc).splitlines()[0]))
        return Response(answer, status=202)


urlpatterns = [
    path("healthz", ready, name="healthz"),
    path("api/v1/alerts/<slug:source>/", FloorIngestView.as_view(), name="floor-ingest"),
]

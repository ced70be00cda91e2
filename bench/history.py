#!/usr/bin/env python
"""History benchmark: ingestion rate and list-page p95 as stored history grows (never run in CI).

Usage (from the repository root, after the README setup of ``.venv``)::

    .venv/bin/python bench/history.py                                # 0, 100,000 and 1,000,000 stored alerts
    .venv/bin/python bench/history.py --sizes 100000,1000000,10000000  # and 10 million (hours, ~20 GB)
    .venv/bin/python bench/history.py --sizes 20000 --posts 300      # a quick check
    .venv/bin/python bench/history.py --keep                         # keep the database afterwards

What it does, all on 127.0.0.1 (it refuses any other host), reusing ``bench/ingest.py``'s database,
registration, gunicorn and load-generator helpers:

1. creates a throw-away database on the PostgreSQL server of ``--database-url``, migrates it and
   registers the ingestion benchmark's job (``bench-hourly-export``), ten tenants and targets and
   the ``bench-generic`` integration with its key (``bench/ingest.py``); adds an admin and a support
   person with the support role on five of the ten tenants;
2. measures the empty history first (the baseline of the same run), then for each size in
   ``--sizes`` (stored alerts, ascending) tops the history up **by SQL, not through the API**:
   ``INSERT … SELECT … FROM generate_series`` into ``runs_delivery``, ``runs_run``, ``runs_attempt``,
   ``runs_alert`` and ``runs_timelineevent`` with explicit ids (the identity sequences are moved past
   them), every row satisfying the real schema: its check constraints, unique constraints and
   foreign keys (checked at commit), the timeline's append-only trigger. One run per two alerts,
   in hourly windows going back from the posted alerts' first window, on the same job and tenants
   and the same integration, so the posts land in the same tables and indexes: each run has one
   attempt (one in seven ``failed``), one post (delivery) of two alerts and two timeline events;
   the second alert of a run is ``unmatched`` (2.5 % of the alerts), ``rejected`` (2.5 %), a
   ``duplicate`` of the first (5 %) or an accepted resolve. Then ``VACUUM ANALYZE`` (what
   autovacuum does soon after a bulk load);
3. at each size: ingestion, ``--posts`` single-alert posts through gunicorn (``--workers`` sync
   workers, DEBUG off) from ``--clients`` concurrent clients (``bench/load.py``), each alert a new
   run (``bench/alerts.py``), after ``--warmup`` unmeasured posts; and pages, ``--page-requests``
   timed GETs (after two warm-ups) of the runs list, the inbox (pages and API lists), the recurrence
   page (the history's newest 90 days) and the "needs attention" page through Django's test client in
   this process -- the whole server side: middleware, session, selectors, the capped counts, template
   -- as the admin and as the support person (visibility filters).

Figures per size go to stdout; the last line is::

    history sizes=0,100000,1000000 ingest_per_s=A,B,C page_p95_ms=D,E,F run_list_p95_ms=… inbox_p95_ms=…
    recurrence_p95_ms=… attention_p95_ms=…

(one line) ``page_p95_ms`` is the worst page's p95 at that size; ``run_list_p95_ms``, ``inbox_p95_ms`` and
``recurrence_p95_ms`` are the admin's ``/runs/``, ``/inbox/`` and ``/recurrence/`` (90 days ending the day
before the posted alerts' first window: the history's newest 90 days, about 3,100 failed runs);
``attention_p95_ms`` is the worse of the admin's and the support person's ``/handovers/attention/``.
Flat means the figures at 1M (10M) stay near the baseline's. On a machine shared with other work
the figures carry its noise: the load average is printed. Exit status 0 when every post got 202,
1 otherwise, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import alerts as bench_alerts  # noqa: E402
from bench.ingest import APP_INTEGRATION, DEFAULT_SERVER_URL, Benchmark, Gunicorn, log  # noqa: E402
from bench.ingest import _interrupt as interrupt  # noqa: E402
from bench.load import PhaseResult  # noqa: E402

CHUNK_RUNS = 250_000  # runs per generated chunk (two alerts each): one INSERT per table per chunk
SUPPORT_TENANTS = 5
# The recurrence page over the 90 days before the posted alerts' first window: the history's last
# 90 days (the default period, the last 30 days, holds none of it).
RECURRENCE = f"/recurrence/?days=90&until={(bench_alerts.BASE - timedelta(days=1)).date().isoformat()}"
ATTENTION = "/handovers/attention/"
PAGES = [
    ("admin", "/runs/"),
    ("admin", "/inbox/"),
    ("admin", "/api/v1/runs/"),
    ("admin", "/api/v1/alerts/"),
    ("admin", RECURRENCE),
    ("admin", ATTENTION),
    ("support", "/runs/"),
    ("support", "/inbox/"),
    ("support", "/api/v1/alerts/"),
    ("support", RECURRENCE),
    ("support", ATTENTION),
]
TABLES = ("runs_delivery", "runs_run", "runs_attempt", "runs_alert", "runs_timelineevent")


def page_name(url: str) -> str:
    """A page's address for the tables: its path, and ``90 days`` for the recurrence page's period."""
    return "/recurrence/ 90 days" if url == RECURRENCE else url


def percentile(samples: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``samples`` by the nearest-rank method."""
    ordered = sorted(samples)
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))]


# --- history by SQL ---------------------------------------------------------------------------------

# One statement per table; %(…)s are bound parameters. ``g`` numbers the history's runs from
# %(first)s to %(last)s; ids are the table's offset + g (deliveries, runs, attempts) or + 2g + k
# (alerts and timeline events, k = 0 or 1). Window of run g: %(base)s - (g / 10 + 1) hours, tenant
# g % 10: before the posted alerts' first window, so no identity collides with a post's.
DELIVERIES_SQL = """
INSERT INTO runs_delivery (id, created_at, updated_at, public_id, received_at, content_type, size_bytes,
    sha256, body, is_body_truncated, outcome, reason, notes, response_status, response_body,
    integration_id, key_id, try_count, next_try_at, last_error)
SELECT %(delivery0)s + g, t, t, gen_random_uuid(), t, 'application/json', 180,
    md5('history-delivery-' || g) || md5('history-delivery-' || g || '-2'),
    '{"alerts": [{"job": "bench-hourly-export", "execution_id": "history-' || g || '"}]}',
    false, 'processed', '', '{}'::jsonb, 202, '{"accepted": 2}'::jsonb,
    %(integration)s, %(key)s, 1, NULL, ''
FROM (SELECT g, %(base)s::timestamptz - make_interval(hours => (g / 10)::int) + interval '5 minutes' AS t
      FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g) AS s
"""

RUNS_SQL = """
INSERT INTO runs_run (id, created_at, updated_at, public_id, environment, window_start, window_end,
    scheduled_for, status, status_changed_at, eligible_count, attempted_count, completed_count,
    skipped_count, rejected_count, unresolved_count, possible_duplicate_count, job_id, target_id,
    tenant_id, absent_count, failure_class, failure_class_confirmed_at, failure_class_confirmed_by_id,
    failure_class_suggested, ledger_updated_at, uncertain_count, unverified_count, ledger_version)
SELECT %(run0)s + g, w + interval '1 hour 5 minutes', w + interval '1 hour 5 minutes', gen_random_uuid(),
    'prod', w, w + interval '1 hour', w + interval '1 hour',
    CASE WHEN g %% 7 = 0 THEN 'failed' ELSE 'succeeded' END, w + interval '1 hour 5 minutes',
    0, 0, 0, 0, 0, 0, 0, %(job)s, (%(targets)s::bigint[])[g %% 10 + 1], (%(tenants)s::bigint[])[g %% 10 + 1],
    0, '', NULL, NULL, '', NULL, 0, 0, 0
FROM (SELECT g, %(base)s::timestamptz - make_interval(hours => (g / 10 + 1)::int) AS w
      FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g) AS s
"""

ATTEMPTS_SQL = """
INSERT INTO runs_attempt (id, created_at, updated_at, public_id, execution_id, number, trigger, status,
    scheduled_at, started_at, ended_at, status_changed_at, error_summary, correlation_ref, log_url,
    config_version, replay_key, abandon_reason, abandoned_by_id, run_id, duplicate_evidence_ref,
    duplicate_explained_at, duplicate_explained_by_id, duplicate_explanation, is_duplicate_trigger,
    is_slot_inferred, is_slot_late, is_trigger_inferred, slot_hint, slot_offset_seconds,
    slot_tolerance_seconds, source_number)
SELECT %(attempt0)s + g, e, e, gen_random_uuid(), 'history-' || g, 1, 'scheduled',
    CASE WHEN g %% 7 = 0 THEN 'failed' ELSE 'succeeded' END,
    w + interval '1 hour', w + interval '1 hour 3 seconds', e, e,
    CASE WHEN g %% 7 = 0 THEN 'Export failed: upstream timeout' ELSE '' END,
    'lg-history-' || g, 'https://logs.example.internal/q/history-' || g, '', '', '', NULL, %(run0)s + g,
    '', NULL, NULL, '', false, false, false, false, '', 0, 60, NULL
FROM (SELECT g, w, w + interval '1 hour 4 minutes' AS e
      FROM (SELECT g, %(base)s::timestamptz - make_interval(hours => (g / 10 + 1)::int) AS w
            FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g) AS s0) AS s
"""

# the second alert of run g: 0 unmatched, 1 rejected, 2-3 duplicate of the first, else an accepted resolve
ALERTS_SQL = """
INSERT INTO runs_alert (id, created_at, updated_at, public_id, index, source, kind, dedup_key, dedup_hash,
    repeat_count, outcome, reason, is_stale, fields, job_key, tenant_slug, environment, execution_id,
    summary, group_ref, outcome_at, duplicate_of_id, ignored_by_id, attempt_id, delivery_id,
    integration_id, run_id, mend_notes, correlation_key)
SELECT %(alert0)s + 2 * g + k, t, t, gen_random_uuid(), k, 'generic',
    CASE WHEN k = 1 AND o = 'accepted' THEN 'resolve' ELSE 'attempt' END,
    'history-' || g || '-' || k,
    CASE WHEN o = 'duplicate' THEN ''
         ELSE md5('history-' || g || '-' || k) || md5('history-' || g || '-' || k || '-2') END,
    CASE WHEN k = 0 AND g %% 20 IN (2, 3) THEN 1 ELSE 0 END,
    o, CASE o WHEN 'unmatched' THEN 'job "not-registered" is not registered'
              WHEN 'rejected' THEN 'status: not one of the known values' ELSE '' END,
    false, '{}'::jsonb,
    CASE WHEN o = 'unmatched' THEN 'not-registered' ELSE 'bench-hourly-export' END,
    (%(slugs)s::text[])[g %% 10 + 1], 'prod', 'history-' || g, '', '', t,
    CASE WHEN o = 'duplicate' THEN %(alert0)s + 2 * g END, NULL,
    CASE WHEN o IN ('accepted', 'duplicate') THEN %(attempt0)s + g END,
    %(delivery0)s + g, %(integration)s,
    CASE WHEN o IN ('accepted', 'duplicate') THEN %(run0)s + g END, '{}'::jsonb, ''
FROM (SELECT g, k, t,
             CASE WHEN k = 0 THEN 'accepted'
                  WHEN g %% 20 = 0 THEN 'unmatched'
                  WHEN g %% 20 = 1 THEN 'rejected'
                  WHEN g %% 20 IN (2, 3) THEN 'duplicate'
                  ELSE 'accepted' END AS o
      FROM (SELECT g, k, %(base)s::timestamptz - make_interval(hours => (g / 10)::int)
                         + interval '5 minutes' + k * interval '1 second' AS t
            FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g
            CROSS JOIN (VALUES (0), (1)) AS ks (k)) AS s0) AS s
"""

EVENTS_SQL = """
INSERT INTO runs_timelineevent (id, public_id, kind, occurred_at, recorded_at, actor_kind, summary, data,
    actor_integration_id, actor_user_id, alert_id, attempt_id, job_id, run_id, tenant_id)
SELECT %(event0)s + 2 * g + k, gen_random_uuid(),
    CASE WHEN k = 0 THEN 'attempt_running' WHEN g %% 7 = 0 THEN 'attempt_failed' ELSE 'attempt_succeeded' END,
    w + interval '1 hour 3 seconds' + k * interval '4 minutes', w + interval '1 hour 5 minutes',
    'integration', CASE WHEN k = 0 THEN 'Attempt #1 running' ELSE 'Attempt #1 ended' END, '{}'::jsonb,
    %(integration)s, NULL, %(alert0)s + 2 * g, %(attempt0)s + g, %(job)s, %(run0)s + g,
    (%(tenants)s::bigint[])[g %% 10 + 1]
FROM (SELECT g, k, %(base)s::timestamptz - make_interval(hours => (g / 10 + 1)::int) AS w
      FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g
      CROSS JOIN (VALUES (0), (1)) AS ks (k)) AS s
"""


@dataclass
class History:
    """The history's runs so far (``runs``, two alerts each) and the ids it needs."""

    job: int
    integration: int
    key: int
    tenants: list[int]
    targets: list[int]
    slugs: list[str]
    runs: int = 0
    seconds: float = 0.0

    @property
    def alerts(self) -> int:
        return 2 * self.runs


def history_world() -> History:
    """The registered job, tenants, targets and the app integration with its key (ids for the SQL)."""
    from runs.catalog.models import Integration, IntegrationKey, Job, JobTarget, Tenant

    job = Job.objects.get(key=bench_alerts.JOB_KEY)
    integration = Integration.objects.get(name=APP_INTEGRATION)
    key = IntegrationKey.objects.filter(integration=integration).order_by("pk").first()
    assert key is not None
    tenants = [Tenant.objects.get(slug=slug) for slug in bench_alerts.TENANTS]
    targets = [
        JobTarget.objects.get(job=job, tenant=tenant, environment=bench_alerts.ENVIRONMENT) for tenant in tenants
    ]
    return History(
        job=job.pk,
        integration=integration.pk,
        key=key.pk,
        tenants=[t.pk for t in tenants],
        targets=[t.pk for t in targets],
        slugs=[t.slug for t in tenants],
    )


def grow(history: History, alerts: int) -> None:
    """Top the history up to ``alerts`` stored history alerts by SQL (chunks of ``CHUNK_RUNS`` runs)."""
    from django.db import connection, transaction

    target_runs = alerts // 2
    started = time.monotonic()
    while history.runs < target_runs:
        first, last = history.runs, min(history.runs + CHUNK_RUNS, target_runs) - 1
        with transaction.atomic(), connection.cursor() as cursor:
            offsets = {}
            for name, table, per_run in (
                ("delivery0", "runs_delivery", 1),
                ("run0", "runs_run", 1),
                ("attempt0", "runs_attempt", 1),
                ("alert0", "runs_alert", 2),
                ("event0", "runs_timelineevent", 2),
            ):
                cursor.execute(f"SELECT COALESCE(MAX(id), 0) + 1 FROM {table}")  # noqa: S608 - fixed names
                # the chunk's first id is the next free one: offset + per_run * first
                offsets[name] = cursor.fetchone()[0] - per_run * first
            params = {
                **offsets,
                "first": first,
                "last": last,
                "base": bench_alerts.BASE,
                "job": history.job,
                "integration": history.integration,
                "key": history.key,
                "tenants": history.tenants,
                "targets": history.targets,
                "slugs": history.slugs,
            }
            for sql in (DELIVERIES_SQL, RUNS_SQL, ATTEMPTS_SQL, ALERTS_SQL, EVENTS_SQL):
                cursor.execute(sql, params)
            for table in TABLES:  # the identity sequences past the explicit ids
                cursor.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT MAX(id) FROM {table}))"  # noqa: S608
                )
        history.runs = last + 1
        log(f"history: {history.alerts:,} alerts ({history.runs:,} runs) after {time.monotonic() - started:.0f} s")
    history.seconds += time.monotonic() - started
    started = time.monotonic()
    with connection.cursor() as cursor:
        for table in TABLES:
            cursor.execute(f"VACUUM ANALYZE {table}")
    log(f"VACUUM ANALYZE in {time.monotonic() - started:.0f} s")
    connection.close()


def table_sizes() -> dict[str, tuple[int, int]]:
    """Per history table: estimated rows (after ANALYZE) and total size in bytes (indexes included)."""
    from django.db import connection

    sizes = {}
    with connection.cursor() as cursor:
        for table in TABLES:
            cursor.execute(f"ANALYZE {table}")  # a sample: the posts since the last VACUUM ANALYZE counted too
            cursor.execute(
                "SELECT reltuples::bigint, pg_total_relation_size(oid) FROM pg_class WHERE relname = %s", [table]
            )
            rows, size = cursor.fetchone()
            sizes[table] = (max(int(rows), 0), int(size))
    connection.close()
    return sizes


# --- measurements ----------------------------------------------------------------------------------


@dataclass
class SizeResult:
    """What one history size gave: ingestion (from the clients) and each page's timings (ms)."""

    alerts: int
    ingest: PhaseResult
    pages: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    labels: dict[tuple[str, str], str] = field(default_factory=dict)
    sizes: dict[str, tuple[int, int]] = field(default_factory=dict)

    def page_p95(self, who: str, url: str) -> float:
        return percentile(self.pages[(who, url)], 95)

    @property
    def worst_p95(self) -> float:
        return max(percentile(samples, 95) for samples in self.pages.values())


def people() -> dict[str, Any]:
    """The admin and the support person (support role on the first five tenants), made once."""
    from django.contrib.auth import get_user_model

    from runs.catalog.models import Tenant
    from runs.catalog.services import role_grant

    model = get_user_model()
    admin, created = model.objects.get_or_create(
        username="history-admin", defaults={"is_staff": True, "is_superuser": True}
    )
    support, _ = model.objects.get_or_create(username="history-support")
    if created:
        for slug in bench_alerts.TENANTS[:SUPPORT_TENANTS]:
            role_grant(user=support, role="support", obj=Tenant.objects.get(slug=slug))
    return {"admin": admin, "support": support}


def time_pages(who_is: dict[str, Any], requests: int) -> tuple[dict[tuple[str, str], list[float]], dict[Any, str]]:
    """``requests`` timed GETs of each page in ``PAGES`` (after two warm-ups): milliseconds each, and
    what each page said about its count (the pager's text, or the API's count and count_capped)."""
    import re

    from django.conf import settings
    from django.db import connections
    from django.test import Client

    settings.ALLOWED_HOSTS = ["testserver", "localhost"]
    clients = {}
    for who, user in who_is.items():
        client = Client()
        client.force_login(user)
        clients[who] = client
    timings: dict[tuple[str, str], list[float]] = {}
    labels: dict[tuple[str, str], str] = {}
    for who, url in PAGES:
        client = clients[who]
        for _ in range(2):
            response = client.get(url)
            if response.status_code != 200:
                raise RuntimeError(f"GET {url} as {who} answered {response.status_code}")
        samples = []
        for _ in range(requests):
            started = time.perf_counter()
            response = client.get(url)
            samples.append((time.perf_counter() - started) * 1000)
        timings[(who, url)] = samples
        if url.startswith("/api/"):
            body = response.json()
            labels[(who, url)] = f"count {body['count']:,}" + (" (capped)" if body.get("count_capped") else "")
        else:
            found = re.search(r"page 1 of [^<]*", response.content.decode())
            labels[(who, url)] = found.group(0).strip() if found else ""
    connections.close_all()
    return timings, labels


class HistoryBenchmark(Benchmark):
    """``bench/ingest.py``'s benchmark (database, registration, gunicorn, load) with a growing history."""

    generated_seconds = 0.0  # generating the history by SQL, all sizes (VACUUM ANALYZE left out)

    def measure(self, app: Gunicorn, history: History) -> SizeResult:
        args = self.args
        self._warm("app", app, APP_INTEGRATION, args.warmup, 1)
        ingest = self._post(f"{history.alerts:,} stored", app, APP_INTEGRATION, args.posts, 1)
        log(
            f"{history.alerts:,} stored: {ingest.alerts_per_s:,.1f} alerts/s, p50 {ingest.percentile(50):.1f} ms"
            + (f", non-202: {ingest.failed}" if ingest.failed else "")
        )
        result = SizeResult(alerts=history.alerts, ingest=ingest)
        result.pages, result.labels = time_pages(people(), args.page_requests)
        result.sizes = table_sizes()
        log(f"{history.alerts:,} stored: worst page p95 {result.worst_p95:.1f} ms")
        return result

    def run_history(self) -> list[SizeResult]:
        self.create_database()
        self.setup_django()
        people()
        history = history_world()
        app = self._start("app", "handover.settings")
        results = [self.measure(app, history)]
        for size in self.args.sizes:
            grow(history, size)
            self.generated_seconds = history.seconds
            results.append(self.measure(app, history))
        app.stop()
        return results


def report(bench: HistoryBenchmark, results: list[SizeResult], generated_seconds: float) -> bool:
    args = bench.args
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    print()
    print(
        f"History benchmark: gunicorn {args.workers} sync workers, {args.clients} clients, {os.cpu_count()} CPUs, "
        f"PostgreSQL {bench.info.get('postgresql')}; {args.posts} single-alert posts and {args.page_requests} "
        f"requests per page at each size; history generated by SQL in {generated_seconds:,.0f} s"
    )
    print()
    header = f"{'stored alerts':>14} {'alerts/s':>9} {'p50 ms':>7} {'p99 ms':>7} {'non-202':>7}"
    print(header)
    print("-" * len(header))
    for r in results:
        i = r.ingest
        print(
            f"{r.alerts:>14,} {i.alerts_per_s:>9,.1f} {i.percentile(50):>7.1f} {i.percentile(99):>7.1f} {i.failed:>7}"
        )
    print()
    header = f"{'page (p50 / p95 ms)':<34}" + "".join(f"{r.alerts:>20,}" for r in results)
    print(header)
    print("-" * len(header))
    for who, url in PAGES:
        cells = "".join(
            f"{statistics.median(r.pages[(who, url)]):>11.1f} / {r.page_p95(who, url):>6.1f}" for r in results
        )
        print(f"{page_name(url) + ' (' + who + ')':<34}{cells}")
    print()
    print("what each page said about its count, at the largest size:")
    for (who, url), label in results[-1].labels.items():
        print(f"  {page_name(url)} ({who}): {label}")
    print()
    header = f"{'table (~rows / MB)':<22}" + "".join(f"{r.alerts:>24,}" for r in results)
    print(header)
    print("-" * len(header))
    for table in TABLES:
        cells = "".join(
            f"{r.sizes[table][0]:>14,} / {r.sizes[table][1] / 1e6:>7,.0f}" for r in results if table in r.sizes
        )
        print(f"{table:<22}{cells}")
    print()
    if load:
        print(
            f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (other work on the machine is noise)"
        )
    for r in results:
        for error in r.ingest.errors:
            print(f"  {r.alerts:,}: {error}")
    print(
        "history sizes=" + ",".join(str(r.alerts) for r in results)
        + " ingest_per_s=" + ",".join(f"{r.ingest.alerts_per_s:.1f}" for r in results)
        + " page_p95_ms=" + ",".join(f"{r.worst_p95:.1f}" for r in results)
        + " run_list_p95_ms=" + ",".join(f"{r.page_p95('admin', '/runs/'):.1f}" for r in results)
        + " inbox_p95_ms=" + ",".join(f"{r.page_p95('admin', '/inbox/'):.1f}" for r in results)
        + " recurrence_p95_ms=" + ",".join(f"{r.page_p95('admin', RECURRENCE):.1f}" for r in results)
        + " attention_p95_ms="
        + ",".join(f"{max(r.page_p95(who, ATTENTION) for who in ('admin', 'support')):.1f}" for r in results),
        flush=True,
    )  # fmt: skip
    return not any(r.ingest.failed for r in results)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/history.py",
        description="Ingestion rate and list-page p95 at growing stored history (generated by SQL).",
    )
    parser.add_argument(
        "--sizes",
        default="100000,1000000",
        help="stored history alerts to measure at, ascending, comma-separated (default 100000,1000000; "
        "the empty history is always measured first)",
    )
    parser.add_argument("--posts", type=int, default=2000, help="single-alert posts measured per size (default 2000)")
    parser.add_argument("--warmup", type=int, default=100, help="unmeasured posts per size first (default 100)")
    parser.add_argument("--page-requests", type=int, default=30, help="timed GETs per page per size (default 30)")
    parser.add_argument(
        "--database-url",
        default=DEFAULT_SERVER_URL,
        help=f"PostgreSQL server on 127.0.0.1 for the throw-away database (default {DEFAULT_SERVER_URL})",
    )
    parser.add_argument("--keep", action="store_true", help="keep the database and the gunicorn logs")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn sync workers (default 2)")
    parser.add_argument("--clients", type=int, default=16, help="concurrent client connections (default 16)")
    parser.add_argument("--client-processes", type=int, default=2, help="processes the clients run in (default 2)")
    args = parser.parse_args(argv)
    try:
        args.sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error("--sizes: whole numbers separated by commas")
    if args.sizes != sorted(set(args.sizes)) or any(s < 2 for s in args.sizes):
        parser.error("--sizes must be ascending, distinct and at least 2")
    if args.posts < 1 or args.page_requests < 1:
        parser.error("--posts and --page-requests must be at least 1")
    args.batch_size = 1  # what bench/ingest.py's Benchmark reads (its probe is not run here)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupt)
    bench = HistoryBenchmark(args)
    try:
        results = bench.run_history()
    except KeyboardInterrupt:
        log("interrupted; cleaning up")
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # let the cleanup finish
        bench.cleanup()
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return 0 if report(bench, results, bench.generated_seconds) else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""Next-run check sweep benchmark: 10,000 due checks among 100,000 on PostgreSQL (never run in CI).

Usage (from the repository root)::

    .venv/bin/python bench/sweep.py                     # 100,000 checks, 10,000 of them due
    .venv/bin/python bench/sweep.py --total 20000 --due 2000
    .venv/bin/python bench/sweep.py --keep              # keep the database afterwards

What it does, all on 127.0.0.1 (it refuses any other host):

1. creates a throw-away database ``handover_bench_sweep_<random>`` on the PostgreSQL server of
   ``--database-url`` (default ``postgres://postgres@127.0.0.1:5432/postgres``; its database part is
   only used to connect for CREATE/DROP DATABASE) and migrates it; Celery uses ``memory://`` so
   the follow-up tasks the sweep enqueues go nowhere;
2. builds, with bulk inserts, one hourly job (``0 * * * *`` UTC, grace 10 min), 100 tenants with a
   target each, an integration key bound to them, and ``--total`` scheduled checks spread evenly
   over the targets, ``--due`` of them past their deadline. The due ones get the evidence a real
   sweep meets: 40 % a next run whose scheduled attempt succeeded in time, reported through the
   bound key (``attempt_succeeded`` event with its alert and delivery) and with a ledger (one work
   item) -- they pass; 5 % the same but with a queued stale retry of the recovered run -- they
   fail; 10 % succeeded in time without a ledger -- they await a person's confirmation; 10 %
   succeeded only after the deadline -- they fail with late evidence; 35 % have no run -- they
   fail. The other checks are upcoming and must be left alone;
3. times one ``next_run_check_sweep`` call (the beat task's service) and counts its SQL statements;
4. checks every due check was settled as expected and nothing else moved, then runs the sweep a
   second time (it must find nothing due).

The last line printed is::

    sweep due=N total=M seconds=S queries_per_check=Q

Target: under 10 s on PostgreSQL. Exit status 0 when the outcomes are right (target met
or not), 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_SERVER_URL = "postgres://postgres@127.0.0.1:5432/postgres"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TENANTS = 100
# The mix of due checks, repeated: 8 in 20 pass (40 %), 1 has a stale retry (5 %), 2 await a person
# (10 %), 2 succeeded late (10 %), 7 have no run (35 %).
KINDS = ["pass"] * 8 + ["stale"] + ["await"] * 2 + ["late"] * 2 + ["none"] * 7


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class BenchDatabase:
    """A throw-away database on a local PostgreSQL server."""

    def __init__(self, server_url: str) -> None:
        parts = urlsplit(server_url)
        if parts.hostname not in ("127.0.0.1", "localhost", "::1"):
            raise SystemExit(f"refusing to use a non-local database server: {parts.hostname}")
        self.server_url = server_url
        self.name = f"handover_bench_sweep_{secrets.token_hex(4)}"
        self.url = urlunsplit(parts._replace(path=f"/{self.name}"))

    def create(self) -> None:
        import psycopg

        with psycopg.connect(self.server_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(self.server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def setup_django(db_url: str) -> None:
    os.environ["DATABASE_URL"] = db_url
    os.environ["CELERY_BROKER_URL"] = "memory://"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "handover.settings")
    os.environ.setdefault("HANDOVER_LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command

    started = time.monotonic()
    call_command("migrate", interactive=False, verbosity=0)
    log(f"migrated in {time.monotonic() - started:.1f} s")


def build_world(total: int, due: int) -> Counter[str]:
    """Insert the job, tenants, targets, key and checks with their evidence; return the expected outcomes."""
    from django.apps import apps

    from runs.alerts.models import Alert, Delivery
    from runs.attempts.models import Attempt, Run
    from runs.catalog.models import Integration, IntegrationKey, Job, JobTarget, Tenant
    from runs.checks.models import NextRunCheck
    from runs.timeline.models import TimelineEvent

    work_item = apps.get_model("runs", "WorkItem")
    job = Job.objects.create(key="bench-hourly-export", schedule="0 * * * *", timezone="UTC", grace_seconds=600)
    tenants = Tenant.objects.bulk_create(
        [Tenant(slug=f"bench-{i:03d}", slug_key=f"bench-{i:03d}", name=f"Bench {i}") for i in range(TENANTS)]
    )
    targets = JobTarget.objects.bulk_create([JobTarget(job=job, tenant=t, environment="prod") for t in tenants])
    integration = Integration.objects.create(source="generic", name="bench-generic")
    key = IntegrationKey.objects.create(integration=integration, prefix="hk_bench", secret_hash="0" * 64)
    key.tenants.set(tenants)

    per_target = total // TENANTS
    due_per_target = due // TENANTS
    grace = timedelta(minutes=10)
    # Due checks: expected hourly before NOW - grace; upcoming ones after NOW.
    first_due = NOW - grace - timedelta(hours=due_per_target)
    checks: list[NextRunCheck] = []
    plan: list[tuple[JobTarget, datetime, str]] = []
    for target in targets:
        for i in range(per_target):
            if i < due_per_target:
                expected = first_due + timedelta(hours=i)
                plan.append((target, expected, KINDS[len(plan) % len(KINDS)]))
            else:
                expected = NOW + timedelta(hours=i - due_per_target + 1)
            checks.append(
                NextRunCheck(
                    target=target,
                    expected_at=expected,
                    deadline_at=expected + grace,
                    window_start=expected - timedelta(hours=1),
                    window_end=expected,
                    status_changed_at=NOW - timedelta(days=30),
                )
            )
    started = time.monotonic()
    NextRunCheck.objects.bulk_create(checks, batch_size=5000)
    log(f"inserted {len(checks):,} checks in {time.monotonic() - started:.1f} s")

    # Evidence for the due checks that have a next run.
    started = time.monotonic()
    runs: list[Run] = []
    with_run = [(t, e, k) for t, e, k in plan if k != "none"]
    for target, expected, _ in with_run:
        runs.append(
            Run(
                job=job,
                tenant_id=target.tenant_id,
                environment="prod",
                target=target,
                window_start=expected - timedelta(hours=1),
                window_end=expected,
                scheduled_for=expected,
                status=Run.Status.SUCCEEDED,
            )
        )
    Run.objects.bulk_create(runs, batch_size=5000)
    attempts = [
        Attempt(
            run=run,
            execution_id=f"exec-{run.pk}",
            status=Attempt.Status.SUCCEEDED,
            trigger=Attempt.Trigger.SCHEDULED,
            started_at=run.scheduled_for,
            ended_at=run.scheduled_for + (timedelta(minutes=20) if kind == "late" else timedelta(minutes=5)),
        )
        for run, (_, _, kind) in zip(runs, with_run, strict=True)
    ]
    Attempt.objects.bulk_create(attempts, batch_size=5000)
    deliveries = Delivery.objects.bulk_create(
        [
            Delivery(
                integration=integration,
                key=key,
                received_at=a.ended_at,
                size_bytes=2,
                sha256="0" * 64,
                body="{}",
                outcome=Delivery.Outcome.PROCESSED,
            )
            for a in attempts
        ],
        batch_size=5000,
    )
    alerts = Alert.objects.bulk_create(
        [
            Alert(
                delivery=d,
                integration=integration,
                index=0,
                source="generic",
                outcome=Alert.Outcome.ACCEPTED,
                run=a.run,
                attempt=a,
            )
            for d, a in zip(deliveries, attempts, strict=True)
        ],
        batch_size=5000,
    )
    TimelineEvent.objects.bulk_create(
        [
            TimelineEvent(
                job=job,
                tenant_id=a.run.tenant_id,
                run=a.run,
                attempt=a,
                alert=al,
                kind="attempt_succeeded",
                occurred_at=a.ended_at,
                recorded_at=a.ended_at,
                actor_kind=TimelineEvent.ActorKind.INTEGRATION,
                actor_integration=integration,
                summary="Attempt 1 succeeded",
            )
            for a, al in zip(attempts, alerts, strict=True)
        ],
        batch_size=5000,
    )
    ledgered = [run for run, (_, _, kind) in zip(runs, with_run, strict=True) if kind in ("pass", "stale")]
    work_item.objects.bulk_create([work_item(run=run, record_id=f"INV-{run.pk}") for run in ledgered], batch_size=5000)
    # Stale retries: the recovered run (an earlier failed run) still has a queued attempt.
    stale = [(t, e) for t, e, k in plan if k == "stale"]
    old_runs = Run.objects.bulk_create(
        [
            Run(
                job=job,
                tenant_id=target.tenant_id,
                environment="prod",
                target=target,
                window_start=expected - timedelta(days=400, hours=1),
                window_end=expected - timedelta(days=400),
                scheduled_for=expected - timedelta(days=400),
                status=Run.Status.RUNNING,
            )
            for target, expected in stale
        ],
        batch_size=5000,
    )
    Attempt.objects.bulk_create(
        [
            Attempt(run=r, execution_id=f"retry-{r.pk}", number=2, trigger="automatic_retry", status="queued")
            for r in old_runs
        ],
        batch_size=5000,
    )
    for (target, expected), old in zip(stale, old_runs, strict=True):
        NextRunCheck.objects.filter(target=target, expected_at=expected).update(recovered_run=old)
    log(f"inserted the evidence of {len(runs):,} next runs in {time.monotonic() - started:.1f} s")

    outcome = {"pass": "passed", "stale": "failed", "await": "awaiting", "late": "failed", "none": "failed"}
    return Counter(outcome[k] for _, _, k in plan)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--total", type=int, default=100_000, help="checks in all (default 100,000)")
    parser.add_argument("--due", type=int, default=10_000, help="checks past their deadline (default 10,000)")
    parser.add_argument("--batch-size", type=int, default=100, help="checks claimed per transaction")
    parser.add_argument(
        "--database-url", default=DEFAULT_SERVER_URL, help=f"server to use (default {DEFAULT_SERVER_URL})"
    )
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = parser.parse_args()
    if args.due > args.total or args.total % TENANTS or args.due % TENANTS:
        parser.error(f"--total and --due must be multiples of {TENANTS}, with due <= total")

    database = BenchDatabase(args.database_url)
    database.create()
    log(f"database {database.name}")
    try:
        setup_django(database.url)
        from django.db import connection, reset_queries

        from runs.checks.models import NextRunCheck
        from runs.checks.sweep import next_run_check_sweep

        expected = build_world(args.total, args.due)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        statements = 0
        sql_seconds: Counter[str] = Counter()

        def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            nonlocal statements
            statements += 1
            started = time.perf_counter()
            try:
                return execute(sql, params, many, context)
            finally:
                verb = sql.lstrip().split(None, 1)[0].upper()
                kind = "claim" if "FOR UPDATE" in sql else verb.lower()
                sql_seconds[kind] += time.perf_counter() - started

        reset_queries()
        with connection.execute_wrapper(count):
            started, cpu_started = time.perf_counter(), time.process_time()
            result = next_run_check_sweep(now=NOW, limit=args.total, batch_size=args.batch_size)
            seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
        second = next_run_check_sweep(now=NOW, limit=args.total, batch_size=args.batch_size)

        checks = NextRunCheck.objects
        found = Counter(
            {
                "passed": checks.filter(status="passed").count(),
                "failed": checks.filter(status="failed").count(),
                "awaiting": checks.filter(status="scheduled", evidence_attempt__isnull=False).count(),
            }
        )
        untouched = checks.filter(status="scheduled", evidence_attempt__isnull=True, deadline_at__gt=NOW).count()
        per_check = statements / result.due if result.due else 0.0
        print(
            f"sweep: {result.due:,} due of {args.total:,}: passed={result.passed:,} failed={result.failed:,} "
            f"awaiting_confirmation={result.awaiting_confirmation:,} skipped={result.skipped:,} "
            f"in {seconds:.2f} s ({result.due / seconds:,.0f} checks/s), {statements:,} SQL statements"
        )
        waits = ", ".join(f"{kind} {sec:.2f} s" for kind, sec in sql_seconds.most_common())
        print(f"time in SQL (driver round trips, commits excluded): {waits}")
        load = os.getloadavg()[0]
        print(f"this process's CPU: {cpu_seconds:.2f} s; machine load average {load:.1f} on {os.cpu_count()} CPUs")
        print(f"expected: {dict(sorted(expected.items()))}; found: {dict(sorted(found.items()))}")
        print(f"upcoming left alone: {untouched:,} of {args.total - args.due:,}; second sweep found {second.due} due")
        ok = found == expected and untouched == args.total - args.due and result.due == args.due and second.due == 0
        if not ok:
            print("OUTCOMES WRONG", file=sys.stderr)
        print(f"sweep due={result.due} total={args.total} seconds={seconds:.2f} queries_per_check={per_check:.2f}")
        return 0 if ok else 1
    finally:
        from django.db import connections

        connections.close_all()
        if args.keep:
            log(f"kept: DATABASE_URL={database.url}")
        else:
            database.drop()


if __name__ == "__main__":
    sys.exit(main())

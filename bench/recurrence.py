#!/usr/bin/env python
"""Recurrence benchmark: the recurrence page, its API and the supportability page over 100,000 runs.

Usage (from the repository root; never run in CI)::

    .venv/bin/python bench/recurrence.py                 # 100,000 runs over 100 days
    .venv/bin/python bench/recurrence.py --runs 20000    # scaled down
    .venv/bin/python bench/recurrence.py --keep          # keep the database afterwards

What it does, all on 127.0.0.1: creates a throw-away PostgreSQL database (``bench/ledger_setup.py``),
bulk-creates a generated history (``tests/approvals/recurrence/history.py``: 20 jobs, 30 tenants, about
30 % of runs failed with one to three failed attempts, 6 % missed, handovers, replay requests and
recoveries), then, logged in as a support person of ten tenants who also owns two jobs (so the
visibility filter runs), requests in-process through Django's test client and times each request
after warm-up:

- ``/recurrence/?days=90`` (the ranking, groups, trends; every failed run of the period fetched),
- ``/recurrence/?days=30``,
- ``/api/v1/recurrence/?days=90``,
- ``/supportability/?days=90`` (no alerts in a bulk history: it measures the empty aggregate),
- the same recurrence page as an admin (every run visible).

The last line printed is::

    recurrence runs=N page90_ms=A page30_ms=B api90_ms=C admin90_ms=D support_ms=E queries=Q
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.ledger_setup import BenchDatabase, add_database_arguments, log, timed  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000, help="runs in the history (default 100,000)")
    parser.add_argument("--repeat", type=int, default=5, help="timed requests per page (median reported)")
    add_database_arguments(parser)
    args = parser.parse_args()

    db = BenchDatabase(args.database_url, keep=args.keep)
    try:
        db.create()
        db.setup_django()
        from django.db import connection
        from django.test import Client
        from django.utils import timezone

        from runs.catalog.services import role_grant
        from tests.approvals.recurrence.history import history_create, history_plan
        from tests.factories import JobFactory, TenantFactory, UserFactory

        jobs = [JobFactory(key=f"bench-job-{n:02d}") for n in range(20)]
        tenants = [TenantFactory(slug=f"bench-tenant-{n:02d}") for n in range(30)]
        admin = UserFactory(username="bench-admin", admin=True)
        support = UserFactory(username="bench-support")
        for tenant in tenants[:10]:
            role_grant(user=support, role="support", obj=tenant)
        for job in jobs[:2]:
            role_grant(user=support, role="technical_owner", obj=job)
        end = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
        log(f"planning and bulk-creating {args.runs:,} runs")
        started = time.perf_counter()
        plans = history_plan(runs=args.runs, days=100, end=end, jobs=len(jobs), tenants=len(tenants))
        history_create(plans=plans, jobs=jobs, tenants=tenants, person=admin)
        log(f"  created in {time.perf_counter() - started:.1f} s")
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # what autovacuum does within a minute of a large load
        failed = sum(1 for p in plans if p.failed and p.scheduled_for >= end - timedelta(days=90))

        client = Client(SERVER_NAME="localhost")
        client.force_login(support)
        with timezone.override("UTC"):
            page90, queries = timed(client, "/recurrence/?days=90", args.repeat, warmups=1)
            page30, _ = timed(client, "/recurrence/?days=30", args.repeat, warmups=1)
            api90, api_queries = timed(client, "/api/v1/recurrence/?days=90", args.repeat, warmups=1)
            support_ms, support_queries = timed(client, "/supportability/?days=90", args.repeat, warmups=1)
            client.force_login(admin)
            admin90, admin_queries = timed(client, "/recurrence/?days=90", args.repeat, warmups=1)

        print(f"  history: {args.runs:,} runs, {failed:,} failed in the last 90 days (all tenants)")
        print(f"  /recurrence/?days=90 (support: 10/30 tenants) {page90:8.1f} ms ({queries} queries)")
        print(f"  /recurrence/?days=30                           {page30:8.1f} ms")
        print(f"  /api/v1/recurrence/?days=90                    {api90:8.1f} ms ({api_queries} queries)")
        print(f"  /supportability/?days=90                       {support_ms:8.1f} ms ({support_queries} queries)")
        print(f"  /recurrence/?days=90 as admin (every run)      {admin90:8.1f} ms ({admin_queries} queries)")
        print(
            f"recurrence runs={args.runs} page90_ms={page90:.1f} page30_ms={page30:.1f} api90_ms={api90:.1f} "
            f"admin90_ms={admin90:.1f} support_ms={support_ms:.1f} queries={queries}"
        )
    finally:
        db.drop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

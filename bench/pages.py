#!/usr/bin/env python
"""Run-page benchmark: the run page and the item API of a run with 1,000,000 work items.

Usage (from the repository root; never run in CI)::

    .venv/bin/python bench/pages.py                  # 1,000,000 items (the target's size)
    .venv/bin/python bench/pages.py --rows 100000    # scaled down
    .venv/bin/python bench/pages.py --keep           # keep the database afterwards

What it does, all on 127.0.0.1: creates a throw-away PostgreSQL database (``bench/ledger_setup.py``),
loads ``--rows`` eligible ids with a runner report and a destination export (the files of
``bench/reconcile.py``, through the service), then, logged in as the tenant's support person (so
the permission checks run), requests in-process through Django's test client — the whole server
side: middleware, session, selectors, template — and times each request after warm-up:

- the run page (``/runs/<id>/``): totals, bar, possible duplicates, loads, the first page of items;
- the run page paged deep by key (``?after=`` a record id 90 % of the way through);
- the run page filtered to a rare outcome (``?outcome=absent``);
- the item API's first page and a deep cursor page.

Target (docs/work-ledger.md): the run page under 300 ms server time. Its queries are counted. The last line
printed is::

    pages rows=N run_page_ms=M deep_page_ms=D filtered_page_ms=F items_api_ms=A queries=Q
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.ledger_setup import (  # noqa: E402
    BenchDatabase,
    add_database_arguments,
    load_files,
    log,
    make_world,
    timed,
    write_files,
)

TARGET_MS = 300.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="work items of the run (default 1,000,000)")
    parser.add_argument("--repeat", type=int, default=15, help="timed requests per page (median reported)")
    add_database_arguments(parser)
    args = parser.parse_args()
    if args.rows < 1000:
        parser.error("--rows must be at least 1,000")

    db = BenchDatabase(args.database_url, keep=args.keep)
    try:
        db.create()
        db.setup_django()
        from django.db import connection
        from django.test import Client

        run, person = make_world()
        log(f"loading {args.rows:,} items")
        files = write_files(db.tmp, args.rows)
        load_files(
            run,
            person,
            {"population": files.population, "runner_report": files.runner_report, "destination": files.destination},
            is_destination_complete=True,
        )
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE runs_workitem")  # what autovacuum does within a minute of a large load
        run.refresh_from_db()
        client = Client(SERVER_NAME="localhost")
        client.force_login(person)
        page = f"/runs/{run.public_id}/"
        deep_key = f"INV-{args.rows * 9 // 10:09d}"
        api = f"/api/v1/runs/{run.public_id}/items/"

        run_ms, queries = timed(client, page, args.repeat)
        deep_ms, _ = timed(client, f"{page}?after={deep_key}", args.repeat)
        filtered_ms, _ = timed(client, f"{page}?outcome=absent", args.repeat)
        api_ms, api_queries = timed(client, api, args.repeat)
        next_link = client.get(api).json()["next"]
        for _ in range(5):  # walk a few cursor pages in
            next_link = client.get(next_link).json()["next"]
        cursor_ms, _ = timed(client, next_link.replace("http://localhost", ""), args.repeat)

        print(f"  run {run.public_id}: {run.eligible_count:,} eligible, {run.unresolved_count:,} unresolved")
        print(f"  run page                 {run_ms:8.1f} ms  ({queries} queries)")
        print(f"  run page, deep by key    {deep_ms:8.1f} ms")
        print(f"  run page, ?outcome=absent{filtered_ms:8.1f} ms")
        print(f"  item API, first page     {api_ms:8.1f} ms  ({api_queries} queries)")
        print(f"  item API, cursor page    {cursor_ms:8.1f} ms")
        print(f"  target: run page < {TARGET_MS:.0f} ms ({'met' if run_ms < TARGET_MS else 'MISSED'})")
        print(
            f"pages rows={args.rows} run_page_ms={run_ms:.1f} deep_page_ms={deep_ms:.1f} "
            f"filtered_page_ms={filtered_ms:.1f} items_api_ms={api_ms:.1f} queries={queries}"
        )
    finally:
        db.drop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

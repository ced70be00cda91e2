"""Planner statistics during a benchmark, as a production server's autoanalyze keeps them.

A benchmark starts from an empty database and grows it by thousands of rows a second. PostgreSQL
plans each foreign-key check once per connection (``ri_triggers`` keeps the plan) from the statistics
of that moment; autoanalyze (autovacuum, on by default and in docs/production.md) re-analyses a table
once a tenth of it has changed, which invalidates those plans. On a server whose autovacuum is off
(these machines' CI configuration, ``/etc/postgresql/15/main/conf.d/90-ci.conf``) nothing does: a
check planned while a table held a few rows (a sequential scan, right for one page) keeps scanning
it as it grows. Measured on 2026-12-02 with ``bench/ingest.py``: posts of 100 alerts cost PostgreSQL
2.04 ms of CPU per alert that way (the two foreign-key checks on new runs and attempts, 0.28 ms
each), 0.23 ms with the tables analysed after the warm-up.

So the benchmarks analyse their database after each warm-up when autovacuum is off, standing in for
the autoanalyze a production server runs, and print that they did.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import psycopg


def autovacuum_on(database_url: str) -> bool:
    """Whether the server of ``database_url`` (a libpq URL) runs autovacuum (``SHOW autovacuum``)."""
    with psycopg.connect(database_url, autocommit=True, connect_timeout=10) as conn:
        row = conn.execute("SHOW autovacuum").fetchone()
    return row is not None and row[0] == "on"


ANALYZED_NOTE = "autovacuum off: ANALYZE after each warm-up stands in for autoanalyze"


def analyze_for_autovacuum(database_url: str, phase: str, log: Callable[[str], None]) -> str | None:
    """``ANALYZE`` the database of ``database_url`` after the warm-up of ``phase`` when its server's
    autovacuum is off, as its autoanalyze would have by now, and ``log`` how long it took; returns the
    note for the report's first line (``ANALYZED_NOTE``), or None when autovacuum is on (nothing done)."""
    if autovacuum_on(database_url):
        return None
    started = time.monotonic()
    with psycopg.connect(database_url, autocommit=True, connect_timeout=10) as conn:
        conn.execute("ANALYZE")
    log(f"{phase}: autovacuum is off, analysed the database after the warm-up in {time.monotonic() - started:.1f} s")
    return ANALYZED_NOTE

"""Shared set-up of the benchmarks on a throw-away database (``bench/reconcile.py``, ``bench/pages.py``,
``bench/recurrence.py``).

A throw-away PostgreSQL database ``handover_bench_ledger_<random>`` on 127.0.0.1 (refusing any
other host), migrated, with one tenant, one job, one failed run and a support person; record-id
files written to a temporary folder; the database dropped again on exit unless ``--keep``.
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_SERVER_URL = "postgres://postgres@127.0.0.1:5432/postgres"
LOOPBACK_NAMES = {"127.0.0.1", "localhost"}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def add_database_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the throw-away database's options to ``parser``: ``--database-url`` (the PostgreSQL server,
    127.0.0.1 only; default ``DEFAULT_SERVER_URL``) and ``--keep`` (keep the database afterwards), the
    arguments of ``BenchDatabase``."""
    parser.add_argument("--database-url", default=DEFAULT_SERVER_URL, help="PostgreSQL server (127.0.0.1 only)")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")


def timed(client: Any, url: str, repeat: int, *, warmups: int = 2) -> tuple[float, int]:
    """Median milliseconds of ``repeat`` GETs of ``url`` through the Django test ``client`` after
    ``warmups`` untimed ones, and the queries of one more. Exits (SystemExit) when a warm-up does not
    answer 200."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for _ in range(warmups):
        response = client.get(url)
        if response.status_code != 200:
            raise SystemExit(f"GET {url} answered {response.status_code}")
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        client.get(url)
        samples.append((time.perf_counter() - started) * 1000)
    with CaptureQueriesContext(connection) as queries:
        client.get(url)
    return statistics.median(samples), len(queries.captured_queries)


def loopback_url(url: str, database: str | None = None) -> str:
    """``url`` with its host forced to 127.0.0.1 (refusing any other host) and, optionally, another database."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql", "pgsql"):
        raise SystemExit(f"--database-url must be a postgres:// URL, not {url!r}")
    if (parts.hostname or "") not in LOOPBACK_NAMES:
        raise SystemExit(f"--database-url must point at 127.0.0.1; the benchmark contacts nothing else ({url!r})")
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = (f"{userinfo}@" if userinfo else "") + f"127.0.0.1:{parts.port or 5432}"
    path = f"/{database}" if database is not None else parts.path
    return urlunsplit(("postgres", netloc, path, parts.query, ""))


@dataclass
class LedgerFiles:
    """The generated files: CSVs for the app, bare id lists (one id a line) for the baselines."""

    population: Path
    runner_report: Path
    destination: Path
    population_ids: Path
    runner_ids: Path
    destination_ids: Path
    rows: int
    present: int
    not_eligible: int


def record_id(index: int) -> str:
    return f"INV-{index:09d}"


def write_files(folder: Path, rows: int, seed: int = 7) -> LedgerFiles:
    """Write the benchmark's files for ``rows`` eligible ids (scaled from the target's 1,000,000).

    The destination holds 99 % as many ids as are eligible, 0.05 % of them not eligible (500 at
    1,000,000); the runner report says every eligible id was attempted, 99.5 % claimed done and
    0.1 % failed. Files are shuffled, as real exports are, so the baseline really sorts.
    """
    rng = random.Random(seed)
    present = rows * 99 // 100
    not_eligible = max(1, rows * 5 // 10_000)
    order = list(range(rows))
    rng.shuffle(order)
    eligible_present = order[: present - not_eligible]
    claimed = rows * 995 // 1000
    failed = rows // 1000
    names = ("population.csv", "runner.csv", "destination.csv", "pop.ids", "runner.ids", "dest.ids")
    paths = {name: folder / name for name in names}
    with open(paths["population.csv"], "w") as pop, open(paths["pop.ids"], "w") as pop_ids:
        pop.write("record_id\n")
        for index in order:
            rid = record_id(index)
            pop.write(rid + "\n")
            pop_ids.write(rid + "\n")
    with open(paths["runner.csv"], "w") as runner, open(paths["runner.ids"], "w") as runner_ids:
        runner.write("record_id,status\n")
        for position, index in enumerate(order):
            status = "completed" if position < claimed else "failed" if position < claimed + failed else "attempted"
            runner.write(f"{record_id(index)},{status}\n")
            runner_ids.write(record_id(index) + "\n")
    extra = [record_id(rows + n) for n in range(not_eligible)]
    dest = [record_id(i) for i in eligible_present] + extra
    rng.shuffle(dest)
    with open(paths["destination.csv"], "w") as out, open(paths["dest.ids"], "w") as dest_ids:
        out.write("record_id,reference\n")
        for rid in dest:
            out.write(f"{rid},gw-{rid[4:]}\n")
            dest_ids.write(rid + "\n")
    return LedgerFiles(
        population=paths["population.csv"],
        runner_report=paths["runner.csv"],
        destination=paths["destination.csv"],
        population_ids=paths["pop.ids"],
        runner_ids=paths["runner.ids"],
        destination_ids=paths["dest.ids"],
        rows=rows,
        present=present,
        not_eligible=not_eligible,
    )


class BenchDatabase:
    """A throw-away database: ``create()`` → ``setup_django()`` → … → ``drop()``."""

    def __init__(self, server_url: str, keep: bool = False) -> None:
        self.server_url = loopback_url(server_url)
        self.name = f"handover_bench_ledger_{secrets.token_hex(4)}"
        self.url = loopback_url(server_url, self.name)
        self.keep = keep
        self.created = False
        self.tmp = Path(tempfile.mkdtemp(prefix="handover-bench-ledger-"))

    def _admin(self) -> Any:
        import psycopg

        return psycopg.connect(self.server_url, autocommit=True)

    def create(self) -> None:
        with self._admin() as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        self.created = True
        log(f"created database {self.name}")

    def setup_django(self) -> None:
        os.environ.update(
            {
                "DATABASE_URL": self.url,
                "DJANGO_SETTINGS_MODULE": "handover.settings",
                "DJANGO_DEBUG": "false",
                "HANDOVER_PRODUCTION": "false",
                "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
                "HANDOVER_VAR_DIR": str(self.tmp / "var"),
                "HANDOVER_LOG_LEVEL": "WARNING",
                "CACHE_URL": "locmemcache://",
            }
        )
        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command

        settings.ALLOWED_HOSTS = ["testserver", "localhost"]
        settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
        call_command("migrate", verbosity=0)

    def drop(self) -> None:
        from django.db import connections

        connections.close_all()
        if self.created and not self.keep:
            with self._admin() as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
            log(f"dropped database {self.name}")
        elif self.created:
            log(f"kept database {self.name} ({self.url})")
        shutil.rmtree(self.tmp, ignore_errors=True)


def make_world() -> tuple[Any, Any]:
    """One failed run of a benchmark job and a support person on its tenant: ``(run, person)``."""
    from datetime import UTC, datetime, timedelta

    from django.contrib.auth import get_user_model

    from runs.attempts.models import Attempt, Run
    from runs.catalog.services import job_get_or_create, role_grant, tenant_get_or_create

    job, _ = job_get_or_create(
        key="bench-ledger-export", defaults={"schedule": "0 2 * * *", "timezone": "UTC", "window_alignment": "day"}
    )
    tenant, _ = tenant_get_or_create(slug="bench-ledger-tenant")
    start = datetime(2026, 11, 27, tzinfo=UTC)
    run = Run.objects.create(
        job=job,
        tenant=tenant,
        environment="prod",
        window_start=start,
        window_end=start + timedelta(days=1),
        scheduled_for=start + timedelta(days=1, hours=2),
        status=Run.Status.FAILED,
    )
    Attempt.objects.create(
        run=run, execution_id="bench-1", number=1, status=Attempt.Status.FAILED, started_at=run.scheduled_for
    )
    person = get_user_model().objects.create_user(username="bench-support", password=secrets.token_urlsafe(16))
    role_grant(user=person, role="support", obj=tenant)
    return run, person


def load_files(run: Any, person: Any, files: dict[str, Path], **extra: Any) -> list[Any]:
    """Load files together through the service, inside the process (no Celery); return the loads."""
    from django.conf import settings

    from runs.ledger.loads import LoadFile, work_item_loads_create

    settings.HANDOVER_LEDGER_SYNC_MAX_BYTES = 1 << 40  # run inline: the benchmark times the load itself
    settings.HANDOVER_LEDGER_MAX_UPLOAD_BYTES = 1 << 40
    uploads = [LoadFile(kind=kind, content=path.read_bytes(), file_name=path.name) for kind, path in files.items()]
    return work_item_loads_create(actor=person, run=run, files=uploads, **extra)

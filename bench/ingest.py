#!/usr/bin/env python
"""Ingestion benchmark: generic alerts through gunicorn + PostgreSQL, beside a one-row baseline.

Usage (from the repository root, after the README setup of ``.venv``)::

    .venv/bin/python bench/ingest.py                 # 5,000 single posts, 20,000 alerts in batches of 100
    .venv/bin/python bench/ingest.py --alerts 500    # a quick run (2,000 batched alerts)
    .venv/bin/python bench/ingest.py --keep          # keep the database and the gunicorn logs afterwards
    .venv/bin/python bench/ingest.py --floor         # also the floor: rule 9's least work (bench/floor_urls.py)

What it does, all on 127.0.0.1 (it refuses any other host):

1. creates a throw-away database ``handover_bench_<random>`` on the PostgreSQL server of
   ``--database-url`` (default ``postgres://postgres@127.0.0.1:5432/postgres``; its database part is
   only used to connect for CREATE/DROP DATABASE), migrates it, and registers through the services
   the job ``bench-hourly-export`` (cron ``0 * * * *`` UTC), ten tenants with their job targets, and
   three ``generic`` integrations with a key each (bound to the ten tenants): ``bench-generic`` for the
   app, ``bench-baseline`` for the baseline, ``bench-floor`` for the floor;
2. counts the SQL of one post of each mode in-process (``bench/probe.py``: statements and
   transactions per post and per alert -- deterministic, unlike the timings);
3. starts two gunicorns (``--workers`` sync workers each, default 2 as in docs/production.md's "Toolchain facts"
   measurements; DEBUG off, the app's settings, so ``CONN_MAX_AGE`` as configured): the *app*, and
   the *baseline* (``bench/baseline_urls.py``: the same DRF APIView base, raw-body parser, body
   reading and integration-key authentication as the ingestion view, then one ``Delivery`` row with
   the required fields only, one ORM INSERT in autocommit, answer 202); with ``--floor`` a third, the
   *floor* (``bench/floor_urls.py``: the baseline's steps, then the product's five rows of a new failed
   run and the delivery's outcome in one prepared statement, the second commit of rule 9 -- what any
   design keeping rule 9 and this schema must do at the least, so the most it can reach);
4. warms them up, then posts ``--alerts`` single alerts to each in ``--rounds`` alternating rounds
   (baseline/app, app/baseline, ...; each mode first and last in turn with the floor), so load from
   elsewhere on a shared machine falls on all alike;
5. stops the baseline and posts ``--batched-alerts`` alerts to the app in posts of ``--batch-size``
   (then to the floor, with ``--floor``).

After each warm-up, on a server whose autovacuum is off, the database is analysed as autoanalyze
would have by then (``bench/stats.py``: foreign-key checks planned on near-empty tables would
otherwise scan them ever longer); the report's first line says so.

Every alert is unique (its own execution id, tenant/window and so its own run: ``bench/alerts.py``),
so each one is a real ``accepted`` alert; the benchmark checks that in the database afterwards.
``--clients`` concurrent clients (default 16, as wrk's 16 connections in docs/production.md, "Toolchain facts") send the
posts with http.client from ``--client-processes`` processes (``bench/load.py``). Throughput is
alerts over the wall time of the measured posts; latency is per post, as the client sees it. A
second table says where the machine's CPU went meanwhile (``bench/cpu.py``): CPU-ms per alert in
the workers and in PostgreSQL, and how much CPU other work on the machine took (noise).

It stops its gunicorns and client processes and drops the database on exit, also on Ctrl-C or
SIGTERM (``--keep`` keeps the database and the logs). Progress goes to stderr; the table and the
figures go to stdout (the frozen endpoints' SHA-256 in their second line) and end with::

    ingest_floor alerts=N alerts_per_s=X baseline_per_s=Y ratio=R p50_ms=A p99_ms=B batched_alerts_per_s=Z  (--floor)
    ingest_batched alerts=N alerts_per_s=X p50_ms=A p99_ms=B
    ingest alerts=N alerts_per_s=X baseline_per_s=Y ratio=R p50_ms=A p99_ms=B

Targets: one alert per post at least 70% of the baseline's throughput; batched posts of
100 alerts at least 5,000 alerts/s; a single post's p99 at most 50 ms at 16 clients (which a closed
loop of 16 clients reaches only above 320 posts/s: Little's law, printed beside it). Exit status 0
when every post got 202 and every alert was accepted (targets missed or not), 1 otherwise, 130 when
interrupted.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import alerts as bench_alerts  # noqa: E402
from bench.load import HOST, LoadGenerator, PhaseResult  # noqa: E402
from bench.probe import RedactionCost, SqlCount, post_once, redaction_cost  # noqa: E402
from bench.stats import analyze_for_autovacuum  # noqa: E402

DEFAULT_SERVER_URL = "postgres://postgres@127.0.0.1:5432/postgres"
LOOPBACK_NAMES = {"127.0.0.1", "localhost"}
TARGET_RATIO = 0.70
TARGET_BATCHED = 5000.0
INGEST_PATH = "/api/v1/alerts/generic/"
APP_INTEGRATION = "bench-generic"
BASELINE_INTEGRATION = "bench-baseline"
FLOOR_INTEGRATION = "bench-floor"
TARGET_P99_MS = 50.0
FROZEN = ("bench/baseline_urls.py", "bench/floor_urls.py")  # their SHA-256 is printed with the figures


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


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


class Gunicorn:
    """One gunicorn master (own session, so a terminal's Ctrl-C reaches only us), stopped by its pid."""

    def __init__(self, name: str, settings_module: str, env: dict[str, str], workers: int, logdir: Path) -> None:
        self.name = name
        self.settings_module = settings_module
        self.env = env
        self.workers = workers
        self.logfile = logdir / f"gunicorn-{name}.log"
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.port = free_port()
        env = {**self.env, "DJANGO_SETTINGS_MODULE": self.settings_module}
        command = [
            sys.executable, "-m", "gunicorn", "handover.wsgi:application",
            "--workers", str(self.workers), "--worker-class", "sync",
            "--bind", f"{HOST}:{self.port}", "--chdir", str(ROOT),
            "--log-level", "warning", "--graceful-timeout", "10", "--timeout", "120",
        ]  # fmt: skip
        with open(self.logfile, "ab") as out:
            self.process = subprocess.Popen(
                command, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn ({self.name}) exited with {self.process.returncode}; see {self.logfile}")
            try:  # http.client, not urllib: no proxy from the environment, only 127.0.0.1
                conn = http.client.HTTPConnection(HOST, self.port, timeout=2)
                conn.request("GET", "/healthz")
                conn.getresponse().read()
                conn.close()
                return  # it answers (whatever the status): that is all we wait for
            except (OSError, http.client.HTTPException):
                time.sleep(0.1)
        raise RuntimeError(f"gunicorn ({self.name}) did not answer within 60 s; see {self.logfile}")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # its own process group, created by us
            process.wait(timeout=10)


class Benchmark:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.server_url = loopback_url(args.database_url)
        self.db_name = f"handover_bench_{secrets.token_hex(4)}"
        self.db_url = loopback_url(args.database_url, self.db_name)
        self.db_created = False
        self.tmp = Path(tempfile.mkdtemp(prefix="handover-bench-"))
        self.servers: list[Gunicorn] = []
        self.load = LoadGenerator(args.clients, args.client_processes)
        self.next_alert = 0
        self.env = {
            **os.environ,
            "DATABASE_URL": self.db_url,
            "DJANGO_SETTINGS_MODULE": "handover.settings",
            "DJANGO_DEBUG": "false",
            "HANDOVER_PRODUCTION": "false",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "HANDOVER_VAR_DIR": str(self.tmp / "var"),
            "HANDOVER_LOG_LEVEL": "WARNING",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])),
        }
        self.keys: dict[str, str] = {}
        self.info: dict[str, str] = {}
        self.app_alerts_sent = 0
        self.floor_alerts_sent = 0
        self.monitor = None  # an admin connection polling pg_stat_activity during measurements
        self.redaction: list[RedactionCost] = []  # redaction per alert, in-process (bench/probe.py)

    # --- database -------------------------------------------------------------------------------

    def _admin(self):  # noqa: ANN202 - a psycopg connection
        import psycopg

        return psycopg.connect(self.server_url, autocommit=True, connect_timeout=10)

    def create_database(self) -> None:
        with self._admin() as conn:
            conn.execute(f'CREATE DATABASE "{self.db_name}"')
            self.db_created = True
            self.info["postgresql"] = conn.execute("SHOW server_version").fetchone()[0].split()[0]
            self.info["synchronous_commit"] = conn.execute("SHOW synchronous_commit").fetchone()[0]
        log(f"database {self.db_name} created on 127.0.0.1")

    def drop_database(self) -> None:
        if not self.db_created:
            return
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')
        self.db_created = False
        log(f"database {self.db_name} dropped")

    def backend_pids(self) -> set[int]:
        """The PostgreSQL backends connected to the benchmark's database (for the CPU table)."""
        try:
            if self.monitor is None or self.monitor.closed:
                self.monitor = self._admin()
            rows = self.monitor.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", [self.db_name])
            return {row[0] for row in rows.fetchall()}
        except Exception:  # noqa: BLE001 - the CPU table is a diagnostic
            return set()

    def setup_django(self) -> None:
        os.environ.update(self.env)
        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command

        started = time.monotonic()
        call_command("migrate", interactive=False, verbosity=0)
        log(f"migrated in {time.monotonic() - started:.1f} s")
        database = settings.DATABASES["default"]
        self.info["conn_max_age"] = str(database.get("CONN_MAX_AGE"))
        self.info["conn_health_checks"] = str(database.get("CONN_HEALTH_CHECKS"))
        self.register()
        self.close_django()

    def register(self) -> None:
        """The job, tenants, targets, integrations and keys, through the services (as an admin would)."""
        from runs.catalog.services import (
            integration_get_or_create,
            integration_key_create,
            job_get_or_create,
            job_target_get_or_create,
            tenant_get_or_create,
        )

        job, _ = job_get_or_create(key=bench_alerts.JOB_KEY, defaults=bench_alerts.JOB_DEFAULTS)
        tenants = []
        for slug in bench_alerts.TENANTS:
            tenant, _ = tenant_get_or_create(slug=slug)
            job_target_get_or_create(job=job, tenant=tenant, environment=bench_alerts.ENVIRONMENT)
            tenants.append(tenant)
        for name in (APP_INTEGRATION, BASELINE_INTEGRATION, FLOOR_INTEGRATION):
            integration = integration_get_or_create(source="generic", name=name)
            self.keys[name] = integration_key_create(integration=integration, tenants=tenants, label="bench").key
        log(f"registered job {job.key}, {len(tenants)} tenants and targets, integrations {', '.join(self.keys)}")

    def analyze_after_warmup(self, phase: str) -> None:
        """Stand in for autoanalyze when the server's autovacuum is off (``bench/stats.py``)."""
        note = analyze_for_autovacuum(self.db_url, phase, log)
        if note is not None:
            self.info["analyzed"] = note

    def close_django(self) -> None:
        if "django" in sys.modules and self.db_created:
            from django.db import connections

            connections.close_all()

    def outcomes(self, integration_name: str) -> dict[str, int]:
        from django.db.models import Count

        from runs.alerts.models import Alert

        rows = (
            Alert.objects.filter(integration__name=integration_name)
            .values_list("outcome")
            .annotate(n=Count("id"))
            .order_by()
        )
        result = dict(rows)
        self.close_django()
        return result

    # --- measurements ---------------------------------------------------------------------------

    def _alerts(self, count: int) -> int:
        first = self.next_alert
        self.next_alert += count
        return first

    def probe(self) -> dict[str, SqlCount]:
        """SQL per post of each mode, in-process (deterministic; see bench/probe.py)."""
        size = self.args.batch_size
        counts = {
            "baseline": post_once(self.keys[BASELINE_INTEGRATION], self._alerts(1), 1, INGEST_PATH,
                                  urlconf="bench.baseline_urls"),
            "single": post_once(self.keys[APP_INTEGRATION], self._alerts(1), 1, INGEST_PATH),
            "batched": post_once(self.keys[APP_INTEGRATION], self._alerts(size), size, INGEST_PATH),
        }  # fmt: skip
        self.app_alerts_sent += 1 + size
        if self.args.floor:
            counts["floor"] = post_once(self.keys[FLOOR_INTEGRATION], self._alerts(1), 1, INGEST_PATH,
                                        urlconf="bench.floor_urls")  # fmt: skip
            self.floor_alerts_sent += 1
        self.redaction = [
            redaction_cost(APP_INTEGRATION, self._alerts(per_post), per_post) for per_post in sorted({1, size})
        ]
        self.close_django()
        for name, result in counts.items():
            if result.status != 202:
                raise RuntimeError(f"probe {name}: HTTP {result.status}")
        log("counted the SQL of one post per mode")
        return counts

    def _post(self, name: str, server: Gunicorn, integration: str, posts: int, per_post: int) -> PhaseResult:
        first = self._alerts(posts * per_post)
        if integration == APP_INTEGRATION:
            self.app_alerts_sent += posts * per_post
        elif integration == FLOOR_INTEGRATION:
            self.floor_alerts_sent += posts * per_post
        masters = {s.process.pid for s in self.servers if s.process is not None}
        return self.load.run(
            name,
            server.port,
            INGEST_PATH,
            self.keys[integration],
            first,
            posts,
            per_post,
            masters=masters,
            backends=self.backend_pids,
        )

    def _warm(self, label: str, server: Gunicorn, integration: str, posts: int, per_post: int) -> None:
        warm = self._post("warm-up", server, integration, posts, per_post)
        if warm.failed:
            raise RuntimeError(f"{label}: warm-up posts failed: {dict(warm.statuses)} {warm.errors}")

    def _start(self, name: str, settings_module: str) -> Gunicorn:
        server = Gunicorn(name, settings_module, self.env, self.args.workers, self.tmp)
        self.servers.append(server)
        server.start()
        log(f"gunicorn ({name}) on {HOST}:{server.port}, {self.args.workers} sync workers")
        return server

    def run(self) -> tuple[dict[str, PhaseResult], dict[str, SqlCount], dict[str, dict[str, int]]]:
        args = self.args
        self.create_database()
        self.setup_django()
        sql = self.probe()

        # One alert per post: the baseline and the app, in alternating rounds, so that load from
        # elsewhere on the machine falls on both alike.
        baseline = self._start("baseline", "bench.baseline_settings")
        app = self._start("app", "handover.settings")
        floor = self._start("floor", "bench.floor_settings") if args.floor else None
        self._warm("baseline", baseline, BASELINE_INTEGRATION, args.warmup, 1)
        self._warm("app", app, APP_INTEGRATION, args.warmup, 1)
        if floor is not None:
            self._warm("floor", floor, FLOOR_INTEGRATION, args.warmup, 1)
        self.analyze_after_warmup("single posts")
        results: dict[str, PhaseResult] = {}
        labels = {
            "baseline": "baseline (1 row per post)",
            "single": "app, 1 alert per post",
            "floor": "floor, 1 alert per post",
        }
        order = [("baseline", baseline, BASELINE_INTEGRATION), ("single", app, APP_INTEGRATION)]
        if floor is not None:
            order.append(("floor", floor, FLOOR_INTEGRATION))
        rounds = max(1, min(args.rounds, args.alerts))
        for number in range(rounds):
            posts = args.alerts // rounds + (1 if number < args.alerts % rounds else 0)
            # each mode goes first, last and in between in turn: other load falls on all alike
            turn = order[number % len(order) :] + order[: number % len(order)]
            for key, server, integration in turn if number % 2 == 0 else turn[::-1]:
                segment = self._post(labels[key], server, integration, posts, 1)
                if key in results:
                    results[key].merge(segment)
                else:
                    results[key] = segment
                log(
                    f"round {number + 1}/{rounds} {labels[key]}: {posts} posts, "
                    f"{segment.alerts_per_s:,.1f} alerts/s, p50 {segment.percentile(50):.1f} ms"
                    + (f", non-202: {segment.failed}" if segment.failed else "")
                )
        baseline.stop()

        # Batched posts, the app alone.
        size = args.batch_size
        self._warm("app batched", app, APP_INTEGRATION, max(4, args.clients // 4), size)
        self.analyze_after_warmup("app batched")
        posts = args.batched_alerts // size
        log(f"app, {size} alerts per post: {posts} posts ...")
        results["batched"] = self._post(f"app, {size} alerts per post", app, APP_INTEGRATION, posts, size)
        log(f"app, {size} alerts per post: {results['batched'].alerts_per_s:,.1f} alerts/s")
        app.stop()
        outcomes = {"app": self.outcomes(APP_INTEGRATION)}
        if floor is not None:
            self._warm("floor batched", floor, FLOOR_INTEGRATION, max(4, args.clients // 4), size)
            log(f"floor, {size} alerts per post: {posts} posts ...")
            results["floor_batched"] = self._post(
                f"floor, {size} alerts per post", floor, FLOOR_INTEGRATION, posts, size
            )
            log(f"floor, {size} alerts per post: {results['floor_batched'].alerts_per_s:,.1f} alerts/s")
            floor.stop()
            outcomes["floor"] = self.outcomes(FLOOR_INTEGRATION)
        return results, sql, outcomes

    def cleanup(self) -> None:
        self.load.stop()
        if self.monitor is not None:
            self.monitor.close()
        for server in self.servers:
            try:
                server.stop()
            except Exception as exc:  # noqa: BLE001 - keep cleaning up
                log(f"stopping gunicorn {server.name}: {exc}")
        self.close_django()
        if self.args.keep:
            if self.db_created:
                log(f"kept: DATABASE_URL={self.db_url}")
            log(f"kept: logs in {self.tmp}")
            return
        try:
            self.drop_database()
        except Exception as exc:  # noqa: BLE001
            log(f"could not drop {self.db_name}: {exc}")
        shutil.rmtree(self.tmp, ignore_errors=True)


def frozen_hashes() -> str:
    """``path sha256=<hex>`` of each frozen comparison endpoint (``FROZEN``), comma-separated."""
    return ", ".join(f"{name} sha256={hashlib.sha256((ROOT / name).read_bytes()).hexdigest()}" for name in FROZEN)


def report(
    bench: Benchmark,
    results: dict[str, PhaseResult],
    sql: dict[str, SqlCount],
    outcomes: dict[str, dict[str, int]],
) -> bool:
    args = bench.args
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    print()
    print(
        f"Ingestion benchmark: gunicorn {args.workers} sync workers, {args.clients} clients "
        f"({args.client_processes} processes), {os.cpu_count()} CPUs, PostgreSQL {bench.info.get('postgresql')} "
        f"(synchronous_commit={bench.info.get('synchronous_commit')}), CONN_MAX_AGE={bench.info.get('conn_max_age')}, "
        f"CONN_HEALTH_CHECKS={bench.info.get('conn_health_checks')}, DEBUG off; 1-per-post modes in "
        f"{max(1, min(args.rounds, args.alerts))} alternating rounds"
        + (f"; {bench.info['analyzed']}" if "analyzed" in bench.info else "")
    )
    print(f"frozen: {frozen_hashes()}")
    print()
    header = (
        f"{'mode':<26} {'posts':>6} {'alerts':>7} {'secs':>6} {'alerts/s':>9} {'posts/s':>8} "
        f"{'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7} {'max ms':>7} {'non-202':>7}"
    )
    print(header)
    print("-" * len(header))
    for r in results.values():
        print(
            f"{r.name:<26} {r.posts:>6} {r.alerts:>7} {r.seconds:>6.1f} {r.alerts_per_s:>9,.1f} {r.posts_per_s:>8,.1f} "
            f"{r.percentile(50):>7.1f} {r.percentile(90):>7.1f} {r.percentile(99):>7.1f} "
            f"{max(r.latencies_ms, default=0):>7.1f} {r.failed:>7}"
        )
    print()
    if all(r.cpu.known for r in results.values()):
        header = (
            f"{'CPU while measuring':<26} {'workers':>8} {'postgres':>8} {'clients':>8} {'other':>8} "
            f"{'idle':>6} {'worker ms/alert':>15} {'postgres ms/alert':>17}"
        )
        print(header)
        print("-" * len(header))
        cpus = os.cpu_count() or 1
        for r in results.values():
            c = r.cpu
            used = c.workers + c.postgres + c.clients + c.bench + c.other
            print(
                f"{r.name:<26} {c.workers / c.wall:>8.2f} {c.postgres / c.wall:>8.2f} {c.clients / c.wall:>8.2f} "
                f"{(c.other + c.bench) / c.wall:>8.2f} {max(0.0, cpus - used / c.wall):>6.2f} "
                f"{c.workers / r.alerts * 1000:>15.2f} {c.postgres / r.alerts * 1000:>17.2f}"
            )
        print(
            "(cores in use on average; postgres = the backends of the benchmark's database; 'other' is CPU not "
            "used by this benchmark, e.g. other work on the machine: noise)"
        )

        def cpu_ms(r: PhaseResult) -> float:
            return (r.cpu.workers + r.cpu.postgres + r.cpu.clients) / r.alerts * 1000

        base_ms, app_ms, batch_ms = (cpu_ms(results[k]) for k in ("baseline", "single", "batched"))
        print(
            f"CPU per alert (workers + postgres + clients): baseline {base_ms:.2f} ms, app {app_ms:.2f} ms "
            f"(1 per post), {batch_ms:.2f} ms ({args.batch_size} per post); CPU-bound ratio "
            f"{base_ms / app_ms:.2f} (less sensitive to other load than the throughput ratio)"
        )
        print()
    header = (
        f"{'SQL per post (probe)':<26} {'alerts':>6} {'stmts':>6} {'SELECT':>6} {'INSERT':>6} {'UPDATE':>6} "
        f"{'SAVEPT':>6} {'BEGIN+COMMIT':>12} {'txns':>5} {'stmts/alert':>11} {'txns/alert':>10}"
    )
    print(header)
    print("-" * len(header))
    for key, count in sql.items():
        k = count.kinds
        name = results[key].name if key in results else key
        print(
            f"{name:<26} {count.alerts:>6} {count.statements:>6} {k['SELECT']:>6} {k['INSERT']:>6} {k['UPDATE']:>6} "
            f"{k['SAVEPOINT'] + k['RELEASE']:>6} {k['BEGIN'] + k['COMMIT']:>12} {count.transactions:>5} "
            f"{count.per_alert(count.statements):>11.2f} {count.per_alert(count.transactions):>10.2f}"
        )
    print("(each request in gunicorn also runs one SELECT 1 health check: CONN_HEALTH_CHECKS)")
    print()
    if bench.redaction:
        header = (
            f"{'redaction per alert (µs)':<26} {'alerts':>6} {'parse':>7} {'body':>7} {'records':>8} "
            f"{'redaction':>9} {'compile':>8}"
        )
        print(header)
        print("-" * len(header))
        for cost in bench.redaction:
            print(
                f"{f'{cost.alerts} per post':<26} {cost.alerts:>6} {cost.parse_us:>7.1f} {cost.body_us:>7.1f} "
                f"{cost.record_us:>8.1f} {cost.total_us:>9.1f} {cost.compile_us:>8.1f}"
            )
        print(
            "(in-process, best of 30: parse = the post's one JSON parse; body = the stored body redacted and its "
            "secrets found; records = each parsed record redacted; compile = an integration's redaction, once "
            "per settings version)"
        )
        print()
    baseline, single, batched = results["baseline"], results["single"], results["batched"]
    ratio = single.alerts_per_s / baseline.alerts_per_s if baseline.alerts_per_s else 0.0
    accepted = outcomes["app"].get("accepted", 0)
    outcome_text = ", ".join(f"{k} {v}" for k, v in sorted(outcomes["app"].items()))
    print(f"app alerts in the database: {outcome_text} (sent {bench.app_alerts_sent}, all should be accepted)")
    floor_ok = True
    if "floor" in outcomes:
        floor_accepted = outcomes["floor"].get("accepted", 0)
        floor_ok = floor_accepted == bench.floor_alerts_sent
        print(f"floor alerts in the database: accepted {floor_accepted} (sent {bench.floor_alerts_sent})")
    if load:
        print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    ok_ratio = ratio >= TARGET_RATIO
    ok_batched = batched.alerts_per_s >= TARGET_BATCHED
    print(
        f"target, 1 alert per post: {single.alerts_per_s:,.1f} alerts/s = {ratio:.0%} of the baseline's "
        f"{baseline.alerts_per_s:,.1f}/s (target >= {TARGET_RATIO:.0%}): {'met' if ok_ratio else 'MISSED'}"
    )
    print(
        f"target, {args.batch_size} alerts per post: {batched.alerts_per_s:,.1f} alerts/s "
        f"(target >= {TARGET_BATCHED:,.0f}): {'met' if ok_batched else 'MISSED'}"
    )
    # A closed loop of N clients has N posts in flight: mean latency = N / throughput (Little's law).
    needed = args.clients / (TARGET_P99_MS / 1000)
    print(
        f"target, p99 of a single post <= {TARGET_P99_MS:.0f} ms at {args.clients} clients: "
        f"{single.percentile(99):.1f} ms: {'met' if single.percentile(99) <= TARGET_P99_MS else 'MISSED'} "
        f"(even the mean needs >= {needed:,.0f} posts/s with {args.clients} posts in flight; the baseline "
        f"did {baseline.posts_per_s:,.1f}/s, p99 {baseline.percentile(99):.1f} ms)"
    )
    floor, floor_batched = results.get("floor"), results.get("floor_batched")
    if floor is not None and floor_batched is not None:
        floor_ratio = floor.alerts_per_s / baseline.alerts_per_s if baseline.alerts_per_s else 0.0
        print(
            f"floor (bench/floor_urls.py: rule 9's two commits and the product's five rows, nothing else): "
            f"{floor.alerts_per_s:,.1f} alerts/s = {floor_ratio:.0%} of the baseline, "
            f"{floor_batched.alerts_per_s:,.1f} alerts/s in posts of {args.batch_size}; the app does "
            f"{single.alerts_per_s / floor.alerts_per_s if floor.alerts_per_s else 0:.0%} and "
            f"{batched.alerts_per_s / floor_batched.alerts_per_s if floor_batched.alerts_per_s else 0:.0%} of it"
        )
    for r in results.values():
        for error in r.errors:
            print(f"  {r.name}: {error}")
    if floor is not None and floor_batched is not None:
        print(
            f"ingest_floor alerts={floor.alerts} alerts_per_s={floor.alerts_per_s:.1f} "
            f"baseline_per_s={baseline.alerts_per_s:.1f} ratio={floor_ratio:.2f} "
            f"p50_ms={floor.percentile(50):.1f} p99_ms={floor.percentile(99):.1f} "
            f"batched_alerts_per_s={floor_batched.alerts_per_s:.1f}"
        )
    print(
        f"ingest_batched alerts={batched.alerts} alerts_per_s={batched.alerts_per_s:.1f} "
        f"p50_ms={batched.percentile(50):.1f} p99_ms={batched.percentile(99):.1f}"
    )
    print(
        f"ingest alerts={single.alerts} alerts_per_s={single.alerts_per_s:.1f} "
        f"baseline_per_s={baseline.alerts_per_s:.1f} ratio={ratio:.2f} "
        f"p50_ms={single.percentile(50):.1f} p99_ms={single.percentile(99):.1f}",
        flush=True,
    )
    return accepted == bench.app_alerts_sent and floor_ok and not any(r.failed for r in results.values())


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/ingest.py",
        description="Post generic alerts through gunicorn + PostgreSQL and compare with a one-row baseline.",
    )
    parser.add_argument("--alerts", type=int, default=5000, help="single-alert posts to the app and the baseline")
    parser.add_argument(
        "--batched-alerts", type=int, default=None, help="alerts sent in batches (default: 4 x --alerts)"
    )
    parser.add_argument("--batch-size", type=int, default=100, help="alerts per batched post (default 100)")
    parser.add_argument(
        "--database-url",
        default=DEFAULT_SERVER_URL,
        help="PostgreSQL server on 127.0.0.1 to create the throw-away database on "
        f"(default {DEFAULT_SERVER_URL}; its database is only used for CREATE/DROP DATABASE)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the database and the gunicorn logs")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn sync workers (default 2)")
    parser.add_argument("--clients", type=int, default=16, help="concurrent client connections (default 16)")
    parser.add_argument("--client-processes", type=int, default=2, help="processes the clients run in (default 2)")
    parser.add_argument(
        "--warmup", type=int, default=200, help="unmeasured single posts per server first (default 200)"
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also serve bench/floor_urls.py (rule 9's least work) in the rounds and in batches",
    )
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of the 1-per-post modes (default 5)")
    args = parser.parse_args(argv)
    if args.batched_alerts is None:
        args.batched_alerts = 4 * args.alerts
    if args.alerts < 1 or args.batch_size < 1 or args.batch_size > 1000 or args.batched_alerts < args.batch_size:
        parser.error("--alerts >= 1, 1 <= --batch-size <= 1000 and --batched-alerts >= --batch-size")
    args.batched_alerts -= args.batched_alerts % args.batch_size
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupt)
    bench = Benchmark(args)
    try:
        results, sql, outcomes = bench.run()
    except KeyboardInterrupt:
        log("interrupted; cleaning up")
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # let the cleanup finish
        bench.cleanup()
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return 0 if report(bench, results, sql, outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""Production-topology load benchmark: alerts/s and page latency on gunicorn + PostgreSQL + Redis + Celery.

Usage (from the repository root; never run in CI)::

    .venv/bin/python -m bench.topology                     # 4 web workers, 8 senders, 4 readers, 60 s
    .venv/bin/python -m bench.topology --duration 20 --baseline-duration 10 --warmup 5   # a quick run
    .venv/bin/python -m bench.topology --rate 100          # open loop: 100 alerts/s offered
    .venv/bin/python -m bench.topology --keep              # keep the database and the logs afterwards

What it builds, all on 127.0.0.1 (the topology of ``docs/production.md``, on one machine):

- a fresh PostgreSQL database ``handover_load`` (dropped first if a previous run left it), migrated;
  Redis db 3 as the Celery broker and db 4 as the cache (both emptied first); its own
  ``HANDOVER_VAR_DIR``; production settings: ``HANDOVER_PRODUCTION=true`` (DEBUG off, manifest
  static files, secure cookies, HSTS, the https redirect), a generated ``DJANGO_SECRET_KEY``,
  ``DJANGO_ALLOWED_HOSTS=127.0.0.1,localhost``. There is no TLS proxy, so every request carries
  ``X-Forwarded-Proto: https``, the header production settings trust (``SECURE_PROXY_SSL_HEADER``):
  what a TLS-terminating proxy sends. Ingestion keeps the production rate limit (6,000 posts a
  minute per key): each sender is its own monitoring system with its own key;
- ``collectstatic``; through the services and commands: the job ``load-hourly-export`` with 40
  tenants and their targets, the demo (``runs/demo/loader.py``: stories of every source, a work
  ledger, a handover, replay requests, so every page has something to show), one support person
  per reader with the support role on every tenant, one integration key per sender
  (``manage.py create_integration_key``);
- ``gunicorn handover.wsgi`` (``--web-workers`` sync workers, a port in 8100-8199), two Celery
  workers (``--celery-workers``, each ``--worker-concurrency`` processes) and exactly one Celery
  beat, as subprocesses in their own process groups; it waits for ``/healthz`` and the workers.

Then it drives traffic (``bench/load.py``, ``MixedTraffic``) in phases of fixed length:

1. warm-up (``--warmup`` s, senders and readers; not reported, but its alerts are checked); then, on a
   server whose autovacuum is off, the database is analysed as autoanalyze would have (``bench/stats.py``);
2. ingest alone (``--baseline-duration`` s): the baseline;
3. ingest while people read (``--duration`` s): the figure; 2 and 3 alternate in ``--rounds``
   rounds (A B, B A, ...) so that load from elsewhere on a shared machine falls on both alike;
4. readers alone (``--baseline-duration`` s): the page baseline.

Senders (``--senders``) post one alert per post in the formats ``--mix`` names (generic,
Alertmanager, Grafana; ``bench/formats.py``: every alert new, each its own run), as fast as
answers come (closed loop), or, with ``--rate``, at that many alerts/s in all on a fixed schedule
(open loop; latency counted from the scheduled send time). Readers (``--readers``) each log in
through the login form as a support person and read, with ``--think`` seconds between reads, the
runs list, run pages, the alert inbox, the handovers list, the approvals queue (replays), the
next-run checks and the API lists of runs, alerts, handovers and checks.

It prints per phase: alerts sent and accepted (202), errors by status, sustained alerts/s, ingest
latency p50/p95/p99/max, page reads/s and page latency p50/p95/p99 per kind, where the CPU went,
the ratio of alerts/s with readers to alerts/s alone; then the Celery queue backlog and task
counts, ``/healthz``, and checks that the database holds exactly the accepted alerts (one
delivery per 202 post, every alert ``accepted``) and that nothing answered 5xx. The last line::

    topology alerts_per_s=X p99_ms=Y baseline_per_s=Z ratio=R page_reads_per_s=P page_p99_ms=Q

It stops every process it started (also on Ctrl-C, SIGTERM or an error), drops the database and
empties Redis dbs 3 and 4 unless ``--keep``. Exit status 0 when every check passed, 1 otherwise, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import io
import json
import logging
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import cpu as cpustat  # noqa: E402
from bench import formats  # noqa: E402
from bench.ledger_setup import DEFAULT_SERVER_URL, log, loopback_url  # noqa: E402
from bench.load import (  # noqa: E402
    FORWARDED,
    HOST,
    MixedTraffic,
    ReaderSpec,
    SenderSpec,
    TrafficResult,
    percentile,
)
from bench.stats import analyze_for_autovacuum  # noqa: E402

DB_NAME = "handover_load"
BROKER_URL = "redis://127.0.0.1:6379/3"
CACHE_URL = "redis://127.0.0.1:6379/4"
PORTS = range(8100, 8200)
INTEGRATION_PREFIX = "load-"
READER_PREFIX = "load-support-"
# (kind, path): what a support person reads; ``{run}`` is a run id (run pages weigh double).
PAGES = [
    ("runs list", "/runs/"),
    ("run page", "/runs/{run}/"),
    ("run page", "/runs/{run}/"),
    ("inbox", "/inbox/"),
    ("handovers", "/handovers/"),
    ("approvals queue", "/replays/"),
    ("checks", "/checks/"),
    ("API runs", "/api/v1/runs/"),
    ("API alerts", "/api/v1/alerts/"),
    ("API handovers", "/api/v1/handovers/"),
    ("API checks", "/api/v1/checks/"),
]


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def free_port(port: int) -> int:
    """``port`` when given, else the first free port in 8100-8199."""
    for candidate in [port] if port else PORTS:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((HOST, candidate))
            except OSError:
                continue
            return candidate
    raise SystemExit(f"no free port in {PORTS.start}-{PORTS.stop - 1}" if not port else f"port {port} is taken")


class Service:
    """One long-running subprocess in its own session (so a terminal's Ctrl-C reaches only us)."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], logfile: Path) -> None:
        self.name = name
        self.command = command
        self.env = env
        self.logfile = logfile
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def start(self) -> None:
        with open(self.logfile, "ab") as out:
            self.process = subprocess.Popen(
                self.command, env=self.env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def check(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.process.returncode}; see {self.logfile}")

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM to the main process (warm shutdown), then SIGKILL to its process group if needed."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                log(f"{self.name} did not stop within {grace:.0f} s; killing its process group")
        with contextlib.suppress(ProcessLookupError):  # children left behind (its group, created by us)
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)

    def log_text(self) -> str:
        try:
            return self.logfile.read_text(errors="replace")
        except OSError:
            return ""


@dataclass
class Phase:
    name: str
    seconds: float
    send: bool
    read: bool
    report: bool = True


class Topology:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.server_url = loopback_url(args.database_url)
        self.db_url = loopback_url(args.database_url, DB_NAME)
        self.db_created = False
        self.tmp = Path(tempfile.mkdtemp(prefix="handover-load-"))
        self.var = self.tmp / "var"
        self.port = 0
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "HANDOVER_"))},
            "DJANGO_SETTINGS_MODULE": "handover.settings",
            "HANDOVER_PRODUCTION": "true",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "HANDOVER_BASE_URL": "https://handover.example.com",
            "DATABASE_URL": self.db_url,
            "CELERY_BROKER_URL": BROKER_URL,
            "CACHE_URL": CACHE_URL,
            "HANDOVER_VAR_DIR": str(self.var),
            "HANDOVER_LOG_LEVEL": "WARNING",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])),
        }
        self.web: Service | None = None
        self.workers: list[Service] = []
        self.beat: Service | None = None
        self.traffic = MixedTraffic(args.client_processes)
        self.keys: list[tuple[str, str]] = []  # (source, key) per sender
        self.password = secrets.token_urlsafe(18)
        self.readers = [f"{READER_PREFIX}{n:02d}" for n in range(args.readers)]
        self.run_ids: list[str] = []
        self.next_index = 0
        self.info: dict[str, str] = {}
        self.monitor = None  # an admin connection listing our PostgreSQL backends
        self.results: list[TrafficResult] = []
        self.warmup: TrafficResult | None = None

    # --- PostgreSQL, Redis, Django -----------------------------------------------------------------

    def _admin(self):  # noqa: ANN202 - a psycopg connection
        import psycopg

        return psycopg.connect(self.server_url, autocommit=True, connect_timeout=10)

    def create_database(self) -> None:
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{DB_NAME}"')
            self.db_created = True
            self.info["postgresql"] = conn.execute("SHOW server_version").fetchone()[0].split()[0]
            self.info["max_connections"] = conn.execute("SHOW max_connections").fetchone()[0]
        log(f"database {DB_NAME} created on 127.0.0.1 (PostgreSQL {self.info['postgresql']})")

    def drop_database(self) -> None:
        if not self.db_created:
            return
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        self.db_created = False
        log(f"database {DB_NAME} dropped")

    def backend_pids(self) -> set[int]:
        """The PostgreSQL backends connected to the benchmark's database (for the CPU table)."""
        try:
            if self.monitor is None or self.monitor.closed:
                self.monitor = self._admin()
            rows = self.monitor.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", [DB_NAME])
            return {row[0] for row in rows.fetchall()}
        except Exception:  # noqa: BLE001 - the CPU table is a diagnostic
            return set()

    def redis_flush(self) -> None:
        import redis

        for url in (BROKER_URL, CACHE_URL):
            client = redis.Redis.from_url(url)
            client.flushdb()
            client.close()
        self.info["redis"] = redis.Redis.from_url(BROKER_URL).info("server")["redis_version"]

    def setup_django(self) -> None:
        # This process only migrates, seeds and checks; it serves nothing. Its own https redirect is
        # off because the demo loader posts through Django's test client over plain http.
        os.environ.update(self.env, HANDOVER_SSL_REDIRECT="false")
        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command

        started = time.monotonic()
        call_command("migrate", interactive=False, verbosity=0)
        log(f"migrated in {time.monotonic() - started:.1f} s")
        started = time.monotonic()
        call_command("collectstatic", interactive=False, verbosity=0)
        log(f"collectstatic in {time.monotonic() - started:.1f} s ({settings.STORAGES['staticfiles']['BACKEND']})")
        database = settings.DATABASES["default"]
        self.info["conn_max_age"] = str(database.get("CONN_MAX_AGE"))
        self.info["rate_limit"] = str(settings.HANDOVER_INGEST_RATE_LIMIT)
        self.seed()
        self.close_django()

    def seed(self) -> None:
        """Job, tenants, targets, the demo, support people and one integration key per sender."""
        from django.contrib.auth import get_user_model
        from django.contrib.auth.hashers import make_password
        from django.core.management import call_command

        from approvals.replays.demo import demo_replay_load
        from handover.handovers.demo import demo_handover_load
        from runs.attempts.models import Run
        from runs.catalog.models import Tenant
        from runs.catalog.services import job_get_or_create, job_target_get_or_create, role_grant, tenant_get_or_create
        from runs.demo.loader import demo_load

        started = time.monotonic()
        job, _ = job_get_or_create(key=formats.JOB_KEY, defaults=formats.JOB_DEFAULTS)
        for slug in formats.TENANTS:
            tenant, _ = tenant_get_or_create(slug=slug)
            job_target_get_or_create(job=job, tenant=tenant, environment=formats.ENVIRONMENT)
        demo_log = io.StringIO()
        request_logger = logging.getLogger("django.request")  # the demo's invalid stories log 400s
        level = request_logger.level
        request_logger.setLevel(logging.ERROR)
        try:
            with contextlib.redirect_stdout(demo_log):  # the console mail backend writes to stdout
                demo_load(log=lambda line: print(line))
                demo_handover_load(log=lambda line: print(line))
                demo_replay_load(log=lambda line: print(line))
        finally:
            request_logger.setLevel(level)
        (self.tmp / "demo.log").write_text(demo_log.getvalue())
        # One password hash for all readers: the hasher costs ~0.3 s a person, the logins stay real.
        password_hash = make_password(self.password)
        User = get_user_model()
        tenants = list(Tenant.objects.order_by("id"))
        for username in self.readers:
            user = User.objects.create(username=username, password=password_hash)
            for tenant in tenants:
                role_grant(user=user, role="support", obj=tenant)
        for number, source in enumerate(self.sender_sources()):
            out = io.StringIO()
            tenant_args = [arg for slug in formats.TENANTS for arg in ("--tenant", slug)]
            call_command(
                "create_integration_key",
                source,
                *tenant_args,
                "--integration",
                f"{INTEGRATION_PREFIX}{source}",
                "--label",
                f"sender-{number:02d}",
                stdout=out,
            )
            self.keys.append((source, out.getvalue().strip().splitlines()[-1]))
        self.run_ids = [str(pk) for pk in Run.objects.values_list("public_id", flat=True)]
        log(
            f"seeded in {time.monotonic() - started:.1f} s: job {formats.JOB_KEY}, {len(formats.TENANTS)} load "
            f"tenants, the demo ({len(self.run_ids)} runs), {len(self.readers)} support people on "
            f"{len(tenants)} tenants, {len(self.keys)} integration keys"
        )

    def sender_sources(self) -> list[str]:
        """The source of each sender, spread by the ``--mix`` weights (largest remainder first)."""
        mix = self.args.mix
        total = sum(mix.values())
        shares = {source: self.args.senders * weight / total for source, weight in mix.items()}
        counts = {source: int(share) for source, share in shares.items()}
        for source in sorted(shares, key=lambda s: counts[s] - shares[s])[: self.args.senders - sum(counts.values())]:
            counts[source] += 1
        order = [source for source in mix for _ in range(counts[source])]
        return order

    def pick_run_ids(self, count: int = 300) -> None:
        """Run ids for the run pages: the demo's runs and a sample of those the warm-up created."""
        from runs.attempts.models import Run

        demo = list(Run.objects.exclude(job__key=formats.JOB_KEY).values_list("public_id", flat=True))
        load = list(Run.objects.filter(job__key=formats.JOB_KEY).values_list("public_id", flat=True)[:5000])
        random.Random(7).shuffle(load)
        self.run_ids = [str(pk) for pk in demo + load[: max(0, count - len(demo))]]
        self.close_django()

    def close_django(self) -> None:
        if "django" in sys.modules and self.db_created:
            from django.db import connections

            connections.close_all()

    # --- the processes -----------------------------------------------------------------------------

    def start_services(self) -> None:
        args = self.args
        self.port = free_port(args.port)
        python = sys.executable
        self.web = Service(
            "gunicorn",
            [
                python, "-m", "gunicorn", "handover.wsgi:application",
                "--workers", str(args.web_workers), "--worker-class", "sync",
                "--bind", f"{HOST}:{self.port}", "--chdir", str(ROOT),
                "--log-level", "warning", "--timeout", "60", "--graceful-timeout", "10",
            ],
            self.env,
            self.tmp / "gunicorn.log",
        )  # fmt: skip
        for n in range(1, args.celery_workers + 1):
            self.workers.append(
                Service(
                    f"celery worker {n}",
                    [
                        python, "-m", "celery", "-A", "handover", "worker",
                        "--concurrency", str(args.worker_concurrency), "--hostname", f"load-worker{n}@%h",
                        "--loglevel", "INFO",
                    ],
                    self.env,
                    self.tmp / f"celery-worker{n}.log",
                )
            )  # fmt: skip
        self.beat = Service(
            "celery beat",
            [
                python, "-m", "celery", "-A", "handover", "beat",
                "--schedule", str(self.var / "celerybeat-schedule"), "--loglevel", "INFO",
            ],
            self.env,
            self.tmp / "celery-beat.log",
        )  # fmt: skip
        for service in self.services():
            service.start()
        log(
            f"started gunicorn ({args.web_workers} sync workers, {HOST}:{self.port}), "
            f"{args.celery_workers} Celery workers (concurrency {args.worker_concurrency}) and one beat"
        )
        self.wait_ready()

    def services(self) -> list[Service]:
        return [s for s in [self.web, *self.workers, self.beat] if s is not None]

    def healthz(self) -> tuple[int, dict]:
        conn = http.client.HTTPConnection(HOST, self.port, timeout=10)
        try:
            conn.request("GET", "/healthz", headers=FORWARDED)
            response = conn.getresponse()
            body = response.read()
        finally:
            conn.close()
        try:
            return response.status, json.loads(body)
        except ValueError:
            return response.status, {"body": body[:200].decode(errors="replace")}

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 90
        health: dict = {}
        while time.monotonic() < deadline:
            for service in self.services():
                service.check()
            try:
                status, health = self.healthz()
            except (OSError, http.client.HTTPException):
                status = 0
            ready = [w for w in self.workers if re.search(r"load-worker\d+@\S+ ready\.", w.log_text())]
            if status == 200 and len(ready) == len(self.workers):
                log(f"/healthz: {health}; {len(ready)} workers ready")
                return
            time.sleep(0.5)
        raise RuntimeError(f"the topology was not ready within 90 s (healthz {health}); logs in {self.tmp}")

    def stop_services(self) -> None:
        # web first (no new work), then beat (no new ticks), then the workers (warm shutdown)
        for service in [self.web, self.beat, *self.workers]:
            if service is None:
                continue
            try:
                service.stop()
            except Exception as exc:  # noqa: BLE001 - keep stopping the others
                log(f"stopping {service.name}: {exc}")

    # --- traffic -----------------------------------------------------------------------------------

    def senders(self) -> list[SenderSpec]:
        count = len(self.keys)
        interval = count / self.args.rate if self.args.rate else 0.0
        return [
            SenderSpec(
                source=source,
                key=key,
                first=self.next_index + n,
                stride=count,
                interval_s=interval,
                offset_s=n * interval / count if interval else 0.0,
            )
            for n, (source, key) in enumerate(self.keys)
        ]

    def reader_specs(self, phase_number: int) -> list[ReaderSpec]:
        return [
            ReaderSpec(username=name, password=self.password, think_s=self.args.think, seed=phase_number * 1000 + n)
            for n, name in enumerate(self.readers)
        ]

    def run_phase(self, number: int, phase: Phase) -> TrafficResult:
        senders = self.senders() if phase.send else []
        readers = self.reader_specs(number) if phase.read else []
        groups = self.process_groups()
        tracker = cpustat.BackendTracker(self.backend_pids)

        def tick() -> None:
            tracker.poll()
            for service in self.services():
                service.check()

        log(f"{phase.name}: {len(senders)} senders, {len(readers)} readers, {phase.seconds:.0f} s ...")
        before = cpustat.snapshot()
        wall_start = time.monotonic()
        result = self.traffic.run(
            phase.name, self.port, senders, readers, PAGES, self.run_ids, phase.seconds, tick=tick
        )
        tracker.poll()
        after = cpustat.snapshot()
        result.cpu = cpu_split(before, after, groups, tracker.seen, result.clients_cpu, time.monotonic() - wall_start)
        if senders:
            self.next_index += len(senders) * max(result.posts.values(), default=0)
        ingest = result.kinds(ingest=True)
        pages = result.kinds(ingest=False)
        log(
            f"{phase.name}: {result.rate(result.count(ingest, 202)):,.1f} alerts/s accepted, ingest p99 "
            f"{percentile(result.latencies(ingest), 99):.0f} ms; {result.rate(result.count(pages)):,.1f} reads/s, "
            f"page p99 {percentile(result.latencies(pages), 99):.0f} ms"
            + (f"; errors: {dict(errors_by_status(result))}" if errors_by_status(result) else "")
        )
        return result

    def process_groups(self) -> dict[str, set[int]]:
        """Main pids per role: their direct children (gunicorn workers, Celery pool processes) count too."""
        groups = {"web": set(), "celery": set()}
        for service in self.services():
            if service.pid is not None:
                groups["web" if service is self.web else "celery"].add(service.pid)
        return groups

    def run(self) -> None:
        args = self.args
        self.create_database()
        self.redis_flush()
        self.setup_django()
        self.start_services()
        # Ingest alone and ingest with readers alternate in rounds (A B, B A, ...), so that load from
        # elsewhere on a shared machine falls on both alike; then the readers alone.
        rounds = max(1, args.rounds)
        phases = [Phase("warm-up", args.warmup, send=True, read=True, report=False)]
        for number in range(rounds):
            pair = [
                Phase("ingest alone", args.baseline_duration / rounds, send=True, read=False),
                Phase("ingest + readers", args.duration / rounds, send=True, read=True),
            ]
            phases += pair if number % 2 == 0 else pair[::-1]
        phases.append(Phase("readers alone", args.baseline_duration, send=False, read=bool(self.readers)))
        results: dict[str, TrafficResult] = {}
        for number, phase in enumerate(phases):
            if phase.seconds <= 0 or not (phase.send or phase.read):
                continue
            if number == 1:
                self.pick_run_ids()
            result = self.run_phase(number, phase)
            result.name = phase.name
            if not phase.report:
                self.warmup = result
                note = analyze_for_autovacuum(self.db_url, phase.name, log)  # bench/stats.py
                if note is not None:
                    self.info["analyzed"] = note
            elif phase.name in results:
                results[phase.name].merge(result)
            else:
                results[phase.name] = result
        self.results = list(results.values())
        time.sleep(1)  # let a post the last response raced with settle

    # --- after the run -----------------------------------------------------------------------------

    def findings(self) -> dict:
        """Backlog, health, task counts, and what the database holds, compared with what was accepted."""
        import redis
        from django.db.models import Count

        from runs.alerts.models import Alert, Delivery

        found: dict = {}
        broker = redis.Redis.from_url(BROKER_URL)
        found["queue_celery"] = broker.llen("celery")
        found["queue_unacked"] = broker.hlen("unacked")
        broker.close()
        try:
            found["healthz_status"], found["healthz"] = self.healthz()
        except (OSError, http.client.HTTPException) as exc:
            found["healthz_status"], found["healthz"] = 0, {"error": str(exc)}
        worker_logs = "".join(w.log_text() for w in self.workers)
        found["tasks_succeeded"] = Counter(re.findall(r"Task (\S+)\[[^\]]+\] succeeded", worker_logs))
        found["tasks_failed"] = len(re.findall(r"Task \S+\[[^\]]+\] (?:raised|failed)", worker_logs))
        found["beat_sent"] = len(re.findall(r"Sending due task", self.beat.log_text() if self.beat else ""))
        web_log = self.web.log_text() if self.web else ""
        found["web_tracebacks"] = web_log.count("Traceback")
        found["web_timeouts"] = web_log.count("WORKER TIMEOUT")
        integrations = {"integration__name__startswith": INTEGRATION_PREFIX}
        found["deliveries"] = Delivery.objects.filter(**integrations).count()
        found["alert_outcomes"] = dict(
            Alert.objects.filter(**integrations).values_list("outcome").annotate(n=Count("id")).order_by()
        )
        self.close_django()
        return found

    def cleanup(self) -> None:
        self.traffic.stop()
        self.stop_services()
        if self.monitor is not None:
            with contextlib.suppress(Exception):
                self.monitor.close()
        self.close_django()
        if self.args.keep:
            if self.db_created:
                log(f"kept: DATABASE_URL={self.db_url} (Redis dbs 3 and 4 as left)")
            log(f"kept: logs and var in {self.tmp}")
            return
        try:
            self.drop_database()
        except Exception as exc:  # noqa: BLE001
            log(f"could not drop {DB_NAME}: {exc}")
        with contextlib.suppress(Exception):
            self.redis_flush()
        shutil.rmtree(self.tmp, ignore_errors=True)


def cpu_split(
    before: cpustat.Snapshot | None,
    after: cpustat.Snapshot | None,
    groups: dict[str, set[int]],
    backends: dict[int, float],
    clients_cpu: float,
    wall: float,
) -> dict[str, float]:
    """Cores in use on average, by role: web, celery, postgres (our backends), clients, other (incl. us)."""
    if before is None or after is None or wall <= 0:
        return {}
    used = {"web": 0.0, "celery": 0.0, "postgres": 0.0, "clients": clients_cpu}
    for pid, (cpu, ppid, _comm) in after.processes.items():
        delta = cpu - before.processes.get(pid, (0.0, 0, ""))[0]
        for role, mains in groups.items():
            if pid in mains or ppid in mains:
                used[role] += delta
                break
        else:
            if pid in backends:
                used["postgres"] += delta
    for pid, cpu in backends.items():
        if pid not in after.processes:  # exited meanwhile: its last seen CPU time
            used["postgres"] += cpu - before.processes.get(pid, (0.0, 0, ""))[0]
    busy = after.busy - before.busy
    used["other"] = max(0.0, busy - sum(used.values()))
    cores = {role: value / wall for role, value in used.items()}
    cores["idle"] = max(0.0, (os.cpu_count() or 1) - busy / wall)
    return cores


def errors_by_status(result: TrafficResult) -> Counter:
    """Non-success answers: for ingestion anything but 202, for pages anything but 200."""
    errors: Counter = Counter()
    for kind, counter in result.statuses.items():
        ok = 202 if kind.startswith("ingest ") else 200
        for status, n in counter.items():
            if status != ok:
                errors[f"{'ingest' if kind.startswith('ingest ') else 'pages'} {status}"] += n
    return errors


def report(bench: Topology, found: dict) -> bool:
    args = bench.args
    results = {r.name: r for r in bench.results}
    alone, mixed, readers_alone = (results.get(n) for n in ("ingest alone", "ingest + readers", "readers alone"))
    sources = Counter(source for source, _ in bench.keys)
    load = os.getloadavg()
    print()
    print(
        f"Topology benchmark: gunicorn handover.wsgi {args.web_workers} sync workers, {args.celery_workers} Celery "
        f"workers (concurrency {args.worker_concurrency}) + 1 beat, Redis {bench.info.get('redis')} (broker db 3, "
        f"cache db 4), PostgreSQL {bench.info.get('postgresql')} (CONN_MAX_AGE={bench.info.get('conn_max_age')}); "
        f"HANDOVER_PRODUCTION=true, X-Forwarded-Proto: https; {os.cpu_count()} CPUs"
        + (f"; {bench.info['analyzed']}" if "analyzed" in bench.info else "")
    )
    mode = f"open loop, {args.rate:g} alerts/s offered" if args.rate else "closed loop (as fast as answers come)"
    print(
        f"senders: {len(bench.keys)} ({', '.join(f'{s} {n}' for s, n in sources.items())}), one key each "
        f"(rate limit {bench.info.get('rate_limit')} posts/min/key), 1 alert per post, {mode}; readers: "
        f"{len(bench.readers)} support people, think time {args.think:g} s"
    )
    print()
    header = (
        f"{'phase':<18} {'secs':>5} {'sent':>6} {'202':>6} {'errors':>6} {'alerts/s':>9} {'p50 ms':>7} "
        f"{'p95 ms':>7} {'p99 ms':>7} {'max ms':>7} {'reads':>6} {'reads/s':>8} {'read p50':>8} {'read p99':>8}"
    )
    print(header)
    print("-" * len(header))
    for r in bench.results:
        ingest, pages = r.kinds(ingest=True), r.kinds(ingest=False)
        lat, page_lat = r.latencies(ingest), r.latencies(pages)
        sent, accepted = r.count(ingest), r.count(ingest, 202)
        reads = r.count(pages)
        print(
            f"{r.name:<18} {r.seconds:>5.1f} {sent:>6} {accepted:>6} {sum(errors_by_status(r).values()):>6} "
            f"{r.rate(accepted):>9,.1f} {percentile(lat, 50):>7.1f} {percentile(lat, 95):>7.1f} "
            f"{percentile(lat, 99):>7.1f} {max(lat, default=0):>7.1f} {reads:>6} {r.rate(reads):>8,.1f} "
            f"{percentile(page_lat, 50):>8.1f} {percentile(page_lat, 99):>8.1f}"
        )
    print("(alerts/s: accepted alerts over the phase's wall time; latency per post as the client sees it)")
    print()
    if mixed is not None:
        header = f"{'ingest, with readers':<22} {'posts':>6} {'202':>6} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7}"
        print(header)
        print("-" * len(header))
        for kind in mixed.kinds(ingest=True):
            lat = mixed.latencies([kind])
            print(
                f"{kind.removeprefix('ingest '):<22} {mixed.count([kind]):>6} {mixed.count([kind], 202):>6} "
                f"{percentile(lat, 50):>7.1f} {percentile(lat, 95):>7.1f} {percentile(lat, 99):>7.1f}"
            )
        print()
        header = (
            f"{'page reads':<16} {'reads':>6} {'reads/s':>8} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7}   "
            f"{'alone: p50':>10} {'p99':>7}"
        )
        print(header)
        print("-" * len(header))
        kinds = list(dict.fromkeys(kind for kind, _ in PAGES))
        for kind in kinds:
            lat = mixed.latencies([kind])
            base = readers_alone.latencies([kind]) if readers_alone else []
            print(
                f"{kind:<16} {mixed.count([kind]):>6} {mixed.rate(mixed.count([kind])):>8.1f} "
                f"{percentile(lat, 50):>7.1f} {percentile(lat, 95):>7.1f} {percentile(lat, 99):>7.1f}   "
                f"{percentile(base, 50):>10.1f} {percentile(base, 99):>7.1f}"
            )
        print("(columns on the left: while alerts are ingested; 'alone': the readers-alone phase)")
        print()
    header = (
        f"{'CPU (cores in use)':<18} {'web':>6} {'celery':>6} {'postgres':>8} {'clients':>7} {'other':>6} {'idle':>6}"
    )
    print(header)
    print("-" * len(header))
    for r in bench.results:
        c = r.cpu
        if c:
            print(
                f"{r.name:<18} {c['web']:>6.2f} {c['celery']:>6.2f} {c['postgres']:>8.2f} {c['clients']:>7.2f} "
                f"{c['other']:>6.2f} {c['idle']:>6.2f}"
            )
    cost = []
    if alone is not None and alone.cpu and alone.count(alone.kinds(ingest=True), 202):
        per = alone.seconds / alone.count(alone.kinds(ingest=True), 202) * 1000
        cost.append(
            f"per alert (ingest alone) web {alone.cpu['web'] * per:.1f} ms, "
            f"postgres {alone.cpu['postgres'] * per:.1f} ms"
        )
    if readers_alone is not None and readers_alone.cpu and readers_alone.count(readers_alone.kinds(ingest=False)):
        per = readers_alone.seconds / readers_alone.count(readers_alone.kinds(ingest=False)) * 1000
        cost.append(
            f"per page read (readers alone) web {readers_alone.cpu['web'] * per:.1f} ms, "
            f"postgres {readers_alone.cpu['postgres'] * per:.1f} ms"
        )
    if cost:
        print(f"CPU {'; '.join(cost)} (less sensitive to other load than the rates)")
    print(
        "(web = gunicorn, celery = workers + beat, postgres = the backends of handover_load, clients = this "
        "benchmark's senders and readers, other = the rest of the machine: PostgreSQL's background "
        "processes, Redis, this process and other work -- noise)"
    )
    print()

    # What every phase (the warm-up too) sent, against what the database holds.
    every = [*bench.results, *([bench.warmup] if bench.warmup is not None else [])]
    accepted_posts = sum(r.count(r.kinds(ingest=True), 202) for r in every)
    errors: Counter = Counter()
    for r in every:
        errors.update(errors_by_status(r))
    server_errors = sum(n for key, n in errors.items() if str(key).split()[-1].startswith("5"))
    client_failures = sum(n for key, n in errors.items() if key.endswith(" error"))
    outcomes = found["alert_outcomes"]
    accepted_alerts = outcomes.get("accepted", 0)
    other_outcomes = {k: v for k, v in outcomes.items() if k != "accepted"}
    tasks = found["tasks_succeeded"]
    print(
        f"Celery: beat sent {found['beat_sent']} due tasks; workers ran {sum(tasks.values())} tasks "
        f"({', '.join(f'{name} {n}' for name, n in sorted(tasks.items())) or 'none'}), {found['tasks_failed']} failed; "
        f"queue backlog at the end: {found['queue_celery']} waiting, {found['queue_unacked']} unacknowledged"
    )
    health = found["healthz"]
    print(
        f"/healthz at the end: HTTP {found['healthz_status']}, database {health.get('database')}, broker "
        f"{health.get('broker')}, beat_age_seconds {health.get('beat_age_seconds')}, pending_alerts "
        f"{health.get('pending_alerts')}, unfinished_deliveries {health.get('unfinished_deliveries')}"
    )
    print(
        f"gunicorn log: {found['web_tracebacks']} tracebacks, {found['web_timeouts']} worker timeouts; "
        f"errors by status, all phases with the warm-up: {dict(errors) or 'none'}"
    )
    ok_deliveries = found["deliveries"] == accepted_posts
    ok_alerts = accepted_alerts == accepted_posts and not other_outcomes
    print(
        f"database: {found['deliveries']} deliveries for {accepted_posts} posts answered 202 "
        f"({'equal' if ok_deliveries else 'DIFFERENT'}); alerts {dict(outcomes)} "
        f"({'exactly the accepted ones' if ok_alerts else 'NOT exactly the accepted ones'})"
        + (f"; {client_failures} posts/reads got no answer, so a difference may be theirs" if client_failures else "")
    )
    ok_5xx = server_errors == 0 and found["web_tracebacks"] == 0
    print(f"5xx answers: {server_errors} ({'none' if ok_5xx else 'SOME'})")
    if load:
        print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for r in every:
        for error in r.errors[:5]:
            print(f"  {r.name}: {error}")
    ok_health = found["healthz_status"] == 200 and found["tasks_failed"] == 0
    if mixed is None:
        return ok_deliveries and ok_alerts and ok_5xx and ok_health
    ingest = mixed.kinds(ingest=True)
    pages = mixed.kinds(ingest=False)
    rate = mixed.rate(mixed.count(ingest, 202))
    base = alone.rate(alone.count(alone.kinds(ingest=True), 202)) if alone else 0.0
    ratio = rate / base if base else 0.0
    print(
        f"sustained: {rate:,.1f} alerts/s with p99 {percentile(mixed.latencies(ingest), 99):.0f} ms while "
        f"{len(bench.readers)} people read {mixed.rate(mixed.count(pages)):,.1f} pages/s (p99 "
        f"{percentile(mixed.latencies(pages), 99):.0f} ms); alone {base:,.1f} alerts/s: ratio {ratio:.2f}"
    )
    print(
        f"topology alerts_per_s={rate:.1f} p99_ms={percentile(mixed.latencies(ingest), 99):.1f} "
        f"baseline_per_s={base:.1f} ratio={ratio:.2f} page_reads_per_s={mixed.rate(mixed.count(pages)):.1f} "
        f"page_p99_ms={percentile(mixed.latencies(pages), 99):.1f}",
        flush=True,
    )
    return ok_deliveries and ok_alerts and ok_5xx and ok_health


def parse_mix(text: str) -> dict[str, int]:
    mix: dict[str, int] = {}
    for part in text.split(","):
        source, _, weight = part.partition("=")
        source = source.strip()
        if source not in formats.SOURCES or not weight.strip().isdigit():
            raise argparse.ArgumentTypeError(f"--mix: 'source=weight,...' with sources {', '.join(formats.SOURCES)}")
        mix[source] = int(weight)
    if not any(mix.values()):
        raise argparse.ArgumentTypeError("--mix: at least one weight above 0")
    return {s: w for s, w in mix.items() if w}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.topology",
        description="Alerts/s and page latency on gunicorn + PostgreSQL + Redis + two Celery workers + one beat.",
    )
    parser.add_argument("--duration", type=float, default=60, help="seconds of ingest while people read (60)")
    parser.add_argument(
        "--baseline-duration", type=float, default=30, help="seconds of ingest alone, and of readers alone (30)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of ingest alone / with readers (2)")
    parser.add_argument("--warmup", type=float, default=10, help="seconds of warm-up traffic, not reported (10)")
    parser.add_argument("--senders", type=int, default=8, help="monitoring systems posting, one key each (8)")
    parser.add_argument(
        "--mix",
        type=parse_mix,
        default=parse_mix("generic=2,alertmanager=1,grafana=1"),
        help="formats of the senders by weight (generic=2,alertmanager=1,grafana=1)",
    )
    parser.add_argument("--rate", type=float, default=0, help="alerts/s offered in all, open loop (0: closed loop)")
    parser.add_argument("--readers", type=int, default=4, help="support people reading pages (4)")
    parser.add_argument("--think", type=float, default=0.5, help="seconds a reader pauses between pages (0.5)")
    parser.add_argument("--web-workers", type=int, default=4, help="gunicorn sync workers (4)")
    parser.add_argument("--celery-workers", type=int, default=2, help="Celery worker processes (2)")
    parser.add_argument("--worker-concurrency", type=int, default=2, help="pool processes per Celery worker (2)")
    parser.add_argument("--port", type=int, default=0, help="gunicorn port (default: the first free in 8100-8199)")
    parser.add_argument("--client-processes", type=int, default=2, help="processes the clients run in (2)")
    parser.add_argument(
        "--database-url",
        default=DEFAULT_SERVER_URL,
        help=f"PostgreSQL server on 127.0.0.1 to create {DB_NAME} on (default {DEFAULT_SERVER_URL})",
    )
    parser.add_argument("--keep", action="store_true", help="keep the database, Redis dbs and logs afterwards")
    args = parser.parse_args(argv)
    if args.senders < 1 or args.readers < 0 or args.duration <= 0 or args.web_workers < 1 or args.celery_workers < 1:
        parser.error("--senders >= 1, --readers >= 0, --duration > 0, --web-workers >= 1, --celery-workers >= 1")
    if args.port and args.port not in PORTS:
        parser.error(f"--port must be in {PORTS.start}-{PORTS.stop - 1}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupt)
    bench = Topology(args)
    found: dict = {}
    try:
        bench.run()
        found = bench.findings()
    except KeyboardInterrupt:
        log("interrupted; cleaning up")
        return 130
    except Exception:
        for service in bench.services():
            tail = service.log_text().splitlines()[-15:]
            if tail:
                log(f"--- last lines of {service.name}'s log ---\n" + "\n".join(tail))
        raise
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # let the cleanup finish
        bench.cleanup()
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return 0 if report(bench, found) else 1


if __name__ == "__main__":
    sys.exit(main())

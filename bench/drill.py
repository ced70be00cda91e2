#!/usr/bin/env python
"""Recovery drill (docs/drill.md): real Celery workers on PostgreSQL and Redis, killed on purpose (never run in CI).

Usage (from the repository root)::

    .venv/bin/python -m bench.drill            # or: .venv/bin/python bench/drill.py
    .venv/bin/python -m bench.drill --keep     # keep the database afterwards
    .venv/bin/python -m bench.drill --due 20000 --seed 7

What it does, all on this machine (127.0.0.1 only):

0. creates the database ``handover_drill`` afresh and migrates it; Redis db 5 is the broker and
   db 6 the cache (both flushed first); its own ``HANDOVER_VAR_DIR`` in a temporary folder; a
   webhook receiver on the first free port from 8200 that sleeps before answering and records
   every request with its idempotency key; two ``celery -A handover worker`` processes
   (prefork, one child each);
1. alerts: posts every demo fixture (``runs/demo/alerts/``, all sources) twice, shuffled, from
   four threads through the real ingestion view -- against a baseline of the same files posted
   once, in order, inside a transaction that is rolled back;
2. sweep: seeds thousands of due next-run checks (``bench.sweep.build_world``), sends one
   ``runs.next_run_check_sweep``, SIGKILLs the pool process running it mid-sweep (the message comes
   back: late acks + reject on worker lost), then SIGKILLs the whole worker running the re-run
   (its message stays unacknowledged in Redis), starts a replacement worker and fires overlapping
   sweeps (tasks and service calls from threads at once);
3. replay: two approvals, a third approver and dispatch triggers from threads at one barrier, then
   more triggers (tasks, service calls, replay sweeps) at once; the signed webhook delivery is
   killed while its request is in flight (SIGKILL of the process holding the connection); the
   drill then ticks like beat until the webhook is delivered again; the runner claims and reports
   through the API and the ledger confirms the scope;
4. the completed period again: more dispatch triggers, a new request for the same items, the
   runner's report and the run's alerts re-sent;
5. gives the messages the killed worker still held back to the queue (as Redis would after its
   visibility timeout) and lets them run;
6. checks the business records with ORM queries and prints PASS/FAIL per invariant.

Exit status 0 when every invariant holds, 1 otherwise. Every process it started is stopped; the
database is dropped unless ``--keep``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DB_NAME = "handover_drill"
SERVER_URL = "postgres://postgres@127.0.0.1:5432/postgres"
DB_URL = f"postgres://postgres@127.0.0.1:5432/{DB_NAME}"
BROKER_URL = "redis://127.0.0.1:6379/5"
CACHE_URL = "redis://127.0.0.1:6379/6"
PORTS = range(8200, 8300)
WEBHOOK_TIMEOUT = 5  # seconds; the delivery claim holds the dispatch 3 x this + 30 s
WEBHOOK_SLEEP = 3.0  # the receiver answers after this long (under the timeout)
T0 = time.monotonic()


def say(message: str) -> None:
    print(f"[{time.monotonic() - T0:7.1f}s] {message}", flush=True)


def head(title: str) -> None:
    print(f"\n== {title}", flush=True)


# --------------------------------------------------------------------------------------------------
# Database, broker, environment


def database_create() -> None:
    import psycopg

    with psycopg.connect(SERVER_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DB_NAME}"')


def database_drop() -> None:
    import psycopg

    with psycopg.connect(SERVER_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')


def redis_flush() -> None:
    import redis

    for url in (BROKER_URL, CACHE_URL):
        redis.Redis.from_url(url).flushdb()


def drill_env(var_dir: Path) -> dict[str, str]:
    return {
        "DJANGO_SETTINGS_MODULE": "handover.settings",
        "DATABASE_URL": DB_URL,
        "CELERY_BROKER_URL": BROKER_URL,
        "CACHE_URL": CACHE_URL,
        "HANDOVER_VAR_DIR": str(var_dir),
        "HANDOVER_LOG_LEVEL": "INFO",
        "HANDOVER_INGEST_RATE_LIMIT": "1000000",
        "HANDOVER_REPLAY_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
        "HANDOVER_REPLAY_WEBHOOK_TIMEOUT_SECONDS": str(WEBHOOK_TIMEOUT),
        "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend",
        "PYTHONUNBUFFERED": "1",
    }


# --------------------------------------------------------------------------------------------------
# Workers


@dataclass
class Worker:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    killed: bool = False

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def node(self) -> str:
        return f"drill-{self.name}@{os.uname().nodename}"

    def children(self) -> list[int]:
        try:
            text = Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def kill(self) -> list[int]:
        """SIGKILL the worker's whole process group (the worker and its pool); the pids it held."""
        group = [self.pid, *self.children()]
        os.killpg(self.pid, signal.SIGKILL)
        self.killed = True
        self.process.wait(timeout=10)
        return group


class Workers:
    def __init__(self, env: dict[str, str], var_dir: Path) -> None:
        self.env = {**os.environ, **env}
        self.var_dir = var_dir
        self.all: list[Worker] = []

    def start(self, name: str) -> Worker:
        log_path = self.var_dir / f"worker-{name}.log"
        log = log_path.open("wb")
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "handover",
                "worker",
                "-n",
                f"drill-{name}@%h",
                "--pool=prefork",
                "--concurrency=1",
                "--without-gossip",
                "--without-mingle",
                "-l",
                "INFO",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: main process and pool child die together
        )
        worker = Worker(name=name, process=process, log_path=log_path)
        self.all.append(worker)
        return worker

    def wait_ready(self, workers: list[Worker], timeout: float = 60) -> None:
        from handover.celery import app

        wanted = {w.node for w in workers}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            answered = {name for reply in app.control.ping(timeout=1.0) for name in reply}
            if wanted <= answered:
                return
            for w in workers:
                if w.process.poll() is not None:
                    raise RuntimeError(f"worker {w.name} exited: see {w.log_path}")
        raise RuntimeError(f"workers not ready after {timeout} s: {sorted(wanted)}")

    @property
    def alive(self) -> list[Worker]:
        return [w for w in self.all if w.process.poll() is None]

    def stop_all(self) -> None:
        for w in self.alive:
            try:
                os.killpg(w.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 15
        for w in self.all:
            try:
                w.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(w.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                w.process.wait(timeout=5)


def active_tasks(task_name: str) -> list[tuple[str, int, str]]:
    """(worker node, pool pid, task id) of every running ``task_name`` (Celery remote control)."""
    from handover.celery import app

    found = []
    replies = app.control.inspect(timeout=1.0).active() or {}
    for node, tasks in replies.items():
        for task in tasks:
            if task.get("name") == task_name:
                found.append((node, int(task["worker_pid"]), task["id"]))
    return found


def broker_backlog() -> int:
    import redis

    return int(redis.Redis.from_url(BROKER_URL).llen("celery"))


def broker_unacked() -> list[str]:
    """The task names of messages delivered to a worker and not acknowledged yet."""
    import redis

    client = redis.Redis.from_url(BROKER_URL)
    names = []
    for raw in client.hvals("unacked"):
        try:
            payload = json.loads(raw)[0]
            names.append(payload["headers"]["task"])
        except (ValueError, KeyError, IndexError, TypeError):
            names.append("?")
    return sorted(names)


def wait_idle(workers: Workers, timeout: float = 300, settle: float = 3.0) -> float:
    """Wait until the queue is empty and no worker runs a task for ``settle`` seconds; returns the wait."""
    from handover.celery import app

    started = time.monotonic()
    quiet_since: float | None = None
    while time.monotonic() - started < timeout:
        replies = app.control.inspect(timeout=1.0).active() or {}
        busy = sum(len(t) for t in replies.values())
        if busy == 0 and broker_backlog() == 0:
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since >= settle:
                return time.monotonic() - started
        else:
            quiet_since = None
        time.sleep(0.5)
    raise RuntimeError(f"the work did not settle within {timeout} s")


def pid_of_connection(client_port: int, server_port: int, candidates: list[int]) -> int | None:
    """The process among ``candidates`` holding the TCP connection 127.0.0.1:client_port -> server_port."""
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        cols = line.split()
        local, remote = cols[1], cols[2]
        if int(local.split(":")[1], 16) == client_port and int(remote.split(":")[1], 16) == server_port:
            inode = cols[9]
            break
    if inode is None:
        return None
    for pid in candidates:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                try:
                    if os.readlink(fd) == f"socket:[{inode}]":
                        return pid
                except OSError:
                    continue
        except OSError:
            continue
    return None


# --------------------------------------------------------------------------------------------------
# The webhook receiver


@dataclass
class Received:
    at: float
    key: str
    signature_ok: bool
    body_key: str
    client_port: int
    answered: bool = False


class Receiver:
    """A job runner's webhook endpoint: records every request, sleeps, then answers 200."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.lock = threading.Lock()
        self.arrived = threading.Event()
        self.secret = ""
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                from approvals.replays import webhook_client as webhooks

                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    stamp = int(self.headers.get(webhooks.TIMESTAMP_HEADER) or 0)
                    ok = webhooks.verify(receiver.secret, stamp, body, self.headers.get(webhooks.SIGNATURE_HEADER, ""))
                    body_key = json.loads(body).get("idempotency_key", "")
                except ValueError:
                    ok, body_key = False, ""
                item = Received(
                    at=time.monotonic(),
                    key=self.headers.get("Idempotency-Key", ""),
                    signature_ok=ok,
                    body_key=body_key,
                    client_port=self.client_address[1],
                )
                with receiver.lock:
                    receiver.requests.append(item)
                receiver.arrived.set()
                time.sleep(WEBHOOK_SLEEP)
                try:
                    answer = b'{"accepted": true}'
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)
                    item.answered = True
                except OSError:
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        for port in PORTS:
            try:
                self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
                break
            except OSError:
                continue
        else:
            raise RuntimeError("no free port in 8200-8299")
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --------------------------------------------------------------------------------------------------
# Threads released together


def together(count: int, work: Callable[[int], Any]) -> tuple[list[Any], list[BaseException]]:
    """Run ``work(i)`` in ``count`` threads released by one barrier (``tests/concurrency.py``
    ``run_concurrently``); (results, errors as results): a drill reports a refusal, it does not fail."""
    from tests.concurrency import run_concurrently

    def caught(i: int) -> Any:
        try:
            return work(i)
        except BaseException as exc:  # noqa: BLE001 - reported
            return exc

    results = run_concurrently([partial(caught, i) for i in range(count)], timeout_seconds=300)
    return results, [r for r in results if isinstance(r, BaseException)]


def labelled(label: str, work: Callable[[], Any]) -> str:
    """``label: result`` -- or ``label: refused (<error> <status>)`` when ``work`` raises."""
    try:
        return f"{label}: {work()}"
    except Exception as exc:  # noqa: BLE001 - the losing path of a race is an outcome to report
        return f"{label}: refused ({outcome_name(exc)})"


def outcome_name(result: Any) -> str:
    if isinstance(result, BaseException):
        code = getattr(result, "status", "")
        return f"{type(result).__name__}{f' {code}' if code else ''}"
    return str(result)


# --------------------------------------------------------------------------------------------------
# Invariants


@dataclass
class Findings:
    rows: list[tuple[str, bool, str]] = field(default_factory=list)

    def check(self, name: str, ok: bool, figures: str) -> bool:
        self.rows.append((name, ok, figures))
        print(f"  {'PASS' if ok else 'FAIL'}  {name}: {figures}", flush=True)
        return ok

    @property
    def failed(self) -> int:
        return sum(1 for _, ok, _ in self.rows if not ok)


# --------------------------------------------------------------------------------------------------
# Step 1: alerts twice, out of order


@dataclass
class AlertWorld:
    files: list[tuple[str, Path, bytes, str]]  # source, path, body, key
    baseline_alerts: dict[str, int]  # body sha256 -> alerts per post
    baseline_attempts: dict[tuple[str, ...], tuple[str, str]]
    baseline_runs: dict[tuple[str, ...], str]
    posts: int = 0
    statuses: Counter[int] = field(default_factory=Counter)


OTHER_JOBS = ("bench-hourly-export", "drill-replay-export")  # the sweep's and the replay's jobs


def _attempt_map() -> tuple[dict[tuple[str, ...], tuple[str, str]], dict[tuple[str, ...], str]]:
    """The alerts' attempts (status, trigger) and runs (status) by identity (the sweep's and the replay's
    jobs left out). Not the attempt's ``number``: it counts the run's attempts first reported before it
    (DESIGN, "Attempt"), so an out-of-order delivery numbers them otherwise (``_numbering_gaps``)."""
    from runs.attempts.models import Attempt, Run

    attempts = {}
    for a in Attempt.objects.exclude(run__job__key__in=OTHER_JOBS).select_related("run__job", "run__tenant"):
        r = a.run
        ident = (r.job.key, r.tenant.slug, r.environment, r.window_start.isoformat(), r.window_end.isoformat())
        attempts[(*ident, a.execution_id)] = (a.status, a.trigger)
    runs = {
        (r.job.key, r.tenant.slug, r.environment, r.window_start.isoformat(), r.window_end.isoformat()): r.status
        for r in Run.objects.exclude(job__key__in=OTHER_JOBS).select_related("job", "tenant")
    }
    return attempts, runs


def _numbering_gaps() -> list[str]:
    """Runs of the alerts whose attempts are not numbered 1..n, each number once."""
    from runs.attempts.models import Attempt

    numbers: dict[int, list[int]] = {}
    for run_id, number in Attempt.objects.exclude(run__job__key__in=OTHER_JOBS).values_list("run_id", "number"):
        numbers.setdefault(run_id, []).append(number)
    return [f"run {run_id}: {sorted(n)}" for run_id, n in numbers.items() if sorted(n) != list(range(1, len(n) + 1))]


def alerts_world() -> list[tuple[str, Path, bytes, str]]:
    """The demo's job, tenants, targets and one key per source (``runs.demo.loader``), and the bodies."""
    from runs.alerts.parsers.registry import available_sources
    from runs.catalog.services import (
        integration_get_or_create,
        integration_key_create,
        job_get_or_create,
        job_target_get_or_create,
        tenant_get_or_create,
    )
    from runs.demo.loader import ALERTS_DIR, DEMO_JOB, SOURCE_TENANTS, UNICODE_TENANT, body_for

    job, _ = job_get_or_create(key=DEMO_JOB["key"], defaults=DEMO_JOB["defaults"])
    unicode_tenant, _ = tenant_get_or_create(slug=UNICODE_TENANT, name="Café Lumière München")
    for tenants in SOURCE_TENANTS.values():
        for slug in tenants:
            tenant, _ = tenant_get_or_create(slug=slug, name=slug.replace("-", " ").title())
            job_target_get_or_create(job=job, tenant=tenant, environment="prod")
    files = []
    for source in available_sources():
        folder = ALERTS_DIR / source
        if not folder.is_dir():
            continue
        integration = integration_get_or_create(source=source)
        tenants = [tenant_get_or_create(slug=s)[0] for s in SOURCE_TENANTS.get(source, [])] + [unicode_tenant]
        issued = integration_key_create(integration=integration, tenants=tenants, label="drill")
        for path in sorted(folder.glob("*.json")):
            files.append((source, path, body_for(source, path, issued.key), issued.key))
    return files


def _post(client: Any, source: str, body: bytes, key: str) -> Any:
    return client.post(
        f"/api/v1/alerts/{source}/", data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
    )


class _Rollback(Exception):
    pass


def alerts_baseline(files: list[tuple[str, Path, bytes, str]]) -> AlertWorld:
    """Post every file once, in order, inside a transaction that is rolled back: what one clean pass gives."""
    from django.core import signals
    from django.db import close_old_connections, transaction
    from django.test import Client

    from runs.alerts.models import Alert, Delivery

    client = Client(SERVER_NAME="localhost")
    per_body: dict[str, int] = {}
    signals.request_finished.disconnect(close_old_connections)  # it would close the open transaction
    try:
        with transaction.atomic():
            for source, _path, body, key in files:
                _post(client, source, body, key)
            for d in Delivery.objects.filter(key__label="drill"):
                per_body[d.sha256] = Alert.objects.filter(delivery=d).count()
            attempts, runs = _attempt_map()
            raise _Rollback
    except _Rollback:
        pass
    finally:
        signals.request_finished.connect(close_old_connections)
    return AlertWorld(files=files, baseline_alerts=per_body, baseline_attempts=attempts, baseline_runs=runs)


def alerts_twice_out_of_order(world: AlertWorld, seed: int, threads: int = 4) -> None:
    from django.db import connection
    from django.test import Client

    posts = [f for f in world.files for _ in range(2)]
    random.Random(seed).shuffle(posts)
    work: queue.Queue[tuple[str, Path, bytes, str]] = queue.Queue()
    for p in posts:
        work.put(p)
    statuses: Counter[int] = Counter()
    lock = threading.Lock()
    barrier = threading.Barrier(threads)

    def poster() -> None:
        client = Client(SERVER_NAME="localhost")
        try:
            barrier.wait(timeout=30)
            while True:
                try:
                    source, _path, body, key = work.get_nowait()
                except queue.Empty:
                    return
                status = _post(client, source, body, key).status_code
                with lock:
                    statuses[status] += 1
        finally:
            connection.close()

    pool = [threading.Thread(target=poster) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=600)
    world.posts = len(posts)
    world.statuses = statuses


def alerts_findings(world: AlertWorld, findings: Findings) -> None:
    from django.db.models import Count

    from runs.alerts.models import Alert, Delivery
    from runs.attempts.models import Attempt

    mine = Delivery.objects.filter(key__label="drill")  # the fixture posts (not the sweep's or step 4's)
    deliveries = mine.count()
    findings.check(
        "every authenticated post stored as a Delivery",
        deliveries == world.posts,
        f"{world.posts} posts ({len(world.files)} files x 2), {deliveries} deliveries",
    )
    lost = []
    stored = 0
    expected = 0
    per_sha = Counter(mine.values_list("sha256", flat=True))
    for d in mine.annotate(n=Count("alerts")):
        want = world.baseline_alerts.get(d.sha256)
        expected += want or 0
        stored += d.n
        if want is None or d.n != want:
            lost.append(f"delivery {d.pk}: {d.n} alert(s), baseline {want}")
    # some fixtures are byte-identical redeliveries of another: each body twice per file that has it
    posted = Counter(hashlib.sha256(body).hexdigest() for _, _, body, _ in world.files for _ in range(2))
    twice = per_sha == posted
    findings.check(
        "no alert lost (each post stored all its alerts)",
        not lost and twice,
        f"{stored} alerts stored, {expected} expected from the baseline; each body delivered twice: {twice}"
        + (f"; {lost[:3]}" if lost else ""),
    )
    originals = (
        Alert.objects.filter(duplicate_of__isnull=True)
        .exclude(dedup_hash="")
        .values("integration_id", "dedup_hash")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .count()
    )
    dup_rows = Alert.objects.filter(duplicate_of__isnull=False).count()
    findings.check(
        "one original per (integration, dedup key); redeliveries are duplicates",
        originals == 0,
        f"{originals} dedup keys with more than one original; {dup_rows} duplicate rows; "
        f"outcomes {dict(sorted(Counter(Alert.objects.values_list('outcome', flat=True)).items()))}",
    )
    dup_attempts = Attempt.objects.values("run_id", "execution_id").annotate(n=Count("id")).filter(n__gt=1).count()
    attempts, runs = _attempt_map()
    alert_attempts, alert_runs = attempts, runs
    diff_attempts = sorted(
        f"{k[1]}/{k[5]}: {world.baseline_attempts.get(k)} -> {alert_attempts.get(k)}"
        for k in set(world.baseline_attempts) | set(alert_attempts)
        if world.baseline_attempts.get(k) != alert_attempts.get(k)
    )
    diff_runs = sorted(
        f"{k[1]} {k[3][:10]}: {world.baseline_runs.get(k)} -> {alert_runs.get(k)}"
        for k in set(world.baseline_runs) | set(alert_runs)
        if world.baseline_runs.get(k) != alert_runs.get(k)
    )
    findings.check(
        "no duplicate attempts from the alerts (per run, per execution id)",
        dup_attempts == 0 and len(alert_attempts) == len(world.baseline_attempts),
        f"{len(alert_attempts)} attempts ({len(world.baseline_attempts)} in the in-order baseline); "
        f"{dup_attempts} (run, execution id) pairs with more than one attempt",
    )
    gaps = _numbering_gaps()
    findings.check(
        "out-of-order, twice-delivered alerts end where one in-order pass ends (numbers in order of arrival)",
        not diff_attempts and not diff_runs and not gaps,
        f"{len(alert_runs)} runs, {len(alert_attempts)} attempts compared (status, trigger); "
        f"{len(diff_attempts)} attempt and {len(diff_runs)} run differences; {len(gaps)} runs not numbered 1..n"
        + (f": {(diff_attempts + diff_runs + gaps)[:6]}" if diff_attempts or diff_runs or gaps else ""),
    )


# --------------------------------------------------------------------------------------------------
# Step 2: the next-run check sweep, killed twice


EVALUATION_KINDS = ("next_run_check_passed", "next_run_check_failed", "next_run_check_awaiting_confirmation")


@dataclass
class SweepDrill:
    now: datetime
    total: int
    due: int
    expected: Counter[str]
    kills: list[str] = field(default_factory=list)
    overlap: list[str] = field(default_factory=list)
    unnotified_after_kill: int = 0
    unnotified: int = 0
    ticks: int = 0


def _settled(now: datetime) -> int:
    from runs.checks.models import NextRunCheck

    return (
        NextRunCheck.objects.filter(deadline_at__lte=now)
        .exclude(status=NextRunCheck.Status.SCHEDULED, evidence_attempt__isnull=True)
        .count()
    )


def _wait_for_task(task: str, timeout: float, exclude_pids: set[int] = frozenset()) -> tuple[str, int, str]:  # type: ignore[assignment]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = [t for t in active_tasks(task) if t[1] not in exclude_pids]
        if running:
            return running[0]
        time.sleep(0.2)
    raise RuntimeError(f"no worker started {task} within {timeout} s")


def _wait_progress(now: datetime, at_least: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        n = _settled(now)
        if n >= at_least:
            return n
        time.sleep(0.05)
    return _settled(now)


def sweep_seed(total: int, due: int) -> SweepDrill:
    """``bench.sweep``'s world: one hourly job, 100 tenants, ``total`` checks, ``due`` of them due now."""
    from django.db import connection

    import bench.sweep as seed

    now = datetime.now(UTC).replace(second=0, microsecond=0)
    seed.NOW = now  # build_world places due checks before, upcoming ones after this instant
    started = time.monotonic()
    expected = seed.build_world(total, due)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    say(
        f"seeded {total:,} next-run checks, {due:,} of them due ({dict(sorted(expected.items()))}) "
        f"in {time.monotonic() - started:.1f} s"
    )
    return SweepDrill(now=now, total=total, due=due, expected=expected)


def sweep_drill(workers: Workers, drill: SweepDrill) -> SweepDrill:
    from handover.handovers import tasks as handover_tasks
    from runs.checks import tasks as check_tasks
    from runs.checks.sweep import next_run_check_sweep

    now, due = drill.now, drill.due
    check_tasks.next_run_check_sweep.delay()
    say("sent 1 runs.next_run_check_sweep")
    node, child, _ = _wait_for_task("runs.next_run_check_sweep", 60)
    settled = _wait_progress(now, due * 15 // 100, 300)
    if settled >= due:
        drill.kills.append(f"kill 1 MISSED: the sweep settled all {due:,} checks before the kill")
        say(drill.kills[-1])
        return drill
    os.kill(child, signal.SIGKILL)
    drill.kills.append(
        f"kill 1: SIGKILL pool process {child} of {node} running the sweep, {settled:,}/{due:,} checks settled"
    )
    say(drill.kills[-1])
    time.sleep(1.0)
    say(f"1 s later: {_settled(now):,} settled (the killed transaction rolled back; nothing else ran it yet)")

    # The message comes back (late ack + reject on worker lost); some worker re-runs the sweep.
    node2, child2, _ = _wait_for_task("runs.next_run_check_sweep", 60, exclude_pids={child})
    say(f"the sweep message came back and runs again in pool process {child2} of {node2}")
    settled = _wait_progress(now, max(settled + 1, due * 55 // 100), 300)
    victim = next(w for w in workers.alive if w.node == node2)
    if settled >= due:
        drill.kills.append(f"kill 2 MISSED: the re-run settled all {due:,} checks before the kill")
        say(drill.kills[-1])
    else:
        group = victim.kill()
        drill.kills.append(
            f"kill 2: SIGKILL worker {victim.name} (processes {group}) running the re-run, "
            f"{settled:,}/{due:,} checks settled; its message stays unacknowledged in Redis"
        )
        say(drill.kills[-1])
    time.sleep(1.0)
    remaining = due - _settled(now)
    say(f"{remaining:,} checks still due; unacknowledged messages: {broker_unacked()}")

    replacement = workers.start(f"c{len(workers.all)}")
    workers.wait_ready([replacement])
    say(f"started replacement worker {replacement.name} (pid {replacement.pid})")

    # Overlapping sweeps: beat ticks as tasks, and the service called from threads, all at once.
    def fire(i: int) -> Any:
        if i < 6:
            check_tasks.next_run_check_sweep.delay()
            return "sent"
        result = next_run_check_sweep()
        return f"due={result.due} passed={result.passed} failed={result.failed} skipped={result.skipped}"

    results, errors = together(9, fire)
    drill.overlap = [outcome_name(r) for r in results]
    say(f"fired 6 sweep tasks and 3 sweep service calls at once: {drill.overlap[6:]}")

    # Kill 3: the worker running the failure follow-ups' outbox sweep (handover.next_run_check_follow_ups_sweep),
    # which beat sends every minute: the drill runs no beat, so it sends the tick itself.
    handover_tasks.next_run_check_follow_ups_sweep.delay()
    try:
        node3, child3, _ = _wait_for_task("handover.next_run_check_follow_ups_sweep", 120)
    except RuntimeError:
        drill.kills.append("kill 3 MISSED: no follow-up seen running")
        say(drill.kills[-1])
    else:
        victim = next(w for w in workers.alive if w.node == node3)
        group = victim.kill()
        drill.kills.append(
            f"kill 3: SIGKILL worker {victim.name} (processes {group}) running a failure follow-up "
            f"(pool process {child3})"
        )
        say(drill.kills[-1])
        replacement = workers.start(f"d{len(workers.all)}")
        workers.wait_ready([replacement])
        say(f"started replacement worker {replacement.name} (pid {replacement.pid})")
    waited = wait_idle(workers)
    drill.unnotified_after_kill = _unnotified()
    say(
        f"settled after {waited:.1f} s: {_settled(now):,}/{due:,} checks settled; failed checks whose follow-up "
        f"never ran: {drill.unnotified_after_kill:,}; unacknowledged messages: {broker_unacked()}"
    )

    # Beat keeps ticking (the drill sends the sweep and the follow-ups' sweep every 15 s, up to 4 minutes).
    started = time.monotonic()
    while _unnotified() and time.monotonic() - started < 240:
        check_tasks.next_run_check_sweep.delay()
        handover_tasks.next_run_check_follow_ups_sweep.delay()
        drill.ticks += 1
        time.sleep(15)
    wait_idle(workers)
    drill.unnotified = _unnotified()
    say(
        f"after {drill.ticks} more sweep tick(s) ({time.monotonic() - started:.0f} s): "
        f"{drill.unnotified:,} failed checks without their follow-up"
    )
    return drill


def _unnotified() -> int:
    from runs.checks.models import NextRunCheck

    return NextRunCheck.objects.filter(status=NextRunCheck.Status.FAILED, failure_notified_at__isnull=True).count()


def sweep_findings(drill: SweepDrill, findings: Findings) -> None:
    from django.db import connection

    from runs.checks.models import NextRunCheck
    from runs.checks.sweep import due_check_ids
    from runs.timeline.models import TimelineEvent

    findings.check(
        "the sweep was killed mid-way twice, then a worker running a follow-up",
        all("MISSED" not in k for k in drill.kills) and len(drill.kills) == 3,
        "; ".join(k.split(":")[0] for k in drill.kills),
    )
    due_ids = dict(NextRunCheck.objects.filter(deadline_at__lte=drill.now).values_list("public_id", "pk"))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT data->>'check', count(*) FROM runs_timelineevent WHERE kind = ANY(%s) GROUP BY 1",
            [list(EVALUATION_KINDS)],
        )
        per_check = {row[0]: row[1] for row in cursor.fetchall()}
        cursor.execute(
            "SELECT data->>'check', count(*) FROM runs_timelineevent WHERE kind = 'next_run_check_late_success' "
            "GROUP BY 1"
        )
        late = {row[0]: row[1] for row in cursor.fetchall()}
    counts = Counter(per_check.get(str(pid), 0) for pid in due_ids)
    findings.check(
        "every due next-run check evaluated exactly once (one evaluation event each)",
        set(counts) == {1} and len(due_ids) == drill.due,
        f"{len(due_ids):,} due checks; events per check: {dict(sorted(counts.items()))}",
    )
    left = len(due_check_ids(drill.now, drill.total))
    untouched = NextRunCheck.objects.filter(
        deadline_at__gt=drill.now, status=NextRunCheck.Status.SCHEDULED, evidence_attempt__isnull=True
    ).count()
    upcoming = NextRunCheck.objects.filter(deadline_at__gt=drill.now, target__job__key="bench-hourly-export").count()
    findings.check(
        "no check left due; upcoming checks untouched",
        left == 0 and untouched >= upcoming and upcoming == drill.total - drill.due,
        f"{left} left due; {untouched:,} of {upcoming:,} upcoming checks still scheduled without evidence",
    )
    checks = NextRunCheck.objects.filter(deadline_at__lte=drill.now)
    found = Counter(
        {
            "passed": checks.filter(status="passed").count(),
            "failed": checks.filter(status="failed").count(),
            "awaiting": checks.filter(status="scheduled", evidence_attempt__isnull=False).count(),
        }
    )
    findings.check(
        "each check settled as it should (same outcomes as one clean sweep)",
        found == drill.expected,
        f"expected {dict(sorted(drill.expected.items()))}, found {dict(sorted(found.items()))}",
    )
    late_checks = checks.filter(late_success_attempt__isnull=False).count()
    findings.check(
        "late successes kept once each (as evidence, never twice)",
        all(n == 1 for n in late.values()),
        f"{late_checks:,} failed checks carry a late success; {sum(late.values()):,} later late-success events, "
        f"{sum(1 for n in late.values() if n > 1)} checks with more than one",
    )
    failed = checks.filter(status="failed").count()
    findings.check(
        "every failed check's follow-up ran (handover reopen, e-mail) before the held messages came back",
        drill.unnotified == 0,
        f"{failed:,} failed checks; {drill.unnotified_after_kill:,} without a follow-up once the work settled "
        f"after kill 3, {drill.unnotified:,} after {drill.ticks} more beat tick(s)",
    )
    events = TimelineEvent.objects.filter(kind__in=EVALUATION_KINDS).count()
    say(f"(evaluation events in all: {events:,})")


# --------------------------------------------------------------------------------------------------
# Steps 3 and 4: one replay, overlapping triggers, the webhook delivery killed, the period replayed again


POPULATION = "record_id,customer\n" + "".join(f"DR-{i},Customer {i}\n" for i in range(1, 9))
RUNNER_REPORT = "record_id,status\n" + "".join(f"DR-{i},completed\n" for i in range(1, 4))
DESTINATION = "record_id,reference\n" + "".join(f"DR-{i},ref-{i}\n" for i in range(1, 4))
PROVIDER_LOOKUP = "record_id,found,reference\n" + "".join(f"DR-{i},no,\n" for i in range(4, 9))
DESTINATION_AFTER = DESTINATION + "".join(f"DR-{i},ref-replay-{i}\n" for i in range(4, 9))
REPLAY_WINDOW = (datetime(2026, 11, 27, tzinfo=UTC), datetime(2026, 11, 28, tzinfo=UTC))


@dataclass
class ReplayDrill:
    request_id: int = 0
    request_public_id: str = ""
    run_id: int = 0
    round1: Counter[str] = field(default_factory=Counter)
    round2: Counter[str] = field(default_factory=Counter)
    kill: str = ""
    delivered_after: float = 0.0
    beat_ticks: int = 0
    runner: list[str] = field(default_factory=list)
    completed_period: list[str] = field(default_factory=list)
    refusal: str = ""
    alert_key: str = ""


def replay_world(receiver: Receiver) -> dict[str, Any]:
    from approvals.replays.webhook_settings import replay_webhook_set
    from runs.attempts.models import Attempt, Run
    from runs.catalog.models import SideEffect
    from runs.catalog.services import (
        integration_get_or_create,
        integration_key_create,
        role_grant,
        runner_credential_create,
    )
    from runs.ledger.loads import LoadFile, work_item_loads_create
    from tests.factories import JobFactory, JobTargetFactory, RunFactory, TenantFactory, UserFactory

    job = JobFactory(key="drill-replay-export", schedule="0 2 * * *", timezone="UTC", window_alignment="day")
    SideEffect.objects.create(job=job, description="posts invoices to the gateway", repeat_safety="idempotent_with_key")
    tenant = TenantFactory(slug="drill-foods")
    target = JobTargetFactory(job=job, tenant=tenant)
    run = RunFactory(
        job=job,
        tenant=tenant,
        target=target,
        window_start=REPLAY_WINDOW[0],
        window_end=REPLAY_WINDOW[1],
        scheduled_for=REPLAY_WINDOW[1] + timedelta(hours=2),
        status=Run.Status.FAILED,
    )
    Attempt.objects.create(run=run, execution_id="drill-exec-a1", number=1, status="failed")
    people = {n: UserFactory(username=n, email=f"{n}@example.com") for n in ("sue", "bob", "bianca", "ted")}
    role_grant(user=people["sue"], role="support", obj=tenant)
    role_grant(user=people["bob"], role="business_owner", obj=tenant)
    role_grant(user=people["bianca"], role="business_owner", obj=tenant)
    role_grant(user=people["ted"], role="technical_owner", obj=job)
    credential, credential_key = runner_credential_create(job=job, label="drill runner")
    work_item_loads_create(
        actor=people["sue"],
        run=run,
        files=[
            LoadFile(kind="population", content=POPULATION.encode(), file_name="population.csv"),
            LoadFile(kind="runner_report", content=RUNNER_REPORT.encode(), file_name="runner-report.csv"),
            LoadFile(kind="destination", content=DESTINATION.encode(), file_name="destination.csv"),
        ],
    )
    work_item_loads_create(
        actor=people["sue"],
        run=run,
        files=[LoadFile(kind="provider_lookup", content=PROVIDER_LOOKUP.encode(), file_name="provider-lookup.csv")],
    )
    _, secret = replay_webhook_set(job=job, url=f"http://127.0.0.1:{receiver.port}/replays")
    receiver.secret = secret
    integration = integration_get_or_create(source="generic")
    issued = integration_key_create(integration=integration, tenants=[tenant], label="drill-replay")
    return {
        "job": job,
        "tenant": tenant,
        "run": run,
        "people": people,
        "credential_key": credential_key,
        "alert_key": issued.key,
    }


def replay_drill(workers: Workers, receiver: Receiver) -> ReplayDrill:
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.utils import timezone

    from approvals.replays import tasks as approval_tasks
    from approvals.replays.decisions import replay_request_approve
    from approvals.replays.dispatch import replay_request_dispatch
    from approvals.replays.models import Dispatch, ReplayRequest
    from approvals.replays.requests import replay_request_create
    from runs.ledger.loads import LoadFile, work_item_loads_create

    world = replay_world(receiver)
    drill = ReplayDrill(run_id=world["run"].pk, alert_key=world["alert_key"])
    people = world["people"]
    request = replay_request_create(
        actor=people["sue"],
        run=world["run"],
        kind=ReplayRequest.Kind.ABSENT_ITEMS,
        reason="the gateway was down; DR-4..DR-8 never arrived",
        all_items=True,
    )
    drill.request_id, drill.request_public_id = request.pk, str(request.public_id)
    say(f"replay request {request.public_id} of {request.item_count} absent items on run {world['run'].public_id}")
    User = get_user_model()

    def approve(user_name: str, kind: str) -> str:
        fresh = ReplayRequest.objects.select_related("run__job", "run__tenant", "requested_by").get(pk=request.pk)
        return replay_request_approve(
            request=fresh,
            actor=User.objects.get(username=user_name),
            kind=kind,
            scope_fingerprint=fresh.scope_fingerprint,
            reauthenticated_at=timezone.now(),
        ).status

    def trigger() -> str:
        fresh = ReplayRequest.objects.select_related("run__job", "run__tenant").get(pk=request.pk)
        _, created = replay_request_dispatch(request=fresh)
        return "created" if created else "existing"

    # Round 1 at one barrier: both approvals, a second business owner, dispatch triggers (service and tasks).
    def round1(i: int) -> str:
        if i == 0:
            return labelled("approve business (bob)", lambda: approve("bob", "business"))
        if i == 1:
            return labelled("approve technical (ted)", lambda: approve("ted", "technical"))
        if i == 2:
            return labelled("approve business (bianca, 2nd owner)", lambda: approve("bianca", "business"))
        if i == 3:
            for _ in range(10):
                approval_tasks.replay_request_dispatch.delay(request.pk)
            return "10 dispatch tasks sent"
        return labelled("dispatch service", trigger)

    results, _ = together(10, round1)
    drill.round1 = Counter(outcome_name(r) for r in results)
    say(f"round 1 (10 threads at one barrier): {dict(drill.round1)}")
    request.refresh_from_db()
    say(f"request is {request.status}")

    # Round 2: the request is approved (or already dispatched); everything triggers again at once.
    def round2(i: int) -> str:
        if i == 0:
            for _ in range(20):
                approval_tasks.replay_request_dispatch.delay(request.pk)
            return "20 dispatch tasks sent"
        if i == 1:
            for _ in range(4):
                approval_tasks.replay_sweep.delay()
            return "4 replay sweeps sent"
        return labelled("dispatch service", trigger)

    results, _ = together(12, round2)
    drill.round2 = Counter(outcome_name(r) for r in results)
    say(f"round 2 (12 threads at one barrier): {dict(drill.round2)}")

    # The signed webhook delivery: killed while its request is in flight.
    if not receiver.arrived.wait(timeout=120):
        drill.kill = "kill MISSED: no webhook request arrived"
        say(drill.kill)
        return drill
    time.sleep(1.0)
    first = receiver.requests[0]
    candidates = [pid for w in workers.alive for pid in (w.pid, *w.children())]
    pid = pid_of_connection(first.client_port, receiver.port, candidates)
    owner = next((w for w in workers.alive if pid in w.children() or pid == w.pid), None)
    if pid is None or owner is None:
        drill.kill = f"kill MISSED: no worker process holds the connection from port {first.client_port}"
        say(drill.kill)
        return drill
    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    drill.kill = (
        f"SIGKILL pool process {pid} of worker {owner.name} 1.0 s into webhook delivery 1 "
        f"(the receiver answers after {WEBHOOK_SLEEP:.0f} s); key {first.key[:10]}…"
    )
    say(drill.kill)

    # Act as beat: a replay sweep every 5 s until the delivery is re-found due and delivered.
    dispatch = Dispatch.objects.get(request_id=request.pk)
    while time.monotonic() - killed_at < 180:
        dispatch.refresh_from_db()
        if dispatch.status != Dispatch.Status.PENDING:
            break
        approval_tasks.replay_sweep.delay()
        drill.beat_ticks += 1
        time.sleep(5)
    drill.delivered_after = time.monotonic() - killed_at
    say(
        f"dispatch {dispatch.status} after {drill.delivered_after:.0f} s and {drill.beat_ticks} replay-sweep ticks; "
        f"the receiver saw {len(receiver.requests)} request(s)"
    )
    wait_idle(workers)

    # The runner: confirms with its credential, reports running then succeeded; the destination confirms.
    runner = Client(SERVER_NAME="localhost", HTTP_AUTHORIZATION=f"Bearer {world['credential_key']}")
    claim = runner.post(f"/api/v1/replays/{request.public_id}/claim/")
    drill.runner.append(f"claim {claim.status_code}")
    key = dispatch.idempotency_key
    for status in ("running", "succeeded"):
        answer = runner.post(
            f"/api/v1/replays/{request.public_id}/runner-report/",
            data={"idempotency_key": key, "execution_id": "drill-replay-1", "status": status},
            content_type="application/json",
        )
        drill.runner.append(f"report {status} {answer.status_code}")
    work_item_loads_create(
        actor=people["sue"],
        run=world["run"],
        files=[LoadFile(kind="destination", content=DESTINATION_AFTER.encode(), file_name="destination-after.csv")],
    )
    for _ in range(5):
        approval_tasks.replay_sweep.delay()  # overlapping ticks complete it once
    wait_idle(workers)
    request.refresh_from_db()
    say(f"runner: {', '.join(drill.runner)}; destination loaded; 5 replay sweeps at once -> request {request.status}")

    # Step 4: the completed period, again.
    head("4. replay an already completed period")

    def again(i: int) -> str:
        if i == 0:
            for _ in range(10):
                approval_tasks.replay_request_dispatch.delay(request.pk)
            return "10 dispatch tasks sent"
        if i == 1:
            try:
                replay_request_create(
                    actor=User.objects.get(username="sue"),
                    run=world["run"],
                    kind=ReplayRequest.Kind.ABSENT_ITEMS,
                    reason="replay the same night again",
                    record_ids=[f"DR-{n}" for n in range(4, 9)],
                )
                return "new request CREATED"
            except Exception as exc:  # noqa: BLE001 - the refusal is the expected outcome
                drill.refusal = f"{type(exc).__name__}: {getattr(exc, 'detail', exc)} {getattr(exc, 'errors', '')}"
                return f"new request refused ({type(exc).__name__})"
        if i in (2, 3):
            answer = runner.post(
                f"/api/v1/replays/{request.public_id}/runner-report/",
                data={"idempotency_key": key, "execution_id": "drill-replay-1", "status": "succeeded"},
                content_type="application/json",
            )
            return f"runner report again {answer.status_code}"
        if i in (4, 5):
            return labelled("dispatch service", trigger)
        return f"alerts re-sent: {resend_period_alerts(world['alert_key'])}"

    results, _ = together(8, again)
    drill.completed_period = [outcome_name(r) for r in results]
    wait_idle(workers)
    for line in drill.completed_period:
        say(line)
    say(f"refusal: {drill.refusal}")
    return drill


def resend_period_alerts(key: str) -> str:
    """The completed window's alerts (first failure and the replay's success) posted again, twice each."""
    from django.test import Client

    client = Client(SERVER_NAME="localhost")
    base = {
        "schema": "handover.alert/v1",
        "job": "drill-replay-export",
        "tenant": "drill-foods",
        "window_start": REPLAY_WINDOW[0].isoformat(),
        "window_end": REPLAY_WINDOW[1].isoformat(),
        "scheduled_for": (REPLAY_WINDOW[1] + timedelta(hours=2)).isoformat(),
    }
    bodies = [
        {**base, "execution_id": "drill-exec-a1", "status": "failed", "error": "gateway timeout"},
        {**base, "execution_id": "drill-replay-1", "status": "succeeded", "trigger": "manual_replay"},
    ]
    outcomes = []
    for body in bodies * 2:
        answer = client.post(
            "/api/v1/alerts/generic/",
            data=json.dumps(body),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {key}",
        )
        outcomes.append(f"{answer.status_code} {answer.json()['alerts'][0]['outcome']}")
    return ", ".join(outcomes)


def replay_findings(drill: ReplayDrill, receiver: Receiver, findings: Findings) -> None:
    from django.db.models import Count, Q

    from approvals.replays.models import Dispatch, ReplayRequest, WebhookDelivery
    from runs.attempts.models import Attempt
    from runs.timeline.models import TimelineEvent

    findings.check(
        "the webhook delivery was killed in flight", "MISSED" not in drill.kill and bool(drill.kill), drill.kill
    )
    reached = ReplayRequest.objects.filter(
        status__in=["approved", "dispatched", "completed", "failed", "unknown"]
    ).annotate(n=Count("dispatches"))
    bad = [(r.pk, r.n) for r in reached if r.n != 1]
    dispatches = list(Dispatch.objects.all())
    keys = {d.idempotency_key for d in dispatches}
    findings.check(
        "exactly one Dispatch per approved ReplayRequest, one idempotency key",
        not bad and len(keys) == len(dispatches) == reached.count(),
        f"{reached.count()} approved request(s), {len(dispatches)} dispatch(es), {len(keys)} key(s); "
        f"round 1 {dict(drill.round1)}; round 2 {dict(drill.round2)}",
    )
    request_events = Counter(TimelineEvent.objects.filter(run_id=drill.run_id).values_list("kind", flat=True))
    once = {
        k: request_events.get(k, 0)
        for k in (
            "replay_approved",
            "replay_dispatched",
            "replay_webhook_delivered",
            "replay_completed",
            "replay_attempt_linked",
        )
    }
    findings.check("one event per step of the replay", set(once.values()) == {1}, f"{once}")
    dispatch = dispatches[0] if dispatches else None
    seen = Counter(r.key for r in receiver.requests)
    rows = list(WebhookDelivery.objects.filter(dispatch=dispatch).order_by("number")) if dispatch else []
    findings.check(
        "the webhook receiver saw the one idempotency key, signed, every time",
        dispatch is not None
        and set(seen) == {dispatch.idempotency_key}
        and all(r.signature_ok and r.body_key == r.key for r in receiver.requests),
        f"{len(receiver.requests)} request(s) with key {dispatch.idempotency_key[:10] if dispatch else '-'}… "
        f"({sum(r.answered for r in receiver.requests)} answered); WebhookDelivery rows: "
        + ", ".join(f"#{w.number} {w.status}{' (' + w.error + ')' if w.error else ''}" for w in rows),
    )
    findings.check(
        "delivery rows match what the receiver saw",
        len(rows) == len(receiver.requests) and (dispatch is not None and dispatch.delivery_count == len(rows)),
        f"{len(rows)} rows, delivery_count {dispatch.delivery_count if dispatch else '-'}, "
        f"{len(receiver.requests)} requests received; redelivered {drill.delivered_after:.0f} s after the kill "
        f"({drill.beat_ticks} beat ticks)",
    )
    request = ReplayRequest.objects.get(pk=drill.request_id)
    attempts = list(Attempt.objects.filter(run_id=drill.run_id).order_by("number"))
    replay_attempts = [a for a in attempts if a.trigger == "manual_replay"]
    findings.check(
        "the replay ran once and completed",
        request.status == "completed"
        and len(replay_attempts) == 1
        and dispatch is not None
        and dispatch.status == "succeeded"
        and dispatch.attempt_id == replay_attempts[0].pk,
        f"request {request.status}, dispatch {dispatch.status if dispatch else '-'}, run attempts "
        + ", ".join(f"{a.number}:{a.execution_id}:{a.trigger}:{a.status}" for a in attempts),
    )
    refused = "scope_outcome" in drill.refusal or "rule 2" in drill.refusal
    others = ReplayRequest.objects.filter(run_id=drill.run_id).exclude(pk=drill.request_id).count()
    findings.check(
        "the completed period: nothing new dispatched, the refusal names its rule",
        refused and others == 0 and len(dispatches) == 1 and not any("CREATED" in x for x in drill.completed_period),
        f"{others} new request(s); {'; '.join(drill.completed_period)}; refusal: {drill.refusal[:160]}",
    )
    dup = Attempt.objects.values("run_id", "execution_id").annotate(n=Count("id")).filter(n__gt=1).count()
    numbers = (
        Attempt.objects.filter(run_id=drill.run_id).values("number").annotate(n=Count("id")).filter(n__gt=1).count()
    )
    replay_keys = (
        Attempt.objects.filter(~Q(replay_key="")).values("replay_key").annotate(n=Count("id")).filter(n__gt=1).count()
    )
    findings.check(
        "no duplicate attempts anywhere (per run and execution id; per replay key; the replay run's numbers)",
        dup == 0 and numbers == 0 and replay_keys == 0,
        f"{Attempt.objects.count():,} attempts; duplicates: {dup} by execution id, {numbers} by number, "
        f"{replay_keys} by replay key",
    )


# --------------------------------------------------------------------------------------------------
# Step 5: the held messages, redelivered


def redeliver_held(workers: Workers) -> list[str]:
    """What Redis does after the visibility timeout (2 h in production), now: requeue unacknowledged messages."""
    from kombu import Connection

    held = broker_unacked()
    with Connection(BROKER_URL, transport_options={"visibility_timeout": 0}) as conn:
        conn.default_channel.qos.restore_visible(num=1000, interval=1)
    wait_idle(workers)
    return held


# --------------------------------------------------------------------------------------------------
# The timeline


def timeline_snapshot() -> dict[int, str]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT id, md5(t::text) FROM runs_timelineevent t")
        return dict(cursor.fetchall())


def timeline_findings(before: dict[int, str], findings: Findings) -> None:
    from django.db import DatabaseError, connection, transaction

    after = timeline_snapshot()
    changed = [pk for pk, digest in before.items() if after.get(pk) != digest]
    refused = []
    some = min(after) if after else None
    for sql in (
        "UPDATE runs_timelineevent SET summary = 'edited' WHERE id = %s",
        "DELETE FROM runs_timelineevent WHERE id = %s",
    ):
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(sql, [some])
            refused.append(False)
        except DatabaseError:
            refused.append(True)
    findings.check(
        "timeline append-only",
        not changed and all(refused) and len(after) >= len(before),
        f"{len(before):,} events before the kills all unchanged ({len(changed)} changed or gone), "
        f"{len(after) - len(before):,} appended since; UPDATE and DELETE refused by the trigger: {all(refused)}",
    )


# --------------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--due", type=int, default=20_000, help="due next-run checks (default 20,000)")
    parser.add_argument("--total", type=int, default=30_000, help="next-run checks in all (default 30,000)")
    parser.add_argument("--seed", type=int, default=10, help="shuffle seed of the alert redeliveries")
    parser.add_argument("--keep", action="store_true", help="keep the database and var dir afterwards")
    args = parser.parse_args()
    if args.due > 20_000 or args.due > args.total or args.total % 100 or args.due % 100:
        parser.error("--due and --total: multiples of 100, due <= total, due <= 20,000 (one sweep's limit)")

    var_dir = Path(tempfile.mkdtemp(prefix="handover-drill-"))
    env = drill_env(var_dir)
    os.environ.update(env)
    head("0. set-up")
    database_create()
    redis_flush()
    import django

    django.setup()
    import logging

    from django.core.management import call_command

    logging.getLogger("django.request").setLevel(logging.ERROR)  # the garbled fixtures' 400s are expected

    started = time.monotonic()
    call_command("migrate", interactive=False, verbosity=0)
    say(
        f"database {DB_NAME} created and migrated in {time.monotonic() - started:.1f} s; broker {BROKER_URL}, "
        f"cache {CACHE_URL}, var dir {var_dir}"
    )
    receiver = Receiver()
    say(
        f"webhook receiver on 127.0.0.1:{receiver.port} (answers after {WEBHOOK_SLEEP:.0f} s; timeout "
        f"{WEBHOOK_TIMEOUT} s)"
    )
    workers = Workers(env, var_dir)
    findings = Findings()
    try:
        first = [workers.start("a"), workers.start("b")]
        workers.wait_ready(first)
        say("workers: " + ", ".join(f"{w.name} pid {w.pid} (pool {w.children()})" for w in first))
        sweep = sweep_seed(args.total, args.due)

        head("1. every alert twice, out of order")
        files = alerts_world()
        world = alerts_baseline(files)
        say(
            f"baseline: {len(files)} fixture files posted once in order, then rolled back "
            f"({sum(world.baseline_alerts.values())} alerts, {len(world.baseline_attempts)} attempts)"
        )
        started = time.monotonic()
        alerts_twice_out_of_order(world, args.seed)
        say(
            f"posted {world.posts} times (seed {args.seed}, 4 threads) in {time.monotonic() - started:.1f} s: "
            f"HTTP {dict(sorted(world.statuses.items()))}"
        )
        timeline_before = timeline_snapshot()

        head("2. a next-run check sweep, killed mid-way")
        sweep = sweep_drill(workers, sweep)

        head("3. one replay: overlapping triggers, the webhook delivery killed in flight")
        replay = replay_drill(workers, receiver)

        head("5. the messages the killed worker held, redelivered")
        held = redeliver_held(workers)
        say(f"requeued {len(held)} unacknowledged message(s) {held} and let them run")

        head("6. the business records")
        alerts_findings(world, findings)
        sweep_findings(sweep, findings)
        replay_findings(replay, receiver, findings)
        timeline_findings(timeline_before, findings)
    except Exception as exc:  # noqa: BLE001 - reported as a failed drill
        import traceback

        traceback.print_exc()
        findings.check("the drill ran to the end", False, f"{type(exc).__name__}: {exc}")
    finally:
        workers.stop_all()
        receiver.stop()
        from django.db import connections

        connections.close_all()
        if args.keep:
            say(f"kept: DATABASE_URL={DB_URL} HANDOVER_VAR_DIR={var_dir}")
        else:
            database_drop()
            shutil.rmtree(var_dir, ignore_errors=True)
        redis_flush()

    total = len(findings.rows)
    print(
        f"\ndrill: {total - findings.failed}/{total} invariants hold"
        + (f"; {findings.failed} FAILED" if findings.failed else ""),
        flush=True,
    )
    return 1 if findings.failed else 0


if __name__ == "__main__":
    sys.exit(main())

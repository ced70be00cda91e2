"""The load generator: ``clients`` concurrent HTTP/1.1 clients (http.client), spread over processes.

Each client thread sends its share of the posts one after another on its own connection
(gunicorn's sync workers close the connection after each response; http.client then reconnects,
as any client of a sync worker must). Bodies are built before the start signal, so only sending
and waiting is timed. Threads are spread over a few processes so the GIL does not become the
bottleneck of the measurement. Only ``127.0.0.1`` is contacted.
"""

from __future__ import annotations

import http.client
import multiprocessing as mp
import os
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from bench import alerts
from bench import cpu as cpustat

HOST = "127.0.0.1"


@dataclass
class PhaseResult:
    """What one measured phase gave, seen from the clients."""

    name: str
    posts: int
    alerts: int
    seconds: float
    latencies_ms: list[float]
    statuses: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    cpu: cpustat.CpuUse = field(default_factory=cpustat.CpuUse)

    def merge(self, other: PhaseResult) -> None:
        """Add another segment of the same mode (rounds)."""
        self.posts += other.posts
        self.alerts += other.alerts
        self.seconds += other.seconds
        self.latencies_ms.extend(other.latencies_ms)
        self.statuses.update(other.statuses)
        self.errors.extend(other.errors[: max(0, 5 - len(self.errors))])
        self.cpu.add(other.cpu)

    @property
    def alerts_per_s(self) -> float:
        return self.alerts / self.seconds if self.seconds else 0.0

    @property
    def posts_per_s(self) -> float:
        return self.posts / self.seconds if self.seconds else 0.0

    def percentile(self, q: float) -> float:
        values = sorted(self.latencies_ms)
        if not values:
            return 0.0
        # nearest rank
        rank = max(1, min(len(values), int(-(-q * len(values) // 100))))
        return values[rank - 1]

    @property
    def failed(self) -> int:
        return sum(n for status, n in self.statuses.items() if status != 202)


def _client_thread(port: int, path: str, headers: dict[str, str], bodies: list[bytes], out: dict) -> None:
    conn = http.client.HTTPConnection(HOST, port, timeout=120)
    latencies = out["latencies"]
    statuses = out["statuses"]
    for body in bodies:
        started = time.perf_counter()
        try:
            conn.request("POST", path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            statuses["error"] += 1
            if len(out["errors"]) < 5:
                out["errors"].append(f"{type(exc).__name__}: {exc}")
            conn.close()
            continue
        latencies.append((time.perf_counter() - started) * 1000.0)
        statuses[response.status] += 1
        if response.status != 202 and len(out["errors"]) < 5:
            out["errors"].append(f"HTTP {response.status}: {data[:300]!r}")
    conn.close()


def _process_main(
    port: int, path: str, token: str, posts: list[tuple[int, int]], threads: int, barrier, results
) -> None:
    try:
        bodies = [alerts.body(first, count) for first, count in posts]
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
        outs = [{"latencies": [], "statuses": Counter(), "errors": []} for _ in range(threads)]
        workers = [
            threading.Thread(target=_client_thread, args=(port, path, headers, bodies[n::threads], outs[n]))
            for n in range(threads)
        ]
        barrier.wait(timeout=300)
        cpu_start = sum(os.times()[:2])
        started = time.monotonic()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        ended = time.monotonic()
        cpu_used = sum(os.times()[:2]) - cpu_start
        latencies: list[float] = []
        statuses: Counter = Counter()
        errors: list[str] = []
        for out in outs:
            latencies.extend(out["latencies"])
            statuses.update(out["statuses"])
            errors.extend(out["errors"])
        results.put((cpu_used, started, ended, latencies, statuses, errors[:5]))
    except KeyboardInterrupt:
        os._exit(130)


class LoadGenerator:
    """Runs phases; remembers its processes so a Ctrl-C can end them (by pid)."""

    def __init__(self, clients: int, processes: int) -> None:
        self.clients = clients
        self.processes = max(1, min(processes, clients))
        self.context = mp.get_context("spawn")
        self.children: list[mp.process.BaseProcess] = []

    def run(
        self,
        name: str,
        port: int,
        path: str,
        token: str,
        first_alert: int,
        posts: int,
        per_post: int,
        masters: set[int] | None = None,
        backends: Callable[[], set[int]] | None = None,
    ) -> PhaseResult:
        """Send ``posts`` posts of ``per_post`` alerts each, alerts numbered from ``first_alert``.

        ``masters``: gunicorn master pids, whose workers' CPU is counted as ``workers``;
        ``backends``: returns the pids of the PostgreSQL backends serving them (polled every second).
        """
        specs = [(first_alert + n * per_post, per_post) for n in range(posts)]
        barrier = self.context.Barrier(self.processes + 1)
        results = self.context.Queue()
        base, extra = divmod(self.clients, self.processes)
        self.children = []
        for n in range(self.processes):
            threads = base + (1 if n < extra else 0)
            child = self.context.Process(
                target=_process_main,
                args=(port, path, token, specs[n :: self.processes], threads, barrier, results),
                daemon=True,
                name=f"bench-client-{n}",
            )
            child.start()
            self.children.append(child)
        tracker = cpustat.BackendTracker(backends) if backends is not None else None
        before = cpustat.snapshot()
        wall_start = time.monotonic()
        barrier.wait(timeout=300)
        collected = []
        while len(collected) < self.processes:
            if tracker is not None:
                tracker.poll()
            try:
                collected.append(results.get(timeout=1))
            except queue.Empty:
                dead = [c for c in self.children if not c.is_alive() and c.exitcode not in (0, None)]
                if dead:
                    raise RuntimeError(f"a client process failed (exit code {dead[0].exitcode})") from None
        if tracker is not None:
            tracker.poll()
        after = cpustat.snapshot()
        wall = time.monotonic() - wall_start
        self.stop()
        latencies: list[float] = []
        statuses: Counter = Counter()
        errors: list[str] = []
        for _cpu, _started, _ended, lat, st, err in collected:
            latencies.extend(lat)
            statuses.update(st)
            errors.extend(err)
        seconds = max(c[2] for c in collected) - min(c[1] for c in collected)
        return PhaseResult(
            name=name,
            posts=posts,
            alerts=posts * per_post,
            seconds=seconds,
            latencies_ms=latencies,
            statuses=statuses,
            errors=errors[:5],
            cpu=cpustat.usage(
                before,
                after,
                masters or set(),
                sum(c[0] for c in collected),
                wall,
                backends=tracker.seen if tracker else None,
            ),
        )

    def stop(self) -> None:
        for child in self.children:
            child.join(timeout=5)
            if child.is_alive():
                child.terminate()
                child.join(timeout=5)
        self.children = []

"""HTTP load generators for the benchmarks, on http.client (no dependency), 127.0.0.1 only.

- ``LoadGenerator`` (``bench/ingest.py``): ``clients`` concurrent HTTP/1.1 clients, spread over
  processes, send a fixed number of posts. Each client thread sends its share of the posts one
  after another on its own connection (gunicorn's sync workers close the connection after each
  response; http.client then reconnects, as any client of a sync worker must). Bodies are built
  before the start signal, so only sending and waiting is timed.
- ``MixedTraffic`` (``bench/topology.py``): for a fixed time, alert senders (each a monitoring
  system with its own integration key, closed or open loop) and page readers (people logged in
  through the login form, reading pages and API lists with a think time), spread over processes.

Threads are spread over a few processes so the GIL does not become the bottleneck of the
measurement. Only ``127.0.0.1`` is contacted.
"""

from __future__ import annotations

import http.client
import multiprocessing as mp
import os
import queue
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from urllib.parse import urlencode

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


# --- mixed traffic for a fixed time: alert senders and page readers (bench/topology.py) -----------
#
# The topology benchmark runs against a production-mode server behind an imagined TLS proxy: every
# request says ``X-Forwarded-Proto: https`` (the header production settings trust), so there is no
# https redirect, and the secure session and CSRF cookies are sent back as a browser would over TLS.

FORWARDED = {"X-Forwarded-Proto": "https"}
_CSRF_FIELD = re.compile(rb'name="csrfmiddlewaretoken" value="([^"]+)"')


@dataclass
class SenderSpec:
    """One monitoring system posting alerts: ``source`` format, its own integration key.

    Alert numbers ``first``, ``first + stride``, ...; ``interval_s`` 0 posts as fast as answers
    come (closed loop), otherwise one post every ``interval_s`` on a fixed schedule (open loop;
    latency is then counted from the scheduled send time, so a stalled server is not hidden).
    """

    source: str
    key: str
    first: int
    stride: int
    interval_s: float = 0.0
    offset_s: float = 0.0


@dataclass
class ReaderSpec:
    """One person reading pages: logs in with ``username``/``password``, then reads, thinking between."""

    username: str
    password: str
    think_s: float
    seed: int


@dataclass
class TrafficResult:
    """What one fixed-time phase gave, seen from the clients; kinds are ``ingest <source>`` or page kinds."""

    name: str
    seconds: float = 0.0
    latencies_ms: dict[str, list[float]] = field(default_factory=dict)
    statuses: dict[str, Counter] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    posts: dict[int, int] = field(default_factory=dict)  # sender number -> posts made
    clients_cpu: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)  # filled by the caller

    def add(self, kind: str, status: int | str, ms: float | None) -> None:
        self.statuses.setdefault(kind, Counter())[status] += 1
        if ms is not None:
            self.latencies_ms.setdefault(kind, []).append(ms)

    def merge(self, other: TrafficResult) -> None:
        """Add another segment of the same phase (alternating rounds); CPU shares are weighted by time."""
        seconds = self.seconds + other.seconds
        if seconds:
            self.cpu = {
                k: (self.cpu.get(k, 0.0) * self.seconds + other.cpu.get(k, 0.0) * other.seconds) / seconds
                for k in self.cpu.keys() | other.cpu.keys()
            }
        self.seconds = seconds
        self.absorb(other)
        for values in self.latencies_ms.values():
            values.sort()

    def absorb(self, other: TrafficResult) -> None:
        """Add the counts, latencies (unsorted), first errors, posts and client CPU of ``other``."""
        for kind, counter in other.statuses.items():
            self.statuses.setdefault(kind, Counter()).update(counter)
        for kind, values in other.latencies_ms.items():
            self.latencies_ms.setdefault(kind, []).extend(values)
        self.errors.extend(other.errors[: max(0, 10 - len(self.errors))])
        self.posts.update(other.posts)
        self.clients_cpu += other.clients_cpu

    def kinds(self, ingest: bool) -> list[str]:
        return sorted(k for k in self.statuses if k.startswith("ingest ") == ingest)

    def latencies(self, kinds: list[str]) -> list[float]:
        return sorted(ms for k in kinds for ms in self.latencies_ms.get(k, []))

    def count(self, kinds: list[str], status: int | str | None = None) -> int:
        return sum(
            n for k in kinds for s, n in self.statuses.get(k, Counter()).items() if status is None or s == status
        )

    def by_status(self, kinds: list[str]) -> Counter:
        total: Counter = Counter()
        for k in kinds:
            total.update(self.statuses.get(k, Counter()))
        return total

    def rate(self, n: int) -> float:
        return n / self.seconds if self.seconds else 0.0


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of sorted ``values`` (0 when empty)."""
    if not values:
        return 0.0
    rank = max(1, min(len(values), int(-(-q * len(values) // 100))))
    return values[rank - 1]


class WebClient:
    """A cookie-keeping HTTP/1.1 client for 127.0.0.1 (http.client: no proxy from the environment).

    gunicorn's sync workers close the connection after each response, so each request connects anew.
    """

    def __init__(self, port: int, timeout: float = 30.0) -> None:
        self.port = port
        self.timeout = timeout
        self.cookies: dict[str, str] = {}
        self.origin = f"https://{HOST}:{port}"

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes, http.client.HTTPResponse]:
        conn = http.client.HTTPConnection(HOST, self.port, timeout=self.timeout)
        try:
            all_headers = {**FORWARDED, **(headers or {})}
            if self.cookies:
                all_headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
            conn.request(method, path, body=body, headers=all_headers)
            response = conn.getresponse()
            data = response.read()
        finally:
            conn.close()
        for header in response.headers.get_all("Set-Cookie") or []:
            jar = SimpleCookie()
            jar.load(header)
            for name, morsel in jar.items():
                self.cookies[name] = morsel.value
        return response.status, data, response

    def login(self, username: str, password: str) -> None:
        """Log in through the login form (CSRF token and all); raises RuntimeError when refused."""
        status, page, _ = self.request("GET", "/login/")
        match = _CSRF_FIELD.search(page)
        if status != 200 or match is None:
            raise RuntimeError(f"GET /login/ answered {status} without a CSRF token")
        form = urlencode({"username": username, "password": password, "csrfmiddlewaretoken": match.group(1).decode()})
        status, data, response = self.request(
            "POST",
            "/login/",
            body=form.encode(),
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Origin": self.origin,
                "Referer": f"{self.origin}/login/",
            },
        )
        if status != 302 or "sessionid" not in self.cookies:
            raise RuntimeError(f"login of {username} answered {status}: {data[:200]!r}")


def _record_error(out: TrafficResult, text: str) -> None:
    if len(out.errors) < 10:
        out.errors.append(text)


def _sender_thread(
    port: int, number: int, spec: SenderSpec, started: float, end: float, timeout: float, out: TrafficResult
) -> None:
    from bench import formats  # no Django: bodies are built as the sender goes

    path = f"/api/v1/alerts/{spec.source}/"
    headers = {**FORWARDED, "Content-Type": "application/json", "Authorization": f"Bearer {spec.key}"}
    kind = f"ingest {spec.source}"
    index = spec.first
    posts = 0
    due = started + spec.offset_s
    while True:
        if spec.interval_s:
            if due >= end:
                break
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            sent_at, due = due, due + spec.interval_s
        else:
            sent_at = time.monotonic()
            if sent_at >= end:
                break
        body = formats.body(spec.source, index)
        index += spec.stride
        posts += 1
        conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
        try:
            conn.request("POST", path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            out.add(kind, "error", None)
            _record_error(out, f"{kind}: {type(exc).__name__}: {exc}")
            continue
        finally:
            conn.close()
        out.add(kind, response.status, (time.monotonic() - sent_at) * 1000.0)
        if response.status != 202:
            _record_error(out, f"{kind}: HTTP {response.status}: {data[:300]!r}")
    out.posts[number] = posts


def _reader_thread(
    client: WebClient,
    spec: ReaderSpec,
    pages: list[tuple[str, str]],
    run_ids: list[str],
    end: float,
    out: TrafficResult,
) -> None:
    rng = random.Random(spec.seed)
    cycle: list[tuple[str, str]] = []
    while time.monotonic() < end:
        if not cycle:
            cycle = list(pages)
            rng.shuffle(cycle)
        kind, path = cycle.pop()
        if "{run}" in path:
            path = path.replace("{run}", rng.choice(run_ids))
        sent_at = time.monotonic()
        try:
            status, data, _ = client.request("GET", path, headers={"Accept": "text/html,application/json"})
        except (OSError, http.client.HTTPException) as exc:
            out.add(kind, "error", None)
            _record_error(out, f"{kind} {path}: {type(exc).__name__}: {exc}")
            continue
        out.add(kind, status, (time.monotonic() - sent_at) * 1000.0)
        if status != 200:
            _record_error(out, f"{kind} {path}: HTTP {status}: {data[:200]!r}")
        if spec.think_s:
            pause = spec.think_s * rng.uniform(0.5, 1.5)
            if time.monotonic() + pause >= end:
                break
            time.sleep(pause)


def _traffic_main(
    port: int,
    senders: list[tuple[int, SenderSpec]],
    readers: list[ReaderSpec],
    pages: list[tuple[str, str]],
    run_ids: list[str],
    seconds: float,
    timeout: float,
    barrier,  # noqa: ANN001 - a multiprocessing barrier
    results,  # noqa: ANN001 - a multiprocessing queue
) -> None:
    try:
        clients = []
        try:
            for spec in readers:  # logging in is not measured
                client = WebClient(port, timeout)
                client.login(spec.username, spec.password)
                clients.append(client)
        except Exception:
            barrier.abort()
            raise
        outs = [TrafficResult("") for _ in range(len(senders) + len(readers))]
        barrier.wait(timeout=300)
        cpu_start = sum(os.times()[:2])
        started = time.monotonic()
        end = started + seconds
        threads = [
            threading.Thread(target=_sender_thread, args=(port, number, spec, started, end, timeout, outs[n]))
            for n, (number, spec) in enumerate(senders)
        ] + [
            threading.Thread(target=_reader_thread, args=(client, spec, pages, run_ids, end, outs[len(senders) + n]))
            for n, (client, spec) in enumerate(zip(clients, readers, strict=True))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        total = TrafficResult("", seconds=time.monotonic() - started)
        for out in outs:
            total.absorb(out)
        total.clients_cpu = sum(os.times()[:2]) - cpu_start
        results.put(total)
    except KeyboardInterrupt:
        os._exit(130)


class MixedTraffic:
    """Runs fixed-time phases of senders and readers spread over processes (so the GIL is no limit)."""

    def __init__(self, processes: int, timeout: float = 30.0) -> None:
        self.processes = max(1, processes)
        self.timeout = timeout
        self.context = mp.get_context("spawn")
        self.children: list[mp.process.BaseProcess] = []

    def run(
        self,
        name: str,
        port: int,
        senders: list[SenderSpec],
        readers: list[ReaderSpec],
        pages: list[tuple[str, str]],
        run_ids: list[str],
        seconds: float,
        tick: Callable[[], None] | None = None,
    ) -> TrafficResult:
        """Send and read for ``seconds``; ``tick`` is called about once a second meanwhile."""
        numbered = list(enumerate(senders))
        processes = max(1, min(self.processes, len(senders) + len(readers)))
        barrier = self.context.Barrier(processes + 1)
        results = self.context.Queue()
        self.children = []
        for n in range(processes):
            child = self.context.Process(
                target=_traffic_main,
                args=(
                    port,
                    numbered[n::processes],
                    readers[n::processes],
                    pages,
                    run_ids,
                    seconds,
                    self.timeout,
                    barrier,
                    results,
                ),
                daemon=True,
                name=f"bench-traffic-{n}",
            )
            child.start()
            self.children.append(child)
        try:
            barrier.wait(timeout=300)
        except threading.BrokenBarrierError:
            self.stop()
            raise RuntimeError(f"{name}: a client process could not start (a login failed?)") from None
        collected: list[TrafficResult] = []
        while len(collected) < processes:
            if tick is not None:
                tick()
            try:
                collected.append(results.get(timeout=1))
            except queue.Empty:
                dead = [c for c in self.children if not c.is_alive() and c.exitcode not in (0, None)]
                if dead:
                    raise RuntimeError(f"a client process failed (exit code {dead[0].exitcode})") from None
        self.stop()
        total = TrafficResult(name, seconds=max(r.seconds for r in collected))
        for r in collected:
            total.absorb(r)
        for values in total.latencies_ms.values():
            values.sort()
        return total

    def stop(self) -> None:
        for child in self.children:
            child.join(timeout=10)
            if child.is_alive():
                child.terminate()
                child.join(timeout=5)
        self.children = []

"""Where the machine's CPU went during a measurement (Linux ``/proc``; empty elsewhere).

The benchmark shares the machine with whatever else runs on it: the "other" share says how much
CPU went to processes that are not part of the measurement, so a noisy run can be recognised.
Categories: the gunicorn workers (and masters), PostgreSQL (the backends connected to the
benchmark's database; PostgreSQL's shared background processes -- WAL writer, checkpointer -- and
other databases' backends count as other), the load-generating clients (they report their own CPU
time, since they have exited when the measurement ends), this process, and other.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass
class Snapshot:
    busy: float = 0.0  # CPU-seconds used on all CPUs (not idle, not iowait)
    total: float = 0.0
    processes: dict[int, tuple[float, int, str]] = field(default_factory=dict)  # pid -> (cpu s, ppid, comm)


def snapshot() -> Snapshot | None:
    try:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:9]]
    except OSError:
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = values
    snap = Snapshot(busy=(user + nice + system + irq + softirq + steal) / TICK, total=sum(values) / TICK)
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                text = f.read()
        except OSError:
            continue
        comm = text[text.find("(") + 1 : text.rfind(")")]
        rest = text[text.rfind(")") + 2 :].split()
        snap.processes[int(name)] = ((int(rest[11]) + int(rest[12])) / TICK, int(rest[1]), comm)
    return snap


@dataclass
class CpuUse:
    """CPU-seconds by category over some wall seconds."""

    wall: float = 0.0
    workers: float = 0.0
    postgres: float = 0.0
    clients: float = 0.0
    bench: float = 0.0
    other: float = 0.0
    known: bool = False

    def add(self, other: CpuUse) -> None:
        for name in ("wall", "workers", "postgres", "clients", "bench", "other"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.known = self.known or other.known


def process_cpu(pid: int) -> float | None:
    """CPU-seconds a live process has used, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    rest = text[text.rfind(")") + 2 :].split()
    return (int(rest[11]) + int(rest[12])) / TICK


class BackendTracker:
    """The latest CPU time seen of each of our PostgreSQL backends, polled during a measurement.

    Backends come and go (``CONN_MAX_AGE`` recycles a connection after its age), and an exited
    process's CPU time can no longer be read: polling about once a second loses at most the last
    second of a backend that exits.
    """

    def __init__(self, list_pids: Callable[[], set[int]]) -> None:
        self.list_pids = list_pids
        self.seen: dict[int, float] = {}

    def poll(self) -> None:
        for pid in self.list_pids():
            cpu = process_cpu(pid)
            if cpu is not None:
                self.seen[pid] = cpu


def usage(
    before: Snapshot | None,
    after: Snapshot | None,
    masters: set[int],
    clients_cpu: float,
    wall: float,
    backends: dict[int, float] | None = None,
) -> CpuUse:
    """Attribute the CPU used between two snapshots.

    ``backends``: our PostgreSQL backends' pids with the latest CPU time seen (``BackendTracker``);
    without it, every process named ``postgres`` counts as ours.
    """
    if before is None or after is None:
        return CpuUse(wall=wall)
    use = CpuUse(wall=wall, clients=clients_cpu, known=True)
    accounted = clients_cpu
    me = os.getpid()
    for pid, (cpu, ppid, comm) in after.processes.items():
        delta = cpu - before.processes.get(pid, (0.0, 0, ""))[0]
        if pid in masters or ppid in masters:
            use.workers += delta
        elif (pid in backends) if backends is not None else (comm == "postgres"):
            use.postgres += delta
        elif pid == me:
            use.bench += delta
        else:
            continue
        accounted += delta
    for pid, cpu in (backends or {}).items():
        if pid not in after.processes:  # exited during the measurement: its last seen CPU time
            delta = cpu - before.processes.get(pid, (0.0, 0, ""))[0]
            use.postgres += delta
            accounted += delta
    use.other = max(0.0, (after.busy - before.busy) - accounted)
    return use

"""The frozen baselines of ``bench/reconcile.py``: ``sort | comm`` and the same stack's floor.

Frozen: ``bench/reconcile.py`` prints this file's sha256 beside the figures, and a note quoting a
ratio quotes the hash too, so a ratio cannot improve by slowing a baseline. Change this file only
to fix a wrong baseline, and say so where the new figures are recorded.

- ``sort_comm_seconds``: ``LC_ALL=C sort`` of the population's and the destination's id files,
  then ``comm`` for the missing ids and the not-eligible ids (no database).
- ``copy_seconds``: the same stack as the load (this Python, psycopg 3, the same PostgreSQL
  database, ``work_mem`` as the load sets it), doing the least a load must: COPY of the three bare
  id files (population, runner report, destination; one id a line, streamed in 1 MiB blocks,
  nothing parsed in Python) into three unindexed temporary tables, then one anti-join into an
  indexed table: every eligible id not already in a logged table with a unique index is inserted
  into it (the load's "new ids become items"), then commit.
"""

from __future__ import annotations

import hashlib
import subprocess
import time
from pathlib import Path

CHUNK_BYTES = 1 << 20


def source_sha256() -> str:
    """The sha256 (hex) of this file: the baselines' code, printed with every figure."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def sort_comm_seconds(population_ids: Path, destination_ids: Path, folder: Path) -> float:
    """Seconds for ``sort`` of both id files and ``comm`` of the sorted files (missing, not eligible)."""
    script = (
        "set -e; export LC_ALL=C; "
        f"sort {population_ids} > {folder}/pop.sorted; sort {destination_ids} > {folder}/dest.sorted; "
        f"comm -23 {folder}/pop.sorted {folder}/dest.sorted > {folder}/missing; "
        f"comm -13 {folder}/pop.sorted {folder}/dest.sorted > {folder}/not_eligible"
    )
    started = time.perf_counter()
    subprocess.run(["sh", "-c", script], check=True)
    return time.perf_counter() - started


def copy_seconds(database_url: str, population_ids: Path, runner_ids: Path, destination_ids: Path) -> float:
    """Seconds from the first COPY to the commit of the same-stack baseline (see the module docstring).

    ``database_url``: a ``postgres://`` URL of the benchmark's database (a fresh connection is
    opened; its time is not counted). The indexed table is dropped again afterwards.
    Raises psycopg errors as they come.
    """
    import psycopg

    with psycopg.connect(database_url) as conn:
        started = time.perf_counter()
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("SET LOCAL work_mem = '256MB'")
            for name, path in (
                ("population", population_ids),
                ("runner", runner_ids),
                ("destination", destination_ids),
            ):
                cur.execute(f"CREATE TEMP TABLE baseline_{name} (record_id text NOT NULL) ON COMMIT DROP")
                with cur.copy(f"COPY baseline_{name} (record_id) FROM STDIN") as copy, open(path, "rb") as source:
                    while block := source.read(CHUNK_BYTES):
                        copy.write(block)
            cur.execute("CREATE TABLE baseline_items (record_id text PRIMARY KEY)")
            cur.execute(
                "INSERT INTO baseline_items (record_id) SELECT p.record_id FROM baseline_population p "
                "WHERE NOT EXISTS (SELECT 1 FROM baseline_items i WHERE i.record_id = p.record_id)"
            )
        seconds = time.perf_counter() - started
        conn.execute("DROP TABLE baseline_items")
        conn.commit()
    return seconds

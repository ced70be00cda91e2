"""The schema floor of ``bench/reconcile.py --floor``: the least a load must write on this schema.

Frozen like ``bench/reconcile_baseline.py``: ``bench/reconcile.py`` prints this file's sha256 beside
its figure. It answers one question: can *any* load of a fresh run's items, on this stack and the
work-item table as it is (its primary key, its unique ``(run, record_id)`` index and the cross-run
prefix-search index on ``UPPER(record_id)``), meet the targets? If the floor cannot, no change to the
load's code can, and the target is out of reach of the schema, not of the code.

``seconds``: the same stack and steps as the COPY baseline (this Python, psycopg 3, the benchmark's
database, ``work_mem`` as the load sets it; COPY of the three bare id files, one id a line, streamed
in 1 MiB blocks, into three unindexed temporary tables), then one ``INSERT ... SELECT`` of every
population id, in the file's order (sorted already), into a new logged table made ``LIKE
runs_workitem INCLUDING ALL`` (the same columns, defaults, identity, checks and indexes; no foreign
key: the real table has none either), each row with the constant values of an unverified item of
the run; then commit. Left out, all of which the load must do: reading the runner report's and the
destination's facts into the items (joins, states, counts), the checks of the files, the not-eligible
ids, the totals and the timeline event.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

CHUNK_BYTES = 1 << 20


def source_sha256() -> str:
    """The sha256 (hex) of this file: the floor's code, printed with its figure."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def schema_floor_seconds(
    database_url: str, run_id: int, population_ids: Path, runner_ids: Path, destination_ids: Path
) -> float:
    """Seconds from the first COPY to the commit of the schema floor (see the module docstring).

    ``database_url``: a ``postgres://`` URL of the benchmark's database (a fresh connection is
    opened; its time is not counted); ``run_id``: the primary key of the run the items are written
    for. The table written is dropped again afterwards. Raises psycopg errors as they come.
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
                cur.execute(f"CREATE TEMP TABLE floor_{name} (record_id text NOT NULL) ON COMMIT DROP")
                with cur.copy(f"COPY floor_{name} (record_id) FROM STDIN") as copy, open(path, "rb") as source:
                    while block := source.read(CHUNK_BYTES):
                        copy.write(block)
            cur.execute("CREATE TABLE floor_workitem (LIKE runs_workitem INCLUDING ALL)")
            cur.execute(
                "INSERT INTO floor_workitem (record_id, outcome, is_in_population, skip_reason, is_attempted, "
                "runner_status, destination_count, destination_ref, is_possible_duplicate, evidence_kind, "
                "evidence_ref, evidence_note, run_id, duplicate_evidence_ref, duplicate_explanation) "
                "SELECT p.record_id, 'unverified', true, '', false, '', 0, '', false, '', '', '', %s, '', '' "
                "FROM floor_population p",
                [run_id],
            )
        seconds = time.perf_counter() - started
        conn.execute("DROP TABLE floor_workitem")
        conn.commit()
    return seconds

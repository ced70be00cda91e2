#!/usr/bin/env python
"""Work-ledger benchmark: load + reconcile a large run on PostgreSQL, beside a ``sort | comm`` baseline.

Usage (from the repository root; never run in CI)::

    .venv/bin/python bench/reconcile.py                 # 1,000,000 eligible ids (the target's size)
    .venv/bin/python bench/reconcile.py --rows 100000   # scaled down
    .venv/bin/python bench/reconcile.py --keep          # keep the database afterwards
    .venv/bin/python bench/reconcile.py --floor         # also the schema's floor (bench/reconcile_floor.py)

What it does, all on 127.0.0.1:

1. creates a throw-away database on the server of ``--database-url`` (default
   ``postgres://postgres@127.0.0.1:5432/postgres``), migrates it, and creates one failed run;
2. writes the files (``bench/ledger_setup.py``): the eligible population (``--rows`` ids), a runner
   report (every id attempted, 99.5 % claimed done, 0.1 % failed) and a destination export of
   99 % as many ids, 0.05 % of them not eligible (990,000 with 500 not eligible at 1,000,000);
3. times the load of the three files through the service (``work_item_loads_create``, run inline:
   each file's bytes COPYed into its own staging table and parsed there, dup checks, one ordered
   ``INSERT ... SELECT`` of the items with the runner's and the destination's facts joined in,
   totals, one timeline event), the destination declared complete so the missing ids become
   ``absent``. ``--one-by-one`` uploads the files one after the other instead (three transactions,
   each rewriting the run's items: the slow path for a million rows);
4. times the two frozen baselines of ``bench/reconcile_baseline.py`` on the same ids (its sha256 is
   printed with the figures): ``LC_ALL=C sort`` of both id files then ``comm`` (``baseline_seconds``),
   and the same stack's floor — COPY of the three bare id files into unindexed tables plus one
   anti-join into an indexed table (``copy_baseline_seconds``; run once before and once after the
   load, the faster counts);
5. with ``--floor``, times ``bench/reconcile_floor.py`` (its sha256 printed too): the COPY baseline's
   staging, then every population id written into a copy of the work-item table with its indexes --
   the least any load must do on this schema (``floor_seconds``, ``floor_copy_ratio``; like the COPY
   baseline, once before and once after the load, the faster counts);
6. checks the run's stored totals against the files.

Targets at 1,000,000 rows (docs/work-ledger.md "Load speed"): at most 10 s, at most 2× the COPY
baseline (``copy_ratio``), and at most 400 MB peak memory (this process's peak resident set,
``ru_maxrss``; the PostgreSQL server's own memory is not included). The last line printed is::

    reconcile rows=N seconds=S baseline_seconds=B ratio=R copy_baseline_seconds=C copy_ratio=Q peak_mb=M

preceded, with ``--floor``, by ``reconcile_floor rows=N floor_seconds=F floor_copy_ratio=P``.

Exit status 0 when the totals are right (targets met or not), 1 otherwise.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import reconcile_baseline, reconcile_floor  # noqa: E402
from bench.ledger_setup import (  # noqa: E402
    BenchDatabase,
    add_database_arguments,
    load_files,
    log,
    make_world,
    write_files,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="eligible ids (default 1,000,000)")
    add_database_arguments(parser)
    parser.add_argument(
        "--one-by-one", action="store_true", help="three uploads in a row instead of one upload of the three files"
    )
    parser.add_argument("--floor", action="store_true", help="also time the schema floor (bench/reconcile_floor.py)")
    args = parser.parse_args()
    if args.rows < 1000:
        parser.error("--rows must be at least 1,000")

    db = BenchDatabase(args.database_url, keep=args.keep)
    ok = False
    try:
        db.create()
        db.setup_django()
        run, person = make_world()
        log(f"writing files for {args.rows:,} eligible ids")
        files = write_files(db.tmp, args.rows)

        log("timing the COPY baseline (before the load)")
        copy_before = reconcile_baseline.copy_seconds(
            db.url, files.population_ids, files.runner_ids, files.destination_ids
        )
        floor_times: list[float] = []

        def time_floor(when: str) -> None:
            if args.floor:
                log(f"timing the schema floor ({when} the load)")
                floor_times.append(
                    reconcile_floor.schema_floor_seconds(
                        db.url, run.pk, files.population_ids, files.runner_ids, files.destination_ids
                    )
                )

        time_floor("before")
        import runs.ledger.loads  # noqa: F401  (imported before the clock starts: the load is timed, not the import)

        phases: list[tuple[str, float]] = []
        started = time.perf_counter()
        if args.one_by_one:
            log("loading population, runner report and destination export, one upload each")
            steps = [
                ({"population": files.population}, {}),
                ({"runner_report": files.runner_report}, {}),
                ({"destination": files.destination}, {"is_destination_complete": True}),
            ]
        else:
            log("loading population, runner report and destination export in one upload")
            steps = [
                (
                    {
                        "population": files.population,
                        "runner_report": files.runner_report,
                        "destination": files.destination,
                    },
                    {"is_destination_complete": True},
                )
            ]
        for step_files, extra in steps:
            phase_start = time.perf_counter()
            loads = load_files(run, person, step_files, **extra)
            phases.append(("+".join(step_files), time.perf_counter() - phase_start))
            for load in loads:
                if load.status != "committed":
                    raise SystemExit(f"{load.kind} load ended {load.status}: {load.error}")
        seconds = time.perf_counter() - started
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

        base = reconcile_baseline.sort_comm_seconds(files.population_ids, files.destination_ids, db.tmp)
        log("timing the COPY baseline (after the load)")
        copy_after = reconcile_baseline.copy_seconds(
            db.url, files.population_ids, files.runner_ids, files.destination_ids
        )
        copy_base = min(copy_before, copy_after)
        time_floor("after")
        floor = min(floor_times) if floor_times else None

        run.refresh_from_db()
        expected_completed = files.present - files.not_eligible
        expected = {
            "eligible_count": files.rows,
            "completed_count": expected_completed,
            "unresolved_count": files.rows - expected_completed - run.rejected_count,
            "possible_duplicate_count": files.not_eligible,
        }
        actual = {name: getattr(run, name) for name in expected}
        ok = actual == expected
        for kind, phase_seconds in phases:
            print(f"  {kind:<42} {phase_seconds:8.2f} s")
        print(
            f"  totals: eligible {run.eligible_count:,}, attempted {run.attempted_count:,}, "
            f"completed {run.completed_count:,}, rejected {run.rejected_count:,}, absent {run.absent_count:,}, "
            f"unresolved {run.unresolved_count:,}, possible duplicates {run.possible_duplicate_count:,}"
            + ("" if ok else f"  MISMATCH expected {expected}")
        )
        print(
            f"  baselines (bench/reconcile_baseline.py sha256 {reconcile_baseline.source_sha256()}): "
            f"sort | comm {base:.2f} s; COPY + anti-join {copy_before:.2f} s before the load, "
            f"{copy_after:.2f} s after"
        )
        if floor is not None:
            print(
                f"  schema floor (bench/reconcile_floor.py sha256 {reconcile_floor.source_sha256()}): "
                f"{floor_times[0]:.2f} s before the load, {floor_times[1]:.2f} s after; the faster, {floor:.2f} s, is "
                f"{floor / copy_base:.2f}x the COPY baseline; the load takes "
                f"{seconds / floor:.2f}x the floor"
            )
        targets = [
            ("seconds <= 10", seconds <= 10),
            ("copy_ratio <= 2", seconds / copy_base <= 2),
            ("peak_mb <= 400", peak_mb <= 400),
        ]
        print("  targets: " + ", ".join(f"{name} ({'met' if met else 'MISSED'})" for name, met in targets))
        if floor is not None:
            print(
                f"reconcile_floor rows={args.rows} floor_seconds={floor:.2f} floor_copy_ratio={floor / copy_base:.2f}"
            )
        print(
            f"reconcile rows={args.rows} seconds={seconds:.2f} baseline_seconds={base:.2f} "
            f"ratio={seconds / base:.1f} copy_baseline_seconds={copy_base:.2f} "
            f"copy_ratio={seconds / copy_base:.2f} peak_mb={peak_mb:.0f}"
        )
    finally:
        db.drop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

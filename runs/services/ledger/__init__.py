"""The work ledger: loads of record ids, reconciliation, verification, changes, totals, failure class.

How a load works (``work_item_load_run``), in one transaction so a failed load changes nothing:

1. the file is checked and parsed (``runs.ledger_files``) and streamed into a temporary staging
   table: ``COPY`` on PostgreSQL (psycopg 3 ``cursor.copy``), batched inserts on SQLite;
2. the database does the set work: duplicate ids (``GROUP BY ... HAVING``), new items
   (``INSERT ... SELECT`` with an anti-join), changed facts (``UPDATE ... FROM`` the staging
   table), items that left the destination (``NOT EXISTS``);
3. every item's outcome is derived from its facts by one SQL ``CASE`` (``_derived``), fused into the
   facts update and then applied once more to the rows whose outcome still differs (e.g. the
   eligible ids a complete destination export lacks become ``absent``);
4. the run's totals are recomputed with one aggregate and stored on the run, the failure-class
   suggestion is refreshed, and ONE timeline event with the counts is written.

Outcome rules (first match wins; DESIGN.md Work item):

- a population row with a skip reason → ``skipped`` (a person's decision overrides the rule);
- present in the latest destination export → ``completed`` (destination query);
- a person's change or a provider lookup → kept;
- the runner reported it failed → ``rejected``;
- missing from a destination export declared complete for the window → ``absent``;
- the runner claims it done but the destination cannot confirm it → ``uncertain``;
- attempted, and an attempt of the run timed out after sending → ``uncertain``;
- otherwise → ``unverified``.

A record the destination holds but the population does not list (or lists as skipped), and a
record the destination holds more than once, is a **possible duplicate**.

A package split by sub-domain, re-exporting the public names here (``from runs.services.ledger import ...``):

- ``common``: table names and limits, the writer check (``run_ledger_require_writer``), progress in the cache;
- ``loads``: storing uploaded files as a batch of loads, run now or queued; retrying a failed batch;
- ``batches``: running one batch in one transaction (steps 1-4 above), or marking it failed;
- ``staging``: parsing a file into a staging table (COPY / batched inserts), repeated ids refused;
- ``reconciliation``: each kind of file applied with set-based SQL (anti-joins, ``UPDATE ... FROM``);
- ``outcomes``: the outcome rules above as one SQL ``CASE`` per derived column;
- ``totals``: a run's totals, one aggregate stored on the run;
- ``failure_class``: the suggested failure class and a person's confirmation;
- ``items``: one item's change by a person, or its provider lookup (verification).
"""

from __future__ import annotations

from runs.services.ledger.batches import work_item_load_run
from runs.services.ledger.common import (
    LedgerPermissionDenied,
    run_ledger_require_writer,
)
from runs.services.ledger.failure_class import failure_class_for, run_failure_class_confirm, run_failure_class_suggest
from runs.services.ledger.items import work_item_change, work_item_verify
from runs.services.ledger.loads import (
    ID_COLUMN_OPTIONS,
    OPTION_NAMES,
    LoadFile,
    work_item_load_create,
    work_item_load_retry,
    work_item_loads_create,
)
from runs.services.ledger.totals import RunTotals, run_totals_refresh

__all__ = [
    "ID_COLUMN_OPTIONS",
    "OPTION_NAMES",
    "LedgerPermissionDenied",
    "LoadFile",
    "RunTotals",
    "failure_class_for",
    "run_failure_class_confirm",
    "run_failure_class_suggest",
    "run_ledger_require_writer",
    "run_totals_refresh",
    "work_item_change",
    "work_item_load_create",
    "work_item_load_retry",
    "work_item_load_run",
    "work_item_loads_create",
    "work_item_verify",
]

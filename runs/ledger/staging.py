"""Parsing a file into a temporary staging table: ``COPY`` on PostgreSQL, batched inserts on SQLite;
repeated ids refused, a destination export grouped once per id."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connection

from runs.ledger import files as ledger_files
from runs.ledger.common import SQLITE_BATCH, STAGE, load_progress_publish
from runs.ledger.files import LedgerInputError, LedgerRow
from runs.ledger.models import WorkItemLoad


def is_postgres() -> bool:
    return connection.vendor == "postgresql"


def stage_name(kind: str) -> str:
    return f"{STAGE}_{kind}"


def stage_create(cursor: Any, table: str) -> None:
    # Column names start with stage_ so that they never shadow a work-item column in UPDATE ... FROM.
    cursor.execute(f"DROP TABLE IF EXISTS {table}")
    cursor.execute(
        f"CREATE TEMP TABLE {table} (stage_line integer NOT NULL, stage_id text NOT NULL, stage_ref text NOT NULL, "
        "stage_status text NOT NULL, stage_skip text NOT NULL, stage_attributes text)"
    )


def _stage_fill(cursor: Any, table: str, rows: Iterable[LedgerRow]) -> int:
    """Stream the rows into a staging table; return how many. COPY on PostgreSQL, batches on SQLite."""
    count = 0
    if is_postgres():
        columns = "stage_line, stage_id, stage_ref, stage_status, stage_skip, stage_attributes"
        with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
                count += 1
        cursor.execute(f"ANALYZE {table}")  # temporary tables are never auto-analysed
        return count
    sql = f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s, %s)"
    batch: list[tuple[Any, ...]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= SQLITE_BATCH:
            cursor.executemany(sql, batch)
            count += len(batch)
            batch = []
    if batch:
        cursor.executemany(sql, batch)
        count += len(batch)
    cursor.execute(f"CREATE INDEX {table}_id ON {table} (stage_id)")
    return count


def stage_refuse_duplicates(cursor: Any, table: str) -> None:
    """Raise LedgerInputError naming the first repeated id's lines, if any id is in the file twice."""
    cursor.execute(
        f"SELECT stage_id, MIN(stage_line) FROM {table} GROUP BY stage_id HAVING COUNT(*) > 1 ORDER BY 2 LIMIT 1"
    )
    found = cursor.fetchone()
    if found is None:
        return
    record_id, first_line = found
    cursor.execute(
        f"SELECT MIN(stage_line) FROM {table} WHERE stage_id = %s AND stage_line > %s", [record_id, first_line]
    )
    (second_line,) = cursor.fetchone()
    cursor.execute(f"SELECT COUNT(*) FROM (SELECT 1 FROM {table} GROUP BY stage_id HAVING COUNT(*) > 1) AS d")
    (repeated,) = cursor.fetchone()
    more = f" ({repeated:,} ids appear more than once)" if repeated > 1 else ""
    raise LedgerInputError(
        f"duplicate record id {record_id!r}, already on line {first_line}{more}. Each id may appear once.",
        line=second_line,
    )


def _destination_group(cursor: Any, table: str) -> None:
    """Materialise the destination export with one row per id: ``stage_id``, ``n`` (times present), ``ref``.

    Grouped once, used three times (the join into new items, the not-eligible ids, the counts).
    """
    cursor.execute(f"DROP TABLE IF EXISTS {table}_g")
    cursor.execute(
        f"CREATE TEMP TABLE {table}_g AS "
        f"SELECT stage_id, COUNT(*) AS n, MAX(stage_ref) AS ref FROM {table} GROUP BY stage_id"
    )
    if is_postgres():
        cursor.execute(f"ANALYZE {table}_g")
    else:
        cursor.execute(f"CREATE INDEX {table}_g_id ON {table}_g (stage_id)")


def destination_grouped_sql(table: str, alias: str) -> str:
    """The materialised grouping of ``_destination_group``, under ``alias``."""
    return f"{table}_g AS {alias}"


def stage_load(cursor: Any, table: str, load: WorkItemLoad, content: bytes, index: int, of: int) -> int:
    """Decode, parse and stage one file; refuse an empty file and (but for a destination) repeated ids."""
    text = ledger_files.decode(content)
    del content  # the text is all we need from here on
    share = 60 / of

    def report(lines: int, total: int) -> None:
        percent = 1 + int(share * index + share * lines / total)
        load_progress_publish(load, "reading", percent, f"{lines:,} of about {total:,} lines read")

    rows = ledger_files.read_rows(
        text,
        kind=load.kind,
        file_format=load.format,
        id_column=load.id_column,
        options=load.options,
        file_name=load.file_name,
        progress=report,
    )
    count = _stage_fill(cursor, table, rows)
    if count == 0:
        raise LedgerInputError("the file has no records.")
    if load.kind == WorkItemLoad.Kind.DESTINATION:
        _destination_group(cursor, table)
    # A destination may hold a record twice (flagged); the population is checked as it is applied.
    if load.kind not in (WorkItemLoad.Kind.DESTINATION, WorkItemLoad.Kind.POPULATION):
        stage_refuse_duplicates(cursor, table)
    return count

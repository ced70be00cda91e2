"""Parsing a file into a temporary staging table: ``COPY`` on PostgreSQL, batched inserts on SQLite;
repeated ids refused, a destination export grouped once per id."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from django.db import DatabaseError, connection, transaction

from runs.ledger import files as ledger_files
from runs.ledger.common import SQLITE_BATCH, STAGE, load_progress_publish
from runs.ledger.files import RUNNER_STATUS_WORDS, WHITESPACE, CopyPlan, LedgerInputError, LedgerRow
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

    Grouped once, used three times by a run that has items (the join into new items, the update
    of known ones, the not-eligible ids, the counts); a fresh run joins ``destination_grouping_sql``.
    """
    cursor.execute(f"DROP TABLE IF EXISTS {table}_g")
    cursor.execute(f"CREATE TEMP TABLE {table}_g AS {destination_grouping_sql(table)}")
    if is_postgres():
        cursor.execute(f"ANALYZE {table}_g")
    else:
        cursor.execute(f"CREATE INDEX {table}_g_id ON {table}_g (stage_id)")


def destination_grouping_sql(table: str) -> str:
    """A query of the destination export staged in ``table``, one row per id: ``stage_id``, ``n``, ``ref``.

    ``n`` counts the id's lines, ``ref`` is the greatest of its references ('' when none).
    """
    return f"SELECT stage_id, COUNT(*) AS n, MAX(stage_ref) AS ref FROM {table} GROUP BY stage_id"


def destination_grouped_sql(table: str) -> str:
    """The table ``_destination_group`` materialised for the destination export staged in ``table``."""
    return f"{table}_g"


COPY_BLOCK_BYTES = 1 << 20
ASCII_WHITESPACE = "".join(c for c in WHITESPACE if c.isascii())
# The ASCII whitespace that can sit inside a line (CR and LF end lines).
_SPACE_BYTES = re.compile(b"[" + re.escape(ASCII_WHITESPACE.replace("\r", "").replace("\n", "").encode()) + b"]")


class _NotPlain(Exception):
    """The database's parse of a file differs from the row-by-row reader's: read it row by row."""


def _stage_copy(cursor: Any, table: str, plan: CopyPlan, content: bytes, report: ledger_files.Progress) -> int:
    """Stage a plain CSV file by streaming its bytes into ``COPY`` (PostgreSQL parses it); return the rows.

    The bytes after the header go in blocks of ``COPY_BLOCK_BYTES``; no row is built in Python.
    Line numbers come from an identity column (a blank or short line fails the COPY or the
    check, so every staged row is one physical line). Raises _NotPlain when the COPY fails or a
    staged value is one the row-by-row reader would change or refuse (an id or text with
    surrounding whitespace, an empty or over-long id, a status word it would map or refuse that
    is not plain ASCII); the caller rolls back to its savepoint and reads the file row by row.
    """
    import psycopg  # PostgreSQL only: the SQLite path never comes here

    named = {"stage_ref": "''", "stage_status": f"'{plan.status_default}'", "stage_skip": "''"}
    cursor.execute(f"DROP TABLE IF EXISTS {table}")
    cursor.execute(
        f"CREATE TEMP TABLE {table} (stage_line integer GENERATED BY DEFAULT AS IDENTITY "
        f"(START WITH {plan.first_line}) NOT NULL, stage_id text NOT NULL, "
        + ", ".join(f"{column} text NOT NULL DEFAULT {default}" for column, default in named.items())
        + ", stage_attributes text"
        + "".join(f", {column} text NOT NULL" for column, _ in plan.extra)
        + ")"
    )
    delimiter = "E'\\t'" if plan.delimiter == "\t" else f"'{plan.delimiter}'"
    data = memoryview(content)[plan.data_offset :]
    total = max(content.count(b"\n"), 1)
    lines = 0
    try:
        with cursor.cursor.copy(
            f"COPY {table} ({', '.join(plan.columns)}) FROM STDIN (FORMAT text, DELIMITER {delimiter})"
        ) as copy:
            for start in range(0, len(data), COPY_BLOCK_BYTES):
                block = data[start : start + COPY_BLOCK_BYTES]
                copy.write(block)
                lines += block.tobytes().count(b"\n")
                report(lines, total)
    except (DatabaseError, psycopg.Error) as exc:  # the raw cursor raises psycopg's own classes
        raise _NotPlain from exc
    ws = {"ws": WHITESPACE, "ascii_ws": ASCII_WHITESPACE}
    statuses = ("attempted", "completed", "failed")
    if "stage_status" in plan.columns:
        # Synonyms and case ("Done ", "OK") mapped as the row-by-row reader maps them; a word it
        # would refuse, or one that is not plain ASCII, stays and fails the check below.
        whens = " ".join(f"WHEN '{word}' THEN '{status}'" for word, status in RUNNER_STATUS_WORDS.items())
        cursor.execute(
            f"UPDATE {table} SET stage_status = CASE lower(btrim(stage_status, %(ascii_ws)s)) "
            f"WHEN '' THEN 'attempted' {whens} ELSE stage_status END "
            f"WHERE stage_status NOT IN {statuses} AND octet_length(stage_status) = char_length(stage_status)",
            ws,
        )
    # Only a file with some whitespace inside its lines can have a value the reader would strip.
    spaced = not content.isascii() or _SPACE_BYTES.search(content) is not None
    bad = ["stage_id = ''", "char_length(stage_id) > %(limit)s"]
    bad += ["stage_id <> btrim(stage_id, %(ws)s)"] if spaced else []
    for column in ("stage_ref", "stage_skip"):
        if column in plan.columns:
            bad += [f"char_length({column}) > %(limit)s"] + ([f"{column} <> btrim({column}, %(ws)s)"] if spaced else [])
    if "stage_status" in plan.columns:
        bad.append(f"stage_status NOT IN {statuses}")
    cursor.execute(
        f"SELECT COUNT(*), COUNT(*) FILTER (WHERE {' OR '.join(bad)}) FROM {table}",
        {**ws, "limit": ledger_files.MAX_RECORD_ID_LENGTH},
    )
    count, refused = cursor.fetchone()
    if refused:
        raise _NotPlain
    if plan.extra:
        pairs = ", ".join(f"%(name{i})s, NULLIF({column}, '')" for i, (column, _) in enumerate(plan.extra))
        attributes = f"NULLIF(jsonb_strip_nulls(jsonb_build_object({pairs}))::text, '{{}}')"
        cursor.execute(
            f"UPDATE {table} SET stage_attributes = {attributes}",
            {f"name{i}": name for i, (_, name) in enumerate(plan.extra)},
        )
    cursor.execute(f"ANALYZE {table}")  # temporary tables are never auto-analysed
    return int(count)


def stage_load(
    cursor: Any, table: str, load: WorkItemLoad, content: bytes, index: int, of: int, *, fresh: bool = False
) -> int:
    """Decode, parse and stage one file; refuse an empty file and (but for a destination) repeated ids.

    ``fresh``: the run has no items yet. Its one insert groups a destination export as it joins
    it (otherwise the grouping is materialised, ``_destination_group``), and a runner report's
    repeated ids are left to the caller: a repeat the insert joins trips the unique index, and
    the others exist only when some of the report's ids are not in the population
    (``reconciliation._apply_runner_report``), so a report of the population's ids is never grouped.

    On PostgreSQL a plain CSV file (``ledger_files.copy_plan``) is parsed by the database: its
    bytes stream into COPY and its values are checked with one scan; any doubt (a COPY error, a
    value the reader would strip, map or refuse) rolls back to a savepoint and the file is read
    row by row, as on SQLite, so both paths stage the same rows and raise the same errors.
    """
    text = ledger_files.decode(content)
    share = 60 / of

    def report(lines: int, total: int) -> None:
        percent = 1 + int(share * index + share * min(lines, total) / total)
        load_progress_publish(load, "reading", percent, f"{lines:,} of about {total:,} lines read")

    options = {"kind": load.kind, "file_format": load.format, "id_column": load.id_column, "options": load.options}
    plan = ledger_files.copy_plan(text, file_name=load.file_name, **options) if is_postgres() else None
    count = None
    if plan is not None:
        try:
            with transaction.atomic():
                count = _stage_copy(cursor, table, plan, content, report)
        except _NotPlain:
            count = None
    del content  # the text is all the row-by-row reader needs
    if count is None:
        stage_create(cursor, table)
        rows = ledger_files.read_rows(text, file_name=load.file_name, progress=report, **options)
        count = _stage_fill(cursor, table, rows)
    del text
    if count == 0:
        raise LedgerInputError("the file has no records.")
    if not fresh and load.kind == WorkItemLoad.Kind.DESTINATION:
        _destination_group(cursor, table)
    # A destination may hold a record twice (flagged); the population is checked as it is applied.
    later = [WorkItemLoad.Kind.DESTINATION, WorkItemLoad.Kind.POPULATION]
    if fresh:
        later.append(WorkItemLoad.Kind.RUNNER_REPORT)
    if load.kind not in later:
        stage_refuse_duplicates(cursor, table)
    return count

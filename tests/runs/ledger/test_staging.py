"""Staging a file: PostgreSQL's own parse of a plain CSV (COPY) stages exactly the rows, and raises exactly
the errors, of the row-by-row reader; anything it cannot promise goes row by row."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection, transaction

from runs.ledger import staging
from runs.ledger.files import LedgerInputError, copy_plan, decode, read_rows
from runs.ledger.models import WorkItemLoad

on_postgres = pytest.mark.skipif(connection.vendor != "postgresql", reason="the COPY path is PostgreSQL's")

# (kind, options, file) the database parses itself
PLAIN = [
    ("population", {}, b"record_id\nA-1\nA-2\n"),
    ("population", {}, b"record_id,skip_reason,region,tier\nA-1,,eu,gold\nA-2,test account,,\nA-3,,us,\n"),
    ("population", {}, b"record_id,region\nA-1, eu \nA-2,\xc3\xa9t\xc3\xa9\n"),
    ("runner_report", {}, b"record_id,status\nA-1,completed\nA-2,Done\nA-3,\nA-4,FAILED\nA-5, ok\n"),
    ("runner_report", {}, b"record_id;status\r\nA-1;ok\r\nA-2;sent\r\n"),
    ("runner_report", {}, b"record_id\nA-1\nA-2\n"),
    ("destination", {}, b"record_id,reference\nA-1,gw-1\nA-1,gw-1b\nB-9,\n"),
    ("destination", {}, b"A-1\nA-2\nA-3"),
    ("destination", {}, b"record_id\treference\nA-1\tgw 1\n"),
    ("destination", {"ref_column": "op"}, b"op,record_id\nx-1,A-1\n"),
]
# files the database's parse would get wrong or refuse differently: staged row by row
ROW_BY_ROW = [
    ("population", {}, b"record_id,region\n A-1 ,eu\n"),
    ("destination", {}, b"record_id,reference\nA-1\nA-2,gw\n"),
    ("population", {}, b"record_id\nA-1\n\nA-2\n"),
    ("destination", {}, b"record_id,reference\nA-1,gw-" + b"x" * 300 + b"\n"),
    ("population", {}, "record_id\nÄ-1\u00a0\n".encode()),
    ("population", {}, b"record_id\nA\\1\n"),
    ("population", {}, b'record_id\n"A-1"\n'),
]
REFUSED = [
    ("runner_report", {}, b"record_id,status\nA-1,completed\nA-2,maybe\n"),
    ("population", {}, b"record_id\nA-1,x\n"),
    ("population", {}, b"record_id\n"),
    ("population", {}, b"record_id\nA-1\n" + b"B" * 301 + b"\n"),
    ("destination", {}, b"record_id,reference\n,gw-1\n"),
    ("runner_report", {}, b"record_id,status\nA-1,\xc3\xa9chec\n"),
]


def _load(kind: str, options: dict[str, str]) -> WorkItemLoad:
    return WorkItemLoad(kind=kind, format="auto", id_column="record_id", options=options, file_name="file.csv")


def _reference(kind: str, options: dict[str, str], data: bytes) -> list[tuple[Any, ...]]:
    """The row-by-row reader's rows, attributes parsed."""
    found = read_rows(decode(data), kind=kind, file_format="auto", id_column="record_id", options=options)
    rows = [(*row[:5], json.loads(row[5]) if row[5] else None) for row in found]
    if not rows:
        raise LedgerInputError("the file has no records.")
    return rows


def _staged(kind: str, options: dict[str, str], data: bytes) -> list[tuple[Any, ...]]:
    """Stage through ``stage_load`` and read the staging table back, in line order."""
    table = staging.stage_name(kind)
    with transaction.atomic(), connection.cursor() as cursor:
        staging.stage_create(cursor, table)
        staging.stage_load(cursor, table, _load(kind, options), data, 0, 1)
        cursor.execute(
            f"SELECT stage_line, stage_id, stage_ref, stage_status, stage_skip, stage_attributes FROM {table} "
            "ORDER BY stage_line"
        )
        rows = [(*row[:5], json.loads(row[5]) if row[5] else None) for row in cursor.fetchall()]
        cursor.execute(f"DROP TABLE IF EXISTS {table}")
        cursor.execute(f"DROP TABLE IF EXISTS {table}_g")
    return rows


@pytest.fixture
def row_by_row(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records the tables staged row by row (``_stage_fill``)."""
    calls: list[str] = []
    fill = staging._stage_fill

    def recording(cursor: Any, table: str, rows: Any) -> int:
        calls.append(table)
        return fill(cursor, table, rows)

    monkeypatch.setattr(staging, "_stage_fill", recording)
    return calls


@pytest.mark.parametrize(("kind", "options", "data"), PLAIN)
def test_a_plain_csv_has_a_copy_plan(kind: str, options: dict[str, str], data: bytes) -> None:
    assert copy_plan(decode(data), kind=kind, file_format="auto", id_column="record_id", options=options)


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        ("provider_lookup", b"record_id,found,reference\nA-1,yes,op-1\n"),
        ("population", b"record_id\nA\\1\n"),
        ("population", b'record_id\n"A-1"\n'),
        ("population", b'{"record_id": "A-1"}\n'),
        ("population", b"record_id,region,region\nA-1,eu,us\n"),
        ("population", b"invoice\nINV-1\nINV-2\n"),
    ],
)
def test_no_copy_plan_where_copy_would_read_differently(kind: str, data: bytes) -> None:
    assert copy_plan(decode(data), kind=kind, file_format="auto", id_column="record_id", options={}) is None


@on_postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("kind", "options", "data"), PLAIN)
def test_copy_stages_the_rows_of_the_reader(
    kind: str, options: dict[str, str], data: bytes, row_by_row: list[str]
) -> None:
    assert _staged(kind, options, data) == _reference(kind, options, data)
    assert row_by_row == []


@on_postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("kind", "options", "data"), ROW_BY_ROW)
def test_a_file_copy_would_read_differently_goes_row_by_row(
    kind: str, options: dict[str, str], data: bytes, row_by_row: list[str]
) -> None:
    assert _staged(kind, options, data) == _reference(kind, options, data)
    assert row_by_row == [staging.stage_name(kind)]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("kind", "options", "data"), REFUSED)
def test_a_refused_file_gets_the_readers_error_and_line(kind: str, options: dict[str, str], data: bytes) -> None:
    with pytest.raises(LedgerInputError) as expected:
        _reference(kind, options, data)
    with pytest.raises(LedgerInputError) as staged:
        _staged(kind, options, data)

    assert (staged.value.detail, staged.value.line, staged.value.column) == (
        expected.value.detail,
        expected.value.line,
        expected.value.column,
    )

"""Reading work-ledger files: header detection, the id column by name, and every refusal with its line."""

from __future__ import annotations

import codecs
import json

import pytest

from runs.ledger.files import LedgerFileTooLarge, LedgerInputError, LedgerRow, check_size, decode, read_rows


def rows(
    data: bytes, kind: str = "population", id_column: str = "record_id", fmt: str = "auto", **options: str
) -> list[LedgerRow]:
    return list(read_rows(decode(data), kind=kind, file_format=fmt, id_column=id_column, options=options))


def refusal(data: bytes, **kwargs: str) -> LedgerInputError:
    with pytest.raises(LedgerInputError) as caught:
        rows(data, **kwargs)
    return caught.value


def test_csv_header_is_detected_and_the_id_column_is_chosen_by_name() -> None:
    found = rows(b"customer,Record_ID,amount\nacme,INV-1, 10\nbeta, INV-2 ,20\n")

    assert [(r[0], r[1]) for r in found] == [(2, "INV-1"), (3, "INV-2")]
    assert json.loads(found[0][5]) == {"customer": "acme", "amount": " 10"}


def test_a_single_column_without_header_is_a_list_of_ids() -> None:
    assert [r[1] for r in rows(b"INV-1\nINV-2\n\nINV-3")] == ["INV-1", "INV-2", "INV-3"]


def test_a_single_column_with_another_header_is_an_unknown_id_column() -> None:
    error = refusal(b"invoice\nINV-1\nINV-2\n")

    assert (error.line, error.column) == (1, "record_id")
    assert "no column named 'record_id'" in error.detail and "invoice" in error.detail


def test_unknown_id_column_names_the_columns_there_are() -> None:
    error = refusal(b"id,amount\nINV-1,3\n", id_column="invoice_id")

    assert (error.line, error.column) == (1, "invoice_id")
    assert "columns: id, amount" in error.detail


def test_semicolon_and_tab_delimiters_are_detected() -> None:
    assert [r[1] for r in rows(b"record_id;amount\nINV-1;3\n")] == ["INV-1"]
    assert [r[1] for r in rows(b"record_id\tamount\nINV-1\t3\n")] == ["INV-1"]


def test_quoted_csv_takes_the_csv_module_and_keeps_line_numbers() -> None:
    found = rows(b'record_id,note\n"INV-1","a, b"\n"INV-2","multi\nline"\n"INV-3",c\n')

    assert [(r[0], r[1]) for r in found] == [(2, "INV-1"), (4, "INV-2"), (5, "INV-3")]


def test_crlf_files_are_fine() -> None:
    assert [r[1] for r in rows(b"record_id\r\nINV-1\r\nINV-2\r\n")] == ["INV-1", "INV-2"]


def test_empty_id_names_its_line_and_column() -> None:
    error = refusal(b"record_id,amount\nINV-1,1\n,2\n")

    assert (error.line, error.column) == (3, "record_id")
    assert error.detail == "Line 3, column 'record_id': the record id is empty."


def test_an_overlong_id_is_refused() -> None:
    error = refusal(b"record_id\n" + b"X" * 301 + b"\n")

    assert error.line == 2 and "301 characters" in error.detail


def test_more_values_than_header_columns_is_refused() -> None:
    error = refusal(b"record_id,amount\nINV-1,1,2\n")

    assert error.line == 2 and "delimiter" in error.detail


def test_a_bom_is_refused_on_line_one() -> None:
    error = refusal(codecs.BOM_UTF8 + b"record_id\nINV-1\n")

    assert error.line == 1 and "byte-order mark" in error.detail


def test_utf16_is_refused() -> None:
    error = refusal("record_id\nINV-1\n".encode("utf-16"))

    assert error.line == 1 and "UTF-16" in error.detail


def test_non_utf8_bytes_name_line_and_byte() -> None:
    error = refusal(b"record_id,customer\nINV-1,ok\nINV-2,Caf\xe9\n")

    assert (error.line, error.column) == (3, "byte 10")
    assert "0xe9 is not UTF-8" in error.detail


def test_nul_characters_are_refused() -> None:
    assert refusal(b"record_id\nINV-1\x00\n").line == 2


@pytest.mark.parametrize(
    ("data", "line", "ending"),
    [
        (b"record_id\r\nINV-1\r\nINV-2\nINV-3\r\n", 3, "LF"),
        (b"record_id\nINV-1\nINV-2\r\nINV-3\n", 3, "CRLF"),
    ],
)
def test_mixed_line_endings_name_the_first_odd_line(data: bytes, line: int, ending: str) -> None:
    error = refusal(data)

    assert error.line == line
    assert f"ends with {ending}" in error.detail


def test_a_lone_carriage_return_is_refused() -> None:
    assert refusal(b"record_id\rINV-1\rINV-2\r").line == 1
    assert refusal(b"record_id\nINV-1\nINV-2\rINV-3\n").line == 3


def test_size_limit() -> None:
    check_size(10, 10)
    with pytest.raises(LedgerFileTooLarge) as caught:
        check_size(11, 10)
    assert caught.value.status == 413 and "limit is 10 bytes" in caught.value.detail


def test_runner_status_words_are_normalised_and_unknown_ones_refused() -> None:
    data = b"record_id,status\nA,completed\nB,DONE\nC,failed\nD,\nE,sent\n"
    assert [r[3] for r in rows(data, kind="runner_report")] == [
        "completed",
        "completed",
        "failed",
        "attempted",
        "attempted",
    ]

    error = refusal(b"record_id,status\nA,maybe\n", kind="runner_report")
    assert (error.line, error.column) == (2, "status")


def test_runner_report_without_status_column_means_attempted() -> None:
    assert [r[3] for r in rows(b"record_id\nA\nB\n", kind="runner_report")] == ["attempted", "attempted"]


def test_an_explicitly_named_column_must_exist() -> None:
    error = refusal(b"record_id,ref\nA,1\n", kind="destination", ref_column="reference_no")

    assert (error.line, error.column) == (1, "reference_no")


def test_destination_reads_references() -> None:
    assert [(r[1], r[2]) for r in rows(b"record_id,reference\nA,gw-1\nA,gw-2\n", kind="destination")] == [
        ("A", "gw-1"),
        ("A", "gw-2"),
    ]


def test_provider_lookup_needs_a_reference_for_found_records() -> None:
    found = rows(b"record_id,found,reference\nA,yes,op-1\nB,no,\n", kind="provider_lookup")
    assert [(r[1], r[2], r[3]) for r in found] == [("A", "op-1", "found"), ("B", "", "not_found")]

    error = refusal(b"record_id,found,reference\nA,yes,\n", kind="provider_lookup")
    assert (error.line, error.column) == (2, "reference")


def test_json_lines() -> None:
    data = b'{"record_id": "A", "amount": 3}\n\n{"record_id": 7, "skip_reason": "test"}\n'
    found = rows(data)

    assert [(r[0], r[1], r[4]) for r in found] == [(1, "A", ""), (3, "7", "test")]
    assert json.loads(found[0][5]) == {"amount": 3}


@pytest.mark.parametrize(
    ("data", "line", "words"),
    [
        (b'{"record_id": "A"}\n{"id": "B"}\n', 2, "no key named 'record_id'"),
        (b'{"record_id": "A"}\n[1]\n', 2, "one JSON object"),
        (b'{"record_id": "A"}\n{"record_id": \n', 2, "not valid JSON"),
        (b'{"record_id": null}\n', 1, "string or an integer"),
    ],
)
def test_json_lines_refusals_name_the_line(data: bytes, line: int, words: str) -> None:
    error = refusal(data, fmt="jsonl")

    assert error.line == line and words in error.detail

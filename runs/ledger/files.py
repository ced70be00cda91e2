"""Reading work-ledger files: record ids (plus a few named columns) out of CSV or JSON lines.

A pure parser, like the alert parsers in ``runs/alerts/parsers/``: bytes in, rows out, no ORM. Every
refusal is a :class:`LedgerInputError` naming the line (1-based) and, where there is one, the
column, so a person can fix the file and load it again. What is refused, and why:

- a byte-order mark (UTF-8 or UTF-16): the first header would silently read ``\\ufeffrecord_id``;
- bytes that are not UTF-8, and NUL characters (PostgreSQL refuses them in text);
- mixed line endings (CRLF and LF in one file, or a lone CR): a sign of concatenated files;
- an id column that is not in the header, an empty id, an id longer than 300 characters;
- a value in a status/found column that means nothing to us;
- a file with no records at all.

Duplicate ids are found afterwards by the database (``runs.ledger``), where the set work
belongs; the destination export is the one kind where a repeat is allowed (and flagged).
"""

from __future__ import annotations

import codecs
import csv
import io
import itertools
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from handover.core.errors import DomainError

MAX_RECORD_ID_LENGTH = 300
MAX_TEXT_LENGTH = 300
DELIMITERS = (",", ";", "\t", "|")

# kind -> the optional named columns it reads, with their default names
KIND_COLUMNS: dict[str, dict[str, str]] = {
    "population": {"skip_column": "skip_reason"},
    "runner_report": {"status_column": "status"},
    "destination": {"ref_column": "reference"},
    "provider_lookup": {"found_column": "found", "ref_column": "reference"},
}
RUNNER_STATUS_WORDS = {
    "attempted": "attempted",
    "sent": "attempted",
    "started": "attempted",
    "completed": "completed",
    "complete": "completed",
    "claimed_done": "completed",
    "done": "completed",
    "succeeded": "completed",
    "success": "completed",
    "ok": "completed",
    "failed": "failed",
    "failure": "failed",
    "error": "failed",
    "rejected": "failed",
}
FOUND_WORDS = {
    "true": "found",
    "yes": "found",
    "y": "found",
    "1": "found",
    "found": "found",
    "false": "not_found",
    "no": "not_found",
    "n": "not_found",
    "0": "not_found",
    "not_found": "not_found",
    "not found": "not_found",
    "missing": "not_found",
}


class LedgerInputError(DomainError):
    """A file that cannot be loaded; ``line`` (1-based) and ``column`` point at the offending input."""

    status = 400
    type = "ledger-input"
    title = "The file cannot be loaded"

    def __init__(self, detail: str, *, line: int | None = None, column: str = "") -> None:
        where = []
        if line is not None:
            where.append(f"line {line}")
        if column:
            where.append(f"column {column!r}" if not column.startswith("byte ") else column)
        text = f"{', '.join(where).capitalize()}: {detail}" if where else detail
        super().__init__(text, errors={"file": [text]})
        self.line = line
        self.column = column


class LedgerFileTooLarge(LedgerInputError):
    """The file is over ``HANDOVER_LEDGER_MAX_UPLOAD_BYTES``."""

    status = 413
    type = "ledger-file-too-large"
    title = "The file is too large"


# One record of a file: (line, record_id, ref, status, skip_reason, attributes JSON or None).
# ``status`` is a runner status or found/not_found, by kind. Plain tuples: a million of them are
# built per file, and they go straight into COPY's write_row.
LedgerRow = tuple[int, str, str, str, str, "str | None"]

Progress = Callable[[int, int], None]


def check_size(size_bytes: int, limit_bytes: int) -> None:
    """Raise LedgerFileTooLarge when ``size_bytes`` is over ``limit_bytes``."""
    if size_bytes > limit_bytes:
        raise LedgerFileTooLarge(
            f"the file is {size_bytes:,} bytes; the limit is {limit_bytes:,} bytes "
            "(split it, or ask an admin to raise HANDOVER_LEDGER_MAX_UPLOAD_BYTES)."
        )


def _line_of(data: bytes, offset: int) -> tuple[int, int]:
    """1-based line and 1-based byte column of ``offset``."""
    line_start = data.rfind(b"\n", 0, offset) + 1
    return data.count(b"\n", 0, offset) + 1, offset - line_start + 1


def decode(data: bytes) -> str:
    """Check the bytes (BOM, UTF-8, NUL, line endings) and return the text. Raises LedgerInputError."""
    if data.startswith(codecs.BOM_UTF8):
        raise LedgerInputError(
            "the file starts with a byte-order mark (BOM). Save it as UTF-8 without BOM "
            "(in Excel: 'CSV UTF-8' adds one; choose plain 'CSV' or remove it).",
            line=1,
        )
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise LedgerInputError("the file is UTF-16 (it starts with a byte-order mark). Save it as UTF-8.", line=1)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, column = _line_of(data, exc.start)
        raise LedgerInputError(
            f"byte 0x{data[exc.start]:02x} is not UTF-8. Save the file as UTF-8.", line=line, column=f"byte {column}"
        ) from exc
    nul = text.find("\x00")
    if nul >= 0:
        raise LedgerInputError("the file contains a NUL character.", line=text.count("\n", 0, nul) + 1)
    lone_cr = re.search(rb"\r(?!\n)", data)
    if lone_cr:  # classic Mac line ends, or a stray one
        raise LedgerInputError(
            "a carriage return (CR) without a line feed: use one kind of line ending (LF or CRLF).",
            line=_line_of(data, lone_cr.start())[0],
        )
    first_lf = data.find(b"\n")
    if first_lf >= 0:
        first_is_crlf = first_lf > 0 and data[first_lf - 1] == 13
        other = re.search(rb"(?<!\r)\n" if first_is_crlf else rb"\r\n", data)
        if other:
            ending, first = ("LF", "CRLF") if first_is_crlf else ("CRLF", "LF")
            raise LedgerInputError(
                f"mixed line endings: this line ends with {ending}, the first line with {first}. "
                "Use one kind of line ending.",
                line=_line_of(data, other.start())[0],
            )
    return text


def detect_format(text: str, file_name: str = "") -> str:
    """``jsonl`` when the name says so or the first non-blank character is ``{``; else ``csv``."""
    lowered = file_name.lower()
    if lowered.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if lowered.endswith((".csv", ".tsv", ".txt")):
        return "csv"
    return "jsonl" if text.lstrip()[:1] == "{" else "csv"


def _norm(name: str) -> str:
    return name.strip().casefold()


def _id_error(record_id: str, line: int, column: str) -> LedgerInputError:
    if not record_id:
        return LedgerInputError("the record id is empty.", line=line, column=column)
    return LedgerInputError(
        f"the record id is {len(record_id)} characters long; at most {MAX_RECORD_ID_LENGTH} are allowed.",
        line=line,
        column=column,
    )


def _word(value: str, words: dict[str, str], line: int, column: str, default: str) -> str:
    found = words.get(value)
    if found is not None:
        return found
    key = value.strip().casefold()
    if not key:
        return default
    if key not in words:
        allowed = ", ".join(sorted(set(words)))
        raise LedgerInputError(f"{value.strip()!r} is not one of: {allowed}.", line=line, column=column)
    return words[key]


@dataclass
class _Columns:
    """The columns a kind reads, by name; ``explicit`` names must exist in the file."""

    id_column: str
    named: dict[str, str]
    explicit: set[str]


def _columns(kind: str, id_column: str, options: dict[str, Any]) -> _Columns:
    named: dict[str, str] = {}
    explicit: set[str] = set()
    for option, default in KIND_COLUMNS[kind].items():
        value = str(options.get(option) or "").strip()
        named[option] = value or default
        if value:
            explicit.add(option)
    return _Columns(id_column=(id_column or "record_id").strip(), named=named, explicit=explicit)


class _RowMaker:
    """Turns one record's values into a LedgerRow for a kind; the column positions are fixed up front.

    ``positions`` maps an option (``skip_column``, ``status_column``, ``ref_column``,
    ``found_column``) to its index in the values, or to its key for JSON lines.
    """

    def __init__(self, kind: str, cols: _Columns, positions: dict[str, Any]) -> None:
        self.kind = kind
        self.cols = cols
        self.skip = positions.get("skip_column")
        self.status = positions.get("status_column")
        self.ref = positions.get("ref_column")
        self.found = positions.get("found_column")

    def make(
        self, line: int, record_id: str, get: Callable[[Any], str], attributes: dict[str, Any] | None
    ) -> LedgerRow:
        if not record_id or len(record_id) > MAX_RECORD_ID_LENGTH:
            stripped = record_id.strip()
            if not stripped or len(stripped) > MAX_RECORD_ID_LENGTH:
                raise _id_error(stripped, line, self.cols.id_column)
            record_id = stripped
        elif record_id[0].isspace() or record_id[-1].isspace():
            record_id = record_id.strip()
        kind = self.kind
        if kind == "runner_report":
            status = "attempted" if self.status is None else get(self.status)
            name = self.cols.named["status_column"]
            return (line, record_id, "", _word(status, RUNNER_STATUS_WORDS, line, name, "attempted"), "", None)
        if kind == "destination":
            ref = "" if self.ref is None else get(self.ref).strip()[:MAX_TEXT_LENGTH]
            return (line, record_id, ref, "", "", None)
        if kind == "population":
            skip = "" if self.skip is None else get(self.skip).strip()[:MAX_TEXT_LENGTH]
            return (line, record_id, "", "", skip, json.dumps(attributes) if attributes else None)
        found = "found" if self.found is None else get(self.found)
        found = _word(found, FOUND_WORDS, line, self.cols.named["found_column"], "found")
        ref = "" if self.ref is None else get(self.ref).strip()[:MAX_TEXT_LENGTH]
        if found == "found" and not ref:
            raise LedgerInputError(
                "a record the provider found needs its reference (the provider's operation id).",
                line=line,
                column=self.cols.named["ref_column"],
            )
        return (line, record_id, ref, found, "", None)


def _sniff_delimiter(header_line: str) -> str:
    counts = {d: header_line.count(d) for d in DELIMITERS}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else ","


def _looks_like_header(cell: str, text: str) -> bool:
    """A single-column file's first cell is a header when it has no digit but the next values do."""
    if any(ch.isdigit() for ch in cell):
        return False
    following = [line.strip() for line in text.split("\n", 6)[1:6] if line.strip()]
    return any(any(ch.isdigit() for ch in value) for value in following)


def _csv_records(text: str, delimiter: str) -> Iterator[tuple[int, list[str]]]:
    """``(line, values)`` per physical record. Without any quote character a plain split does (fast
    path); otherwise the csv module parses quoting (and values spanning lines) strictly."""
    if '"' not in text:
        crlf = "\r\n" in text
        for number, raw in enumerate(text.split("\n"), start=1):
            if crlf and raw.endswith("\r"):
                raw = raw[:-1]
            yield number, raw.split(delimiter)
        return
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    while True:
        try:
            values = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise LedgerInputError(f"not valid CSV ({exc}).", line=reader.line_num) from exc
        yield reader.line_num, values


def _read_csv(text: str, kind: str, cols: _Columns, progress: Progress | None) -> Iterator[LedgerRow]:
    total_lines = max(text.count("\n"), 1)
    first_line = text.split("\n", 1)[0]
    records = _csv_records(text, _sniff_delimiter(first_line))
    first_record = next(records, None)
    if first_record is None:
        return
    first = first_record[1]
    header = [_norm(c) for c in first]
    wanted = _norm(cols.id_column)
    pending: list[tuple[int, list[str]]] = []
    if wanted in header:
        index_of = {name: index for index, name in reversed(list(enumerate(header)))}
        id_index = index_of[wanted]
        for option in cols.explicit:
            if _norm(cols.named[option]) not in index_of:
                raise LedgerInputError(
                    f"no column named {cols.named[option]!r} in the header (columns: {', '.join(first)}).",
                    line=1,
                    column=cols.named[option],
                )
        positions = {o: index_of[_norm(n)] for o, n in cols.named.items() if _norm(n) in index_of}
        used = {id_index, *positions.values()}
        extra = [(i, first[i].strip()) for i in range(len(first)) if i not in used] if kind == "population" else []
    elif len(first) == 1 and not cols.explicit and not _looks_like_header(first[0], text):
        # No header: a bare list of ids, one a line; line 1 is already a record.
        positions, id_index, extra, pending = {}, 0, [], [first_record]
    else:
        raise LedgerInputError(
            f"no column named {cols.id_column!r} in the header (columns: {', '.join(c.strip() for c in first)}). "
            "Choose the id column by its name in the header.",
            line=1,
            column=cols.id_column,
        )
    width = len(first)
    maker = _RowMaker(kind, cols, positions)
    for line, values in itertools.chain(pending, records):
        count = len(values)
        if count == width:
            record_id = values[id_index]
        elif count > width:
            raise LedgerInputError(
                f"{count} values, but the header has {width} columns (is the delimiter right?).", line=line
            )
        else:
            if not any(v.strip() for v in values):
                continue  # a blank line
            values = values + [""] * (width - count)
            record_id = values[id_index]
        if not record_id and not any(v.strip() for v in values):
            continue  # a blank line
        attributes = {name: values[i] for i, name in extra if values[i] != ""} if extra else None
        yield maker.make(line, record_id, values.__getitem__, attributes)
        if progress is not None and line % 50_000 == 0:
            progress(line, total_lines)


def _read_jsonl(text: str, kind: str, cols: _Columns, progress: Progress | None) -> Iterator[LedgerRow]:
    total_lines = max(text.count("\n"), 1)
    named = {cols.named[o] for o in cols.named}
    maker = _RowMaker(kind, cols, {option: name for option, name in cols.named.items()})
    for number, raw in enumerate(text.split("\n"), start=1):
        raw = raw.rstrip("\r")
        if not raw.strip():
            continue
        try:
            document = json.loads(raw)
        except ValueError as exc:
            raise LedgerInputError(f"not valid JSON ({exc.args[0]}).", line=number) from exc
        if not isinstance(document, dict):
            raise LedgerInputError("each line must be one JSON object.", line=number)
        if cols.id_column not in document:
            raise LedgerInputError(
                f"no key named {cols.id_column!r} (keys: {', '.join(sorted(document))}).",
                line=number,
                column=cols.id_column,
            )
        value = document[cols.id_column]
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise LedgerInputError("the record id must be a string or an integer.", line=number, column=cols.id_column)
        for option in cols.explicit:
            if cols.named[option] not in document:
                raise LedgerInputError(f"no key named {cols.named[option]!r}.", line=number, column=cols.named[option])

        def get(name: str, document: dict[str, Any] = document) -> str:
            found = document.get(name)
            if found is None:
                return ""
            return ("true" if found else "false") if isinstance(found, bool) else str(found)

        attributes = None
        if kind == "population":
            attributes = {k: v for k, v in document.items() if k != cols.id_column and k not in named} or None
        yield maker.make(number, str(value), get, attributes)
        if progress is not None and number % 50_000 == 0:
            progress(number, total_lines)


# Every character ``str.strip()`` removes (``str.isspace``): a value the plain-CSV fast path stages
# must not start or end with one, or the row-by-row reader would have stripped it.
WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
# Kinds a database may parse itself (``copy_plan``); provider lookups always go row by row.
COPY_KINDS = ("population", "runner_report", "destination")


@dataclass
class CopyPlan:
    """How a plain CSV file maps onto staging columns, so that PostgreSQL can parse it (``COPY`` text format).

    ``columns``: the staging column of each of the file's ``width`` columns, in file order
    (``stage_id``, ``stage_ref``, ``stage_status``, ``stage_skip``, or ``stage_c<i>`` for one
    that is only kept as a population attribute); ``extra``: ``(column, attribute name)`` of
    those; ``data_offset``: the byte offset of the first record in the file's bytes and
    ``first_line`` its 1-based line number; ``status_default``: the status of a record when the
    file has no status column.
    """

    delimiter: str
    columns: list[str]
    extra: list[tuple[str, str]]
    data_offset: int
    first_line: int
    status_default: str


def copy_plan(
    text: str, *, kind: str, file_format: str, id_column: str, options: dict[str, Any], file_name: str = ""
) -> CopyPlan | None:
    """A CopyPlan when the database's plain-text parse of the file can match ``read_rows`` exactly; else None.

    Only for CSV files of the kinds in ``COPY_KINDS`` without any quote or backslash (COPY's text
    format would read a backslash as an escape), whose header names every column asked for,
    with no column used twice and no repeated attribute name. The caller still checks every
    staged value (``stage_copy_check``) and reads the file row by row when any value is one the
    row-by-row reader would have changed or refused, so the two paths give the same rows and the
    same errors.
    """
    if kind not in COPY_KINDS:
        return None
    chosen = detect_format(text, file_name) if file_format in ("", "auto") else file_format
    if chosen != "csv" or '"' in text or "\\" in text:
        return None
    cols = _columns(kind, id_column, options)
    end = text.find("\n")
    first = text if end < 0 else text[:end]
    delimiter = _sniff_delimiter(first)
    values = (first[:-1] if first.endswith("\r") else first).split(delimiter)
    header = [_norm(c) for c in values]
    wanted = _norm(cols.id_column)
    if wanted in header:
        if end < 0:
            return None
        index_of = {name: index for index, name in reversed(list(enumerate(header)))}
        if any(_norm(cols.named[option]) not in index_of for option in cols.explicit):
            return None
        positions = {o: index_of[_norm(n)] for o, n in cols.named.items() if _norm(n) in index_of}
        positions["id"] = index_of[wanted]
        data_offset, first_line = len(first.encode()) + 1, 2
    elif len(values) == 1 and not cols.explicit and not _looks_like_header(values[0], text):
        positions, data_offset, first_line = {"id": 0}, 0, 1
    else:
        return None
    if len(set(positions.values())) != len(positions):
        return None
    names = {
        "id": "stage_id",
        "ref_column": "stage_ref",
        "status_column": "stage_status",
        "skip_column": "stage_skip",
        "found_column": "",
    }
    by_index = {index: names[option] for option, index in positions.items()}
    if "" in by_index.values():
        return None
    columns = [by_index.get(i, f"stage_c{i}") for i in range(len(values))]
    extra = [(columns[i], values[i].strip()) for i in range(len(values)) if i not in by_index]
    if kind != "population":
        extra = []
    if len({name for _, name in extra}) != len(extra):
        return None
    status_default = "attempted" if kind == "runner_report" and "status_column" not in positions else ""
    return CopyPlan(delimiter, columns, extra, data_offset, first_line, status_default)


def read_rows(
    text: str,
    *,
    kind: str,
    file_format: str,
    id_column: str,
    options: dict[str, Any],
    file_name: str = "",
    progress: Progress | None = None,
) -> Iterator[LedgerRow]:
    """Yield the records of a decoded file, in file order.

    ``kind``: population, runner_report, destination or provider_lookup (which named columns are
    read: ``KIND_COLUMNS``). ``file_format``: csv, jsonl or auto. ``id_column``: the id column's
    name (CSV header, case-insensitive; JSON key, exact); a CSV with a single column and no such
    header is read as a bare list of ids. ``options`` may name the other columns
    (``skip_column``, ``status_column``, ``ref_column``, ``found_column``); a named column must
    exist, a defaulted one is used when present. ``progress(lines_read, total_lines)`` is called
    every 50,000 lines. Raises LedgerInputError at the first bad line.
    """
    if kind not in KIND_COLUMNS:
        raise LedgerInputError(f"unknown load kind {kind!r}.")
    cols = _columns(kind, id_column, options)
    chosen = detect_format(text, file_name) if file_format in ("", "auto") else file_format
    if chosen == "jsonl":
        return _read_jsonl(text, kind, cols, progress)
    if chosen == "csv":
        return _read_csv(text, kind, cols, progress)
    raise LedgerInputError(f"unknown format {file_format!r} (csv, jsonl or auto).")


__all__ = [
    "COPY_KINDS",
    "KIND_COLUMNS",
    "WHITESPACE",
    "CopyPlan",
    "copy_plan",
    "LedgerFileTooLarge",
    "LedgerInputError",
    "LedgerRow",
    "check_size",
    "decode",
    "detect_format",
    "read_rows",
]

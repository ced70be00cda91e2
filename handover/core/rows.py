"""One helper the ingestion path's get-or-create writes share: insert a row unless its unique key is taken.

A get-or-create that reads first costs a SELECT, a SAVEPOINT, the INSERT and a RELEASE for every new
row; on PostgreSQL ``INSERT ... ON CONFLICT DO NOTHING RETURNING id`` does the same in one statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from django.db import IntegrityError, NotSupportedError, connections, router, transaction
from django.db.models import Field, Model
from django.db.models.constants import OnConflict

M = TypeVar("M", bound=Model)


def row_insert_unless_conflict(obj: Model) -> bool:
    """INSERT the unsaved ``obj`` unless a unique constraint already holds a row like it; True when inserted.

    On success ``obj`` is saved (its primary key set). On a unique conflict nothing is written and
    ``obj`` stays unsaved: the caller reads the row that holds the key. A conflict with a row another
    transaction has not committed yet waits for that transaction, as a plain INSERT would, so a
    ``False`` always means the other row is committed (or is this transaction's own). Other
    violations (CHECK, NOT NULL, foreign keys) still raise. Call inside a transaction.

    PostgreSQL: one statement, built by Django's own INSERT compiler with the conflict clause
    (``bulk_create(ignore_conflicts=True)`` would not return the id). Elsewhere (SQLite, whose
    ``INSERT OR IGNORE`` would also swallow CHECK and NOT NULL failures): a savepoint around a plain
    INSERT, rolled back on a UNIQUE failure. Like ``bulk_create``, it sends no ``pre_save`` or
    ``post_save`` signal (none is connected to the rows it writes).
    """
    model = type(obj)
    using = router.db_for_write(model, instance=obj)
    returning = model._meta.db_returning_fields
    if connections[using].vendor == "postgresql":
        rows = _insert([obj], returning, using, on_conflict=OnConflict.IGNORE)
        if not rows or rows[0] is None:  # DO NOTHING returned no row: the key is taken
            return False
    else:
        try:
            with transaction.atomic(using=using):
                rows = _insert([obj], returning, using)
        except IntegrityError as exc:
            if "UNIQUE" not in str(exc).upper():
                raise
            return False
    for value, field in zip(rows[0], returning, strict=True):
        setattr(obj, field.attname, value)
    _saved(obj, using)
    return True


def rows_insert_unless_conflict(objs: list[Model], *, match_field: str = "public_id") -> list[bool]:
    """``row_insert_unless_conflict`` for several unsaved rows of one model in ONE statement (PostgreSQL only).

    ``INSERT ... VALUES (...), (...) ON CONFLICT DO NOTHING RETURNING`` the primary key and ``match_field``
    (a unique value each object carries before it is saved, such as its ``public_id`` UUID), which maps the
    returned rows back to the objects: PostgreSQL returns only the rows it inserted, in no promised order.
    Returns, in the order of ``objs``, whether each one was inserted (its primary key then set); a row left
    out conflicted with a committed row (or an earlier one of this transaction) and stays unsaved. Like
    ``row_insert_unless_conflict``, other violations raise, a conflict with an uncommitted row waits, and no
    signal is sent. Raises ``NotSupportedError`` on another database (SQLite inserts row by row).
    """
    if not objs:
        return []
    model = type(objs[0])
    using = router.db_for_write(model, instance=objs[0])
    if connections[using].vendor != "postgresql":
        raise NotSupportedError("rows_insert_unless_conflict needs PostgreSQL's INSERT ... ON CONFLICT ... RETURNING")
    meta = model._meta
    match = meta.get_field(match_field)
    assert isinstance(match, Field), f"{match_field} is not a column of {meta.label}"
    assert meta.pk is not None
    rows = _insert(objs, [meta.pk, match], using, on_conflict=OnConflict.IGNORE)
    # one object: a refused row comes back as None (``fetch_returned_insert_columns``)
    inserted = {row[1]: row[0] for row in rows or [] if row is not None}
    result = []
    for obj in objs:
        pk = inserted.get(getattr(obj, match.attname))
        if pk is not None:
            obj.pk = pk
            _saved(obj, using)
        result.append(pk is not None)
    return result


def rows_insert(objs: list[M]) -> list[M]:
    """INSERT the unsaved ``objs`` (one model) in ONE statement and set their primary keys; returns ``objs``.

    ``QuerySet.bulk_create(objs)`` for the ingestion path's appends (attempts, timeline events, runner
    reports, deliveries): on PostgreSQL through ``_insert``'s cached statement (see there), elsewhere
    ``bulk_create`` itself. Like ``bulk_create``: no signal is sent, a related object assigned before it
    was saved is taken by its primary key (``ValueError`` when it still has none), and every violation
    raises (``IntegrityError``).
    """
    if not objs:
        return objs
    model = type(objs[0])
    using = router.db_for_write(model, instance=objs[0])
    if connections[using].vendor != "postgresql":
        return model._base_manager.using(using).bulk_create(objs)
    meta = model._meta
    assert meta.pk is not None
    for obj in objs:
        # what bulk_create calls for each row: a related row saved after it was assigned is taken by its id
        obj._prepare_related_fields_for_save(operation_name="bulk_create")  # type: ignore[attr-defined]  # noqa: SLF001
    rows = _insert(objs, [meta.pk], using)
    for obj, row in zip(objs, rows, strict=True):
        obj.pk = row[0]
        _saved(obj, using)
    return objs


# The INSERT statement of a (model, several rows, returned columns, conflict clause): built once per process.
_STATEMENTS: dict[tuple[type[Model], bool, tuple[str, ...], bool], tuple[str, list[Field[Any, Any]]] | None] = {}


def _insert(
    objs: Sequence[Model], returning: Sequence[Field[Any, Any]], using: str, *, on_conflict: OnConflict | None = None
) -> list[Any]:
    """INSERT ``objs`` (unsaved, one model) in one statement into the columns ``Model.save()`` would write for
    a new row (no auto primary key, no generated field); returns the ``returning`` columns' values per
    inserted row, in no promised order with a conflict clause (``QuerySet._insert``'s contract).

    PostgreSQL: the statement's text is built once per shape (``_statement``) and each value is what
    Django's INSERT compiler would send -- the field's ``pre_save`` (``auto_now``) and ``get_db_prep_save``
    -- without compiling the query again for every post (measured in ``bench/ingest.py``: the compiler
    was about a quarter of a single-alert post's CPU). A value that is a query expression goes through
    Django's compiler, as does a model with a field of its own SQL placeholder or a returned column that
    converts what the database gives. Other databases: Django's compiler (``QuerySet._insert``).
    """
    model = type(objs[0])
    meta = model._meta
    connection = connections[using]
    statement = (
        _statement(model, len(objs) > 1, returning, ignore_conflicts=on_conflict is not None, using=using)
        if connection.vendor == "postgresql" and on_conflict in (None, OnConflict.IGNORE)
        else None
    )
    if statement is not None:
        sql, fields = statement
        values = _values(objs, fields, connection)
        if values is not None:
            params = [list(column) for column in zip(*values, strict=True)] if len(objs) > 1 else values[0]
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                return [tuple(row) for row in cursor.fetchall()] if returning else []
    fields = [f for f in meta.local_concrete_fields if f is not meta.auto_field and not f.generated]
    manager = model._base_manager.using(using)
    rows = manager._insert(  # type: ignore[attr-defined]  # noqa: SLF001  # private QuerySet API the stubs omit
        objs, fields=fields, returning_fields=returning, using=using, on_conflict=on_conflict
    )
    return list(rows or [])


def _values(objs: Sequence[Model], fields: list[Field[Any, Any]], connection: Any) -> list[list[Any]] | None:
    """Each row's values as Django's INSERT compiler sends them (the field's ``pre_save`` with ``add``, then
    ``get_db_prep_save``); None when one is a query expression (left to the compiler)."""
    rows = []
    for obj in objs:
        row = []
        for field in fields:
            value = field.pre_save(obj, True)
            if hasattr(value, "resolve_expression"):
                return None
            row.append(field.get_db_prep_save(value, connection))
        rows.append(row)
    return rows


def _statement(
    model: type[Model], several: bool, returning: Sequence[Field[Any, Any]], *, ignore_conflicts: bool, using: str
) -> tuple[str, list[Field[Any, Any]]] | None:
    """The PostgreSQL INSERT of one row of ``model`` (``VALUES (%s, ...)``), or of ``several`` as Django 5.2's
    compiler writes them (``SQLInsertCompiler.assemble_as_sql``): ``SELECT * FROM UNNEST((%s)::type[], ...)``,
    one array per column however many rows; with the fields whose values it takes, in order.
    ``ON CONFLICT DO NOTHING`` when ``ignore_conflicts``; ``RETURNING`` the ``returning`` columns. Cached per
    shape (``_STATEMENTS``). None where Django's compiler writes something else: a field with its own SQL
    placeholder (``get_placeholder``), several rows with a column of a type PostgreSQL's arrays do not
    cover here (``connection.data_types``), or a returned column that converts what the database gives
    (``from_db_value``)."""
    key = (model, several, tuple(field.column for field in returning), ignore_conflicts)
    if key not in _STATEMENTS:
        _STATEMENTS[key] = _statement_build(model, several, returning, ignore_conflicts=ignore_conflicts, using=using)
    return _STATEMENTS[key]


def _statement_build(
    model: type[Model], several: bool, returning: Sequence[Field[Any, Any]], *, ignore_conflicts: bool, using: str
) -> tuple[str, list[Field[Any, Any]]] | None:
    meta = model._meta
    connection = connections[using]
    quote = connection.ops.quote_name
    fields = [f for f in meta.local_concrete_fields if f is not meta.auto_field and not f.generated]
    if any(hasattr(f, "get_placeholder") for f in fields) or any(hasattr(f, "from_db_value") for f in returning):
        return None
    table, columns = quote(meta.db_table), ", ".join(quote(f.column) for f in fields)
    if several:
        kinds = [(getattr(f, "target_field", f) if f.is_relation else f).get_internal_type() for f in fields]
        if not all(kind in connection.data_types for kind in kinds):
            return None
        arrays = ", ".join(f"(%s)::{(f.db_type(connection) or '').split('(')[0]}[]" for f in fields)
        sql = f"INSERT INTO {table} ({columns}) SELECT * FROM UNNEST({arrays})"
    else:
        sql = f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})"
    if ignore_conflicts:
        sql += " ON CONFLICT DO NOTHING"
    if returning:
        sql += " RETURNING " + ", ".join(quote(field.column) for field in returning)
    return sql, fields


def _saved(obj: Model, using: str) -> None:
    """Mark ``obj`` as a row of ``using`` (what ``Model.save()`` does once it has inserted it)."""
    obj._state.adding = False
    obj._state.db = using

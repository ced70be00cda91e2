"""One helper the ingestion path's get-or-create writes share: insert a row unless its unique key is taken.

A get-or-create that reads first costs a SELECT, a SAVEPOINT, the INSERT and a RELEASE for every new
row; on PostgreSQL ``INSERT ... ON CONFLICT DO NOTHING RETURNING id`` does the same in one statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import IntegrityError, NotSupportedError, connections, router, transaction
from django.db.models import Field, Model
from django.db.models.constants import OnConflict


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


def _insert(
    objs: list[Model], returning: Sequence[Field[Any, Any]], using: str, *, on_conflict: OnConflict | None = None
) -> list[Any]:
    """INSERT ``objs`` (unsaved, one model) in one statement through the INSERT compiler ``Model.save()``
    itself uses, into the columns it would write for a new row (no auto primary key, no generated
    field); returns the ``returning`` columns' values per inserted row (``QuerySet._insert``)."""
    model = type(objs[0])
    meta = model._meta
    fields = [f for f in meta.local_concrete_fields if f is not meta.auto_field and not f.generated]
    manager = model._base_manager.using(using)
    rows = manager._insert(  # type: ignore[attr-defined]  # noqa: SLF001  # private QuerySet API the stubs omit
        objs, fields=fields, returning_fields=returning, using=using, on_conflict=on_conflict
    )
    return list(rows or [])


def _saved(obj: Model, using: str) -> None:
    """Mark ``obj`` as a row of ``using`` (what ``Model.save()`` does once it has inserted it)."""
    obj._state.adding = False
    obj._state.db = using

"""One helper the ingestion path's get-or-create writes share: insert a row unless its unique key is taken.

A get-or-create that reads first costs a SELECT, a SAVEPOINT, the INSERT and a RELEASE for every new
row; on PostgreSQL ``INSERT ... ON CONFLICT DO NOTHING RETURNING id`` does the same in one statement.
"""

from __future__ import annotations

from django.db import IntegrityError, connections, router, transaction
from django.db.models import Model
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
    meta = model._meta
    # The columns Model.save() would insert for a new row (no auto primary key, no generated field),
    # through the INSERT compiler Model.save() itself uses.
    fields = [f for f in meta.local_concrete_fields if f is not meta.auto_field and not f.generated]
    returning = meta.db_returning_fields
    manager = model._base_manager.using(using)
    if connections[using].vendor == "postgresql":
        rows = manager._insert(  # type: ignore[attr-defined]  # noqa: SLF001  # private QuerySet API the stubs omit
            [obj], fields=fields, returning_fields=returning, using=using, on_conflict=OnConflict.IGNORE
        )
        if not rows or rows[0] is None:  # DO NOTHING returned no row: the key is taken
            return False
    else:
        try:
            with transaction.atomic(using=using):
                rows = manager._insert([obj], fields=fields, returning_fields=returning, using=using)  # type: ignore[attr-defined]  # noqa: SLF001
        except IntegrityError as exc:
            if "UNIQUE" not in str(exc).upper():
                raise
            return False
    for value, field in zip(rows[0], returning, strict=True):
        setattr(obj, field.attname, value)
    obj._state.adding = False
    obj._state.db = using
    return True

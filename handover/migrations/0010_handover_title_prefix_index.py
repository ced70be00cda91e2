"""An index for the handovers list's case-insensitive prefix search on the title (``title__istartswith``).

PostgreSQL: an expression index on ``UPPER(title)`` with ``text_pattern_ops`` (Django writes
``UPPER(title::text) LIKE UPPER('x%')``); SQLite: the column ``COLLATE NOCASE`` (its LIKE is
case-insensitive for ASCII). See runs' migration "prefix_search_indexes" for the reasoning.
"""

from django.db import migrations

NAME, TABLE, COLUMN = "handover_title_prefix_idx", "handover_handover", "title"


def create(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    quote = schema_editor.quote_name
    if vendor == "postgresql":
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {quote(NAME)} ON {quote(TABLE)} (UPPER({quote(COLUMN)}::text) text_pattern_ops)"
        )
    elif vendor == "sqlite":
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {quote(NAME)} ON {quote(TABLE)} ({quote(COLUMN)} COLLATE NOCASE)")


def drop(apps, schema_editor):
    if schema_editor.connection.vendor in ("postgresql", "sqlite"):
        schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(NAME)}")


class Migration(migrations.Migration):
    dependencies = [
        ('handover', '0009_problems'),
    ]

    operations = [migrations.RunPython(create, drop, elidable=False)]

"""Indexes for the lists' case-insensitive prefix search (``column__istartswith``).

Django writes ``istartswith`` as ``UPPER(column::text) LIKE UPPER('x%')`` on PostgreSQL: an
expression index on ``UPPER(column)`` with ``text_pattern_ops`` serves it whatever the database's
collation (without the operator class LIKE uses a btree only under the C collation). SQLite writes
``column LIKE 'x%' ESCAPE '\\'``, case-insensitive for ASCII, which its LIKE optimisation serves from
an index declared ``COLLATE NOCASE``. Other backends get no index (the search still works).
Queries served: the runs list's search (job key and name, tenant slug and name, execution id,
correlation reference) and "find a record" (work item record id).
"""

from django.db import migrations

# (index name, table, column)
PREFIX_INDEXES = [
    ("runs_attempt_exec_prefix_idx", "runs_attempt", "execution_id"),
    ("runs_attempt_corr_prefix_idx", "runs_attempt", "correlation_ref"),
    ("runs_job_key_prefix_idx", "runs_job", "key"),
    ("runs_job_name_prefix_idx", "runs_job", "name"),
    ("runs_tenant_slug_prefix_idx", "runs_tenant", "slug"),
    ("runs_tenant_name_prefix_idx", "runs_tenant", "name"),
    ("runs_workitem_rec_prefix_idx", "runs_workitem", "record_id"),
]


def create(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    quote = schema_editor.quote_name
    for name, table, column in PREFIX_INDEXES:
        if vendor == "postgresql":
            schema_editor.execute(
                f"CREATE INDEX IF NOT EXISTS {quote(name)} ON {quote(table)} (UPPER({quote(column)}::text) text_pattern_ops)"
            )
        elif vendor == "sqlite":
            schema_editor.execute(
                f"CREATE INDEX IF NOT EXISTS {quote(name)} ON {quote(table)} ({quote(column)} COLLATE NOCASE)"
            )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor in ("postgresql", "sqlite"):
        for name, _table, _column in PREFIX_INDEXES:
            schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(name)}")


class Migration(migrations.Migration):
    dependencies = [
        ('runs', '0024_timeline_kinds_aged_work_ownership'),
    ]

    operations = [migrations.RunPython(create, drop, elidable=False)]

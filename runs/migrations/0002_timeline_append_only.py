"""On PostgreSQL, refuse UPDATE and DELETE on the timeline: it is append-only (docs/architecture.md, "Timeline")."""

from __future__ import annotations

from django.db import migrations

FORWARD = """
CREATE OR REPLACE FUNCTION runs_timelineevent_refuse_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'the timeline is append-only: % on runs_timelineevent refused', TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER runs_timelineevent_append_only
    BEFORE UPDATE OR DELETE ON runs_timelineevent
    FOR EACH ROW EXECUTE FUNCTION runs_timelineevent_refuse_change();
"""
REVERSE = """
DROP TRIGGER IF EXISTS runs_timelineevent_append_only ON runs_timelineevent;
DROP FUNCTION IF EXISTS runs_timelineevent_refuse_change();
"""


def forward(apps, schema_editor):  # noqa: ANN001, ANN201 - migration signature
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FORWARD, params=None)


def reverse(apps, schema_editor):  # noqa: ANN001, ANN201
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(REVERSE, params=None)


class Migration(migrations.Migration):
    dependencies = [("runs", "0001_tenants_jobs_runs_alerts_timeline")]
    operations = [migrations.RunPython(forward, reverse)]

"""Redact the text stored before deterministic redaction tokens, with today's rules (rule 8 in docs/architecture.md).

Runs ``runs.audit.stored_text.stored_text_redact`` -- the service ``manage.py redact_stored_text``
runs too -- on this migration's historical models: delivery bodies, alert fields, attempt errors and
log links, timeline summaries (the PostgreSQL append-only trigger is disabled and re-enabled inside
that table's transaction), handover texts and revisions, replay reasons; one audit event; then
``VACUUM`` (SQLite, with ``secure_delete``) or ``VACUUM FULL`` of the touched tables (PostgreSQL).
VACUUM cannot run inside a transaction, hence ``atomic = False``: each table is rewritten in a
transaction of its own. Backups taken before still hold the old text (docs/security.md "Redaction").
The reverse step does nothing: redacted text cannot be restored, and the old text must not be.
"""

from __future__ import annotations

from django.db import migrations

from runs.audit.stored_text import stored_text_redact


def forward(apps, schema_editor):  # noqa: ANN001, ANN201 - migration signature
    stored_text_redact(apps=apps)


class Migration(migrations.Migration):
    atomic = False
    dependencies = [
        ("runs", "0012_audit_redaction_rerun_action"),
        ("handover", "0004_api_token_label"),
        ("approvals", "0001_replay_requests"),
    ]
    operations = [migrations.RunPython(forward, migrations.RunPython.noop, elidable=False)]

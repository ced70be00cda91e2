"""``manage.py redact_stored_text [--dry-run] [--no-vacuum]``: redact the stored text again with today's rules."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from runs.audit.stored_text import stored_text_redact


class Command(BaseCommand):
    help = (
        "Redact every stored free-text column again (delivery bodies, alerts, attempts, timeline summaries, "
        "handover texts, replay reasons) with the current redaction rules, write one audit event, then VACUUM "
        "so the old text leaves the database file (backups keep it). The migration that introduced these rules "
        "runs the same service. Prints the rows changed per model; --dry-run only counts. Safe to repeat."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="count the rows that would change; write nothing")
        parser.add_argument("--no-vacuum", action="store_true", help="skip the VACUUM after the rewrite")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            result = stored_text_redact(apps=apps, dry_run=options["dry_run"], vacuum=not options["no_vacuum"])
        except DatabaseError as exc:
            raise CommandError(f"Redacting the stored text failed: {exc}") from exc
        verb = "would change" if options["dry_run"] else "changed"
        for label, count in result.rows.items():
            self.stdout.write(f"{label}: {count} row(s) {verb}")
        self.stdout.write(f"Total: {result.total} row(s) {verb}.")
        if result.vacuumed:
            self.stdout.write("Compacted: " + ", ".join(result.vacuumed))
        elif not options["dry_run"]:
            self.stdout.write(f"Not compacted: {result.vacuum_skipped}.")

"""``manage.py purge_retention``: run the retention purge now (the hourly beat task's service)."""

from __future__ import annotations

from argparse import ArgumentParser, ArgumentTypeError
from datetime import UTC
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from runs.audit.retention import RetentionResult, retention_preview, retention_purge

# A century: far past any retention policy, and far from the calendar's start (year 1), where the
# cutoff (now - days) would overflow.
MAX_DAYS = 36500


def _days(value: str) -> int:
    """``--older-than-days``: a whole number of days, 0 to ``MAX_DAYS``."""
    try:
        days = int(value)
    except ValueError:
        raise ArgumentTypeError(f"{value!r} is not a whole number of days") from None
    if days < 0:
        raise ArgumentTypeError(f"{days} is negative: give 0 or more days")
    if days > MAX_DAYS:
        raise ArgumentTypeError(f"{days} days is more than a century: give at most {MAX_DAYS}")
    return days


class Command(BaseCommand):
    help = (
        "Blank delivery bodies and remove work-ledger items older than the retention age, as the hourly "
        "beat task does (same service, same rules: what the inbox or a handover still needs is kept). "
        "Prints the counts per kind; --dry-run only counts. Safe to repeat."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--older-than-days",
            type=_days,
            default=None,
            metavar="DAYS",
            help="purge what is older than this many days (default HANDOVER_RETENTION_DAYS; 0 purges nothing)",
        )
        parser.add_argument("--dry-run", action="store_true", help="count what would be purged; change nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        days: int = options["older_than_days"]
        if days is None:
            days = settings.HANDOVER_RETENTION_DAYS
        if days <= 0:
            self.stdout.write("Retention is off (0 days): nothing purged.")
            return
        try:
            if options["dry_run"]:
                result = retention_preview(older_than_days=days)
            else:
                result = retention_purge(older_than_days=days)
        except DatabaseError as exc:
            raise CommandError(f"Retention purge failed: {exc.__class__.__name__}: {exc}") from exc
        self.stdout.write(self._summary(result, days, dry_run=options["dry_run"]))

    @staticmethod
    def _summary(result: RetentionResult, days: int, *, dry_run: bool) -> str:
        cutoff = f"{result.cutoff.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z" if result.cutoff else "—"
        head = "Would purge" if dry_run else "Purged"
        return "\n".join(
            [
                f"{head} data older than {days} days (before {cutoff}):",
                f"  delivery bodies: {result.delivery_bodies}",
                f"  work items: {result.work_items}",
                f"  ledger files: {result.load_files}",
                f"  total: {result.total}"
                + ("" if dry_run else f" (counts on the timeline of {len(result.per_job)} jobs, and in the audit)"),
            ]
        )

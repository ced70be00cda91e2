"""``manage.py next_runs "<cron>" --tz ZONE [--after ISO] [--count N] [--dst-gap G] [--dst-overlap O]``."""

from __future__ import annotations

from argparse import ArgumentParser
from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from runs.checks.schedule.cron import DstGapPolicy, DstOverlapPolicy, ScheduleError
from runs.checks.schedule.fire_times import next_fire_times

MAX_COUNT = 10_000


class Command(BaseCommand):
    help = (
        "Print the next fire times of a cron schedule (Debian/Vixie dialect) in an IANA zone, strictly after "
        "--after: one ISO 8601 instant with its UTC offset per line, in the job's zone (or UTC with --utc). "
        "Nothing else goes to stdout. Does not depend on the server's or Django's TIME_ZONE."
    )
    # Pure schedule arithmetic: no model or database is touched, so the system checks add nothing.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("cron", help="five-field cron expression, e.g. '30 2 * * *' (quote it)")
        parser.add_argument("--tz", required=True, help="the job's IANA time zone, e.g. Europe/Berlin or UTC")
        parser.add_argument(
            "--after",
            help="ISO 8601 instant with a UTC offset or Z, e.g. 2027-03-27T02:30:00+01:00 (default: now)",
        )
        parser.add_argument("--count", type=int, default=1, help=f"how many fire times, 1-{MAX_COUNT} (default 1)")
        parser.add_argument(
            "--dst-gap",
            choices=[policy.value for policy in DstGapPolicy],
            default=DstGapPolicy.NEXT_EXISTING.value,
            help="fixed-time slot in a spring-forward gap (default next_existing, as Debian cron)",
        )
        parser.add_argument(
            "--dst-overlap",
            choices=[policy.value for policy in DstOverlapPolicy],
            default=DstOverlapPolicy.FIRST.value,
            help="fixed-time slot in a repeated hour (default first, as Debian cron)",
        )
        parser.add_argument("--utc", action="store_true", help="print instants in UTC (with a Z) instead")

    def handle(self, *args: Any, **options: Any) -> None:
        count = options["count"]
        if not 1 <= count <= MAX_COUNT:
            raise CommandError(f"--count must be between 1 and {MAX_COUNT}; got {count}.")
        after = self._parse_after(options["after"])
        try:
            fire_times = next_fire_times(
                options["cron"],
                options["tz"],
                after,
                count,
                dst_gap=options["dst_gap"],
                dst_overlap=options["dst_overlap"],
            )
        except ScheduleError as exc:
            raise CommandError(str(exc)) from exc
        for fire_time in fire_times:
            if options["utc"]:
                self.stdout.write(fire_time.astimezone(UTC).isoformat().replace("+00:00", "Z"))
            else:
                self.stdout.write(fire_time.isoformat())

    @staticmethod
    def _parse_after(value: str | None) -> datetime:
        if value is None:
            return datetime.now(UTC)
        try:
            after = datetime.fromisoformat(value.strip())
        except ValueError:
            raise CommandError(
                f"--after {value!r} is not an ISO 8601 time; write e.g. 2027-03-27T02:30:00+01:00."
            ) from None
        if after.tzinfo is None:
            # A bare local time would be read in some zone; refusing it keeps the answer server-independent.
            raise CommandError(f"--after {value!r} needs a UTC offset or Z, e.g. {value.strip()}+00:00.")
        return after

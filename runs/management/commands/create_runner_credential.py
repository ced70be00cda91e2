"""``manage.py create_runner_credential <job-key> [--label …]``: the credential alone on the last line."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from runs.catalog.models import Job
from runs.catalog.services import runner_credential_create


class Command(BaseCommand):
    help = (
        "Issue a runner credential for a job: its runner claims replays and reports their attempts with it. "
        "The credential is printed once, alone on the last line."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("job", help="the job's key, e.g. nightly-invoice-export")
        parser.add_argument("--label", default="", help="a label shown next to the credential's prefix")

    def handle(self, *args: Any, **options: Any) -> None:
        job = Job.objects.filter(key=options["job"]).first()
        if job is None:
            raise CommandError(f"No job {options['job']!r}. Register it in the admin first.")
        record, secret = runner_credential_create(job=job, label=options["label"])
        self.stdout.write(
            f"Runner credential {record.prefix}… for job {job.key}. Send it as `Authorization: Bearer <credential>` "
            "to /api/v1/replays/claimable/, /claim/ and /runner-report/; it is not shown again:"
        )
        self.stdout.write(secret)

"""``manage.py set_replay_webhook <job-key> <url> [--rotate-secret]``."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from approvals.replays.webhook_settings import replay_webhook_set
from handover.core.errors import DomainError
from runs.catalog.models import Job


class Command(BaseCommand):
    help = (
        "Set the signed webhook approved replays of a job are posted to (admins only). A new webhook, or "
        "--rotate-secret, gets a new HMAC secret; the secret is printed alone on the last line for the runner's "
        "operator. Idempotent: setting the same URL again changes nothing."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("job", help="the job's key, e.g. nightly-invoice-export")
        parser.add_argument("url", help="https URL of the job runner's replay endpoint")
        parser.add_argument("--rotate-secret", action="store_true", help="issue a new secret for an existing webhook")

    def handle(self, *args: Any, **options: Any) -> None:
        job = Job.objects.filter(key=options["job"]).first()
        if job is None:
            raise CommandError(f"No job {options['job']!r}.")
        try:
            row, secret = replay_webhook_set(job=job, url=options["url"], rotate_secret=options["rotate_secret"])
        except DomainError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(
            f"Replays of {job.key} are posted to {row.url}, signed with HMAC-SHA256 over "
            "'<X-Handover-Timestamp>.<body>' (header X-Handover-Signature: sha256=<hex>). The secret:"
        )
        self.stdout.write(secret)

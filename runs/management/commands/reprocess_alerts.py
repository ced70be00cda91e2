"""``manage.py reprocess_alerts``: re-apply unmatched alerts after a job, tenant or mapping was fixed."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from handover.core.errors import DomainError
from runs.alerts.models import Alert
from runs.alerts.triage import alert_reprocess


class Command(BaseCommand):
    help = "Reprocess unmatched original alerts (optionally of one source or job key); prints a summary."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--source", default="")
        parser.add_argument("--job", default="", help="only alerts naming this job key")
        parser.add_argument("--dry-run", action="store_true", help="list what would be reprocessed")

    def handle(self, *args: Any, **options: Any) -> None:
        alerts = Alert.objects.filter(outcome=Alert.Outcome.UNMATCHED, duplicate_of__isnull=True).order_by("id")
        if options["source"]:
            alerts = alerts.filter(source=options["source"])
        if options["job"]:
            alerts = alerts.filter(job_key=options["job"])
        outcomes: dict[str, int] = {}
        for alert in alerts.select_related("delivery__key__integration", "integration"):
            if options["dry_run"]:
                self.stdout.write(f"would reprocess {alert.public_id} ({alert.source}): {alert.reason}")
                continue
            try:
                result = alert_reprocess(alert=alert)
                outcomes[result.outcome] = outcomes.get(result.outcome, 0) + 1
            except DomainError as exc:
                self.stderr.write(f"{alert.public_id}: {exc.detail}")
        summary = ", ".join(f"{n} {o}" for o, n in sorted(outcomes.items())) or "nothing to do"
        self.stdout.write(f"reprocessed: {summary}")

"""``manage.py load_demo [--demo] [--reset-passwords]``: the demo job, tenants, users, and every fixture story,
posted for real.

It lives in the approvals app because it loads every app's story: the runs app's (``runs.demo.loader``),
then the handover's and the replays' (the runs app never imports the other apps). The demo people's
verified notification addresses are set here for the same reason.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from approvals.recurrence.demo import demo_history_load
from approvals.replays.demo import demo_replay_load
from handover.handovers.demo import demo_handover_load
from handover.notifications.services import notification_email_set_verified
from runs.demo.loader import demo_load


class Command(BaseCommand):
    help = (
        "Register the demo job, tenants, targets and users (random passwords, printed once), then post every "
        "fixture story through the real ingestion API. Runs only with DEBUG on or --demo; idempotent."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--demo", action="store_true", help="allow loading demo data with DEBUG off")
        parser.add_argument(
            "--reset-passwords",
            action="store_true",
            help="give every demo user a new random password and print them (the old ones stop working)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not (settings.DEBUG or options["demo"]):
            raise CommandError("Refusing to load demo data with DEBUG off; pass --demo if you really mean it.")
        log = lambda line: self.stdout.write(line)  # noqa: E731
        report = demo_load(
            log=log,
            reset_passwords=options["reset_passwords"],
            person_ready=lambda user, address: notification_email_set_verified(user=user, address=address),
        )
        # The handover for acme-foods' partially committed run (window 2026-11-27); once only.
        demo_handover_load(log=log)
        # The replays of dunmore-pharmacy's failed run (window 2026-11-27): one refused (rule 2), one
        # approved by both owners, claimed by a simulated runner through the API and completed; once only.
        demo_replay_load(log=log)
        # Five weeks of nightly failures of two more jobs on fixed dates, for the recurrence and
        # supportability pages; once only.
        demo_history_load(log=log)
        for source in report.skipped_sources:
            self.stdout.write(f"{source}: already loaded, nothing posted")
        for source, posts in report.posts.items():
            codes = ", ".join(str(code) for _, code in posts)
            self.stdout.write(f"{source}: posted {len(posts)} files ({codes})")
        if report.passwords:
            self.stdout.write("Demo users (passwords are shown only now):")
            for username, password in report.passwords.items():
                self.stdout.write(f"  {username:16} {password}")
        else:
            self.stdout.write(
                "Demo users already exist; their passwords were printed when they were created "
                "(manage.py load_demo --reset-passwords prints new ones)."
            )

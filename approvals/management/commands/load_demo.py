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

from approvals.recurrence.demo import DEMO_LAST_DAY, demo_history_load
from approvals.replays.demo import demo_replay_load
from handover.handovers.demo import demo_handover_load
from handover.notifications.services import notification_email_set_verified
from handover.ownership.demo import demo_ownership_load
from handover.problems.demo import demo_problem_load
from runs.demo.loader import DemoReport, demo_load


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
        verbose = options["verbosity"] >= 2
        refused_replays: list[str] = []

        def log(line: str) -> None:
            """Every step at verbosity 2; the demo's expected replay refusal is summarised either way."""
            if "refused as expected" in line:
                refused_replays.append(line.split("—", 1)[-1].strip())
            if verbose:
                self.stdout.write(line)

        report = demo_load(
            log=log,
            reset_passwords=options["reset_passwords"],
            person_ready=lambda user, address: notification_email_set_verified(user=user, address=address),
        )
        # Owners of aged work: teams and escalation owners of the demo job and one target (fixed date);
        # first, so that the demo problem can name its owning team.
        demo_ownership_load(log=log)
        # The handover for acme-foods' partially committed run (window 2026-11-27, written on fixed times);
        # once only.
        demo_handover_load(log=log)
        # The problem behind acme-foods' and ironbridge-telecom's failures of that night (a second handover,
        # drafted for ironbridge-telecom), owned by "Invoicing platform", opened on a fixed date; once only.
        demo_problem_load(log=log)
        # The replays of dunmore-pharmacy's failed run (window 2026-11-27): one refused (rule 2), one
        # approved by both owners, claimed by a simulated runner through the API and completed; once only.
        demo_replay_load(log=log)
        # Five weeks of nightly failures of two more jobs on fixed dates, with their owning teams, for the
        # recurrence and supportability pages; once only.
        demo_history_load(log=log)
        if options["verbosity"] >= 1:
            for line in summary_lines(report, refused_replays):
                self.stdout.write(line)
            self.stdout.write(history_line())
            for line in password_box(report.passwords):
                self.stdout.write(line)


def summary_lines(report: DemoReport, refused_replays: list[str]) -> list[str]:
    """What the demo posted, in one line, and the refusals the demo means to provoke, in one more.

    The fixtures ``9x-*`` include posts that break their source's format: their ``400`` answers (and
    the replay refused by rule 2) are the demo working, not errors.
    """
    posts = [(f"{source}/{name}", code) for source, answers in report.posts.items() for name, code in answers]
    if not posts:
        return ["Demo already loaded: nothing posted again."]
    accepted = sum(1 for _, code in posts if code == 202)
    refused = [name for name, code in posts if code != 202]
    lines = [f"Demo loaded: {len(posts)} fixture alerts posted through the API, {accepted} accepted."]
    parts = []
    if refused:
        parts.append(f"{len(refused)} malformed posts answered 400 ({', '.join(refused)})")
    if refused_replays:
        parts.append(f"{len(refused_replays)} replay request refused ({'; '.join(refused_replays)})")
    if parts:
        lines.append("Expected refusals (the demo shows them): " + "; ".join(parts) + ".")
    return lines


def history_line() -> str:
    """Where the demo's weeks of history are read: the period ending on its fixed last day (it is not "now")."""
    query = f"?days=30&until={DEMO_LAST_DAY.isoformat()}"
    return (
        "The demo's history is on fixed dates, read over the 30 days ending "
        f"{DEMO_LAST_DAY.isoformat()}: which jobs cost most and who owns each at /recurrence/{query}, "
        f"what their alerts lack at /supportability/{query}."
    )


def password_box(passwords: dict[str, str]) -> list[str]:
    """The demo users and their new passwords in a box (shown once), or where to get new ones."""
    if not passwords:
        return [
            "Demo users already exist; their passwords were printed when they were created "
            "(manage.py load_demo --reset-passwords prints new ones)."
        ]
    rows = [f"{username:16} {password}" for username, password in passwords.items()]
    title = "Demo users (passwords are shown only now)"
    width = max(len(title), *(len(r) for r in rows))
    return [
        "+" + "-" * (width + 2) + "+",
        f"| {title:{width}} |",
        "+" + "-" * (width + 2) + "+",
        *(f"| {r:{width}} |" for r in rows),
        "+" + "-" * (width + 2) + "+",
    ]

"""``manage.py create_api_token <username>``: a personal API token (hashed at rest, expiring, audited).

People make their own at /account/tokens/; this is for an operator setting up a script's account.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from handover.accounts.services import api_token_create, api_token_expiry_choices
from handover.core.errors import DomainError


class Command(BaseCommand):
    help = (
        "Create a personal API token for a user (audited); printed once, alone on the last line "
        "(`Authorization: Token <t>`). Not idempotent by nature: each call makes a new token."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--label", default="", help="what the token is for (at most 100 characters)")
        parser.add_argument(
            "--days",
            type=int,
            default=None,
            choices=api_token_expiry_choices(),
            help="lifetime in days (default and maximum: HANDOVER_API_TOKEN_DAYS)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"No user {options['username']!r}.")
        try:
            issued = api_token_create(user=user, label=options["label"], expires_in_days=options["days"])
        except DomainError as exc:
            raise CommandError(exc.detail) from exc
        token = issued.token
        expiry = f"{token.expiry:%Y-%m-%d}" if token.expiry else "never"
        self.stdout.write(f"Token {token.token_key}… for {user.get_username()}, expires {expiry}:")
        self.stdout.write(issued.raw)

"""``manage.py create_api_token <username>``: a personal API token (hashed at rest, expiring)."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from knox.models import AuthToken


class Command(BaseCommand):
    help = "Create a personal API token for a user; printed once, alone on the last line (`Authorization: Token <t>`)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("username")

    def handle(self, *args: Any, **options: Any) -> None:
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"No user {options['username']!r}.")
        instance, token = AuthToken.objects.create(user=user)
        self.stdout.write(f"Token {instance.token_key}… for {user.get_username()}, expires {instance.expiry:%Y-%m-%d}:")
        self.stdout.write(token)

"""``manage.py create_integration_key <source> (--tenant SLUG ... | --all-tenants) [--in-url]``."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from handover.core.errors import DomainError
from runs.alerts.parsers.registry import available_sources
from runs.catalog.models import IntegrationKey, Tenant
from runs.catalog.services import integration_get_or_create, integration_key_create, integration_key_url


class Command(BaseCommand):
    help = (
        "Issue an integration key for a source (creating the integration with default settings, or adding "
        "a key to the existing one). The key is printed once, alone on the last line; with --in-url a URL key "
        "is issued instead and the full ingestion address carrying it is printed alone on the last line."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("source", help="source slug, e.g. generic, alertmanager, pagerduty")
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--tenant", action="append", default=[], help="bind the key to this tenant (repeatable)")
        group.add_argument("--all-tenants", action="store_true", help="bind the key to every tenant (explicit)")
        parser.add_argument("--integration", default="", help="integration name (default: the source slug)")
        parser.add_argument("--label", default="", help="a label shown next to the key prefix")
        parser.add_argument(
            "--in-url",
            action="store_true",
            help="issue a URL key (for senders that cannot set headers) and print the full address carrying it",
        )
        parser.add_argument(
            "--base-url", default="", help="the address senders reach Handover at (default: HANDOVER_BASE_URL)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        source = options["source"]
        if source not in available_sources():
            raise CommandError(f"Unknown source {source!r}; choose one of: {', '.join(available_sources())}.")
        tenants = []
        for slug in options["tenant"]:
            tenant = Tenant.objects.filter(slug_key=slug.casefold()).first()
            if tenant is None:
                raise CommandError(f"No tenant {slug!r}. Create it in the admin first.")
            tenants.append(tenant)
        try:
            integration = integration_get_or_create(source=source, name=options["integration"])
            issued = integration_key_create(
                integration=integration,
                tenants=tenants,
                all_tenants=options["all_tenants"],
                label=options["label"],
                kind=IntegrationKey.Kind.URL if options["in_url"] else IntegrationKey.Kind.HEADER,
            )
        except DomainError as exc:
            raise CommandError(exc.detail) from exc
        binding = "all tenants" if options["all_tenants"] else ", ".join(t.slug for t in tenants)
        if options["in_url"]:
            self.stdout.write(
                f"URL key {issued.record.prefix}… for integration {integration.name!r} ({source}), bound to "
                f"{binding}. Point the sender at this address (the key is in it; it is not shown again):"
            )
            url = integration_key_url(source=source, key=issued.key, base_url=options["base_url"] or None)
            self.stdout.write(url)
            return
        self.stdout.write(
            f"Key {issued.record.prefix}… for integration {integration.name!r} ({source}), bound to {binding}. "
            "Send it as `Authorization: Bearer <key>`; it is not shown again:"
        )
        self.stdout.write(issued.key)

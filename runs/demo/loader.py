"""The demo: register what the fixture stories need, then post them through the real HTTP API.

The fixtures (``runs/demo/alerts/<source>/``) are the project's own copy of the shared stories;
each source tells the same failed night for its own tenant (``alerts/README.md``).
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import Client

from handover.core.people import Person
from runs.alerts.models import Delivery
from runs.alerts.parsers.registry import available_sources
from runs.catalog.services import (
    integration_get_or_create,
    integration_key_create,
    job_get_or_create,
    job_target_get_or_create,
    role_grant,
    tenant_get_or_create,
)

ALERTS_DIR = Path(__file__).resolve().parent / "alerts"
DEMO_JOB: dict[str, Any] = {
    "key": "nightly-invoice-export",
    "defaults": {
        "name": "Nightly invoice export",
        "schedule": "0 2 * * *",
        "timezone": "Europe/Berlin",
        "grace_seconds": 1800,
        "window_alignment": "day",
        "expected_output": "One invoice per billable order of the window, delivered to the ledger gateway.",
        "verification": "Query the ledger gateway's invoice export for the window (read-only).",
    },
}
UNICODE_TENANT = "café-lumière-münchen"
# source -> the tenants its story uses (alerts/README.md); every source also sees the Unicode tenant.
SOURCE_TENANTS = {
    "generic": ["acme-foods", "borealis-retail", "cedar-health"],
    "alertmanager": ["dunmore-pharmacy"],
    "grafana": ["elmwood-books"],
    "eventbridge-scheduler": ["fjord-freight"],
    "airflow": ["glenrock-energy"],
    "pagerduty": ["harbor-dental"],
    "kubernetes": ["ironbridge-telecom"],
}
DEMO_USERS = {
    # username: (tenant roles, job roles, is_admin)
    "support": (["support"], [], False),
    "business-owner": (["business_owner"], [], False),
    "tech-owner": ([], ["technical_owner"], False),
    "auditor": (["auditor"], [], False),
    "admin": ([], [], True),
}


@dataclass
class DemoReport:
    """What ``demo_load`` did: new users with their one-time passwords, and posts per source."""

    passwords: dict[str, str] = field(default_factory=dict)
    posts: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    skipped_sources: list[str] = field(default_factory=list)


def body_for(source: str, path: Path, key: str) -> bytes:
    raw = path.read_bytes()
    if source == "pagerduty":  # PagerDuty senders carry the key in the body
        try:
            document = json.loads(raw)
        except ValueError:
            return raw
        if isinstance(document, dict) and "routing_key" in document:
            document["routing_key"] = key
            return json.dumps(document, ensure_ascii=False).encode()
    return raw


# The demo people's addresses: a reserved example domain (RFC 2606), so no mail leaves for a real person;
# in development the console mail backend prints them in the server log.
DEMO_EMAIL_DOMAIN = "handover.example"


def demo_load(
    *,
    log: Callable[[str], None] = lambda _: None,
    reset_passwords: bool = False,
    person_ready: Callable[[Person, str], object] = lambda _user, _address: None,
) -> DemoReport:
    """Register the demo job, tenants, targets, integrations and users; post every story once.

    Idempotent: a source whose demo integration already has deliveries is not posted again, and
    existing users keep their passwords (only new users get one, returned once) unless
    ``reset_passwords``, which gives every demo user a new random password (returned once). A demo
    user without an e-mail address is passed to ``person_ready`` with ``<username>@handover.example``
    (``manage.py load_demo`` gives it a verified notification address there: the runs app does not
    import the notifications). Side effects: rows through the services, and HTTP posts through
    Django's test client to the real endpoint.
    """
    report = DemoReport()
    with transaction.atomic():
        job, _ = job_get_or_create(key=DEMO_JOB["key"], defaults=DEMO_JOB["defaults"])
        unicode_tenant, _ = tenant_get_or_create(slug=UNICODE_TENANT, name="Café Lumière München")
        all_tenants = [unicode_tenant]
        for tenants in SOURCE_TENANTS.values():
            for slug in tenants:
                tenant, _ = tenant_get_or_create(slug=slug, name=slug.replace("-", " ").title())
                job_target_get_or_create(job=job, tenant=tenant, environment="prod")
                all_tenants.append(tenant)
        User = get_user_model()
        for username, (tenant_roles, job_roles, is_admin) in DEMO_USERS.items():
            user = User.objects.filter(username=username).first()
            if user is None:
                password = secrets.token_urlsafe(12)
                user = User.objects.create_user(
                    username=username, password=password, is_staff=is_admin, is_superuser=is_admin
                )
                report.passwords[username] = password
            elif reset_passwords:
                password = secrets.token_urlsafe(12)
                user.set_password(password)
                user.save(update_fields=["password"])
                report.passwords[username] = password
            if not user.email:
                person_ready(user, f"{username}@{DEMO_EMAIL_DOMAIN}")
            for tenant in all_tenants:
                for role in tenant_roles:
                    role_grant(user=user, role=role, obj=tenant)
            for role in job_roles:
                role_grant(user=user, role=role, obj=job)

    client = Client(SERVER_NAME="localhost")
    # The 9x fixtures break their source's format on purpose: Django's request log would print each
    # of their 400 answers as a warning; the report (and ``manage.py load_demo``) summarises them instead.
    request_log = logging.getLogger("django.request")
    level = request_log.level
    request_log.setLevel(logging.ERROR)
    try:
        _post_fixtures(client, report, log)
    finally:
        request_log.setLevel(level)

    # The work ledger of acme-foods' failed run (window 2026-11-27): every outcome kind; once only.
    demo_ledger_load(log=log)
    return report


def _post_fixtures(client: Client, report: DemoReport, log: Callable[[str], None]) -> None:
    """Post every source's fixture stories through the real ingestion endpoint, once per source."""
    for source in available_sources():
        folder = ALERTS_DIR / source
        if not folder.is_dir():
            continue
        integration = integration_get_or_create(source=source)
        if Delivery.objects.filter(integration=integration, key__label="demo").exists():
            report.skipped_sources.append(source)
            continue
        key_tenants = [tenant_get_or_create(slug=s)[0] for s in SOURCE_TENANTS.get(source, [])]
        key_tenants.append(tenant_get_or_create(slug=UNICODE_TENANT)[0])
        issued = integration_key_create(integration=integration, tenants=key_tenants, label="demo")
        report.posts[source] = []
        for path in sorted(folder.glob("*.json")):
            response = client.post(
                f"/api/v1/alerts/{source}/",
                data=body_for(source, path, issued.key),
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {issued.key}",
            )
            report.posts[source].append((path.name, response.status_code))
            log(f"  {source}/{path.name}: {response.status_code}")


LEDGER_DIR = Path(__file__).resolve().parent / "ledger"
LEDGER_TENANT = "acme-foods"
LEDGER_WINDOW_START = datetime(2026, 11, 26, 23, 0, tzinfo=UTC)  # 2026-11-27 00:00 Europe/Berlin


def demo_ledger_load(*, log: Callable[[str], None] = lambda _: None) -> bool:
    """Give the acme-foods run of 2026-11-27 its demo ledger (``runs/demo/ledger/README.md``).

    Loads through the services as the demo ``support`` person: population, runner report and
    destination export together, then the provider lookup as a bulk verification. Idempotent: a
    run that already has a committed load is left alone. Returns whether anything was loaded.
    """
    from runs.attempts.models import Run
    from runs.ledger.loads import LoadFile, work_item_loads_create
    from runs.ledger.models import WorkItemLoad

    run = Run.objects.filter(
        job__key=DEMO_JOB["key"], tenant__slug=LEDGER_TENANT, environment="prod", window_start=LEDGER_WINDOW_START
    ).first()
    person = get_user_model().objects.filter(username="support").first()
    if run is None or person is None:
        log("  ledger: the acme-foods run of 2026-11-27 or the support person is missing; skipped")
        return False
    if WorkItemLoad.objects.filter(run=run, status=WorkItemLoad.Status.COMMITTED).exists():
        log("  ledger: already loaded")
        return False

    def upload(kind: str, name: str) -> LoadFile:
        return LoadFile(kind=kind, content=(LEDGER_DIR / name).read_bytes(), file_name=name)

    work_item_loads_create(
        actor=person,
        run=run,
        files=[
            upload("population", "population.csv"),
            upload("runner_report", "runner-report.csv"),
            upload("destination", "destination.csv"),
        ],
    )
    work_item_loads_create(actor=person, run=run, files=[upload("provider_lookup", "provider-lookup.csv")])
    run.refresh_from_db()
    log(
        f"  ledger: {run.eligible_count} eligible, {run.completed_count} completed, {run.unresolved_count} "
        f"unresolved, {run.possible_duplicate_count} possible duplicates"
    )
    return True


__all__ = ["DemoReport", "demo_ledger_load", "demo_load"]

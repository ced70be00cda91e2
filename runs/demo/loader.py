"""The demo: register what the fixture stories need, then post them through the real HTTP API.

The fixtures (``runs/demo/alerts/<source>/``) are the project's own copy of the shared stories;
each source tells the same failed night for its own tenant (``alerts/README.md``).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import Client

from runs.ingest import available_sources
from runs.models import Delivery
from runs.services import (
    integration_get_or_create,
    integration_key_create,
    job_get_or_create,
    job_target_get_or_create,
    role_grant,
    tenant_get_or_create,
)

ALERTS_DIR = Path(__file__).resolve().parent / "alerts"
DEMO_JOB = {
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


def _body_for(source: str, path: Path, key: str) -> bytes:
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


def demo_load(*, log: Callable[[str], None] = lambda _: None) -> DemoReport:
    """Register the demo job, tenants, targets, integrations and users; post every story once.

    Idempotent: a source whose demo integration already has deliveries is not posted again, and
    existing users keep their passwords (only new users get one, returned once). Side effects:
    rows through the services, and HTTP posts through Django's test client to the real endpoint.
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
            for tenant in all_tenants:
                for role in tenant_roles:
                    role_grant(user=user, role=role, obj=tenant)
            for role in job_roles:
                role_grant(user=user, role=role, obj=job)

    client = Client(SERVER_NAME="localhost")
    for source in available_sources():
        folder = ALERTS_DIR / source
        if not folder.is_dir():
            continue
        integration = integration_get_or_create(source=source)
        if Delivery.objects.filter(integration=integration, key__label="demo").exists():
            report.skipped_sources.append(source)
            continue
        tenants = [tenant_get_or_create(slug=s)[0] for s in SOURCE_TENANTS.get(source, [])]
        tenants.append(tenant_get_or_create(slug=UNICODE_TENANT)[0])
        issued = integration_key_create(integration=integration, tenants=tenants, label="demo")
        report.posts[source] = []
        for path in sorted(folder.glob("*.json")):
            response = client.post(
                f"/api/v1/alerts/{source}/",
                data=_body_for(source, path, issued.key),
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {issued.key}",
            )
            report.posts[source].append((path.name, response.status_code))
            log(f"  {source}/{path.name}: {response.status_code}")

    # The handover for acme-foods' partially committed run (window 2026-11-27); once only.
    from handover.demo import demo_handover_load

    demo_handover_load(log=log)
    return report


__all__ = ["DemoReport", "demo_load"]

"""Shared fixtures: fast test settings, the demo world the fixture stories need, keys and posting."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, connection
from django.test import Client

from runs.catalog.models import Integration, Job, Tenant
from runs.catalog.services import (
    integration_get_or_create,
    integration_key_create,
    job_get_or_create,
    job_target_get_or_create,
    tenant_get_or_create,
)

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "runs" / "demo" / "alerts"
STORY_TENANTS = [
    "acme-foods",
    "borealis-retail",
    "cedar-health",
    "dunmore-pharmacy",
    "elmwood-books",
    "fjord-freight",
    "glenrock-energy",
    "harbor-dental",
    "ironbridge-telecom",
]
UNICODE_TENANT = "café-lumière-münchen"


def pytest_configure(config: pytest.Config) -> None:
    # Django's default hasher costs ~0.3 s a check; manifest storage needs collectstatic
    # (docs/production.md, "Toolchain facts").
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Rate limits high in tests: concurrency tests post in bursts (a rate-limit test sets its own).
    settings.HANDOVER_INGEST_RATE_LIMIT = 1_000_000
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture
def django_assert_max_num_queries(
    django_assert_max_num_queries: Callable[..., Any], django_db_blocker: Any
) -> Callable[..., Any]:
    """pytest-django's query budget, with the per-process lookup caches warmed first.

    A web process looks each model's ContentType, and each permission's ContentType for guardian's
    ``get_objects_for_user``, up once and keeps it; a test that runs alone starts with those caches
    cold and would count lookups a warm process never makes, so a budget would pass or fail with
    the test order.
    """
    from django.apps import apps
    from django.contrib.auth.models import Permission
    from django.contrib.contenttypes.models import ContentType

    # guardian keeps its content-type cache behind a private lru_cache and offers no public warm-up
    from guardian.shortcuts import _get_ct_cached  # noqa: PLC2701

    with django_db_blocker.unblock():
        ContentType.objects.get_for_models(*apps.get_models())
        for app_label, codename in Permission.objects.values_list("content_type__app_label", "codename"):
            _get_ct_cached(app_label, codename)
    return django_assert_max_num_queries


@pytest.fixture
def in_process_connections() -> Iterator[None]:
    """Requests served in-process (schemathesis over the WSGI app) keep the test's own connection.

    Django closes "old" connections when a request starts and finishes; inside the test's
    transaction on PostgreSQL that would close the test's own connection (docs/production.md, "Toolchain facts").
    """
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    try:
        yield
    finally:
        for signal in (request_started, request_finished):
            signal.connect(close_old_connections)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Print the figures suites leave on ``config.handover_summary_lines`` (e.g. the fuzzer's case count)."""
    for line in getattr(config, "handover_summary_lines", []):
        terminalreporter.write_line(line)


def is_postgres() -> bool:
    return connection.vendor == "postgresql"


def fixture_path(source: str, name: str) -> Path:
    """The project's own copy of a fixture file, kept under runs/demo/alerts/."""
    return FIXTURES / source / name


def fixture_files(source: str) -> list[Path]:
    """A source's fixture files in post order."""
    return sorted((FIXTURES / source).glob("*.json"))


# The story job's schedule (alerts/README.md): daily at 02:00 Berlin, windows of a day.
STORY_JOB_DEFAULTS = {
    "schedule": "0 2 * * *",
    "timezone": "Europe/Berlin",
    "grace_seconds": 1800,
    "window_alignment": "day",
}


@pytest.fixture
def story_job(db: None) -> Job:
    """The job every fixture story is about (alerts/README.md)."""
    job, _ = job_get_or_create(
        key="nightly-invoice-export",
        defaults=STORY_JOB_DEFAULTS,
    )
    return job


@pytest.fixture
def story_tenants(story_job: Job) -> dict[str, Tenant]:
    """Every story tenant with a prod target, plus the Unicode tenant without one."""
    tenants = {}
    for slug in STORY_TENANTS:
        tenant, _ = tenant_get_or_create(slug=slug)
        job_target_get_or_create(job=story_job, tenant=tenant, environment="prod")
        tenants[slug] = tenant
    tenants[UNICODE_TENANT], _ = tenant_get_or_create(slug=UNICODE_TENANT)
    return tenants


@pytest.fixture
def make_key(db: None) -> Callable[..., str]:
    """Issue an integration key: ``make_key(source, tenants=[...])`` or ``make_key(source, all_tenants=True)``."""

    def _make(source: str, tenants: Iterable[Tenant] = (), all_tenants: bool = False, name: str = "") -> str:
        integration = integration_get_or_create(source=source, name=name)
        return integration_key_create(integration=integration, tenants=tenants, all_tenants=all_tenants).key

    return _make


@pytest.fixture
def api_client() -> Client:
    return Client()


PostAlert = Callable[..., Any]


@pytest.fixture
def post_alert(api_client: Client) -> PostAlert:
    """``post_alert(source, body, key)`` -> response; ``body`` may be bytes, a dict or a fixture Path."""

    def _post(source: str, body: bytes | dict[str, Any] | Path, key: str | None, **extra: Any) -> Any:
        if isinstance(body, Path):
            body = body.read_bytes()
        elif isinstance(body, dict):
            body = json.dumps(body).encode()
        headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"} if key else {}
        return api_client.post(
            f"/api/v1/alerts/{source}/", data=body, content_type="application/json", **headers, **extra
        )

    return _post


__all__ = ["Integration", "fixture_files", "fixture_path", "is_postgres"]

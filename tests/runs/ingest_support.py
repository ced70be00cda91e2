"""What ingestion tests share: the story's generic alert and a custom integration reading one row per record."""

from __future__ import annotations

import uuid
from typing import Any

from runs.catalog.models import Integration, IntegrationKey
from runs.catalog.services import integration_get_or_create, integration_key_create


def story_alert(**extra: Any) -> dict[str, Any]:
    """A generic (``handover.alert/v1``) failure of the story job for acme-foods in prod, a new execution
    each call unless ``execution_id`` is given; ``extra`` adds or replaces fields."""
    return {
        "schema": "handover.alert/v1",
        "scheduled_for": "2026-11-28T02:00:00+01:00",
        "job": "nightly-invoice-export",
        "tenant": "acme-foods",
        "environment": "prod",
        "execution_id": f"exec-{uuid.uuid4().hex[:8]}",
        "status": "failed",
        "window_start": "2026-11-27T00:00:00+01:00",
        "window_end": "2026-11-28T00:00:00+01:00",
        **extra,
    }


def row_mapping(*, fields: dict[str, str] | None = None, status_map: dict[str, str] | None = None) -> dict[str, Any]:
    """A custom mapping reading one record per row (``job``, ``tenant``, ``run_id``, ``state``,
    ``scheduled``; prod by default), with ``fields`` added and ``status_map`` (default ``fail``)."""
    return {
        "records": "@",
        "fields": {
            "job_key": "job",
            "tenant": "tenant",
            "execution_id": "run_id",
            "status": "state",
            "scheduled_for": "scheduled",
            **(fields or {}),
        },
        "status_map": status_map or {"fail": "failed"},
        "defaults": {"environment": "prod"},
    }


def custom_integration_with(name: str, mapping: dict[str, Any]) -> Integration:
    """A custom integration called ``name`` reading with ``mapping`` (no key)."""
    integration = integration_get_or_create(source="custom", name=name)
    integration.settings = {"mapping": mapping}
    integration.save()
    return integration


def custom_with_url_key(name: str, mapping: dict[str, Any]) -> tuple[Integration, str]:
    """A custom integration called ``name`` with ``mapping``, and a URL key to it for every tenant."""
    integration = custom_integration_with(name, mapping)
    key = integration_key_create(integration=integration, all_tenants=True, kind=IntegrationKey.Kind.URL).key
    return integration, key

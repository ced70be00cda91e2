"""Source adapters: one pure parser module per source (``runs/alerts/parsers/<source>.py``), found by slug."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from runs.alerts.parsers.base import settings_in_force

# slug -> module name. A source is listed once its parser exists.
_MODULES = {
    "generic": "runs.alerts.parsers.generic",
    "alertmanager": "runs.alerts.parsers.alertmanager",
    "grafana": "runs.alerts.parsers.grafana",
    "eventbridge-scheduler": "runs.alerts.parsers.eventbridge_scheduler",
    "airflow": "runs.alerts.parsers.airflow",
    "pagerduty": "runs.alerts.parsers.pagerduty",
    "kubernetes": "runs.alerts.parsers.kubernetes",
    # any other format, mapped by each integration's own configuration (JMESPath; docs/custom-integrations.md)
    "custom": "runs.alerts.parsers.custom.parser",
}


def available_sources() -> list[str]:
    """The slugs of every source with a parser, in a stable order."""
    return list(_MODULES)


def get_adapter(source: str) -> ModuleType | None:
    """Return the parser module for ``source``, or None when there is no such adapter."""
    name = _MODULES.get(source)
    if name is None:
        return None
    return importlib.import_module(name)


def source_default_settings(source: str) -> dict[str, Any]:
    """The conventions ``source``'s adapter reads when an integration sets nothing: a copy of its
    ``DEFAULT_SETTINGS`` (documented per source in docs/integrations/<source>.md); ``{}`` for a source
    without an adapter, or an adapter that has none."""
    return dict(getattr(get_adapter(source), "DEFAULT_SETTINGS", None) or {})


def integration_settings_in_force(integration: Any) -> tuple[dict[str, Any], list[str]]:
    """The settings ``integration`` (anything with ``source`` and ``settings``) is read with, and the
    sentences naming each setting that was not (``base.settings_in_force``: a value of the wrong shape is
    left out and named, never read as its default without a word). The one call for receiving,
    reprocessing, the integration page and the API."""
    return settings_in_force(source_default_settings(integration.source), integration.settings)

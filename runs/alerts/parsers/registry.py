"""Source adapters: one pure parser module per source (``runs/alerts/parsers/<source>.py``), found by slug."""

from __future__ import annotations

import importlib
from types import ModuleType

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

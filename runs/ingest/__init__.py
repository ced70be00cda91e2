"""Source adapters: one pure parser module per source (``runs/ingest/<source>.py``), found by slug."""

from __future__ import annotations

import importlib
from types import ModuleType

# slug -> module name. A source is listed once its parser exists.
_MODULES = {
    "generic": "runs.ingest.generic",
    "alertmanager": "runs.ingest.alertmanager",
    "grafana": "runs.ingest.grafana",
    "eventbridge-scheduler": "runs.ingest.eventbridge_scheduler",
    "airflow": "runs.ingest.airflow",
    "pagerduty": "runs.ingest.pagerduty",
    "kubernetes": "runs.ingest.kubernetes",
    # any other format, mapped by each integration's own configuration (JMESPath; issue 9)
    "custom": "runs.ingest.custom",
}


def available_sources() -> list[str]:
    """The slugs whose parser module can be imported, in a stable order."""
    return [slug for slug in _MODULES if get_adapter(slug) is not None]


def get_adapter(source: str) -> ModuleType | None:
    """Return the parser module for ``source``, or None when there is no such adapter."""
    name = _MODULES.get(source)
    if name is None:
        return None
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None
        raise

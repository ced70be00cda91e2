"""The runs app's HTTP API, split by resource (STYLE.md §1 growth rule)."""

from __future__ import annotations

from runs.api.alerts import AlertViewSet
from runs.api.checks import NextRunCheckViewSet
from runs.api.ingest import AlertIngestView
from runs.api.integrations import IntegrationViewSet
from runs.api.runs import RunViewSet

__all__ = ["AlertIngestView", "AlertViewSet", "IntegrationViewSet", "NextRunCheckViewSet", "RunViewSet"]

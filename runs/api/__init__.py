"""The runs app's HTTP API, split by resource (STYLE.md §1 growth rule)."""

from __future__ import annotations

from runs.api.alerts import AlertViewSet
from runs.api.checks import NextRunCheckViewSet
from runs.api.ingest import AlertIngestView
from runs.api.integrations import IntegrationViewSet
from runs.api.runs import RunViewSet
from runs.api.workitems import (
    RunFailureClassConfirmView,
    RunLedgerView,
    WorkItemChangeListView,
    WorkItemChangeView,
    WorkItemListView,
    WorkItemLoadDetailView,
    WorkItemLoadListCreateView,
    WorkItemLoadRetryView,
    WorkItemSearchView,
    WorkItemVerifyView,
)

__all__ = [
    "AlertIngestView",
    "AlertViewSet",
    "IntegrationViewSet",
    "NextRunCheckViewSet",
    "RunFailureClassConfirmView",
    "RunLedgerView",
    "RunViewSet",
    "WorkItemChangeListView",
    "WorkItemChangeView",
    "WorkItemListView",
    "WorkItemLoadDetailView",
    "WorkItemLoadListCreateView",
    "WorkItemLoadRetryView",
    "WorkItemSearchView",
    "WorkItemVerifyView",
]

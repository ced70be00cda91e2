"""The approvals app's HTTP API, split by who calls it (STYLE.md §1 growth rule)."""

from __future__ import annotations

from approvals.api.replays import ReplayRequestViewSet
from approvals.api.runner import ReplayClaimableView, ReplayClaimView, ReplayRunnerReportView

__all__ = ["ReplayClaimView", "ReplayClaimableView", "ReplayRequestViewSet", "ReplayRunnerReportView"]

"""The handover app's HTTP API, split by resource (STYLE.md §1 growth rule)."""

from __future__ import annotations

from handover.api.handovers import HandoverViewSet, MarkdownRenderer
from handover.api.jobs import JobPauseView, JobResumeView
from handover.api.tokens import ApiTokenViewSet

__all__ = ["ApiTokenViewSet", "HandoverViewSet", "JobPauseView", "JobResumeView", "MarkdownRenderer"]

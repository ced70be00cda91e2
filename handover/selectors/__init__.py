"""Reads of the handover app, split by sub-domain (STYLE.md §1 growth rule) and re-exported here."""

from __future__ import annotations

from handover.selectors.attention import AttentionItem, attention_sections
from handover.selectors.evidence import JobEvidence, RunEvidence, handover_evidence, job_repeat_safety
from handover.selectors.handovers import (
    handover_for_run,
    handover_get,
    handover_list,
    handover_may_write,
    handover_revision_list,
    handover_visibility_filter,
    job_may_pause,
    run_get_brief,
    runs_may_write,
)

__all__ = [
    "AttentionItem",
    "JobEvidence",
    "RunEvidence",
    "attention_sections",
    "handover_evidence",
    "handover_for_run",
    "handover_get",
    "handover_list",
    "handover_may_write",
    "handover_revision_list",
    "handover_visibility_filter",
    "job_may_pause",
    "job_repeat_safety",
    "run_get_brief",
    "runs_may_write",
]

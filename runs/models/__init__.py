"""Models of the runs app, split by sub-domain (STYLE.md §1 growth rule) and re-exported here."""

from __future__ import annotations

from runs.models.audit import AuditEvent
from runs.models.checks import NextRunCheck
from runs.models.core import (
    Alert,
    Attempt,
    AuthFailureCounter,
    Delivery,
    Integration,
    IntegrationKey,
    Job,
    JobTarget,
    Run,
    RunnerCredential,
    RunnerReport,
    SideEffect,
    Tenant,
    TimelineEvent,
    normalise_slug,
)
from runs.models.heartbeats import Heartbeat
from runs.models.ledger import WorkItem, WorkItemChange, WorkItemLoad

__all__ = [
    "Alert",
    "AuditEvent",
    "Attempt",
    "AuthFailureCounter",
    "Delivery",
    "Heartbeat",
    "Integration",
    "IntegrationKey",
    "Job",
    "JobTarget",
    "NextRunCheck",
    "Run",
    "RunnerCredential",
    "RunnerReport",
    "SideEffect",
    "Tenant",
    "TimelineEvent",
    "WorkItem",
    "WorkItemChange",
    "WorkItemLoad",
    "normalise_slug",
]

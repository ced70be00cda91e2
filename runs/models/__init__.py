"""Models of the runs app, gathered for Django's registry (they live in the slices)."""

from __future__ import annotations

from runs.alerts.models import Alert, AuthFailureCounter, Delivery, RefusedRequestCount
from runs.attempts.models import Attempt, Run, RunnerReport
from runs.audit.models import AuditEvent
from runs.catalog.models import (
    Integration,
    IntegrationKey,
    Job,
    JobTarget,
    RunnerCredential,
    SideEffect,
    Tenant,
    normalise_slug,
)
from runs.checks.models import MissedStreak, NextRunCheck
from runs.health.models import Heartbeat
from runs.ledger.models import WorkItem, WorkItemChange, WorkItemLoad
from runs.timeline.models import TimelineEvent

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
    "MissedStreak",
    "NextRunCheck",
    "RefusedRequestCount",
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

"""The timeline: the append-only chronology of a job's runs, attempts and decisions."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from handover.core.models import choices_check
from runs.alerts.models import Alert
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Integration, Job, Tenant


class _TimelineEventActorKind(models.TextChoices):
    PERSON = "person", "Person"
    INTEGRATION = "integration", "Integration"
    SYSTEM = "system", "System"


class TimelineEvent(models.Model):
    """The append-only chronology. Never edited or deleted (a PostgreSQL trigger refuses both).

    ``job`` is required; tenant, run and attempt are null for job-level events (a pause).
    ``occurred_at`` is when the thing happened (per the source), ``recorded_at`` when we wrote it.
    """

    ActorKind = _TimelineEventActorKind

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    job = models.ForeignKey(Job, on_delete=models.PROTECT, related_name="timeline")
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.PROTECT, related_name="timeline")
    attempt = models.ForeignKey(Attempt, null=True, blank=True, on_delete=models.PROTECT, related_name="timeline")
    alert = models.ForeignKey(Alert, null=True, blank=True, on_delete=models.PROTECT, related_name="timeline")
    kind = models.CharField(max_length=60)
    occurred_at = models.DateTimeField()
    recorded_at = models.DateTimeField()
    actor_kind = models.CharField(max_length=20, choices=ActorKind.choices)
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    actor_integration = models.ForeignKey(
        Integration, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    summary = models.CharField(max_length=500)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            choices_check("runs_timelineevent_actor_valid", "actor_kind", _TimelineEventActorKind),
            models.CheckConstraint(
                condition=~Q(actor_kind="person") | Q(actor_user__isnull=False),
                name="runs_timelineevent_person_actor",
                violation_error_code="actor_required",
            ),
        ]
        indexes = [
            models.Index(fields=["run", "occurred_at"], name="runs_event_run_idx"),
            models.Index(fields=["job", "occurred_at"], name="runs_event_job_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.occurred_at:%Y-%m-%d %H:%M:%S}Z {self.kind}: {self.summary}"

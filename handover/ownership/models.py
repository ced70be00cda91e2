"""Ownership of aged work: who owns a job (or one of its targets) when its work ages, and the reminder
ladder's record of what was sent (docs/ownership.md).

The rows live on the handover side, not on ``runs.Job``: a team is a notification slice model, and the
``runs`` app never imports the handover app (docs/architecture.md "Layout rules"), so the one-to-one
rows point at the job and the target instead of the other way round.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from handover.core.models import TimeStampedModel, choices_check
from handover.notifications.models import Team
from runs.catalog.models import Job, JobTarget


class _AgedWorkKind(models.TextChoices):
    FAILED_RUN = "failed_run", "Failed run with no handover"
    STALLED_HANDOVER = "stalled_handover", "Handover not progressing"
    UNRESOLVED_LEDGER = "unresolved_ledger", "Work ledger unresolved"
    OVERDUE_CHECK = "overdue_check", "Next-run check overdue"


class JobOwnership(TimeStampedModel):
    """A job's owning team and escalation owner (a person); either may be empty ("no owner").

    A target's own ownership (``TargetOwnership``) overrides these field by field. Set by admins and
    the job's technical owners (``runs.permissions.may_manage_job_ownership``).
    """

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="+")
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="owned_jobs")
    escalation_owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    set_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    set_at = models.DateTimeField(help_text="when the ownership was last set (UTC)")

    def __str__(self) -> str:
        return f"{self.job_id}: {self.team or 'no team'} / {self.escalation_owner or 'no escalation owner'}"


class TargetOwnership(TimeStampedModel):
    """A target's own owning team and escalation owner; an empty field falls back to the job's."""

    target = models.OneToOneField(JobTarget, on_delete=models.CASCADE, related_name="+")
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="owned_targets")
    escalation_owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    set_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    set_at = models.DateTimeField(help_text="when the ownership was last set (UTC)")

    def __str__(self) -> str:
        return f"{self.target_id}: {self.team or 'no team'} / {self.escalation_owner or 'no escalation owner'}"


class AgedWorkEscalation(models.Model):
    """One step of the reminder ladder sent for one aged item, once.

    The item is (``kind``, ``subject``: the public id of the run, handover or next-run check) and the
    episode's ``since`` (when it started to age: a handover that progresses and stalls again starts a
    new ladder). Unique on (kind, subject, since, step), so two overlapping sweeps send a step once.
    ``team`` and ``escalation_owner`` are whom it was addressed to at the time.
    """

    Kind = _AgedWorkKind

    kind = models.CharField(max_length=30, choices=Kind.choices)
    subject = models.UUIDField(help_text="public id of the run, handover or next-run check")
    since = models.DateTimeField(help_text="when the item started to age (UTC)")
    step = models.PositiveSmallIntegerField(help_text="1-based index into HANDOVER_AGED_REMINDER_STEPS_SECONDS")
    step_seconds = models.PositiveIntegerField(help_text="the step's age, in seconds")
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="+")
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    escalation_owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    told_count = models.PositiveIntegerField(default=0, help_text="people notified")
    sent_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "subject", "since", "step"],
                name="ownership_agedworkescalation_once",
                violation_error_code="duplicate",
            ),
            choices_check("ownership_agedworkescalation_kind_valid", "kind", _AgedWorkKind),
            models.CheckConstraint(
                condition=Q(step__gte=1), name="ownership_agedworkescalation_step", violation_error_code="step"
            ),
        ]
        indexes = [
            # the aged-work lists: the latest step sent per item
            models.Index(fields=["subject", "since"], name="ownership_escalation_subj_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.subject} step {self.step}"

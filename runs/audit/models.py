"""The audit trail of site administration: role grants, key changes, admin edits, retention purges,
stored text redacted again; and refused replay requests and approvals (they did not happen, so they
are not on a run's timeline).

Separate from the timeline, which is the chronology of jobs and runs: an audit event need not
belong to a job (a key bound to all tenants, a person's account). Append-only: written by
``runs.audit.services`` only, read-only in the admin, and on PostgreSQL a trigger refuses UPDATE
and DELETE (migration ``0006``).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from handover.core.models import choices_check
from runs.catalog.models import Job, Tenant


class _AuditEventAction(models.TextChoices):
    ROLE_GRANT = "role_grant", "Role granted"
    ROLE_REVOKE = "role_revoke", "Role revoked"
    GROUP_CHANGE = "group_change", "Group membership changed"
    KEY_CREATE = "key_create", "Integration key created"
    KEY_ROTATE = "key_rotate", "Integration key rotated"
    KEY_REVOKE = "key_revoke", "Integration key revoked"
    RUNNER_CREDENTIAL_CREATE = "runner_credential_create", "Runner credential issued"
    RUNNER_CREDENTIAL_REVOKE = "runner_credential_revoke", "Runner credential revoked"
    API_TOKEN_CREATE = "api_token_create", "Personal API token created"
    API_TOKEN_REVOKE = "api_token_revoke", "Personal API token revoked"
    INTEGRATION_UPDATE = "integration_update", "Integration settings changed"
    ADMIN_EDIT = "admin_edit", "Admin edit"
    RETENTION_PURGE = "retention_purge", "Retention purge"
    REDACTION_RERUN = "redaction_rerun", "Stored text redacted again"
    REPLAY_REFUSED = "replay_refused", "Replay request or approval refused"


class AuditEvent(models.Model):
    """One administrative act: who (``actor``, null for the system), when, what, on which objects.

    ``tenants`` are the tenants the act concerns (an auditor of any of them may read it);
    ``is_all_tenants`` marks acts that concern every tenant (a key bound to all tenants). ``job`` is
    set for acts on a job (a technical owner grant). ``subject`` is the person whose roles changed.
    ``data`` holds the details (never a secret: keys appear by prefix only).
    """

    Action = _AuditEventAction

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    occurred_at = models.DateTimeField()
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True, help_text="the actor's username when it happened")
    action = models.CharField(max_length=30, choices=Action.choices)
    summary = models.CharField(max_length=500)
    subject = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    tenants = models.ManyToManyField(Tenant, blank=True, related_name="+")
    is_all_tenants = models.BooleanField(default=False)
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    object_type = models.CharField(max_length=100, blank=True, help_text="app_label.model of the object acted on")
    object_ref = models.CharField(max_length=200, blank=True, help_text="its public id, prefix or primary key")
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            choices_check("runs_auditevent_action_valid", "action", _AuditEventAction),
            models.CheckConstraint(
                condition=~Q(summary=""), name="runs_auditevent_summary_set", violation_error_code="required"
            ),
        ]
        indexes = [
            # the audit page: newest first
            models.Index(fields=["-occurred_at", "-id"], name="runs_audit_newest_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.occurred_at:%Y-%m-%d %H:%M:%S}Z {self.action}: {self.summary}"

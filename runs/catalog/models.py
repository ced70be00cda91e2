"""Tenants, jobs, their side effects and targets, integrations, integration keys and runner credentials."""

from __future__ import annotations

import re
import unicodedata
import uuid
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from handover.core.models import TimeStampedModel, choices_check, validate_time_zone
from runs.checks.schedule.cron import alignment_problem, cron_problem, dst_both_problem, timezone_problem

# An environment is a plain slug (``prod``, ``staging``): the pattern and length the API documents for
# every ``environment`` it answers (Run and JobTarget store it in a SlugField of this length).
ENVIRONMENT_MAX_LENGTH = 50
ENVIRONMENT_PATTERN = r"^[-a-zA-Z0-9_]+$"
_ENVIRONMENT_RE = re.compile(r"[-a-zA-Z0-9_]+")


def environment_is_valid(value: object) -> bool:
    """Whether ``value`` may be stored as an environment: ASCII letters, digits, ``-`` and ``_``, 1 to 50 long.

    Every write path that stores an environment checks it (ingestion refuses a record whose environment
    fails it), so an answer never breaks the documented pattern ``ENVIRONMENT_PATTERN``.
    """
    return (
        isinstance(value, str)
        and 0 < len(value) <= ENVIRONMENT_MAX_LENGTH
        and _ENVIRONMENT_RE.fullmatch(value) is not None
    )


def normalise_slug(value: str) -> str:
    """NFC-normalise a tenant slug (Unicode allowed); its casefolded form is the unique key."""
    return unicodedata.normalize("NFC", value.strip())


def schedule_validate(*, job: Job, target: JobTarget | None = None) -> None:
    """Check the schedule in force for ``job`` (all its saved targets) or for one ``target`` of it.

    What is checked, on the job's values with each target's overrides laid over them: the cron
    (cronsim's own message for a bad field; "can never fire" for ``0 0 30 2 *``), the IANA zone, a
    window alignment no coarser than the shortest gap of the schedule, and the DST overlap policy
    ``both`` only with the alignment ``none`` or ``hour``. Called by ``Job.clean`` and
    ``JobTarget.clean``, so every save path that validates (admin forms, ``job_get_or_create``,
    ``job_target_get_or_create``, the demo loader) refuses the same schedules.

    Raises Django's ValidationError keyed by the model fields at fault (``schedule``, ``timezone``,
    ``window_alignment``, ``dst_overlap_policy``; for a target ``schedule_override``,
    ``timezone_override``, ``dst_overlap_override``); an existing target's override that the job's
    new alignment does not fit is reported on ``window_alignment``, naming the target.
    """
    errors: dict[str, list[str]] = {}

    def add(field: str, message: str | None) -> None:
        if message:
            errors.setdefault(field, []).append(message)

    job_cron_problem = cron_problem(job.schedule)
    if target is None:
        add("schedule", job_cron_problem)
        add("timezone", timezone_problem(job.timezone))
        if job_cron_problem is None:
            add("window_alignment", alignment_problem(job.schedule, job.window_alignment))
        add("dst_overlap_policy", dst_both_problem(job.dst_overlap_policy, job.window_alignment))
        targets = list(job.targets.select_related("tenant")) if job.pk else []
        for existing in targets:
            existing.job = job  # the values being saved, not the stored ones
            try:
                schedule_validate(job=job, target=existing)
            except ValidationError as exc:
                for messages in exc.message_dict.values():
                    for message in messages:
                        add("window_alignment", f"Target {existing}: {message}")
    else:
        label = {"schedule": "schedule_override", "timezone": "timezone_override"}
        if target.schedule_override:
            problem = cron_problem(target.schedule_override)
            add(label["schedule"], problem)
            if problem is None:
                add(label["schedule"], alignment_problem(target.schedule_override, job.window_alignment))
        if target.timezone_override:
            add(label["timezone"], timezone_problem(target.timezone_override))
        if target.dst_overlap_override:
            add("dst_overlap_override", dst_both_problem(target.dst_overlap_override, job.window_alignment))
    if errors:
        raise ValidationError(errors)


class Tenant(TimeStampedModel):
    """The client whose data a run processes. ``slug`` is NFC; ``slug_key`` (casefolded) is unique."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    slug = models.CharField(max_length=100)
    slug_key = models.CharField(max_length=100, unique=True, editable=False, help_text="casefold(NFC(slug))")
    name = models.CharField(max_length=200)

    class Meta:
        permissions = [
            ("act_as_support", "Support: triage, evidence, handovers, replay requests"),
            ("act_as_business_owner", "Business owner: approve the business side of replays"),
            ("act_as_auditor", "Auditor: read everything of this tenant"),
        ]

    def save(self, *args: object, **kwargs: object) -> None:
        self.slug = normalise_slug(self.slug)
        self.slug_key = self.slug.casefold()
        super().save(*args, **kwargs)  # type: ignore[arg-type]

    def __str__(self) -> str:
        return self.slug


class _JobDstGap(models.TextChoices):
    NEXT_EXISTING = "next_existing", "Run at the next existing time (Debian cron, Dagster)"
    SKIP = "skip", "Skip the slot (EventBridge Scheduler, Kubernetes)"
    SHIFT = "shift", "Shift by the gap length"


class _JobDstOverlap(models.TextChoices):
    FIRST = "first", "First occurrence (Debian cron)"
    SECOND = "second", "Second occurrence (Dagster)"
    BOTH = "both", "Both occurrences"


class _JobWindowAlignment(models.TextChoices):
    NONE = "none", "None"
    HOUR = "hour", "Hour"
    DAY = "day", "Day"
    MONTH = "month", "Month"


class _JobMissedRunPolicy(models.TextChoices):
    CATCH_UP_ALL = "catch_up_all", "Catch up every missed slot"
    LATEST_ONLY = "latest_only", "Run only the latest missed slot"
    EXPIRE_AFTER = "expire_after", "Expire missed slots after a duration"


class _JobOverlapPolicy(models.TextChoices):
    SKIP = "skip", "Skip"
    QUEUE = "queue", "Queue"
    REPLACE = "replace", "Replace"
    ALLOW = "allow", "Allow"


class Job(TimeStampedModel):
    """A scheduled job definition, identified by its stable ``key`` (``nightly-invoice-export``)."""

    DstGap = _JobDstGap
    DstOverlap = _JobDstOverlap
    WindowAlignment = _JobWindowAlignment
    MissedRunPolicy = _JobMissedRunPolicy
    OverlapPolicy = _JobOverlapPolicy

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    key = models.SlugField(max_length=150, unique=True, allow_unicode=True)
    name = models.CharField(max_length=200, blank=True)
    schedule = models.CharField(max_length=200, help_text="cron expression (Debian/Vixie dialect)")
    timezone = models.CharField(max_length=64, default="UTC", validators=[validate_time_zone])
    dst_gap_policy = models.CharField(max_length=20, choices=DstGap.choices, default=DstGap.NEXT_EXISTING)
    dst_overlap_policy = models.CharField(max_length=20, choices=DstOverlap.choices, default=DstOverlap.FIRST)
    grace_seconds = models.PositiveIntegerField(default=1800)
    window_alignment = models.CharField(max_length=10, choices=WindowAlignment.choices, default=WindowAlignment.NONE)
    missed_run_policy = models.CharField(
        max_length=20, choices=MissedRunPolicy.choices, default=MissedRunPolicy.CATCH_UP_ALL
    )
    missed_run_expire_after_seconds = models.PositiveIntegerField(null=True, blank=True)
    overlap_policy = models.CharField(max_length=10, choices=OverlapPolicy.choices, default=OverlapPolicy.ALLOW)
    early_tolerance_seconds = models.PositiveIntegerField(
        default=60, help_text="seconds before a fire time a report still belongs to it (capped at a quarter interval)"
    )
    starting_deadline_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="seconds after a fire time a start still belongs to it (empty: no deadline)"
    )
    active_from = models.DateTimeField(null=True, blank=True, help_text="no slot before this instant")
    expected_output = models.TextField(blank=True, help_text="what a successful run produces")
    verification = models.TextField(blank=True, help_text="how to verify it in the authoritative destination")
    paused_at = models.DateTimeField(null=True, blank=True)
    paused_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    pause_reason = models.TextField(blank=True)
    resumed_at = models.DateTimeField(null=True, blank=True, help_text="when its last pause ended")

    class Meta:
        permissions = [("act_as_technical_owner", "Technical owner: classify repeat safety, approve technically")]
        constraints = [
            choices_check("runs_job_dst_gap_valid", "dst_gap_policy", _JobDstGap),
            choices_check("runs_job_dst_overlap_valid", "dst_overlap_policy", _JobDstOverlap),
            choices_check("runs_job_alignment_valid", "window_alignment", _JobWindowAlignment),
            choices_check("runs_job_missed_valid", "missed_run_policy", _JobMissedRunPolicy),
            choices_check("runs_job_overlap_valid", "overlap_policy", _JobOverlapPolicy),
            models.CheckConstraint(
                condition=Q(paused_at__isnull=True) | ~Q(pause_reason=""),
                name="runs_job_pause_has_reason",
                violation_error_code="pause_reason_required",
            ),
        ]

    def __str__(self) -> str:
        return self.key

    def clean(self) -> None:
        """The schedule in force, for the job and each of its saved targets (``schedule_validate``)."""
        super().clean()
        schedule_validate(job=self)


class _SideEffectRepeatSafety(models.TextChoices):
    IDEMPOTENT = "idempotent", "Idempotent"
    IDEMPOTENT_WITH_KEY = "idempotent_with_key", "Idempotent with a key"
    NOT_IDEMPOTENT = "not_idempotent", "Not idempotent"
    UNKNOWN = "unknown", "Unknown"


class SideEffect(TimeStampedModel):
    """Something a job does in the world, with its repeat safety and the evidence for it."""

    RepeatSafety = _SideEffectRepeatSafety

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="side_effects")
    description = models.CharField(max_length=300)
    repeat_safety = models.CharField(max_length=30, choices=RepeatSafety.choices, default=RepeatSafety.UNKNOWN)
    evidence = models.TextField(blank=True)

    class Meta:
        constraints = [choices_check("runs_sideeffect_safety_valid", "repeat_safety", _SideEffectRepeatSafety)]

    def __str__(self) -> str:
        return f"{self.job.key}: {self.description}"


class JobTarget(TimeStampedModel):
    """A (job, tenant, environment) the job runs for, with optional schedule overrides."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    job = models.ForeignKey(Job, on_delete=models.PROTECT, related_name="targets")
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="targets")
    environment = models.SlugField(max_length=50, default="prod")
    schedule_override = models.CharField(max_length=200, blank=True)
    timezone_override = models.CharField(max_length=64, blank=True)
    dst_gap_override = models.CharField(max_length=20, choices=Job.DstGap.choices, blank=True)
    dst_overlap_override = models.CharField(max_length=20, choices=Job.DstOverlap.choices, blank=True)
    reports_successes = models.BooleanField(default=True)
    is_active = models.BooleanField(default=True)
    active_from = models.DateTimeField(null=True, blank=True, help_text="no slot before this instant")
    # A target's pause (its tenant's part of the job; runs/catalog/pause.py): no replay is dispatched for
    # it and the missed-run sweep skips it; fire times before ``resumed_at`` are never counted missed.
    paused_at = models.DateTimeField(null=True, blank=True)
    paused_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    pause_reason = models.TextField(blank=True)
    resumed_at = models.DateTimeField(null=True, blank=True, help_text="when its last pause ended")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["job", "tenant", "environment"],
                name="runs_jobtarget_unique",
                violation_error_code="duplicate_target",
            ),
            models.CheckConstraint(
                condition=Q(paused_at__isnull=True) | ~Q(pause_reason=""),
                name="runs_jobtarget_pause_has_reason",
                violation_error_code="pause_reason_required",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.job.key} / {self.tenant.slug} / {self.environment}"

    def clean(self) -> None:
        """The target's overrides against its job's schedule and alignment (``schedule_validate``)."""
        super().clean()
        if self.job_id is not None:
            schedule_validate(job=self.job, target=self)


class Integration(TimeStampedModel):
    """A monitoring system posting alerts: a source adapter plus declarative settings.

    ``settings`` is laid over the adapter's ``DEFAULT_SETTINGS`` (where the tenant, environment and
    job key come from; defaults such as ``default_tenant``).
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    source = models.SlugField(max_length=50)
    name = models.CharField(max_length=100, unique=True)
    settings = models.JSONField(default=dict, blank=True)
    is_active = models.BooleanField(default=True)
    refused_post_count = models.PositiveIntegerField(
        default=0,
        help_text="requests refused that named this integration's key (another source, signature, rate, GET)",
    )

    def __str__(self) -> str:
        return self.name


class _IntegrationKeyKind(models.TextChoices):
    HEADER = "header", "Header key (Authorization: Bearer)"
    URL = "url", "URL key (in the ingestion address)"


def key_unrevoked_at(when: datetime) -> Q:
    """The keys not revoked at ``when`` (aware): never revoked, or revoked later -- a rotated key's grace
    period, which ``integration_key_revoke`` cuts short by moving its time to now. The one spelling of
    the rule (the ingest path's raw key-state read, ``runs.catalog.authentication``, says it in SQL)."""
    return Q(revoked_at__isnull=True) | Q(revoked_at__gt=when)


class IntegrationKey(TimeStampedModel):
    """A secret a monitoring system authenticates with: shown once, stored as SHA-256.

    Bound to one integration and to a list of tenants; ``all_tenants`` only by an admin's explicit choice.
    ``kind``: a ``header`` key is accepted only in ``Authorization: Bearer`` (or PagerDuty's
    ``routing_key``); a ``url`` key -- for senders that cannot set headers -- only as the path segment
    of ``/api/v1/alerts/<source>/k/<key>/`` (docs/integrations/transport.md). A key never works as the
    other kind, so a header key never ends up in an access log.
    """

    Kind = _IntegrationKeyKind

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    integration = models.ForeignKey(Integration, on_delete=models.PROTECT, related_name="keys")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.HEADER)
    label = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, db_index=True, help_text="first characters, for lookup and display")
    secret_hash = models.CharField(max_length=64, help_text="hex SHA-256 of the whole key")
    tenants = models.ManyToManyField(Tenant, blank=True, related_name="integration_keys")
    all_tenants = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [choices_check("runs_integrationkey_kind_valid", "kind", _IntegrationKeyKind)]

    def __str__(self) -> str:
        return f"{self.integration.name} {self.prefix}…"


class RunnerCredential(TimeStampedModel):
    """A job runner's secret: claims replays and reports their attempts for one job only."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    job = models.ForeignKey(Job, on_delete=models.PROTECT, related_name="runner_credentials")
    label = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, db_index=True)
    secret_hash = models.CharField(max_length=64)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.job.key} runner {self.prefix}…"

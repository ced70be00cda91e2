"""Deliveries (one authenticated post each), the alerts parsed out of them, and the counters of refused posts."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from handover.core.models import TimeStampedModel, choices_check
from runs.alerts.parsers.base import AlertKind
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Integration, IntegrationKey


class AuthFailureCounter(models.Model):
    """Unauthenticated ingestion posts are not stored, only counted (per source slug)."""

    source = models.CharField(max_length=50, unique=True)
    count = models.PositiveBigIntegerField(default=0)
    last_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.source}: {self.count}"


class _RefusedReason(models.TextChoices):
    NO_KEY = "no_key", "No key"
    WRONG_KEY = "wrong_key", "Wrong key (unknown, revoked, of another kind or another source)"
    BAD_SIGNATURE = "bad_signature", "Bad signature"
    RATE_LIMITED = "rate_limited", "Rate-limited"
    METHOD_NOT_ALLOWED = "method_not_allowed", "GET not enabled for the integration"


class RefusedRequestCount(models.Model):
    """Refused ingestion requests, counted per (integration or source, reason, network, hour); no rows per post.

    ``integration`` is set when the key named one (a bad signature, a rate limit, a key of another
    source), else only ``source`` (the address posted to) is known. ``network`` is the client's /24
    (IPv4) or /64 (IPv6), or ``*`` once ``REFUSED_NETWORKS_PER_HOUR`` networks were counted for the
    source in that hour (the cap: a scan from many addresses adds one row, not thousands). ``hour``
    is the UTC hour the posts fell in; rows are kept 30 days (``runs.alerts.refusals``).
    """

    Reason = _RefusedReason

    source = models.SlugField(max_length=50)
    integration = models.ForeignKey(
        Integration, null=True, blank=True, on_delete=models.CASCADE, related_name="refused_request_counts"
    )
    reason = models.CharField(max_length=30, choices=Reason.choices)
    network = models.CharField(max_length=50, help_text="the client's /24 or /64, or * past the hourly cap")
    hour = models.DateTimeField(help_text="start of the UTC hour counted")
    count = models.PositiveIntegerField(default=0)
    first_at = models.DateTimeField()
    last_at = models.DateTimeField()

    class Meta:
        constraints = [
            choices_check("runs_refused_reason_valid", "reason", _RefusedReason),
            models.UniqueConstraint(
                fields=["integration", "reason", "network", "hour"],
                condition=Q(integration__isnull=False),
                name="runs_refused_integration_unique",
                violation_error_code="duplicate",
            ),
            models.UniqueConstraint(
                fields=["source", "reason", "network", "hour"],
                condition=Q(integration__isnull=True),
                name="runs_refused_source_unique",
                violation_error_code="duplicate",
            ),
        ]
        indexes = [
            # the source's page, the needs-attention section and the 30-day pruning
            models.Index(fields=["source", "-hour"], name="runs_refused_source_idx"),
            models.Index(fields=["hour"], name="runs_refused_hour_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.source} {self.reason} {self.network} {self.hour:%Y-%m-%d %H}h: {self.count}"


class _DeliveryOutcome(models.TextChoices):
    RECEIVED = "received", "Received (not parsed yet)"
    PROCESSED = "processed", "Processed"
    REJECTED = "rejected", "Rejected"
    FAILED = "failed", "Failed (its processing kept failing)"


class Delivery(TimeStampedModel):
    """One authenticated HTTP post to an ingestion endpoint, stored before anything is parsed.

    ``body`` is the body as text (decoded by its declared charset, else its byte order mark, else as
    UTF-8; what a text column cannot hold escaped) with secrets redacted; ``size_bytes`` and ``sha256``
    describe the bytes as received (computed before decoding and redaction). A processing that fails
    leaves it ``received`` with ``try_count``, ``last_error`` and ``next_try_at`` for the sweep, which
    stores it ``failed`` after a few tries (``runs.alerts.receive.delivery_sweep_received``).
    """

    Outcome = _DeliveryOutcome

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    integration = models.ForeignKey(Integration, on_delete=models.PROTECT, related_name="deliveries")
    key = models.ForeignKey(IntegrationKey, on_delete=models.PROTECT, related_name="deliveries")
    received_at = models.DateTimeField()
    content_type = models.CharField(max_length=200, blank=True)
    size_bytes = models.PositiveBigIntegerField(help_text="size of the body as received, in bytes")
    sha256 = models.CharField(max_length=64)
    body = models.TextField(help_text="raw body, redacted; an oversized body keeps its first 64 KiB")
    is_body_truncated = models.BooleanField(default=False)
    outcome = models.CharField(max_length=20, choices=Outcome.choices, default=Outcome.RECEIVED)
    reason = models.TextField(blank=True)
    notes = models.JSONField(default=dict, blank=True, help_text="facts about the post, e.g. truncated_alerts")
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.JSONField(null=True, blank=True)
    try_count = models.PositiveSmallIntegerField(
        default=0, help_text="how often processing failed (the request, then the sweep's retries)"
    )
    next_try_at = models.DateTimeField(
        null=True, blank=True, help_text="when the sweep tries a failed processing again (UTC); empty: not waiting"
    )
    last_error = models.TextField(blank=True, help_text="the last processing error, redacted")

    class Meta:
        verbose_name_plural = "deliveries"
        constraints = [choices_check("runs_delivery_outcome_valid", "outcome", _DeliveryOutcome)]
        indexes = [
            # the integration page's "recent deliveries"
            models.Index(fields=["integration", "-received_at"], name="runs_delivery_recent_idx"),
            # the sweep of deliveries a crash left unfinished (runs.alerts.receive.delivery_sweep_received)
            models.Index(fields=["received_at"], condition=Q(outcome="received"), name="runs_delivery_received_idx"),
            # the inbox's rejected and failed posts (counts and the newest 20 of each), not every post
            models.Index(
                fields=["outcome", "-received_at"],
                condition=Q(outcome__in=["rejected", "failed"]),
                name="runs_delivery_refused_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"delivery {self.public_id} ({self.outcome})"


class _AlertOutcome(models.TextChoices):
    PENDING = "pending", "Pending"
    ACCEPTED = "accepted", "Accepted"
    DUPLICATE = "duplicate", "Duplicate"
    UNMATCHED = "unmatched", "Unmatched"
    REJECTED = "rejected", "Rejected"
    IGNORED = "ignored", "Ignored"


class Alert(TimeStampedModel):
    """One record parsed out of a delivery, with its outcome.

    The first alert with a given (integration, dedup key) is the original; later ones are
    ``duplicate`` rows pointing at it. ``dedup_hash`` is the SHA-256 of the source's dedup key,
    computed before redaction.
    """

    Outcome = _AlertOutcome
    Kind = AlertKind

    # action -> (allowed source outcomes, target outcome); docs/architecture.md "Alert outcome".
    # ``pending``, ``duplicate`` and ``rejected`` are also written when the row is created.
    TRANSITIONS: dict[str, tuple[frozenset[str], str]] = {
        "accept": (frozenset({Outcome.PENDING}), Outcome.ACCEPTED),
        "unmatch": (frozenset({Outcome.PENDING}), Outcome.UNMATCHED),
        "reject": (frozenset({Outcome.PENDING}), Outcome.REJECTED),
        # an HA peer (another replica's report of the same instance) or a stale re-firing found on apply
        "fold": (frozenset({Outcome.PENDING}), Outcome.DUPLICATE),
        "reprocess": (frozenset({Outcome.UNMATCHED, Outcome.PENDING}), Outcome.PENDING),
        "ignore": (frozenset({Outcome.UNMATCHED}), Outcome.IGNORED),
    }
    ACTION_FOR_OUTCOME = {
        Outcome.ACCEPTED: "accept",
        Outcome.UNMATCHED: "unmatch",
        Outcome.REJECTED: "reject",
        Outcome.DUPLICATE: "fold",
    }

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # No index of their own: (delivery, index) and (integration, job_key) lead with them (every alert
    # written keeps each index up to date: an alert storm pays for every redundant one).
    delivery = models.ForeignKey(Delivery, on_delete=models.PROTECT, related_name="alerts", db_index=False)
    integration = models.ForeignKey(Integration, on_delete=models.PROTECT, related_name="alerts", db_index=False)
    index = models.PositiveIntegerField(help_text="position of the record in its post, from 0")
    source = models.SlugField(max_length=50)
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.ATTEMPT)
    dedup_key = models.TextField(blank=True, help_text="the source's dedup key, for display")
    dedup_hash = models.CharField(max_length=64, blank=True)
    duplicate_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="duplicates")
    repeat_count = models.PositiveIntegerField(default=0, help_text="how often the same alert was sent again")
    outcome = models.CharField(max_length=20, choices=Outcome.choices, default=Outcome.PENDING)
    reason = models.TextField(blank=True)
    is_stale = models.BooleanField(default=False, help_text="a late, earlier-state report: kept, changes nothing")
    fields = models.JSONField(default=dict, blank=True, help_text="normalised fields, for display")
    mend_notes = models.JSONField(
        default=list,
        blank=True,
        help_text="what was mended so the database could hold the record (a list of sentences)",
    )
    job_key = models.CharField(max_length=300, blank=True)
    tenant_slug = models.CharField(max_length=300, blank=True)
    environment = models.CharField(max_length=100, blank=True)
    execution_id = models.CharField(max_length=300, blank=True)
    summary = models.CharField(max_length=500, blank=True)
    group_ref = models.CharField(
        max_length=300,
        blank=True,
        help_text="the source's incident key (PagerDuty dedup_key), for ack/resolve",
    )
    correlation_key = models.CharField(
        max_length=300,
        blank=True,
        help_text="the id the events of one execution share (a custom mapping's correlate_by), redacted",
    )
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.PROTECT, related_name="alerts")
    attempt = models.ForeignKey(Attempt, null=True, blank=True, on_delete=models.PROTECT, related_name="alerts")
    outcome_at = models.DateTimeField(null=True, blank=True)
    ignored_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        constraints = [
            # One original per (integration, dedup key): concurrent posts of one alert race on this
            # index, and the losers become `duplicate` rows.
            models.UniqueConstraint(
                fields=["integration", "dedup_hash"],
                condition=Q(duplicate_of__isnull=True) & ~Q(dedup_hash=""),
                name="runs_alert_original_unique",
                violation_error_code="duplicate",
            ),
            models.UniqueConstraint(
                fields=["delivery", "index"],
                name="runs_alert_delivery_index_unique",
                violation_error_code="index",
            ),
            choices_check("runs_alert_outcome_valid", "outcome", _AlertOutcome),
            choices_check("runs_alert_kind_valid", "kind", AlertKind),
            models.CheckConstraint(
                condition=~Q(outcome="duplicate") | Q(duplicate_of__isnull=False),
                name="runs_alert_duplicate_has_original",
                violation_error_code="duplicate_of_required",
            ),
        ]
        indexes = [
            # the inbox: unmatched first, newest first; its capped counts decide who sees an alert from the
            # index alone (an unlinked alert's tenant slug, a linked one's run), without a heap fetch each
            models.Index(
                fields=["outcome", "-created_at"],
                include=["id", "run", "tenant_slug", "duplicate_of"],
                name="runs_alert_inbox_cover_idx",
            ),
            # the inbox's counts of alerts without a run, per outcome and tenant (a support person's
            # tenants): only those alerts, not every alert of the outcome nor every alert without a run
            models.Index(
                fields=["outcome", "tenant_slug"],
                include=["id", "duplicate_of"],
                condition=Q(run__isnull=True),
                name="runs_alert_unlinked_idx",
            ),
            # the pending sweep
            models.Index(fields=["created_at"], condition=Q(outcome="pending"), name="runs_alert_pending_idx"),
            models.Index(fields=["integration", "job_key"], name="runs_alert_job_idx"),
            # attaching a PagerDuty acknowledge/resolve to the triggers with the same dedup_key
            models.Index(fields=["integration", "group_ref"], name="runs_alert_group_idx"),
            # correlation: the earlier events of an execution, and the alerts waiting for them
            models.Index(
                fields=["integration", "correlation_key"],
                condition=~Q(correlation_key=""),
                name="runs_alert_correlation_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source} alert {self.public_id} ({self.outcome})"

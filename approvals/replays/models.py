"""Replay requests, their scope, approvals, the one dispatch and its webhook deliveries.

Vocabulary and lifecycles: docs/architecture.md ("Vocabulary", "State machines").

- ``ReplayRequest``: a request to re-execute a scoped part of a run, with its lifecycle
  (``ReplayRequest.TRANSITIONS``; the one function that moves it is
  ``approvals.replays.requests.replay_request_transition``).
- ``ReplayRequestItem``: one work item in a request's scope. It keeps its own ``is_open`` flag so
  "no open replay already covers the same item" is a partial unique constraint (a condition cannot
  reach across the join to the request's status), written in the same transaction as the status.
- ``Approval``: one business or technical decision, bound to the scope fingerprint it was given for.
  Voided approvals are kept (``voided_at``); the live ones are unique per (request, kind) and per
  (request, person), and never the requester's.
- ``Dispatch``: the one release of an approved request to the job's runner, unique per request, with
  the request's one idempotency key. A claim or a delivered webhook is a lease; a lapsed lease makes
  it ``unknown`` (a person decides; it is never re-dispatched automatically).
- ``WebhookDelivery``: one HTTP attempt to deliver a dispatch, written before the call and completed
  after it (at most 4 KiB of the answer kept).
- ``ReplayWebhook``: the signed outbound webhook of one job, set by an admin (``set_replay_webhook``).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from handover.core.models import TimeStampedModel


def choices_check(name: str, field: str, choices: type[models.TextChoices]) -> models.CheckConstraint:
    """A CheckConstraint keeping ``field`` inside the enum (choices alone do not constrain the database)."""
    return models.CheckConstraint(
        condition=Q(**{f"{field}__in": choices.values}), name=name, violation_error_code="invalid_choice"
    )


class _ReplayRequestKind(models.TextChoices):
    ABSENT_ITEMS = "absent_items", "Selective replay of absent items"
    REJECTED_FIXED = "rejected_fixed", "Replay of rejected items after the cause was fixed"
    WHOLE_BATCH = "whole_batch", "Reprocessing of a whole batch that was never committed"


class _ReplayRequestStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    APPROVED = "approved", "Approved"
    DISPATCHED = "dispatched", "Dispatched"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    REJECTED = "rejected", "Rejected"
    CANCELLED = "cancelled", "Cancelled"
    EXPIRED = "expired", "Expired"


class ReplayRequest(TimeStampedModel):
    """A request to re-execute a scoped part of ``run``: kind, scope, reason, requester and lifecycle.

    ``scope_fingerprint`` is the SHA-256 of the exact scope (run, kind, fix reference, sorted record
    ids); approvals carry the fingerprint they were given for, so changing the scope voids them.
    ``eligible_approvers`` is the list shown at creation (``{"business": [...], "technical": [...]}``
    usernames, requester excluded); who may approve is always re-checked live. ``checks`` is the
    last evaluation of the preconditions (``[{"code", "rule", "ok", "detail"}]``).
    """

    Kind = _ReplayRequestKind
    Status = _ReplayRequestStatus

    OPEN_STATUSES = frozenset({Status.PENDING, Status.APPROVED, Status.DISPATCHED})
    TERMINAL_STATUSES = frozenset(_ReplayRequestStatus.values) - {s.value for s in OPEN_STATUSES}
    # action -> allowed source statuses -> target status (docs/architecture.md "State machines")
    TRANSITIONS: dict[str, tuple[frozenset[str], str]] = {
        "approve": (frozenset({Status.PENDING}), Status.APPROVED),
        "rescope": (frozenset({Status.PENDING, Status.APPROVED}), Status.PENDING),
        "dispatch": (frozenset({Status.APPROVED}), Status.DISPATCHED),
        "complete": (frozenset({Status.DISPATCHED}), Status.COMPLETED),
        "fail": (frozenset({Status.DISPATCHED}), Status.FAILED),
        "reject": (frozenset({Status.PENDING}), Status.REJECTED),
        "cancel": (frozenset({Status.PENDING, Status.APPROVED}), Status.CANCELLED),
        "expire": (frozenset({Status.PENDING}), Status.EXPIRED),
    }

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    run = models.ForeignKey("runs.Run", on_delete=models.PROTECT, related_name="replay_requests")
    handover = models.ForeignKey(
        "handover.Handover",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="replay_requests",
        help_text="the run's open handover when the request was made",
    )
    kind = models.CharField(max_length=20, choices=Kind.choices)
    fix_reference = models.CharField(
        max_length=500, blank=True, help_text="where the cause of the rejections is recorded as fixed"
    )
    reason = models.TextField()
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    status_changed_at = models.DateTimeField(null=True, blank=True)
    scope_fingerprint = models.CharField(max_length=64, help_text="hex SHA-256 of the exact scope")
    scope_revision = models.PositiveIntegerField(default=1, help_text="1 at creation, +1 per scope change")
    ledger_disclosures = models.JSONField(
        default=list,
        blank=True,
        help_text="items weakened from completed and duplicates explained, as shown to the approvers (bound into "
        "the fingerprint): kind, record_id, from, to, by, at, why, reference",
    )
    item_count = models.PositiveIntegerField(default=0)
    eligible_approvers = models.JSONField(default=dict, blank=True)
    checks = models.JSONField(default=list, blank=True, help_text="the last evaluation of the preconditions")
    checked_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(help_text="a request still pending then expires and its approvals are void")
    approved_at = models.DateTimeField(null=True, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True, help_text="when it reached a terminal status")
    closed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="the person who cancelled, rejected or settled it; empty when the system closed it",
    )
    close_reason = models.TextField(blank=True)
    notified_at = models.DateTimeField(null=True, blank=True, help_text="eligible approvers e-mailed")
    reminded_at = models.DateTimeField(null=True, blank=True)
    reminder_count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            choices_check("approvals_replayrequest_kind_valid", "kind", _ReplayRequestKind),
            choices_check("approvals_replayrequest_status_valid", "status", _ReplayRequestStatus),
            models.CheckConstraint(
                condition=~Q(reason=""), name="approvals_replayrequest_reason_set", violation_error_code="required"
            ),
            # a replay of rejected items names where the fix is recorded
            models.CheckConstraint(
                condition=~Q(kind="rejected_fixed") | ~Q(fix_reference=""),
                name="approvals_replayrequest_fix_reference",
                violation_error_code="fix_reference_required",
            ),
            # status and stamps agree (our own code sets both)
            models.CheckConstraint(
                condition=~Q(status__in=["approved", "dispatched", "completed", "failed"])
                | Q(approved_at__isnull=False),
                name="approvals_replayrequest_approved_stamp",
                violation_error_code="approved_stamp",
            ),
            models.CheckConstraint(
                condition=(
                    (Q(status__in=["dispatched", "completed", "failed"]) & Q(dispatched_at__isnull=False))
                    | (~Q(status__in=["dispatched", "completed", "failed"]) & Q(dispatched_at__isnull=True))
                ),
                name="approvals_replayrequest_dispatched_stamp",
                violation_error_code="dispatched_stamp",
            ),
            models.CheckConstraint(
                condition=(
                    (
                        Q(status__in=["completed", "failed", "rejected", "cancelled", "expired"])
                        & Q(closed_at__isnull=False)
                    )
                    | (Q(status__in=["pending", "approved", "dispatched"]) & Q(closed_at__isnull=True))
                ),
                name="approvals_replayrequest_closed_stamp",
                violation_error_code="closed_stamp",
            ),
            models.CheckConstraint(
                condition=~Q(status__in=["cancelled", "rejected"]) | (Q(closed_by__isnull=False) & ~Q(close_reason="")),
                name="approvals_replayrequest_closed_by",
                violation_error_code="closed_by_required",
            ),
            models.CheckConstraint(
                condition=Q(expires_at__gt=F("created_at")),
                name="approvals_replayrequest_expiry_order",
                violation_error_code="expiry_order",
            ),
        ]
        indexes = [
            # the run page's replays and the run's open requests
            models.Index(fields=["run", "-created_at"], name="approvals_request_run_idx"),
            # the expiry and reminder sweeps, and "waiting for me"
            models.Index(fields=["expires_at"], condition=Q(status="pending"), name="approvals_request_pending_idx"),
            # the dispatch sweep: approved requests not dispatched yet
            models.Index(fields=["approved_at"], condition=Q(status="approved"), name="approvals_request_approved_idx"),
        ]

    def __str__(self) -> str:
        return f"replay {self.public_id} ({self.status})"

    @property
    def is_open(self) -> bool:
        return self.status in self.OPEN_STATUSES


class ReplayRequestItem(models.Model):
    """One work item in a replay request's scope, with its outcome when it entered the scope.

    ``is_open`` mirrors "the request is open" (pending, approved, dispatched) and is written in the
    same transaction as the request's status, so the partial unique constraint holds "no open
    replay already covers this item".
    """

    request = models.ForeignKey(ReplayRequest, on_delete=models.CASCADE, related_name="items")
    work_item = models.ForeignKey("runs.WorkItem", on_delete=models.PROTECT, related_name="replay_items")
    record_id = models.CharField(max_length=300)
    outcome_at_request = models.CharField(max_length=20, help_text="the item's outcome when it entered the scope")
    is_open = models.BooleanField(default=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["request", "work_item"], name="approvals_item_unique", violation_error_code="duplicate"
            ),
            models.UniqueConstraint(
                fields=["work_item"],
                condition=Q(is_open=True),
                name="approvals_item_one_open_replay",
                violation_error_code="open_replay_exists",
            ),
        ]
        indexes = [
            # the request page's scope table, by record id
            models.Index(fields=["request", "record_id"], name="approvals_item_request_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.record_id} in {self.request_id}"


class _ApprovalKind(models.TextChoices):
    BUSINESS = "business", "Business"
    TECHNICAL = "technical", "Technical"


class _ApprovalDecision(models.TextChoices):
    APPROVE = "approve", "Approve"
    REJECT = "reject", "Reject"


class Approval(models.Model):
    """One business or technical decision on a replay request, bound to the exact scope's fingerprint.

    ``requester`` copies the request's requester so "the requester cannot approve" is a constraint.
    ``accepts_unknown_repeat_safety`` (technical only, with a reason) is the technical owner's
    explicit acceptance of a job whose repeat safety is ``unknown`` (rule 3 in docs/architecture.md). A voided
    approval (scope changed, request expired) is kept with ``voided_at`` and the reason.
    """

    Kind = _ApprovalKind
    Decision = _ApprovalDecision

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    request = models.ForeignKey(ReplayRequest, on_delete=models.PROTECT, related_name="approvals")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    decision = models.CharField(max_length=20, choices=Decision.choices)
    comment = models.TextField(blank=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    requester = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", help_text="the request's requester"
    )
    decided_at = models.DateTimeField()
    scope_fingerprint = models.CharField(max_length=64, help_text="the fingerprint of the scope decided on")
    accepts_unknown_repeat_safety = models.BooleanField(default=False)
    acceptance_reason = models.TextField(blank=True)
    voided_at = models.DateTimeField(null=True, blank=True)
    void_reason = models.CharField(max_length=300, blank=True)

    class Meta:
        constraints = [
            choices_check("approvals_approval_kind_valid", "kind", _ApprovalKind),
            choices_check("approvals_approval_decision_valid", "decision", _ApprovalDecision),
            models.UniqueConstraint(
                fields=["request", "kind"],
                condition=Q(voided_at__isnull=True),
                name="approvals_approval_one_per_kind",
                violation_error_code="already_decided",
            ),
            # one person cannot give both approvals
            models.UniqueConstraint(
                fields=["request", "actor"],
                condition=Q(voided_at__isnull=True),
                name="approvals_approval_one_per_person",
                violation_error_code="same_person",
            ),
            models.CheckConstraint(
                condition=~Q(actor=F("requester")),
                name="approvals_approval_not_requester",
                violation_error_code="requester_cannot_approve",
            ),
            models.CheckConstraint(
                condition=Q(accepts_unknown_repeat_safety=False)
                | (Q(kind="technical", decision="approve") & ~Q(acceptance_reason="")),
                name="approvals_approval_acceptance_reasoned",
                violation_error_code="acceptance_reason_required",
            ),
            models.CheckConstraint(
                condition=Q(voided_at__isnull=True) | ~Q(void_reason=""),
                name="approvals_approval_void_reason",
                violation_error_code="void_reason_required",
            ),
            models.CheckConstraint(
                condition=~Q(decision="reject") | ~Q(comment=""),
                name="approvals_approval_reject_comment",
                violation_error_code="comment_required",
            ),
        ]
        indexes = [models.Index(fields=["request", "decided_at"], name="approvals_approval_request_idx")]

    def __str__(self) -> str:
        return f"{self.kind} {self.decision} on {self.request_id}"


class _DispatchChannel(models.TextChoices):
    WEBHOOK = "webhook", "Signed webhook"
    CLAIM = "claim", "Claimed by the runner"


class _DispatchStatus(models.TextChoices):
    PENDING = "pending", "Waiting for the runner"
    LEASED = "leased", "Leased to the runner"
    STARTED = "started", "Replay attempt started"
    SUCCEEDED = "succeeded", "Replay attempt succeeded"
    FAILED = "failed", "Replay attempt failed"
    UNKNOWN = "unknown", "Unknown (a person decides)"


class Dispatch(TimeStampedModel):
    """The one release of an approved replay request to the job's runner (unique per request).

    ``idempotency_key`` is the request's one key: the webhook and the claim carry it, and the
    replay's attempt reports it back (rule 7 in docs/architecture.md). ``lease_expires_at``: while ``pending``,
    when an unclaimed, undelivered dispatch is given up; once ``leased``, by when the runner must
    report the attempt as started. A lapsed lease makes it ``unknown``. ``payload`` is the webhook
    body, built once so every delivery sends the same bytes.
    """

    Channel = _DispatchChannel
    Status = _DispatchStatus

    TRANSITIONS: dict[str, tuple[frozenset[str], str]] = {
        "lease": (frozenset({Status.PENDING}), Status.LEASED),
        "start": (frozenset({Status.PENDING, Status.LEASED, Status.UNKNOWN}), Status.STARTED),
        "succeed": (frozenset({Status.PENDING, Status.LEASED, Status.STARTED, Status.UNKNOWN}), Status.SUCCEEDED),
        "fail": (frozenset({Status.PENDING, Status.LEASED, Status.STARTED, Status.UNKNOWN}), Status.FAILED),
        "lapse": (frozenset({Status.PENDING, Status.LEASED}), Status.UNKNOWN),
    }

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    request = models.ForeignKey(ReplayRequest, on_delete=models.PROTECT, related_name="dispatches")
    idempotency_key = models.CharField(max_length=100, unique=True)
    channel = models.CharField(max_length=10, choices=Channel.choices)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    status_changed_at = models.DateTimeField(null=True, blank=True)
    dispatched_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="the person whose action released it; empty when the system or the runner did",
    )
    lease_expires_at = models.DateTimeField()
    claimed_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.ForeignKey(
        "runs.RunnerCredential", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    delivered_at = models.DateTimeField(null=True, blank=True, help_text="the webhook was answered with 2xx")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    unknown_at = models.DateTimeField(null=True, blank=True)
    unknown_reason = models.CharField(max_length=500, blank=True)
    attempt = models.OneToOneField(
        "runs.Attempt", null=True, blank=True, on_delete=models.PROTECT, related_name="replay_dispatch"
    )
    payload = models.TextField(blank=True, help_text="the webhook body (JSON), the same bytes on every delivery")
    delivery_count = models.PositiveIntegerField(default=0, help_text="webhook deliveries tried")
    next_delivery_at = models.DateTimeField(
        null=True, blank=True, help_text="when the webhook is due (again); pushed forward while a worker sends"
    )

    class Meta:
        verbose_name_plural = "dispatches"
        constraints = [
            # rule 5 (docs/architecture.md): one dispatch per request, whatever races
            models.UniqueConstraint(
                fields=["request"], name="approvals_dispatch_one_per_request", violation_error_code="already_dispatched"
            ),
            choices_check("approvals_dispatch_channel_valid", "channel", _DispatchChannel),
            choices_check("approvals_dispatch_status_valid", "status", _DispatchStatus),
            models.CheckConstraint(
                condition=~Q(status="unknown") | (Q(unknown_at__isnull=False) & ~Q(unknown_reason="")),
                name="approvals_dispatch_unknown_stamp",
                violation_error_code="unknown_stamp",
            ),
            models.CheckConstraint(
                condition=~Q(status__in=["succeeded", "failed"]) | Q(finished_at__isnull=False),
                name="approvals_dispatch_finished_stamp",
                violation_error_code="finished_stamp",
            ),
            models.CheckConstraint(
                condition=~Q(idempotency_key=""), name="approvals_dispatch_key_set", violation_error_code="required"
            ),
        ]
        indexes = [
            # the lease sweep
            models.Index(
                fields=["lease_expires_at"],
                condition=Q(status__in=["pending", "leased"]),
                name="approvals_dispatch_lease_idx",
            ),
            # the webhook sweep: deliveries due
            models.Index(
                fields=["next_delivery_at"],
                condition=Q(status="pending", channel="webhook"),
                name="approvals_dispatch_due_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"dispatch {self.idempotency_key} ({self.status})"


class _WebhookDeliveryStatus(models.TextChoices):
    SENDING = "sending", "Sending"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


class WebhookDelivery(models.Model):
    """One HTTP attempt to deliver a dispatch: written before the call, completed after it.

    ``is_transient`` says whether the failure was worth retrying (timeout, connection error, 5xx).
    ``response_body`` keeps at most 4 KiB of the answer.
    """

    Status = _WebhookDeliveryStatus

    dispatch = models.ForeignKey(Dispatch, on_delete=models.PROTECT, related_name="webhook_deliveries")
    number = models.PositiveIntegerField(help_text="1 for the first delivery of the dispatch")
    url = models.URLField(max_length=2000)
    timestamp = models.PositiveBigIntegerField(help_text="the signed X-Handover-Timestamp, Unix seconds")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.SENDING)
    is_transient = models.BooleanField(default=False)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.TextField(blank=True, help_text="at most 4 KiB of the answer")
    error = models.TextField(blank=True)

    class Meta:
        verbose_name_plural = "webhook deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["dispatch", "number"], name="approvals_webhookdelivery_number", violation_error_code="duplicate"
            ),
            choices_check("approvals_webhookdelivery_status_valid", "status", _WebhookDeliveryStatus),
            models.CheckConstraint(
                condition=Q(status="sending") | Q(finished_at__isnull=False),
                name="approvals_webhookdelivery_finished",
                violation_error_code="finished_stamp",
            ),
        ]

    def __str__(self) -> str:
        return f"delivery {self.number} of {self.dispatch_id} ({self.status})"


class ReplayWebhook(TimeStampedModel):
    """The signed outbound webhook of one job: where approved replays are sent (set by admins only).

    The HMAC secret is not stored: it is derived from the site's secret key and ``secret_salt``
    (``approvals.replays.webhook_client.webhook_secret``) and shown once when set.
    """

    job = models.OneToOneField("runs.Job", on_delete=models.PROTECT, related_name="replay_webhook")
    url = models.URLField(max_length=2000)
    secret_salt = models.CharField(max_length=64, editable=False)
    is_active = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    def __str__(self) -> str:
        return f"{self.job.key} → {self.url}"

"""Reads of the approvals app: replay requests a person may see, the "waiting for me" queue, eligible
approvers, and the ledger queries the replay rules need (scope candidates, outcome counts).

Visibility follows the run: whoever may see a run sees its replay requests (``runs.permissions.run_visibility_filter``).
Who may approve is ``runs.permissions.approvers_eligible`` / ``may_decide`` (rule 4: explicit roles,
superusers not exempt).
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from django.contrib.auth.models import AnonymousUser
from django.db.models import BooleanField, Case, Count, Exists, OuterRef, Prefetch, Q, QuerySet, Value, When

from approvals.replays.models import Approval, Dispatch, ReplayRequest, ReplayRequestItem, WebhookDelivery
from handover.core.people import Person
from handover.handovers.evidence import ACTIVE_ATTEMPT_STATUSES
from runs.attempts.models import Attempt, Run
from runs.catalog.models import RunnerCredential, SideEffect
from runs.catalog.selectors import job_repeat_safety
from runs.ledger.models import WorkItem
from runs.permissions import decide_filters, manage_replay_filter, may_decide, run_visibility_filter
from runs.timeline.models import TimelineEvent

User = Person | AnonymousUser

SAMPLE_SIZE = 10


# --- who may do what ----------------------------------------------------------------------------


def approval_kinds_open_to(*, user: User, request: ReplayRequest) -> list[str]:
    """The approval kinds ``user`` may still give on ``request`` (the request page's decision form).

    None unless the request is pending, ``user`` is not its requester and has not decided on it
    already; then each kind nobody has decided (live) for which ``user`` is eligible. Reads the
    request's approvals through ``request.approvals.all()`` (prefetched by ``replay_request_get``).
    """
    live = [a for a in request.approvals.all() if a.voided_at is None]
    if (
        request.status != ReplayRequest.Status.PENDING
        or request.requested_by_id == user.pk
        or any(a.actor_id == user.pk for a in live)
    ):
        return []
    decided_kinds = {a.kind for a in live}
    return [
        k for k in Approval.Kind.values if k not in decided_kinds and may_decide(user=user, run=request.run, kind=k)
    ]


# --- replay requests ----------------------------------------------------------------------------


def replay_request_list(
    *, user: User, status: str | None = None, run: Run | None = None, open_only: bool = False
) -> QuerySet[ReplayRequest]:
    """Replay requests on runs ``user`` may see, newest first, with run, job, tenant and requester joined.

    Filters: status, run, open only (pending, approved, dispatched). Annotated with
    ``live_approval_count``. Queries: one.
    """
    requests = ReplayRequest.objects.filter(run_visibility_filter(user=user, prefix="run__"))
    if status:
        requests = requests.filter(status=status)
    if run is not None:
        requests = requests.filter(run=run)
    if open_only:
        requests = requests.filter(status__in=ReplayRequest.OPEN_STATUSES)
    return (
        requests.select_related("run__job", "run__tenant", "requested_by")
        .annotate(
            live_approval_count=Count(
                "approvals",
                filter=Q(approvals__voided_at__isnull=True, approvals__decision=Approval.Decision.APPROVE),
                distinct=True,
            )
        )
        .order_by("-created_at", "-id")
    )


def _detail_prefetches() -> list[Prefetch]:  # type: ignore[type-arg]
    return [
        Prefetch("approvals", queryset=Approval.objects.select_related("actor").order_by("decided_at", "id")),
        Prefetch(
            "dispatches",
            queryset=Dispatch.objects.select_related("claimed_by", "attempt", "dispatched_by").prefetch_related(
                Prefetch("webhook_deliveries", queryset=WebhookDelivery.objects.order_by("-number")),
            ),
        ),
    ]


def replay_request_get(*, user: User, public_id: UUID | str) -> ReplayRequest | None:
    """One replay request ``user`` may see, with approvals (and actors), its dispatch and webhook
    deliveries prefetched; None when missing or not visible (callers answer 404 either way).

    Queries: four (request with run, job, tenant, handover; approvals; dispatch; deliveries).
    """
    return (
        ReplayRequest.objects.filter(run_visibility_filter(user=user, prefix="run__"), public_id=public_id)
        .select_related("run__job", "run__tenant", "requested_by", "handover", "closed_by")
        .prefetch_related(*_detail_prefetches())
        .first()
    )


def dispatch_get_for_request(*, request: ReplayRequest) -> Dispatch | None:
    """The request's dispatch from the prefetched rows (no query after ``replay_request_get``)."""
    dispatches = list(request.dispatches.all())
    return dispatches[0] if dispatches else None


def replay_request_list_for_run(*, run: Run) -> QuerySet[ReplayRequest]:
    """Every replay request of ``run``, newest first, with requester and dispatch. Queries: two."""
    return (
        ReplayRequest.objects.filter(run=run)
        .select_related("requested_by")
        .prefetch_related(Prefetch("dispatches", queryset=Dispatch.objects.select_related("attempt")))
        .order_by("-created_at", "-id")
    )


def replay_request_items(*, request: ReplayRequest, limit: int | None = None) -> QuerySet[ReplayRequestItem]:
    """The scope of ``request`` by record id, with each work item's *current* outcome joined."""
    items = ReplayRequestItem.objects.filter(request=request).select_related("work_item").order_by("record_id")
    return items[:limit] if limit else items


def replay_request_queue(*, user: User) -> QuerySet[ReplayRequest]:
    """Pending requests ("waiting for me") ``user`` may approve and nobody has decided for that kind yet.

    A request counts when ``user`` is not its requester, has not decided on it already, and holds
    the explicit business permission on its tenant with no live business decision, or the explicit
    technical permission on its job with no live technical decision. Oldest first (expiring soonest).
    Queries: one (the permission lookups are subqueries).
    """
    if not user.is_authenticated or not user.is_active:
        return ReplayRequest.objects.none()
    business, technical = decide_filters(user=user, prefix="run__")
    live = Approval.objects.filter(request=OuterRef("pk"), voided_at__isnull=True)
    waits_business = business & Q(has_business=False)
    waits_technical = technical & Q(has_technical=False)
    return (
        ReplayRequest.objects.filter(status=ReplayRequest.Status.PENDING)
        .exclude(requested_by=user)
        .annotate(
            has_business=Exists(live.filter(kind=Approval.Kind.BUSINESS)),
            has_technical=Exists(live.filter(kind=Approval.Kind.TECHNICAL)),
            decided_by_me=Exists(live.filter(actor=user)),
        )
        .filter(decided_by_me=False)
        .filter(waits_business | waits_technical)
        # which sides wait for this person (the queue's inline approval offers only those)
        .annotate(
            waits_business=Case(
                When(waits_business, then=Value(True)), default=Value(False), output_field=BooleanField()
            ),
            waits_technical=Case(
                When(waits_technical, then=Value(True)), default=Value(False), output_field=BooleanField()
            ),
        )
        .select_related("run__job", "run__tenant", "requested_by")
        .order_by("expires_at", "id")
    )


def replay_request_queue_rows(*, user: User, limit: int = 100) -> list[ReplayRequest]:
    """The first ``limit`` rows of ``replay_request_queue``, each with ``repeat_safety`` set: its job's
    (``job_repeat_safety``, the least safe side effect's), so a technical approver's row asks for the
    explicit acceptance of an ``unknown`` one (rule 3) as the request page does. Queries: two."""
    rows = list(replay_request_queue(user=user)[:limit])
    effects: dict[int, list[SideEffect]] = {}
    for effect in SideEffect.objects.filter(job_id__in={r.run.job_id for r in rows}).order_by("id"):
        effects.setdefault(effect.job_id, []).append(effect)
    for row in rows:
        row.repeat_safety = job_repeat_safety(effects.get(row.run.job_id, []))  # type: ignore[attr-defined]
    return rows


def replay_request_needs_decision(*, user: User) -> QuerySet[ReplayRequest]:
    """Dispatched requests waiting for a person: the dispatch is ``unknown`` (lease lapsed, webhook
    failed), or its attempt succeeded and the ledger does not confirm the scope yet. For people who
    may manage them (requester, support on the tenant, technical owner of the job). Queries: one.
    """
    if not user.is_authenticated or not user.is_active:
        return ReplayRequest.objects.none()
    return (
        ReplayRequest.objects.filter(
            status=ReplayRequest.Status.DISPATCHED,
            dispatches__status__in=[Dispatch.Status.UNKNOWN, Dispatch.Status.SUCCEEDED],
        )
        .filter(manage_replay_filter(user=user))
        .select_related("run__job", "run__tenant", "requested_by")
        .prefetch_related("dispatches")
        .distinct()
        .order_by("dispatched_at", "id")
    )


def runner_claimable(*, credential: RunnerCredential) -> QuerySet[ReplayRequest]:
    """Requests of the credential's job a runner may claim: approved, or dispatched and not yet leased
    to another runner. Oldest approval first. Queries: one (plus the dispatch prefetch)."""
    return (
        ReplayRequest.objects.filter(run__job_id=credential.job_id)
        .filter(
            Q(status=ReplayRequest.Status.APPROVED)
            | Q(
                status=ReplayRequest.Status.DISPATCHED,
                dispatches__status__in=[Dispatch.Status.PENDING, Dispatch.Status.LEASED],
                dispatches__claimed_by__isnull=True,
            )
        )
        .select_related("run__job", "run__tenant")
        .prefetch_related("dispatches")
        .distinct()
        .order_by("approved_at", "id")
    )


# --- the ledger, as the replay rules read it ------------------------------------------------------


def scope_candidates(*, run: Run, kind: str) -> QuerySet[WorkItem]:
    """The work items a request of ``kind`` takes when asked for "all": by record id.

    ``absent_items``: eligible items confirmed absent; ``rejected_fixed``: eligible items the
    destination rejected; ``whole_batch``: every eligible item (in the population, not skipped).
    Served by the (run, outcome, record_id) index.
    """
    items = WorkItem.objects.filter(run=run, is_in_population=True).exclude(outcome=WorkItem.Outcome.SKIPPED)
    if kind == ReplayRequest.Kind.ABSENT_ITEMS:
        items = items.filter(outcome=WorkItem.Outcome.ABSENT)
    elif kind == ReplayRequest.Kind.REJECTED_FIXED:
        items = items.filter(outcome=WorkItem.Outcome.REJECTED)
    return items.order_by("record_id")


def work_items_by_record_id(*, run: Run, record_ids: list[str]) -> QuerySet[WorkItem]:
    """The eligible population's items of ``run`` with these record ids (those that exist), by record id.

    Records the destination holds but the population does not list are never in a replay's scope.
    Served by the unique (run, record_id) index.
    """
    return WorkItem.objects.filter(run=run, record_id__in=record_ids, is_in_population=True).order_by("record_id")


@dataclass(frozen=True)
class ScopeFacts:
    """What the ledger says about a scope now: item count, outcome -> count, outcome -> sample ids,
    and the open replay requests (other than the one asked about) that cover some of its items."""

    item_count: int
    outcome_counts: dict[str, int]
    outcome_samples: dict[str, list[str]]
    overlapping: list[tuple[str, list[str]]]  # (request public id, sample record ids)


def scope_facts(*, items: QuerySet[WorkItem], exclude_request: ReplayRequest | None = None) -> ScopeFacts:
    """Count the scope's items by current outcome, sample the ids per outcome, find overlapping open replays.

    ``items``: the scope as a WorkItem queryset. Queries: three (counts, samples of outcomes other
    than the usual one are read at most ``SAMPLE_SIZE`` per outcome, overlaps).
    """
    counts = {row["outcome"]: row["n"] for row in items.order_by().values("outcome").annotate(n=Count("id"))}
    samples: dict[str, list[str]] = {}
    for outcome in counts:
        samples[outcome] = list(
            items.filter(outcome=outcome).order_by("record_id").values_list("record_id", flat=True)[:SAMPLE_SIZE]
        )
    open_items = ReplayRequestItem.objects.filter(is_open=True, work_item__in=items.order_by().values("pk"))
    if exclude_request is not None:
        open_items = open_items.exclude(request=exclude_request)
    overlapping: dict[str, list[str]] = {}
    for request_id, record_id in open_items.order_by("request_id", "record_id").values_list(
        "request__public_id", "record_id"
    )[: SAMPLE_SIZE * 5]:
        overlapping.setdefault(str(request_id), [])
        if len(overlapping[str(request_id)]) < SAMPLE_SIZE:
            overlapping[str(request_id)].append(record_id)
    return ScopeFacts(
        item_count=sum(counts.values()),
        outcome_counts=counts,
        outcome_samples=samples,
        overlapping=list(overlapping.items()),
    )


def run_completed_count(*, run: Run) -> int:
    """How many eligible items of ``run`` the destination holds (a whole batch needs none)."""
    return WorkItem.objects.filter(run=run, is_in_population=True, outcome=WorkItem.Outcome.COMPLETED).count()


def run_active_attempts(*, run: Run) -> list[Attempt]:
    """Attempts of ``run`` that are queued or running (an automatic retry may be on its way), by number.

    Served by the partial index on active attempts.
    """
    return list(Attempt.objects.filter(run=run, status__in=ACTIVE_ATTEMPT_STATUSES).order_by("number", "id"))


def scope_is_completed(*, request: ReplayRequest) -> bool:
    """Whether the ledger now confirms every item in the request's scope as completed."""
    return (
        request.item_count > 0
        and not ReplayRequestItem.objects.filter(request=request)
        .exclude(work_item__outcome=WorkItem.Outcome.COMPLETED)
        .exists()
    )


def replay_request_timeline(*, request: ReplayRequest) -> QuerySet[TimelineEvent]:
    """The events about ``request`` on its run's timeline, in order, with their actors. Queries: one."""
    return (
        TimelineEvent.objects.filter(run_id=request.run_id, data__replay_request=str(request.public_id))
        .select_related("actor_user", "attempt")
        .order_by("occurred_at", "recorded_at", "id")
    )


def replay_request_recent(*, user: User, limit: int = 50) -> list[ReplayRequest]:
    """The newest replay requests ``user`` may see (the replays page). Queries: one."""
    return list(replay_request_list(user=user)[:limit])

"""Handovers a person may see, and who may change them.

A handover is visible to a person who may see *every* run it covers (a handover spanning two
tenants must not show one tenant's support the other's records). Writing takes support on the
tenant of every run, or technical ownership of the job; auditors and business owners read only;
superusers do everything. Never a global group check (docs/architecture.md "Roles and permissions").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from uuid import UUID

from django.contrib.auth.models import AnonymousUser
from django.db.models import Count, Exists, Max, OuterRef, Prefetch, Q, QuerySet

from handover.core.people import Person
from handover.handovers.models import Handover, HandoverNotification, HandoverRevision, HandoverRun, ResidualException
from handover.handovers.staleness import Staleness, evidence_annotations, evidence_changes, run_evidence_snapshot
from runs.attempts.business_state import BUSINESS_STATE_FACTS, business_state_annotations
from runs.attempts.models import Run
from runs.ledger.models import WorkItem
from runs.permissions import is_admin, run_visibility_filter
from runs.timeline.models import TimelineEvent

User = Person | AnonymousUser


def handover_visibility_filter(*, user: User) -> Q:
    """A Q object limiting handovers to those whose every run ``user`` may see."""
    if not user.is_authenticated:
        return Q(pk__in=[])
    if is_admin(user):
        return Q()
    hidden = HandoverRun.objects.filter(handover=OuterRef("pk")).exclude(
        run_visibility_filter(user=user, prefix="run__")
    )
    return ~Q(Exists(hidden))


def handover_list(
    *,
    user: User,
    status: str | None = None,
    escalation_owner: Person | None = None,
    is_open: bool | None = None,
    run: Run | None = None,
    search: str | None = None,
) -> QuerySet[Handover]:
    """Handovers ``user`` may see, newest first, with job, owners and runs (tenant) loaded.

    Filters: ``status``, ``escalation_owner`` ("my handovers"), ``is_open`` (not closed), ``run`` and
    ``search`` (the title starts with it, any case; served by the title's prefix index).
    Queries: two (the handovers with everything shown joined; their runs with tenants).
    """
    handovers = Handover.objects.filter(handover_visibility_filter(user=user))
    if status:
        handovers = handovers.filter(status=status)
    if escalation_owner is not None:
        handovers = handovers.filter(escalation_owner=escalation_owner)
    if is_open is True:
        handovers = handovers.exclude(status=Handover.Status.CLOSED)
    elif is_open is False:
        handovers = handovers.filter(status=Handover.Status.CLOSED)
    if run is not None:
        handovers = handovers.filter(links__run=run)
    if search and search.strip():
        handovers = handovers.filter(title__istartswith=search.strip())
    return (
        handovers.select_related("job", "escalation_owner", "customer_update_owner", "job__paused_by")
        .prefetch_related(
            Prefetch(
                "links",
                # each run's business state facts come with the links (``handover_list_runs`` hands them on)
                queryset=HandoverRun.objects.select_related("run__tenant", "run__job")
                .annotate(**business_state_annotations("run_id"))
                .order_by("id"),
            )
        )
        .order_by("-created_at", "-id")
    )


def handover_links_business_state(handovers: Iterable[Handover]) -> list[Handover]:
    """Hand each run of ``handovers`` (from ``handover_list``) the business-state facts its link carries.

    Returns the handovers as a list; no query beyond the list's own (the links are prefetched).
    """
    rows = list(handovers)
    for handover in rows:
        for link in handover.links.all():
            for name in BUSINESS_STATE_FACTS:
                setattr(link.run, name, getattr(link, name))
    return rows


def handover_list_state(*, handovers: QuerySet[Handover]) -> tuple[object, ...]:
    """A fingerprint of a handovers list for its ETag: ``(count, newest updated_at, newest event id)``.

    Every edit and transition of a handover touches the handover and writes a timeline event on each
    of its runs; the runs' own events (a new attempt, a ledger load) change their business state.
    Queries: two.
    """
    base = handovers.order_by().values("pk")
    totals = Handover.objects.filter(pk__in=base).aggregate(count=Count("pk"), updated=Max("updated_at"))
    newest_event = TimelineEvent.objects.filter(run__handover_links__handover__in=base).aggregate(newest=Max("pk"))
    return (totals["count"], totals["updated"], newest_event["newest"])


def handover_get(*, user: User, public_id: UUID | str) -> Handover | None:
    """One handover ``user`` may see, with everything its page shows prefetched; None when missing or hidden.

    Loaded: job (and who paused it), owners and lifecycle actors; its runs with tenant, target,
    the execution and the next-run check (with the waiver owner); residual exceptions with owner,
    run and the record ids they cover; notifications with recipients; each run's business-state
    facts (``runs.attempts.business_state``). Queries: five (handover, runs, exceptions, covered
    items, notifications).
    """
    exceptions = ResidualException.objects.select_related("owner", "run__tenant", "created_by").prefetch_related(
        Prefetch("work_items", queryset=WorkItem.objects.only("id", "run_id", "record_id").order_by("record_id"))
    )
    handover = (
        Handover.objects.filter(handover_visibility_filter(user=user), public_id=public_id)
        .select_related(
            "job",
            "job__paused_by",
            "escalation_owner",
            "customer_update_owner",
            "created_by",
            "handed_over_by",
            "closed_by",
            "reopened_by",
        )
        .prefetch_related(
            Prefetch(
                "links",
                queryset=HandoverRun.objects.select_related(
                    "run__tenant",
                    "run__job",
                    "run__target",
                    "attempt",
                    "next_run_check__waiver_owner",
                )
                # the runs' business state and attempts, read with the links (no query per run)
                .annotate(**business_state_annotations("run_id"), **evidence_annotations("run_id"))
                .order_by("id"),
            ),
            Prefetch("residual_exceptions", queryset=exceptions.order_by("created_at", "id")),
            Prefetch(
                "notifications",
                queryset=HandoverNotification.objects.select_related("recipient").order_by("created_at", "id"),
            ),
        )
        .first()
    )
    if handover is not None:
        for link in handover.links.all():  # prefetched: hand each run its business-state facts
            for name in BUSINESS_STATE_FACTS:
                setattr(link.run, name, getattr(link, name))
    return handover


def handover_generated_staleness(*, handover: Handover) -> Staleness:
    """Whether the handover's generated text is stale: its runs' evidence compared with what it came from.

    Uses the links ``handover_get`` prefetched (with their attempt annotations); no query then.
    Only a handover with generated (unconfirmed) sections can be stale.
    """
    if not handover.generated_sections:
        return Staleness(changes=())
    current: dict[str, dict[str, Any]] = {}
    labels: dict[str, str] = {}
    for link in handover.links.all():
        run = link.run
        key = str(run.public_id)
        labels[key] = f"{run.tenant.slug} {run.environment}"
        current[key] = run_evidence_snapshot(
            run,
            attempt_count=getattr(link, "ev_attempt_count", None) or 0,
            latest_attempt=getattr(link, "ev_latest_attempt", None),
        )
    return evidence_changes(recorded=handover.generated_evidence or {}, current=current, labels=labels)


def run_get_brief(*, user: User, public_id: UUID | str) -> Run | None:
    """One run ``user`` may see, with job (and who paused it), tenant and target; None otherwise. Queries: one."""
    return (
        Run.objects.filter(run_visibility_filter(user=user), public_id=public_id)
        .select_related("job", "job__paused_by", "tenant", "target")
        .first()
    )


def handover_for_run(*, run: Run) -> list[Handover]:
    """The handovers about ``run`` (the open one first, then newest first), with escalation owners.

    The caller has already checked that the person may see the run; a handover also covering a run
    they may not see is still listed by title only. Queries: one.
    """
    links = (
        HandoverRun.objects.filter(run=run)
        .select_related("handover__escalation_owner")
        .order_by("-is_open", "-handover__created_at", "-handover_id")
    )
    return [link.handover for link in links]


def handover_revision_list(*, handover: Handover, section: str | None = None) -> QuerySet[HandoverRevision]:
    """Every text the handover's sections had, by section then oldest first, with the author. Queries: one."""
    revisions = HandoverRevision.objects.filter(handover=handover)
    if section:
        revisions = revisions.filter(section=section)
    return revisions.select_related("created_by").order_by("section", "created_at", "id")


def handover_runs(handover: Handover) -> list[Run]:
    """The runs ``handover`` is about, from its prefetched links (``handover_get``): no query when prefetched."""
    return [link.run for link in handover.links.all()]

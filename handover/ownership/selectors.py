"""Reading ownership and aged work: who owns a job or target, which work has aged, who may see a team.

Aged work (docs/ownership.md) is four kinds of item, each past its own age (settings, seconds):

- ``failed_run``: a run whose status is ``failed`` or ``missed`` (its business state) with no handover,
  counted from when its status last changed (else its slot, else when it was recorded);
  ``HANDOVER_AGED_FAILED_RUN_SECONDS``.
- ``stalled_handover``: a handover in ``draft``, ``handed_over`` or ``recovering`` with no write
  (state change, edit, owner change: each raises ``updated_at``) since; ``HANDOVER_AGED_HANDOVER_SECONDS``.
  A ``verifying`` handover waits on its next-run check, which ages on its own.
- ``unresolved_ledger``: a run with unresolved ledger items (unverified, absent or uncertain), counted
  from its last ledger change; ``HANDOVER_AGED_LEDGER_SECONDS``.
- ``overdue_check``: a next-run check still ``scheduled`` after its deadline, counted from the deadline;
  ``HANDOVER_AGED_CHECK_SECONDS``.

An item is aged when ``now - since >= age``. Its owner is the target's ownership, field by field over
the job's; an item with neither shows "no owner".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db.models import Exists, F, Max, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.urls import reverse

from handover.core.people import Person
from handover.handovers.models import Handover, HandoverRun
from handover.handovers.selectors import handover_visibility_filter
from handover.notifications.models import Team
from handover.ownership.models import AgedWorkEscalation, JobOwnership, TargetOwnership
from handover.templatetags.handover_tags import seconds_in_words
from runs.attempts.models import Run
from runs.catalog.models import Job, JobTarget
from runs.checks.models import NextRunCheck
from runs.permissions import is_admin, job_list_owned, run_visibility_filter, tenant_list_visible

User = Person | AnonymousUser
Kind = AgedWorkEscalation.Kind
KIND_LIMIT = 500  # per kind and call: the oldest first
STALLED_HANDOVER_STATUSES = (Handover.Status.DRAFT, Handover.Status.HANDED_OVER, Handover.Status.RECOVERING)
AGE_SETTINGS = {
    Kind.FAILED_RUN: "HANDOVER_AGED_FAILED_RUN_SECONDS",
    Kind.STALLED_HANDOVER: "HANDOVER_AGED_HANDOVER_SECONDS",
    Kind.UNRESOLVED_LEDGER: "HANDOVER_AGED_LEDGER_SECONDS",
    Kind.OVERDUE_CHECK: "HANDOVER_AGED_CHECK_SECONDS",
}


def aged_age_seconds(kind: str) -> int:
    """The age (seconds) past which an item of ``kind`` is aged, from settings (``AGE_SETTINGS``)."""
    return int(getattr(settings, AGE_SETTINGS[Kind(kind)]))


@dataclass
class Owner:
    """An item's owning team and escalation owner (either may be None); ``from_target`` when the target's
    own ownership named at least one of them."""

    team: Team | None = None
    escalation_owner: Person | None = None
    from_target: bool = False

    @property
    def words(self) -> str:
        """ "team Billing · escalation owner olga", or "no owner" when neither is named."""
        parts = []
        if self.team is not None:
            parts.append(f"team {self.team.name}")
        if self.escalation_owner is not None:
            parts.append(f"escalation owner {self.escalation_owner.get_username()}")
        return " · ".join(parts) or "no owner"


@dataclass
class AgedItem:
    """One aged item: what (``kind``, ``subject`` public id, ``title``, ``url`` path), since when (UTC),
    how old (``age_seconds`` at the ``now`` asked), its job / tenant / run / target ids and its owner.
    ``last_step`` is the highest ladder step already sent for this episode (0: none)."""

    kind: str
    subject: UUID
    title: str
    detail: str
    url: str
    since: datetime
    age_seconds: int
    job: Job
    tenant_id: int | None
    run_id: int | None
    target_id: int | None
    owner: Owner = field(default_factory=Owner)
    last_step: int = 0

    @property
    def kind_label(self) -> str:
        """The kind in words ("Failed run with no handover")."""
        return str(Kind(self.kind).label)

    @property
    def age_words(self) -> str:
        """The age in words, two largest units ("3 days 2 hours")."""
        return seconds_in_words(self.age_seconds)


# --- ownership ------------------------------------------------------------------------------------


def job_ownership_get(*, job: Job) -> JobOwnership | None:
    """The job's ownership row (team and escalation owner loaded), or None when never set."""
    return JobOwnership.objects.select_related("team", "escalation_owner", "set_by").filter(job=job).first()


def target_ownership_map(*, job: Job) -> dict[int, TargetOwnership]:
    """The job's targets' own ownership rows by target id. Queries: one."""
    rows = TargetOwnership.objects.select_related("team", "escalation_owner").filter(target__job=job)
    return {row.target_id: row for row in rows}


def owners_resolve(pairs: set[tuple[int, int | None]]) -> dict[tuple[int, int | None], Owner]:
    """The owner of each (job id, target id or None): the target's fields over the job's. Queries: two
    (none for no pairs)."""
    if not pairs:
        return {}
    job_rows = {
        row.job_id: row
        for row in JobOwnership.objects.select_related("team", "escalation_owner").filter(
            job_id__in={job_id for job_id, _ in pairs}
        )
    }
    target_rows = {
        row.target_id: row
        for row in TargetOwnership.objects.select_related("team", "escalation_owner").filter(
            target_id__in={t for _, t in pairs if t is not None}
        )
    }
    owners: dict[tuple[int, int | None], Owner] = {}
    for job_id, target_id in pairs:
        job_row = job_rows.get(job_id)
        target_row = target_rows.get(target_id) if target_id is not None else None
        team = target_row.team if target_row is not None and target_row.team is not None else None
        person = target_row.escalation_owner if target_row is not None and target_row.escalation_owner else None
        from_target = team is not None or person is not None
        if team is None and job_row is not None:
            team = job_row.team
        if person is None and job_row is not None:
            person = job_row.escalation_owner
        owners[(job_id, target_id)] = Owner(team=team, escalation_owner=person, from_target=from_target)
    return owners


# --- aged work ------------------------------------------------------------------------------------


def _run_title(run: Run) -> str:
    return f"{run.job.key} · {run.tenant.slug} · {run.environment} · window {run.window_start:%Y-%m-%d %H:%M}Z"


# Each kind's rows carry the same annotations: ``since`` and the item's tenant, run and target ids.
_RUN_PLACE = {"aged_tenant_id": F("tenant_id"), "aged_run_id": F("pk"), "aged_target_id": F("target_id")}


def _failed_runs(cut: datetime, user: User | None) -> QuerySet[Run]:
    return (
        Run.objects.filter(
            run_visibility_filter(user=user) if user is not None else Q(),
            status__in=[Run.Status.FAILED, Run.Status.MISSED],
        )
        .filter(~Exists(HandoverRun.objects.filter(run=OuterRef("pk"))))
        .annotate(since=Coalesce("status_changed_at", "scheduled_for", "created_at"))
        .filter(since__lte=cut)
        .annotate(**_RUN_PLACE)
        .select_related("job", "tenant")
        .order_by("since", "id")
    )


def _unresolved_ledger_runs(cut: datetime, user: User | None) -> QuerySet[Run]:
    return (
        Run.objects.filter(run_visibility_filter(user=user) if user is not None else Q(), unresolved_count__gt=0)
        .annotate(since=Coalesce("ledger_updated_at", "created_at"))
        .filter(since__lte=cut)
        .annotate(**_RUN_PLACE)
        .select_related("job", "tenant")
        .order_by("since", "id")
    )


def _stalled_handovers(cut: datetime, user: User | None) -> QuerySet[Handover]:
    first_run = HandoverRun.objects.filter(handover=OuterRef("pk")).order_by("pk")
    return (
        Handover.objects.filter(status__in=STALLED_HANDOVER_STATUSES, updated_at__lte=cut)
        .filter(handover_visibility_filter(user=user) if user is not None else Q())
        .annotate(
            since=F("updated_at"),
            aged_run_id=Subquery(first_run.values("run_id")[:1]),
            aged_tenant_id=Subquery(first_run.values("run__tenant_id")[:1]),
            aged_target_id=Subquery(first_run.values("run__target_id")[:1]),
        )
        .select_related("job")
        .order_by("updated_at", "id")
    )


def _overdue_checks(cut: datetime, user: User | None) -> QuerySet[NextRunCheck]:
    return (
        NextRunCheck.objects.filter(status=NextRunCheck.Status.SCHEDULED, deadline_at__lte=cut)
        .filter(run_visibility_filter(user=user, prefix="target__") if user is not None else Q())
        .annotate(
            since=F("deadline_at"),
            aged_tenant_id=F("target__tenant_id"),
            aged_run_id=F("recovered_run_id"),
            aged_target_id=F("target_id"),
        )
        .select_related("target__job", "target__tenant")
        .order_by("deadline_at", "id")
    )


def _check_title(check: NextRunCheck) -> str:
    target = check.target
    return (
        f"{target.job.key} · {target.tenant.slug} · {target.environment} · next run {check.expected_at:%Y-%m-%d %H:%M}Z"
    )


@dataclass(frozen=True)
class AgedSource:
    """How one aged-work kind is read and shown.

    ``rows(cut, user)``: the queryset of that kind's rows aged at ``cut`` (UTC: now minus the kind's
    age), oldest first, limited to what ``user`` may see (None: everything); each row is annotated with
    ``since`` (UTC) and ``aged_tenant_id`` / ``aged_run_id`` / ``aged_target_id`` (each may be None).
    ``url_name``: the page of a row (reversed with its ``public_id``); ``job``, ``title`` and ``detail``:
    a row's job and its words."""

    rows: Callable[[datetime, User | None], QuerySet[Any]]
    url_name: str
    job: Callable[[Any], Job]
    title: Callable[[Any], str]
    detail: Callable[[Any], str]

    def item(self, kind: str, row: Any) -> AgedItem:
        """The aged item of one of ``rows``'s rows, ``age_seconds`` 0 and owner and last step unset
        (``aged_work_list`` fills them)."""
        return AgedItem(
            kind=kind,
            subject=row.public_id,
            title=self.title(row),
            detail=self.detail(row),
            url=reverse(self.url_name, kwargs={"id": row.public_id}),
            since=row.since,
            age_seconds=0,
            job=self.job(row),
            tenant_id=row.aged_tenant_id,
            run_id=row.aged_run_id,
            target_id=row.aged_target_id,
        )


# Read in this order; ``aged_work_list`` sorts the union afterwards.
AGED_SOURCES: dict[str, AgedSource] = {
    Kind.FAILED_RUN: AgedSource(
        rows=_failed_runs,
        url_name="runs:run-detail",
        job=lambda run: run.job,
        title=_run_title,
        detail=lambda run: f"run {run.status}; no handover written",
    ),
    Kind.UNRESOLVED_LEDGER: AgedSource(
        rows=_unresolved_ledger_runs,
        url_name="runs:run-detail",
        job=lambda run: run.job,
        title=_run_title,
        detail=lambda run: (
            f"{run.unresolved_count} unresolved item(s): {run.uncertain_count} uncertain, "
            f"{run.absent_count} absent, {run.unverified_count} unverified"
        ),
    ),
    Kind.STALLED_HANDOVER: AgedSource(
        rows=_stalled_handovers,
        url_name="handover:handover-detail",
        job=lambda handover: handover.job,
        title=lambda handover: handover.title,
        detail=lambda handover: f"{handover.get_status_display().lower()}; no change since",
    ),
    Kind.OVERDUE_CHECK: AgedSource(
        rows=_overdue_checks,
        url_name="runs:check-detail",
        job=lambda check: check.target.job,
        title=_check_title,
        detail=lambda check: "next-run check still scheduled past its deadline",
    ),
}


def aged_work_list(*, now: datetime, user: User | None = None, kinds: list[str] | None = None) -> list[AgedItem]:
    """Every aged item at ``now`` (UTC), oldest first, with its owner and the last ladder step sent.

    ``user``: only what that person may see (runs by ``run_visibility_filter``, handovers by
    ``handover_visibility_filter``, checks by their target's tenant and job); None: everything (the
    sweep). ``kinds``: limit to those kinds (``AgedWorkEscalation.Kind`` values). At most
    ``KIND_LIMIT`` per kind. Each kind is read by its ``AGED_SOURCES`` entry. Queries: one per kind
    asked, two for owners, one for the ladder.
    """
    wanted = set(kinds) if kinds else set(Kind.values)
    items: list[AgedItem] = []
    for kind, source in AGED_SOURCES.items():
        if kind not in wanted:
            continue
        cut = now - timedelta(seconds=aged_age_seconds(kind))
        items.extend(source.item(kind, row) for row in source.rows(cut, user)[:KIND_LIMIT])
    owners = owners_resolve({(item.job.pk, item.target_id) for item in items})
    steps = _last_steps(items)
    for item in items:
        item.age_seconds = int((now - item.since) / timedelta(seconds=1))
        item.owner = owners[(item.job.pk, item.target_id)]
        item.last_step = steps.get((item.kind, item.subject, item.since), 0)
    items.sort(key=lambda i: (i.since, i.kind, str(i.subject)))
    return items


def _last_steps(items: list[AgedItem]) -> dict[tuple[str, UUID, datetime], int]:
    """The highest step sent per (kind, subject, since) among ``items``. Queries: one."""
    if not items:
        return {}
    rows = (
        AgedWorkEscalation.objects.filter(subject__in={item.subject for item in items})
        .values("kind", "subject", "since")
        .annotate(last=Max("step"))
        .order_by()
    )
    return {(row["kind"], row["subject"], row["since"]): row["last"] for row in rows}


def aged_work_for_team(*, team: Team, items: list[AgedItem]) -> list[AgedItem]:
    """The items of ``items`` owned by ``team``."""
    return [item for item in items if item.owner.team is not None and item.owner.team.pk == team.pk]


def aged_work_for_person(*, user: User, items: list[AgedItem]) -> list[AgedItem]:
    """The items of ``items`` whose escalation owner is ``user`` or whose owning team has ``user`` as a member.
    Queries: one (the person's teams)."""
    team_ids = set(Team.objects.filter(members__pk=int(user.pk or 0)).values_list("pk", flat=True))
    return [
        item
        for item in items
        if (item.owner.escalation_owner is not None and item.owner.escalation_owner.pk == user.pk)
        or (item.owner.team is not None and item.owner.team.pk in team_ids)
    ]


# --- teams ----------------------------------------------------------------------------------------


def team_list_visible(*, user: User) -> QuerySet[Team]:
    """Teams ``user`` may see: all for admins; otherwise the teams they belong to and those owning a job
    or target they may see (a tenant role on the target's tenant, technical owner of the job). Teams
    grant no permission; this only decides whose team pages a person can open (else 404)."""
    if not user.is_authenticated or not user.is_active:
        return Team.objects.none()
    if is_admin(user):
        return Team.objects.all()
    tenants = tenant_list_visible(user=user).values("pk")
    jobs = job_list_owned(user=user).values("pk")
    visible_targets = JobTarget.objects.filter(Q(tenant__in=tenants) | Q(job__in=jobs))
    return Team.objects.filter(
        Q(members__pk=int(user.pk or 0))
        | Q(owned_jobs__job__in=visible_targets.values("job_id"))
        | Q(owned_jobs__job__in=jobs)
        | Q(owned_targets__target__in=visible_targets)
    ).distinct()


def team_list_assignable(*, user: User, keeping: int | None = None) -> QuerySet[Team]:
    """Teams ``user`` may name as an owner (of a problem, a job or a target) or filter problems by: those
    they may see (``team_list_visible``) and every team that owns no job or target (an engineering team, a
    new team: nothing of any client's shows through it). A team owning only other clients' jobs or targets
    is left out, as its page is (404). ``keeping``: the pk of the team the record names now, offered
    whatever it is, so that an edit keeps it."""
    visible = team_list_visible(user=user).values("pk")
    if not user.is_authenticated or not user.is_active:
        return Team.objects.none()
    offered = Q(pk__in=visible) | Q(owned_jobs__isnull=True, owned_targets__isnull=True)
    if keeping is not None:
        offered |= Q(pk=keeping)
    return Team.objects.filter(offered).distinct()


def team_get(*, user: User, public_id: UUID | str) -> Team | None:
    """The team with ``public_id`` if ``user`` may see it (``team_list_visible``), else None."""
    return team_list_visible(user=user).prefetch_related("members").filter(public_id=public_id).first()

"""The "needs attention" page: what nobody has picked up yet, each with its owner, oldest first.

Sections: failed runs with no handover; open handovers with no escalation owner; runs unresolved
for longer than ``HANDOVER_UNRESOLVED_AGE_SECONDS``; job targets failing repeatedly
(``HANDOVER_REPEATED_FAILURES`` of their last ``HANDOVER_REPEATED_FAILURES_OF`` runs); aged work with
its owning team and escalation owner and its age (``handover.ownership.selectors``, docs/ownership.md); unmatched
alerts waiting for triage; runs whose slot or re-fires need a person and jobs whose runs outlast their
interval (``runs.checks.slot_review``); for admins, senders refused for an hour or more
(``runs.alerts.refusals``). Each section is one query or a few (plus two for the technical owners' names).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypedDict
from urllib.parse import urlencode
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.contrib.contenttypes.models import ContentType
from django.db.models import Count, Exists, Max, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.urls import reverse
from guardian.models import GroupObjectPermission, UserObjectPermission

from handover.core.people import Person
from handover.core.time_format import window_text
from handover.handovers.models import Handover, HandoverRun
from handover.handovers.selectors import handover_visibility_filter
from handover.ownership.selectors import aged_work_list
from runs.alerts.models import Alert
from runs.alerts.refusals import refused_senders_attention
from runs.alerts.selectors import alert_list
from runs.attempts.models import Run
from runs.catalog.models import Job, JobTarget
from runs.checks.slot_review import duration_warnings, fabricated_window_runs, unexplained_refires
from runs.permissions import TECHNICAL_OWNER_CODENAME, run_visibility_filter, run_visibility_filter_listed
from runs.timeline.models import TimelineEvent

User = Person | AnonymousUser
SECTION_LIMIT = 100
FAILING_STATUSES = (Run.Status.FAILED, Run.Status.MISSED)
SETTLED_STATUSES = (Run.Status.SUCCEEDED, Run.Status.FAILED, Run.Status.MISSED)

SECTION_TITLES = {
    "failed_runs": "Failed runs with no handover",
    "unowned_handovers": "Handovers with no escalation owner",
    "unresolved_runs": "Runs unresolved for too long",
    "repeated_failures": "Jobs failing repeatedly",
    "aged_work": "Aged work, with its owner",
    "run_identity": "Runs whose slot or re-fires need a person",
    "outlasting_runs": "Jobs whose runs outlast their interval",
    "refused_senders": "Senders refused for an hour or more (admins)",
    "unmatched_alerts": "Unmatched alerts waiting for triage",
}


@dataclass
class AttentionItem:
    """One line of the page: what, since when, who owns it, where to go."""

    title: str
    detail: str
    since: datetime | None
    owner: str
    url: str
    is_job_paused: bool = False


def job_technical_owner_names(job_ids: Iterable[int]) -> dict[int, list[str]]:
    """Usernames of the technical owners of each job (direct and through groups). Queries: two."""
    ids = [str(pk) for pk in set(job_ids)]
    owners: dict[int, list[str]] = defaultdict(list)
    if not ids:
        return owners
    content_type = ContentType.objects.get_for_model(Job)
    common = {"content_type": content_type, "permission__codename": TECHNICAL_OWNER_CODENAME, "object_pk__in": ids}
    rows = list(UserObjectPermission.objects.filter(**common).values_list("object_pk", "user__username"))
    rows += list(
        GroupObjectPermission.objects.filter(**common, group__user__isnull=False).values_list(
            "object_pk", "group__user__username"
        )
    )
    for object_pk, username in sorted(rows):
        if username not in owners[int(object_pk)]:
            owners[int(object_pk)].append(username)
    return owners


def _owners_text(names: list[str]) -> str:
    return ", ".join(names) + " (technical owner)" if names else "nobody named — support of the tenant"


def _run_title(run: Run) -> str:
    window = window_text(run.window_start, run.window_end, run.job.timezone)
    return f"{run.job.key} · {run.tenant.slug} · {run.environment} · window {window}"


def attention_failed_runs(*, user: User) -> QuerySet[Run]:
    """Failed or missed runs ``user`` may see that no handover covers: the page's first section."""
    return Run.objects.filter(run_visibility_filter(user=user), status__in=FAILING_STATUSES).filter(
        ~Exists(HandoverRun.objects.filter(run=OuterRef("pk")))
    )


def attention_unowned_handovers(*, user: User) -> QuerySet[Handover]:
    """Handovers ``user`` may see, not closed, that name no escalation owner: the page's second section."""
    return Handover.objects.filter(handover_visibility_filter(user=user), escalation_owner__isnull=True).exclude(
        status=Handover.Status.CLOSED
    )


class _OpenLinkAnnotations(TypedDict):
    since: datetime
    open_owner: str | None
    open_handover: UUID | None


if TYPE_CHECKING:  # django-stubs is a development dependency
    from django_stubs_ext import WithAnnotations

    UnresolvedRun = WithAnnotations[Run, _OpenLinkAnnotations]


def attention_unresolved_runs(*, user: User, older_than: datetime) -> list[UnresolvedRun]:
    """Runs ``user`` may see, from before ``older_than`` (their slot, else when recorded), that still have
    unresolved or possibly duplicated work items or an open handover not yet resolved: the oldest 100
    (``SECTION_LIMIT``) by that time, then id, each annotated ``since``, ``open_owner`` (the open
    handover's escalation owner's username or None) and ``open_handover`` (its public id or None).

    Read as two parts, each from its own rows and merged here: the runs with such items (from the
    partial index ``runs_run_unresolved_since_idx``), and the runs an open, unresolved handover links
    (from the handover links). ``OR``-ed in one query, PostgreSQL read every run of the history to
    find them. Queries: two.
    """
    since = Coalesce("scheduled_for", "created_at")
    open_links = HandoverRun.objects.filter(run=OuterRef("pk"), is_open=True)
    unresolved_open = HandoverRun.objects.filter(is_open=True).exclude(
        handover__status__in=[Handover.Status.RESOLVED, Handover.Status.CLOSED]
    )
    runs = (
        Run.objects.filter(run_visibility_filter(user=user))
        .select_related("job", "tenant")
        .annotate(
            since=since,
            open_owner=Subquery(open_links.values("handover__escalation_owner__username")[:1]),
            open_handover=Subquery(open_links.values("handover__public_id")[:1]),
        )
        .filter(since__lt=older_than)
        .order_by("since", "id")
    )
    parts = (
        runs.filter(Q(unresolved_count__gt=0) | Q(possible_duplicate_count__gt=0)),
        runs.filter(pk__in=unresolved_open.values("run_id")),
    )
    found: dict[int, UnresolvedRun] = {run.pk: run for part in parts for run in part[:SECTION_LIMIT]}
    return sorted(found.values(), key=lambda run: (run.since, run.pk))[:SECTION_LIMIT]


RecentRun = tuple[int, str, datetime | None, str, str, str, datetime]
RECENT_RUN_FIELDS = ("job_id", "job__key", "job__paused_at", "tenant__slug", "environment", "status", "window_start")


def recent_settled_runs(*, user: User, of: int) -> list[RecentRun]:
    """The last ``of`` settled runs (succeeded, failed, missed; newest window first, then id) of each
    ``(job, tenant, environment)`` ``user`` may see, as rows ``(job id, job key, job paused_at, tenant
    slug, environment, status, window_start)``: what "failing repeatedly" is judged on.

    Read per job target, never over the whole history: one query over the visible targets, with the
    status and window start at each of the ``of`` positions as a subquery (an index probe on the run
    identity, ``runs_run_identity_unique``); then the groups with runs but no target, found through
    the runs without a target and read one query each: a run needs no target (an alert for a
    registered job and tenant in an environment nobody listed still creates its run, and a run of an
    inactive target is recorded without it: ``runs.alerts.identity``). A window function over every
    visible run read the whole history (0.6 s at a million stored alerts). Queries: two, plus one per such group.
    """
    settled = Run.objects.filter(
        job_id=OuterRef("job_id"),
        tenant_id=OuterRef("tenant_id"),
        environment=OuterRef("environment"),
        status__in=SETTLED_STATUSES,
    ).order_by("-window_start", "-id")
    positions = {}
    for k in range(of):
        positions[f"status_{k}"] = Subquery(settled.values("status")[k : k + 1])
        positions[f"start_{k}"] = Subquery(settled.values("window_start")[k : k + 1])
    rows: list[RecentRun] = []
    groups = set()
    targets = (
        JobTarget.objects.filter(run_visibility_filter(user=user))
        .annotate(**positions)
        .values_list("job_id", "job__key", "job__paused_at", "tenant__slug", "environment", "tenant_id", *positions)
    )
    for job_id, key, paused_at, slug, environment, tenant_id, *at in targets:
        groups.add((job_id, tenant_id, environment))
        for status, start in zip(at[0::2], at[1::2], strict=True):
            if status is not None:
                rows.append((job_id, key, paused_at, slug, environment, status, start))
    untargeted = (
        Run.objects.filter(run_visibility_filter(user=user), target__isnull=True, status__in=SETTLED_STATUSES)
        .values_list("job_id", "tenant_id", "environment")
        .order_by()
        .distinct()
    )
    for job_id, tenant_id, environment in sorted(set(untargeted) - groups):
        rows += (
            Run.objects.filter(job_id=job_id, tenant_id=tenant_id, environment=environment, status__in=SETTLED_STATUSES)
            .order_by("-window_start", "-id")
            .values_list(*RECENT_RUN_FIELDS)[:of]
        )
    return rows


def attention_unmatched_alerts(*, user: User) -> QuerySet[Alert]:
    """Unmatched alerts ``user`` may see that are no duplicate, oldest first (then id): the page's last
    section, which lists the first 100."""
    return (
        alert_list(user=user, outcome=Alert.Outcome.UNMATCHED)
        .filter(duplicate_of__isnull=True)
        .order_by("created_at", "id")
    )


def attention_state(*, user: User, now: datetime) -> tuple[object, ...]:
    """A fingerprint of the page for its ETag: what ``user`` sees of runs, their timelines, handovers and alerts.

    ``(runs count, newest run change, newest event id, handovers count, newest handover change,
    [(id, change) of each unmatched alert listed], the hour)``: every section is computed from these rows;
    the hour makes the age-based sections ("unresolved for too long") refresh as time passes.
    Queries: four (six for a person who is not an admin: their tenants and jobs are looked up first).
    """
    runs = Run.objects.filter(run_visibility_filter(user=user))
    run_totals = runs.aggregate(count=Count("pk"), updated=Max("updated_at"))
    # The newest event is found from the newest end of the events' primary key (``IN`` the visible runs,
    # PostgreSQL read every event of the history: 0.2-0.3 s at a million stored alerts).
    newest_event = (
        TimelineEvent.objects.filter(run_visibility_filter_listed(user=user, prefix="run__"), run__isnull=False)
        .order_by("-pk")
        .values_list("pk", flat=True)
        .first()
    )
    handovers = Handover.objects.filter(handover_visibility_filter(user=user)).aggregate(
        count=Count("pk"), updated=Max("updated_at")
    )
    # The unmatched alerts the page lists, as it lists them: not a count of every unmatched alert and
    # duplicate of the history (0.1 s at 25,000).
    alerts = list(attention_unmatched_alerts(user=user).values_list("pk", "updated_at")[:SECTION_LIMIT])
    return (
        *run_totals.values(),
        newest_event,
        *handovers.values(),
        alerts,
        now.replace(minute=0, second=0, microsecond=0),
    )


def attention_sections(*, user: User, now: datetime) -> dict[str, list[AttentionItem]]:
    """Everything that needs a person, by section (keys of ``SECTION_TITLES``), oldest first, at most 100 each.

    Only what ``user`` may see. Queries: at most seven (five sections, two for owner names), plus the
    aged work's (one per kind, and with aged items two for their owners and one for the ladder).
    """
    visible_runs = Run.objects.filter(run_visibility_filter(user=user)).select_related("job", "tenant")
    age = timedelta(seconds=settings.HANDOVER_UNRESOLVED_AGE_SECONDS)
    since = Coalesce("scheduled_for", "created_at")

    failed = list(
        attention_failed_runs(user=user)
        .select_related("job", "tenant")
        .annotate(since=since)
        .order_by("since", "id")[:SECTION_LIMIT]
    )
    unresolved = attention_unresolved_runs(user=user, older_than=now - age)
    unowned = list(
        attention_unowned_handovers(user=user)
        .select_related("job", "created_by")
        .order_by("created_at", "id")[:SECTION_LIMIT]
    )
    window = RepeatedFailureWindow()
    recent = recent_settled_runs(user=user, of=window.of)
    unmatched = list(attention_unmatched_alerts(user=user)[:SECTION_LIMIT])

    groups: dict[tuple[int, str, str, str, bool], list[tuple[str, datetime]]] = defaultdict(list)
    for job_id, key, paused_at, tenant, environment, status, start in recent:
        groups[(job_id, key, tenant, environment, paused_at is not None)].append((status, start))
    repeated = []
    for (job_id, key, tenant, environment, paused), rows in groups.items():
        failures = [start for status, start in rows if status in FAILING_STATUSES]
        if len(failures) >= window.failures:
            repeated.append((min(failures), job_id, key, tenant, environment, paused, len(failures), len(rows)))
    repeated.sort()

    owners = job_technical_owner_names(
        [r.job_id for r in failed] + [r.job_id for r in unresolved] + [row[1] for row in repeated]
    )
    sections: dict[str, list[AttentionItem]] = {key: [] for key in SECTION_TITLES}
    for run in failed:
        sections["failed_runs"].append(
            AttentionItem(
                title=_run_title(run),
                detail=f"run {run.status}; no handover written",
                since=run.since,
                owner=_owners_text(owners[run.job_id]),
                url=reverse("runs:run-detail", kwargs={"id": run.public_id}),
                is_job_paused=run.job.paused_at is not None,
            )
        )
    for handover in unowned:
        sections["unowned_handovers"].append(
            AttentionItem(
                title=handover.title,
                detail=f"{handover.get_status_display().lower()}; no escalation owner named",
                since=handover.created_at,
                owner=f"{handover.created_by.get_username()} (wrote it)",
                url=reverse("handover:handover-detail", kwargs={"id": handover.public_id}),
                is_job_paused=handover.job.paused_at is not None,
            )
        )
    for stale in unresolved:
        parts = []
        if stale.unresolved_count:
            parts.append(f"{stale.unresolved_count} unresolved item(s)")
        if stale.possible_duplicate_count:
            parts.append(f"{stale.possible_duplicate_count} possible duplicate(s)")
        if stale.open_handover:
            parts.append("open handover not resolved")
        owner = stale.open_owner
        sections["unresolved_runs"].append(
            AttentionItem(
                title=_run_title(stale),
                detail="; ".join(parts) or "unresolved",
                since=stale.since,
                owner=f"{owner} (escalation owner)" if owner else _owners_text(owners[stale.job_id]),
                url=(
                    reverse("handover:handover-detail", kwargs={"id": stale.open_handover})
                    if stale.open_handover
                    else reverse("runs:run-detail", kwargs={"id": stale.public_id})
                ),
                is_job_paused=stale.job.paused_at is not None,
            )
        )
    for first, job_id, key, tenant, environment, paused, count, total in repeated[:SECTION_LIMIT]:
        sections["repeated_failures"].append(
            AttentionItem(
                title=f"{key} · {tenant} · {environment}",
                detail=f"{count} of its last {total} runs failed",
                since=first,
                owner=_owners_text(owners[job_id]),
                url=reverse("runs:run-list") + "?" + urlencode({"job": key, "tenant": tenant}),
                is_job_paused=paused,
            )
        )
    for aged in aged_work_list(now=now, user=user)[:SECTION_LIMIT]:
        sections["aged_work"].append(
            AttentionItem(
                title=aged.title,
                detail=f"{aged.kind_label}, aged {aged.age_words}: {aged.detail}"
                + (f"; reminder {aged.last_step} sent" if aged.last_step else ""),
                since=aged.since,
                owner=aged.owner.words,
                url=aged.url,
                is_job_paused=aged.job.paused_at is not None,
            )
        )
    for alert in unmatched:
        sections["unmatched_alerts"].append(
            AttentionItem(
                title=f"{alert.source}: {alert.summary or alert.job_key or 'alert'}",
                detail=alert.reason or "unmatched",
                since=alert.created_at,
                owner="admins (triage)",
                url=reverse("runs:alert-detail", kwargs={"id": alert.public_id}),
            )
        )
    _identity_sections(sections, visible_runs, now)
    # Refused senders are site configuration, not tenant data: admins only (one more query for them).
    if getattr(user, "is_staff", False):
        for sender in refused_senders_attention(now=now)[:SECTION_LIMIT]:
            where = sender.integration_name or f"the {sender.source} address (no key recognised)"
            sections["refused_senders"].append(
                AttentionItem(
                    title=f"{where}: {sender.count} request(s) refused",
                    detail=f"{', '.join(sender.reasons)}; last {sender.last_at:%Y-%m-%d %H:%M}Z",
                    since=sender.first_at,
                    owner="admins (integrations)",
                    url=(
                        reverse("runs:integration-detail", kwargs={"id": sender.integration_public_id})
                        if sender.integration_public_id
                        else reverse("runs:integration-list")
                    ),
                )
            )
    return sections


def _identity_sections(sections: dict[str, list[AttentionItem]], visible_runs: QuerySet[Run], now: datetime) -> None:
    """The slot rules' items (docs/slots.md): runs recorded with a window made up from an off-schedule
    time (listed, never merged silently), runs with a re-fire nobody explained, and job targets whose
    recent runs outlast the interval to their next slot. Queries: four or five."""
    for item in fabricated_window_runs(runs=visible_runs, now=now, limit=SECTION_LIMIT):
        run = item.run
        sections["run_identity"].append(
            AttentionItem(
                title=_run_title(run),
                detail=f"window made up from the off-schedule time {run.scheduled_for:%Y-%m-%d %H:%M:%S}Z"
                + (f"; its slot is {item.slot:%Y-%m-%d %H:%M}Z" if item.slot else "; no slot takes that time"),
                since=run.scheduled_for,
                owner="support of the tenant",
                url=reverse("runs:run-detail", kwargs={"id": run.public_id}),
                is_job_paused=run.job.paused_at is not None,
            )
        )
    for run in unexplained_refires(visible_runs).order_by("scheduled_for", "id")[:SECTION_LIMIT]:
        sections["run_identity"].append(
            AttentionItem(
                title=_run_title(run),
                detail="an alert fired again after its resolve on the same execution; not explained yet",
                since=run.scheduled_for or run.created_at,
                owner="support of the tenant",
                url=reverse("runs:run-detail", kwargs={"id": run.public_id}),
                is_job_paused=run.job.paused_at is not None,
            )
        )
    for warning in duration_warnings(runs=visible_runs, now=now)[:SECTION_LIMIT]:
        sections["outlasting_runs"].append(
            AttentionItem(
                title=f"{warning.job.key} · {warning.environment}",
                detail=warning.text,
                since=None,
                owner="the job's technical owners",
                url=reverse("runs:job-detail", kwargs={"id": warning.job.public_id}),
                is_job_paused=warning.job.paused_at is not None,
            )
        )


@dataclass(frozen=True)
class RepeatedFailureWindow:
    """``failures`` of the last ``of`` settled runs of one job target count as failing repeatedly."""

    failures: int = 0
    of: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "failures", self.failures or settings.HANDOVER_REPEATED_FAILURES)
        object.__setattr__(self, "of", self.of or settings.HANDOVER_REPEATED_FAILURES_OF)

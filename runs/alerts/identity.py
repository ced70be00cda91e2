"""Where a record belongs: its job, tenant (if available to the key), environment and window, every
reason it cannot be placed, and the run of that identity."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.utils import timezone

from handover.core.durations import seconds_in_words
from handover.core.rows import row_insert_unless_conflict
from runs.alerts.context import PostContext
from runs.alerts.parsers.base import AlertKind, ParsedAlert, parse_timestamp
from runs.attempts.models import Run
from runs.attempts.services import RUN_STATUS_FOR_ATTEMPT
from runs.catalog.models import Job, JobTarget, Tenant
from runs.checks.schedule.cron import ScheduleError, schedule_prepare
from runs.checks.schedule.fire_times import next_fire_time, previous_fire_time
from runs.checks.schedule.slots import SlotPlacement, SlotReport, TimeKind, placement_describe
from runs.checks.slot_placement import report_place, slot_schedule, slot_window

MANUAL_TRIGGERS = ("manual_rerun", "manual_replay")
NEUTRAL_TENANT_REASON = "tenant {slug!r} is not available to this integration key"
NEUTRAL_TENANT_ALIAS_HINT = (
    " (a label that cannot spell a tenant's slug needs an entry in this integration's `tenant_aliases`)"
)


@dataclass
class RecordIdentity:
    job: Job | None = None
    tenant: Tenant | None = None
    environment: str | None = None
    window_start: datetime | None = None
    window_end: datetime | None = None
    scheduled_for: datetime | None = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    placement: SlotPlacement | None = None


def _tenant_for(
    slug: str | None,
    ctx: PostContext,
    problems: list[str],
    *,
    report_absent: bool = True,
) -> Tenant | None:
    settings = ctx.settings
    slug = slug or settings.get("default_tenant")
    if not slug:
        if report_absent:  # else the parser already said why, in its own terms
            problems.append("no tenant: the alert names none and the integration has no default tenant")
        return None
    tenant = ctx.tenant(slug)
    if tenant is None:
        # Unknown and unbound read the same, so a key cannot probe for tenants. The alias
        # hint depends only on the source's settings, never on whether the tenant exists.
        reason = NEUTRAL_TENANT_REASON.format(slug=slug)
        if "tenant_aliases" in settings:
            reason += NEUTRAL_TENANT_ALIAS_HINT
        problems.append(reason)
        return None
    return tenant


def schedule_in_force(
    job: Job, tenant: Tenant | None, environment: str | None, ctx: PostContext
) -> tuple[str, str, dict[str, str]]:
    """The cron, zone and DST policies in force for a target: the job's, with the target's overrides."""
    target = ctx.target(job, tenant, environment)
    cron = (target.schedule_override if target else "") or job.schedule
    zone = (target.timezone_override if target else "") or job.timezone
    kwargs = {
        "dst_gap": (target.dst_gap_override if target else "") or job.dst_gap_policy,
        "dst_overlap": (target.dst_overlap_override if target else "") or job.dst_overlap_policy,
    }
    return cron, zone, kwargs


def _mentions_window(problems: list[str]) -> bool:
    """True when a parser problem already explains a missing window (a garbled window or scheduled time)."""
    return any("window" in p.lower() or "scheduled" in p.lower() for p in problems)


def record_target_names(record: ParsedAlert, ctx: PostContext) -> tuple[str, str, str] | None:
    """The (job key, tenant slug, environment) ``record`` names, with the integration's default tenant and
    environment where it names none (as ``record_identity`` resolves them); None when one is missing."""
    slug = record.tenant or ctx.settings.get("default_tenant")
    environment = record.environment or ctx.settings.get("default_environment")
    if record.job_key and slug and environment:
        return record.job_key, slug, environment
    return None


def record_identity(
    record: ParsedAlert, ctx: PostContext, *, need_window: bool, received_at: datetime | None = None
) -> RecordIdentity:
    """Resolve job, tenant, environment and (when ``need_window``) the window; collect every reason it fails.

    Parsers list missing or garbled convention fields themselves (``runs/alerts/parsers/base.py``), so the
    mechanism's own "nothing named" reasons for job, tenant and environment are only a safety net for a
    record that came with no problem at all: the inbox never lists one missing label twice. Lookups only
    the mechanism can do are always added: job not registered, tenant not available, no window.
    """
    ident = RecordIdentity(problems=list(record.problems))
    parser_reported = bool(record.problems)
    names = record_target_names(record, ctx)
    if names is not None:
        ctx.prime(*names)
    if record.job_key:
        ident.job = ctx.job(record.job_key)
        if ident.job is None:
            ident.problems.append(f"job {record.job_key!r} is not registered (register it, then reprocess)")
    elif not parser_reported:
        ident.problems.append("no job key in the alert")
    ident.tenant = _tenant_for(record.tenant, ctx, ident.problems, report_absent=not parser_reported)
    ident.environment = record.environment or ctx.settings.get("default_environment")
    if not ident.environment and not parser_reported:
        ident.problems.append("no environment: the alert names none and the integration has no default")
    if not need_window:
        return ident
    received_at = received_at or timezone.now()
    job = ident.job
    rule = record.details.get("scheduled_for_rule")
    # The window is placed only once the tenant is known to be available to the key: the schedule in
    # force depends on the tenant's target, and an unavailable tenant must read the same either way.
    if job is not None and ident.tenant is not None:
        try:
            _place_in_window(ident, record, job, rule, ctx, received_at)
        except (ValueError, OverflowError) as exc:  # ScheduleError is a ValueError
            ident.window_start = ident.window_end = ident.scheduled_for = None
            ident.problems.append(_unplaceable(record, job, ident, ctx, exc))
    # "No window" is a reason of its own whenever the alert names a job (registered or not) and neither
    # carries a window or scheduled time nor has a rule that derives one -- unless a parser problem already
    # says why (a garbled window or scheduled time). Without a job key there is nothing to place.
    derivable = rule == "latest_fire_at_or_before_starts_at" and job is None
    if (
        record.job_key
        and ident.window_start is None
        and not (record.window_start and record.window_end)
        and record.scheduled_for is None
        and not derivable
        and not _mentions_window(record.problems)
    ):
        reason = "no window: the alert carries neither a window nor a scheduled time"
        if record.details.get("manual_run_outside_approval"):
            reason += " (a manual run, outside the approval process: no replay key)"
        ident.problems.append(reason)
    return ident


def _fire_time_words(at: datetime | None) -> str:
    return f"{at.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z" if at is not None else "none"


def _unplaceable(
    record: ParsedAlert, job: Job, ident: RecordIdentity, ctx: PostContext, exc: ValueError | OverflowError
) -> str:
    """Why a record cannot be placed in a window, naming its time and the two nearest fire times.

    A schedule that does not validate is named first ("the job's schedule is invalid: ..."); otherwise
    the window came out empty (a time that is no fire time, aligned coarser than the schedule) or
    beyond the calendar (the year 9999). Never raises.
    """
    cron, zone, kwargs = schedule_in_force(job, ident.tenant, ident.environment, ctx)
    try:
        schedule_prepare(cron, zone, kwargs["dst_gap"], kwargs["dst_overlap"])
    except ScheduleError as invalid:
        whose = "the job's" if cron == job.schedule and zone == job.timezone else "the target's"
        return f"{whose} schedule is invalid: {invalid}"
    at = record.scheduled_for or record.window_end
    if at is None:
        return f"no window can be placed: {exc}"
    what = "scheduled time" if record.scheduled_for else "window end"
    nearest = []
    for find in (previous_fire_time, next_fire_time):
        try:
            nearest.append(_fire_time_words(find(cron, zone, at, **kwargs)))
        except (ValueError, OverflowError):  # before the year 1 or after 9999
            nearest.append("none")
    return (
        f"no window can be placed for the {what} {_fire_time_words(at)} with {cron!r} ({zone}): {exc}; "
        f"the nearest fire times are {nearest[0]} and {nearest[1]}"
    )


def _slot_report(record: ParsedAlert, rule: str | None, received_at: datetime) -> SlotReport | None:
    """The times a record places by (Slot rule 4): window, else scheduled time, else a detection time
    (Grafana's ``startsAt``, tolerance 0), else the actual start; None when it names no time at all."""
    manual = record.trigger in MANUAL_TRIGGERS
    if record.window_start and record.window_end:
        return SlotReport(received_at=received_at, window_end=record.window_end)
    if record.scheduled_for is not None:
        return SlotReport(received_at=received_at, t=record.scheduled_for, time_kind=TimeKind.SCHEDULED)
    if rule == "latest_fire_at_or_before_starts_at" and record.details.get("starts_at"):
        starts_at = parse_timestamp(record.details["starts_at"])
        if starts_at is not None:
            return SlotReport(received_at=received_at, t=starts_at, time_kind=TimeKind.DETECTION, is_manual=manual)
    if record.started_at is not None:
        return SlotReport(received_at=received_at, t=record.started_at, time_kind=TimeKind.START, is_manual=manual)
    return None


def _place_in_window(
    ident: RecordIdentity, record: ParsedAlert, job: Job, rule: str | None, ctx: PostContext, received_at: datetime
) -> None:
    """Place the record on its slot (``runs.checks.slot_placement.report_place``) and derive the window.

    The run's ``scheduled_for`` is the slot; a payload window is kept as sent, otherwise the window is
    derived from the slot. An unmatched placement adds its reason and the two nearest slots to
    ``ident.problems``; a flagged one (late, inferred, a mismatch hint) adds a note for the timeline.
    Raises ``ScheduleError`` (a ``ValueError``) for a schedule in force that does not validate.
    """
    # Checked even when the payload names window and time: nothing downstream may meet a schedule
    # that cannot fire (an admin could once save ``61 * * * *``).
    cron, zone, kwargs = schedule_in_force(job, ident.tenant, ident.environment, ctx)
    schedule_prepare(cron, zone, kwargs["dst_gap"], kwargs["dst_overlap"])
    report = _slot_report(record, rule, received_at)
    if report is None or ident.tenant is None or not ident.environment:
        return
    target = ctx.target(job, ident.tenant, ident.environment)
    placement = report_place(
        job=job,
        tenant=ident.tenant,
        environment=ident.environment,
        target=target,
        report=report,
        execution_id=record.execution_id or "",
    )
    schedule = slot_schedule(job=job, target=target)
    if placement.slot is None:
        nearest = ", ".join(f"{at:%Y-%m-%d %H:%M}Z" for at in placement.nearest)
        reason = f"no window: {placement.reason}" + (f" (nearest slots: {nearest})" if nearest else "")
        if record.details.get("manual_run_outside_approval"):
            reason += " (a manual run, outside the approval process: no replay key)"
        ident.problems.append(reason)
        return
    ident.placement = placement
    ident.scheduled_for = placement.slot
    if record.window_start and record.window_end:
        ident.window_start, ident.window_end = record.window_start, record.window_end
        return
    try:
        ident.window_start, ident.window_end = slot_window(job=job, target=target, slot=placement.slot)
    except ScheduleError as exc:
        ident.problems.append(f"no window: {exc}")
        return
    if placement.is_flagged or (report.time_kind == TimeKind.SCHEDULED and placement.offset_seconds):
        ident.notes.append(
            f"{placement_describe(placement, schedule.timezone)} ({schedule.timezone}; schedule {schedule.cron!r}, "
            f"early tolerance {seconds_in_words(placement.tolerance_seconds)}, "
            f"grace {seconds_in_words(schedule.grace_seconds)})"
        )


def run_for_identity(ident: RecordIdentity, ctx: PostContext, *, status: str | None = None) -> tuple[Run, bool]:
    """The run of ``ident``, created if new (``status``: the status a new run starts with, if known);
    see ``run_get_or_create``."""
    assert ident.job and ident.tenant and ident.environment and ident.window_start and ident.window_end
    return run_get_or_create(
        job=ident.job,
        tenant=ident.tenant,
        environment=ident.environment,
        window_start=ident.window_start,
        window_end=ident.window_end,
        target=ctx.target(ident.job, ident.tenant, ident.environment),
        scheduled_for=ident.scheduled_for,
        status=status,
    )


def run_get_or_create(
    *,
    job: Job,
    tenant: Tenant,
    environment: str,
    window_start: datetime,
    window_end: datetime,
    target: JobTarget | None,
    scheduled_for: datetime | None,
    status: str | None = None,
) -> tuple[Run, bool]:
    """The run with identity (job, tenant, environment, window), created if new; True when created.

    A new run gets ``target`` (when active), ``scheduled_for`` (its slot) and ``status`` (if known).
    Insert first: a new run costs one statement; an existing one, the refused INSERT and its SELECT.
    """
    identity = {
        "job": job,
        "tenant": tenant,
        "environment": environment,
        "window_start": window_start,
        "window_end": window_end,
    }
    run = Run(
        **identity,
        target=target if target is not None and target.is_active else None,
        scheduled_for=scheduled_for,
    )
    if status is not None:
        run.status, run.status_changed_at = status, timezone.now()
    if row_insert_unless_conflict(run):
        return run, True
    run = Run.objects.get(**identity)  # an earlier alert created it (or a concurrent post, now committed)
    run.job, run.tenant = job, tenant  # the same rows: spares the timeline two lookups
    return run, False


# RUN_STATUS_FOR_ATTEMPT keyed by the plain status string a parsed record carries
_RUN_STATUS_BY_ATTEMPT_STATUS: dict[str, str] = {str(a): str(r) for a, r in RUN_STATUS_FOR_ATTEMPT.items()}


def run_status_for_new_run(record: ParsedAlert) -> str | None:
    """The status a run created by this alert starts with: that of the one attempt it reports.

    None when the alert reports several attempts (or none): the status is then refreshed from the
    attempts once they are applied (``run_status_refresh``), as for an existing run.
    """
    if record.kind != AlertKind.ATTEMPT or not record.execution_id or record.related_attempts:
        return None
    return _RUN_STATUS_BY_ATTEMPT_STATUS.get(record.status or "")

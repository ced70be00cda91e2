"""Ingestion: a post becomes a stored Delivery, then Alerts, then runs, attempts and timeline events.

Order (DESIGN.md "Architecture"): commit the Delivery first (raw body, redacted; hash and size of
the bytes as received), then parse, then record and apply each alert in post order, each in its
own short transaction. Nothing authenticated is lost: a crash leaves an alert ``pending`` for
``alert_sweep_pending``; an unparseable post is kept ``rejected``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from types import ModuleType
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings as django_settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from handover.errors import DomainError, InvalidTransition
from runs import schedule
from runs.ingest import get_adapter
from runs.ingest.base import (
    AlertKind,
    FormatError,
    InvalidItem,
    ParsedAlert,
    merged_settings,
    parse_timestamp,
)
from runs.models import (
    Alert,
    Attempt,
    Delivery,
    Integration,
    IntegrationKey,
    Job,
    JobTarget,
    Run,
    RunnerReport,
    Tenant,
    normalise_slug,
)
from runs.redaction import redact_body, redact_text
from runs.services.attempts import AttemptReport, attempt_report_apply, run_status_refresh
from runs.services.timeline import timeline_event_record

logger = logging.getLogger(__name__)

NEUTRAL_TENANT_REASON = "tenant {slug!r} is not available to this integration key"
NEUTRAL_TENANT_ALIAS_HINT = (
    " (a label that cannot spell a tenant's slug needs an entry in this integration's `tenant_aliases`)"
)


@dataclass
class IngestResult:
    """What one post produced: the delivery, its alerts in post order, and a format error if any."""

    delivery: Delivery
    alerts: list[Alert] = field(default_factory=list)
    error: FormatError | None = None
    response: dict[str, Any] = field(default_factory=dict)


def _json_safe(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _record_fields(record: ParsedAlert) -> dict[str, Any]:
    data = asdict(record)
    data.pop("problems", None)
    data.pop("dedup_key", None)
    kept = _json_safe({k: v for k, v in data.items() if v not in (None, "", [], {})})
    # Free-text redaction over every kept value (labels and annotations may carry e-mails or
    # tokens); the replacement has no quotes, so the JSON stays valid.
    return json.loads(redact_text(json.dumps(kept, ensure_ascii=False)))


def dedup_hash(key: str) -> str:
    """SHA-256 hex of a source's dedup key (computed from the raw, unredacted values)."""
    return hashlib.sha256(key.encode("utf-8", errors="surrogatepass")).hexdigest()


# --- the delivery ------------------------------------------------------------------------------


def delivery_receive(
    *,
    key: IntegrationKey,
    body: bytes,
    content_type: str = "",
    received_at: datetime | None = None,
    size_bytes: int | None = None,
    is_body_truncated: bool = False,
) -> IngestResult:
    """Store one authenticated post, then parse and apply every record in it.

    ``body`` is the raw bytes (for an oversized post: its first 64 KiB, with ``size_bytes`` the
    size announced or read and ``is_body_truncated`` set -- such a delivery is stored ``rejected``
    and not parsed). Returns an ``IngestResult``; never raises for bad input. Side effects:
    Delivery, Alert, Run, Attempt, RunnerReport and TimelineEvent rows; the key's ``last_used_at``.
    """
    integration = key.integration
    adapter = get_adapter(integration.source)
    if adapter is None:  # an integration whose adapter was removed: keep the post anyway
        raise DomainError(f"No adapter for {integration.source!r}")
    received_at = received_at or timezone.now()
    with transaction.atomic():
        delivery = Delivery.objects.create(
            integration=integration,
            key=key,
            received_at=received_at,
            content_type=content_type[:200],
            size_bytes=size_bytes if size_bytes is not None else len(body),
            sha256=hashlib.sha256(body).hexdigest(),
            body=redact_body(body, adapter.REDACT_PATHS),
            is_body_truncated=is_body_truncated,
        )
        IntegrationKey.objects.filter(pk=key.pk).update(last_used_at=received_at)
    result = IngestResult(delivery=delivery)
    if is_body_truncated:
        limit = django_settings.HANDOVER_MAX_BODY_BYTES
        result.error = FormatError(f"The body is larger than {limit} bytes; its first 64 KiB are kept.")
        _delivery_finish(delivery, Delivery.Outcome.REJECTED, reason=result.error.message)
        return result
    return _delivery_parse(result, adapter, body, key)


def _delivery_parse(result: IngestResult, adapter: ModuleType, body: bytes, key: IntegrationKey) -> IngestResult:
    delivery = result.delivery
    integration = key.integration
    settings = merged_settings(adapter.DEFAULT_SETTINGS, integration.settings)
    try:
        parsed = adapter.parse(body, settings=settings, received_at=delivery.received_at)
    except FormatError as exc:
        result.error = exc
        _delivery_finish(delivery, Delivery.Outcome.REJECTED, reason=redact_text(exc.message))
        return result
    for index, record in enumerate(parsed.alerts):
        alert = alert_record(delivery=delivery, index=index, record=record)
        if alert.outcome == Alert.Outcome.PENDING and isinstance(record, ParsedAlert):
            alert = alert_apply(alert=alert, record=record, key=key, settings=settings)
        result.alerts.append(alert)
    result.response = dict(parsed.response)
    _delivery_finish(delivery, Delivery.Outcome.PROCESSED, notes=_json_safe(parsed.notes))
    return result


def _delivery_finish(
    delivery: Delivery, outcome: str, *, reason: str = "", notes: dict[str, Any] | None = None
) -> None:
    Delivery.objects.filter(pk=delivery.pk).update(outcome=outcome, reason=reason, notes=notes or {})
    delivery.outcome, delivery.reason, delivery.notes = outcome, reason, notes or {}


def delivery_record_response(*, delivery: Delivery, status: int, body: dict[str, Any]) -> None:
    """Keep the response given to the sender on the delivery (for the integration page)."""
    Delivery.objects.filter(pk=delivery.pk).update(response_status=status, response_body=body)


# --- alerts -----------------------------------------------------------------------------------


def alert_record(*, delivery: Delivery, index: int, record: ParsedAlert | InvalidItem) -> Alert:
    """Insert the Alert row for one parsed record: ``pending``, ``duplicate`` or ``rejected``.

    The partial unique index on (integration, dedup hash) decides which of several concurrent
    posts of one alert is the original; the others become ``duplicate`` rows pointing at it (a
    re-sent unmatched alert also bumps the original's ``repeat_count``, so the inbox shows one).
    """
    integration = delivery.integration
    if isinstance(record, InvalidItem):
        return Alert.objects.create(
            delivery=delivery,
            integration=integration,
            index=index,
            source=integration.source,
            outcome=Alert.Outcome.REJECTED,
            reason=redact_text(f"{record.field}: {record.message}"),
            fields={"field": record.field},
            outcome_at=timezone.now(),
        )
    hashed = dedup_hash(record.dedup_key)
    values = {
        "delivery": delivery,
        "integration": integration,
        "index": index,
        "source": integration.source,
        "kind": record.kind,
        "dedup_key": redact_text(record.dedup_key)[:2000],
        "dedup_hash": hashed,
        "fields": _record_fields(record),
        "job_key": (record.job_key or "")[:300],
        "tenant_slug": (record.tenant or "")[:300],
        "environment": (record.environment or "")[:100],
        "execution_id": (record.execution_id or "")[:300],
        "summary": redact_text(record.summary or "")[:500],
        "group_ref": (record.group_ref or "")[:300],
    }
    with transaction.atomic():
        try:
            with transaction.atomic():
                return Alert.objects.create(**values, outcome=Alert.Outcome.PENDING)
        except IntegrityError:
            pass
        original = Alert.objects.get(integration=integration, dedup_hash=hashed, duplicate_of__isnull=True)
        Alert.objects.filter(pk=original.pk).update(repeat_count=F("repeat_count") + 1)
        return Alert.objects.create(
            **values,
            duplicate_of=original,
            outcome=Alert.Outcome.DUPLICATE,
            reason=f"same alert as {original.public_id} (received {original.created_at:%Y-%m-%d %H:%M:%S}Z)",
            run_id=original.run_id,
            attempt_id=original.attempt_id,
            outcome_at=timezone.now(),
        )


@dataclass
class _Identity:
    job: Job | None = None
    tenant: Tenant | None = None
    environment: str | None = None
    window_start: datetime | None = None
    window_end: datetime | None = None
    scheduled_for: datetime | None = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _tenant_for(
    slug: str | None,
    key: IntegrationKey,
    settings: dict[str, Any],
    problems: list[str],
    *,
    report_absent: bool = True,
) -> Tenant | None:
    slug = slug or settings.get("default_tenant")
    if not slug:
        if report_absent:  # else the parser already said why, in its own terms
            problems.append("no tenant: the alert names none and the integration has no default tenant")
        return None
    tenant = Tenant.objects.filter(slug_key=normalise_slug(slug).casefold()).first()
    allowed = tenant is not None and (key.all_tenants or key.tenants.filter(pk=tenant.pk).exists())
    if not allowed:
        # Unknown and unbound read the same, so a key cannot probe for tenants (DESIGN.md). The alias
        # hint depends only on the source's settings, never on whether the tenant exists.
        reason = NEUTRAL_TENANT_REASON.format(slug=slug)
        if "tenant_aliases" in settings:
            reason += NEUTRAL_TENANT_ALIAS_HINT
        problems.append(reason)
        return None
    return tenant


def _schedule_in_force(job: Job, tenant: Tenant | None, environment: str | None) -> tuple[str, str, dict[str, str]]:
    """The cron, zone and DST policies in force for a target: the job's, with the target's overrides."""
    target = (
        JobTarget.objects.filter(job=job, tenant=tenant, environment=environment).first()
        if tenant is not None and environment
        else None
    )
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


def _identity(record: ParsedAlert, key: IntegrationKey, settings: dict[str, Any], *, need_window: bool) -> _Identity:
    """Resolve job, tenant, environment and (when ``need_window``) the window; collect every reason it fails.

    Parsers list missing or garbled convention fields themselves (``runs/ingest/base.py``), so the
    mechanism's own "nothing named" reasons for job, tenant and environment are only a safety net for a
    record that came with no problem at all: the inbox never lists one missing label twice. Lookups only
    the mechanism can do are always added: job not registered, tenant not available, no window.
    """
    ident = _Identity(problems=list(record.problems))
    parser_reported = bool(record.problems)
    if record.job_key:
        ident.job = Job.objects.filter(key=record.job_key).first()
        if ident.job is None:
            ident.problems.append(f"job {record.job_key!r} is not registered (register it, then reprocess)")
    elif not parser_reported:
        ident.problems.append("no job key in the alert")
    ident.tenant = _tenant_for(record.tenant, key, settings, ident.problems, report_absent=not parser_reported)
    ident.environment = record.environment or settings.get("default_environment")
    if not ident.environment and not parser_reported:
        ident.problems.append("no environment: the alert names none and the integration has no default")
    if not need_window:
        return ident
    job = ident.job
    rule = record.details.get("scheduled_for_rule")
    if job is not None:
        _place_in_window(ident, record, job, rule)
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


def _place_in_window(ident: _Identity, record: ParsedAlert, job: Job, rule: str | None) -> None:
    """Fill the scheduled time and window of ``ident`` from the record and the schedule in force."""
    cron, zone, kwargs = _schedule_in_force(job, ident.tenant, ident.environment)
    ident.scheduled_for = record.scheduled_for
    if (
        ident.scheduled_for is None
        and not (record.window_start and record.window_end)
        and rule == "latest_fire_at_or_before_starts_at"
        and record.details.get("starts_at")
    ):
        # Grafana names no run: its rule counts failures in the latest processing window, so the
        # fire time at or before the alert's start is the one it speaks about (grafana/STORY.md).
        starts_at = parse_timestamp(record.details["starts_at"])
        if starts_at is not None:
            previous = schedule.previous_fire_time(cron, zone, starts_at, **kwargs)
            ident.scheduled_for = previous.astimezone(UTC) if previous else None
    if record.window_start and record.window_end:
        ident.window_start, ident.window_end = record.window_start, record.window_end
        if ident.scheduled_for is None:
            ident.scheduled_for = schedule.fire_time_closing_window(cron, zone, record.window_end, **kwargs).astimezone(
                UTC
            )
    elif ident.scheduled_for:
        start, end = schedule.processing_window(
            cron, zone, ident.scheduled_for, alignment=job.window_alignment, **kwargs
        )
        ident.window_start, ident.window_end = start.astimezone(UTC), end.astimezone(UTC)
        previous = schedule.previous_fire_time(cron, zone, ident.scheduled_for, **kwargs)
        if previous is None or previous.astimezone(UTC) != ident.scheduled_for.astimezone(UTC):
            # Shown, not corrected: the window it falls in places the run without a guess.
            at = ident.scheduled_for.astimezone(UTC)
            local = at.astimezone(ZoneInfo(zone))
            ident.notes.append(
                f"scheduled time {at:%Y-%m-%d %H:%M:%S}Z ({local:%H:%M} in {zone}) is not a fire time of "
                f"{cron!r} ({zone}); the run is the one whose window contains it"
            )


def _run_for(ident: _Identity) -> tuple[Run, bool]:
    assert ident.job and ident.tenant and ident.environment and ident.window_start and ident.window_end
    target = JobTarget.objects.filter(
        job=ident.job, tenant=ident.tenant, environment=ident.environment, is_active=True
    ).first()
    identity = {
        "job": ident.job,
        "tenant": ident.tenant,
        "environment": ident.environment,
        "window_start": ident.window_start,
        "window_end": ident.window_end,
    }
    run = Run.objects.filter(**identity).first()
    if run is not None:
        return run, False
    try:
        with transaction.atomic():
            return Run.objects.create(**identity, target=target, scheduled_for=ident.scheduled_for), True
    except IntegrityError:  # a concurrent post created it first
        return Run.objects.get(**identity), False


def _finish(
    alert: Alert,
    outcome: str,
    *,
    reason: str = "",
    run: Run | None = None,
    attempt: Attempt | None = None,
    stale: bool = False,
) -> Alert:
    now = timezone.now()
    Alert.objects.filter(pk=alert.pk).update(
        outcome=outcome,
        reason=reason[:4000],
        run=run,
        attempt=attempt,
        is_stale=stale,
        outcome_at=now,
        updated_at=now,
    )
    alert.outcome, alert.reason, alert.run, alert.attempt, alert.is_stale = (
        outcome,
        reason,
        run,
        attempt,
        stale,
    )
    alert.outcome_at = now
    return alert


def alert_apply(*, alert: Alert, record: ParsedAlert, key: IntegrationKey, settings: dict[str, Any]) -> Alert:
    """Apply one ``pending`` alert: resolve its identity, then create or move its run and attempts.

    Outcome ``accepted`` (with ``is_stale`` for a late earlier-state report) or ``unmatched`` with
    every reason found (job not registered, tenant not available to the key, no window, garbled
    convention fields). Runs in one transaction holding the alert's row lock, so a sweep and a
    request cannot apply the same alert twice. Returns the alert with its outcome.
    """
    with transaction.atomic():
        locked = Alert.objects.select_for_update().filter(pk=alert.pk, outcome=Alert.Outcome.PENDING).first()
        if locked is None:  # already applied by someone else
            alert.refresh_from_db()
            return alert
        received_at = alert.delivery.received_at
        integration = key.integration

        if record.kind in (AlertKind.RESOLVE, AlertKind.ACKNOWLEDGE):
            return _apply_signal(alert, record, key, settings, received_at)
        ident = _identity(record, key, settings, need_window=record.kind != AlertKind.DEFINITION)
        if ident.problems:
            return _finish(alert, Alert.Outcome.UNMATCHED, reason="; ".join(ident.problems))
        assert ident.job is not None
        if record.kind == AlertKind.DEFINITION:
            return _apply_definition(alert, record, ident, integration, received_at)

        run, _ = _run_for(ident)
        if record.kind == AlertKind.RUN:
            timeline_event_record(
                job=run.job,
                run=run,
                alert=alert,
                kind="run_reported",
                summary=record.summary or "The scheduler reported on the run as a whole",
                occurred_at=record.occurred_at or received_at,
                actor_integration=integration,
            )
            return _finish(alert, Alert.Outcome.ACCEPTED, run=run)

        return _apply_attempts(alert, record, run, ident, integration, received_at)


def _apply_attempts(
    alert: Alert,
    record: ParsedAlert,
    run: Run,
    ident: _Identity,
    integration: Integration,
    received_at: datetime,
) -> Alert:
    if not record.execution_id or not record.status:
        return _finish(alert, Alert.Outcome.UNMATCHED, reason="no execution id or status in the alert")
    own_number = record.attempt_number or 1
    own = AttemptReport(
        execution_id=record.execution_id,
        status=record.status,
        number=own_number,
        trigger=record.trigger or (Attempt.Trigger.SCHEDULED if own_number == 1 else Attempt.Trigger.AUTOMATIC_RETRY),
        scheduled_at=record.scheduled_at,
        started_at=record.started_at,
        ended_at=record.ended_at,
        error_summary=redact_text(record.error_summary),
        correlation_ref=record.correlation_ref,
        log_url=record.log_url,
        config_version=record.config_version,
    )
    related = [
        AttemptReport(
            execution_id=r.execution_id,
            status=r.status,
            number=r.number or own_number,
            trigger=r.trigger,
            scheduled_at=r.scheduled_at,
            started_at=r.started_at,
            ended_at=r.ended_at,
            error_summary=redact_text(r.error_summary),
            # the same object describes them: a Kubernetes Job's pods share its configuration
            config_version=record.config_version,
        )
        for r in record.related_attempts
    ]
    reports = sorted([*related, own], key=lambda r: (r.number, r is not own))
    own_result = None
    for report in reports:
        result = attempt_report_apply(
            run=run,
            report=report,
            received_at=received_at,
            alert=alert,
            actor_integration=integration,
            occurred_at=record.occurred_at if report is own else None,
        )
        if report is own:
            own_result = result
    assert own_result is not None
    attempt = own_result.attempt
    if record.runner_items:
        RunnerReport.objects.create(
            attempt=attempt,
            alert=alert,
            attempted_ids=record.runner_items.get("attempted", []),
            completed_ids=record.runner_items.get("completed", []),
            failed_ids=record.runner_items.get("failed", []),
            reported_at=record.occurred_at or received_at,
        )
    if own_result.created and own.trigger == Attempt.Trigger.MANUAL_REPLAY:
        # A replay_key is honoured only with the job's runner credential: on an integration key,
        # no replay dispatched by Handover carries this attempt.
        timeline_event_record(
            job=run.job,
            run=run,
            attempt=attempt,
            alert=alert,
            kind="manual_replay_unapproved",
            summary=f"Attempt {attempt.number} is a manual re-run that went around the approval process "
            "(no replay dispatched by Handover carries it)",
            occurred_at=own.started_at or own.scheduled_at or received_at,
            actor_integration=integration,
        )
    exhausted = record.details.get("exhausted_retry_condition")
    if own_result.created and exhausted:
        earlier = record.details.get("earlier_invocations_failed")
        timeline_event_record(
            job=run.job,
            run=run,
            attempt=attempt,
            alert=alert,
            kind="retries_exhausted",
            summary=f"Retries exhausted ({exhausted})"
            + (f"; {earlier} earlier invocation{'s' if earlier != 1 else ''} also failed" if earlier else ""),
            occurred_at=record.occurred_at or received_at,
            actor_integration=integration,
        )
    for note in ident.notes:
        if own_result.created:
            timeline_event_record(
                job=run.job,
                run=run,
                attempt=attempt,
                alert=alert,
                kind="schedule_mismatch",
                summary=note,
                occurred_at=record.occurred_at or received_at,
                actor_integration=integration,
            )
    run_status_refresh(run=run)
    reason = ""
    if own_result.stale:
        reason = (
            f"stale: attempt {attempt.number} is already {attempt.status}; this earlier-state report changes nothing"
        )
    return _finish(alert, Alert.Outcome.ACCEPTED, reason=reason, run=run, attempt=attempt, stale=own_result.stale)


def _apply_signal(
    alert: Alert, record: ParsedAlert, key: IntegrationKey, settings: dict[str, Any], received_at: datetime
) -> Alert:
    """Resolve/acknowledge: a timeline event on the attempt it concerns; never a status change."""
    attempt: Attempt | None = None
    if record.group_ref:
        earlier = (
            Alert.objects.filter(
                integration=alert.integration,
                group_ref=record.group_ref,
                attempt__isnull=False,
                outcome=Alert.Outcome.ACCEPTED,
                kind=AlertKind.ATTEMPT,
            )
            .exclude(pk=alert.pk)
            .select_related("attempt__run__job", "attempt__run__tenant")
            .order_by("-attempt__number", "-created_at", "-id")
            .first()
        )
        attempt = earlier.attempt if earlier else None
    if attempt is None and record.execution_id:
        ident = _identity(record, key, settings, need_window=True)
        if ident.problems:
            return _finish(alert, Alert.Outcome.UNMATCHED, reason="; ".join(ident.problems))
        attempt = (
            Attempt.objects.filter(
                run__job=ident.job,
                run__tenant=ident.tenant,
                run__environment=ident.environment,
                run__window_start=ident.window_start,
                run__window_end=ident.window_end,
                execution_id=record.execution_id,
            )
            .select_related("run__job", "run__tenant")
            .first()
        )
    if attempt is None:
        return _finish(
            alert,
            Alert.Outcome.UNMATCHED,
            reason=f"nothing to {record.kind}: no earlier alert of this integration reported the attempt it names",
        )
    word = "resolved" if record.kind == AlertKind.RESOLVE else "acknowledged"
    timeline_event_record(
        job=attempt.run.job,
        run=attempt.run,
        attempt=attempt,
        alert=alert,
        kind=word,
        # The sender's own line (PagerDuty's "acknowledged by on-call") says who or why; keep it.
        summary=f"{alert.source}: {word} on attempt {attempt.number} ({attempt.execution_id})"
        + (" — a resolve is not a success" if word == "resolved" else "")
        + (f" — {alert.summary}" if alert.summary else ""),
        occurred_at=record.occurred_at or received_at,
        actor_integration=alert.integration,
    )
    return _finish(alert, Alert.Outcome.ACCEPTED, run=attempt.run, attempt=attempt)


def _apply_definition(
    alert: Alert, record: ParsedAlert, ident: _Identity, integration: Integration, received_at: datetime
) -> Alert:
    """A job definition (Kubernetes CronJob): compare its schedule and zone with the schedule in force.

    The schedule in force is the job's with the target's overrides (``_schedule_in_force``) for the
    alert's tenant and environment. Agreement records nothing; a mismatch writes one job-level timeline
    event (with the tenant) and is named in the alert's reason. A definition without a time zone runs
    in the controller's zone (usually UTC), so it is compared as UTC. Never creates a run or attempt.
    """
    job = ident.job
    assert job is not None
    cron, zone, _ = _schedule_in_force(job, ident.tenant, ident.environment)
    seen_schedule = record.details.get("schedule")
    seen_zone = record.details.get("timezone") or record.details.get("timeZone") or "UTC"
    mismatches = []
    if seen_schedule and str(seen_schedule).split() != cron.split():
        mismatches.append(f"schedule {seen_schedule!r} (registered {cron!r})")
    if seen_schedule and seen_zone != zone:
        mismatches.append(f"time zone {seen_zone!r} (registered {zone!r})")
    if mismatches:
        timeline_event_record(
            job=job,
            tenant=ident.tenant,
            alert=alert,
            kind="definition_mismatch",
            summary=f"{integration.source} reports {', '.join(mismatches)}",
            occurred_at=record.occurred_at or received_at,
            actor_integration=integration,
        )
    return _finish(alert, Alert.Outcome.ACCEPTED, reason="; ".join(mismatches))


# --- triage: reprocess, ignore, sweep ---------------------------------------------------------


def alert_reprocess(*, alert: Alert, actor: AbstractBaseUser | None = None) -> Alert:
    """Parse the stored body again and re-apply an ``unmatched`` or ``pending`` original alert.

    Used after registering a job or fixing a mapping. Raises ``InvalidTransition`` for other
    outcomes and for duplicates (reprocess their original). Returns the alert with its new outcome.
    """
    if alert.duplicate_of_id is not None or alert.outcome not in (
        Alert.Outcome.UNMATCHED,
        Alert.Outcome.PENDING,
    ):
        raise InvalidTransition(f"Only unmatched or pending original alerts can be reprocessed, not {alert.outcome}.")
    adapter = get_adapter(alert.source)
    delivery = alert.delivery
    key = delivery.key
    if adapter is None:
        raise InvalidTransition(f"There is no adapter for {alert.source!r} any more.")
    settings = merged_settings(adapter.DEFAULT_SETTINGS, alert.integration.settings)
    try:
        parsed = adapter.parse(delivery.body.encode(), settings=settings, received_at=delivery.received_at)
    except FormatError as exc:
        raise InvalidTransition(f"The stored body no longer parses: {exc.message}") from exc
    record = parsed.alerts[alert.index] if alert.index < len(parsed.alerts) else None
    if not isinstance(record, ParsedAlert):
        raise InvalidTransition("The stored body no longer holds this alert.")
    Alert.objects.filter(pk=alert.pk, outcome=alert.outcome).update(outcome=Alert.Outcome.PENDING)
    alert.outcome = Alert.Outcome.PENDING
    result = alert_apply(alert=alert, record=record, key=key, settings=settings)
    logger.info("alert %s reprocessed: %s", alert.public_id, result.outcome)
    return result


def alert_ignore(*, alert: Alert, actor: AbstractBaseUser, reason: str) -> Alert:
    """A person's dismissal of an ``unmatched`` alert, with a reason. Raises ``InvalidTransition``."""
    if not reason.strip():
        raise InvalidTransition("Say why the alert is ignored.")
    updated = Alert.objects.filter(pk=alert.pk, outcome=Alert.Outcome.UNMATCHED).update(
        outcome=Alert.Outcome.IGNORED,
        reason=f"ignored: {reason.strip()}",
        ignored_by=actor,
        outcome_at=timezone.now(),
    )
    if not updated:
        alert.refresh_from_db()
        if alert.outcome == Alert.Outcome.IGNORED:
            return alert
        raise InvalidTransition(f"Only unmatched alerts can be ignored, not {alert.outcome}.")
    alert.refresh_from_db()
    return alert


def alert_sweep_pending(*, older_than_seconds: int | None = None, limit: int = 500) -> int:
    """Finish alerts a crash left ``pending`` (older than the given age). Returns how many were applied.

    Safe to run concurrently with requests and other sweeps: ``alert_apply`` claims each alert
    under its row lock and skips one that is no longer pending.
    """
    age = older_than_seconds if older_than_seconds is not None else django_settings.HANDOVER_PENDING_SWEEP_AFTER_SECONDS
    cutoff = timezone.now() - timezone.timedelta(seconds=age)
    done = 0
    for alert in Alert.objects.filter(outcome=Alert.Outcome.PENDING, created_at__lt=cutoff).order_by("id")[:limit]:
        try:
            alert_reprocess(alert=alert)
            done += 1
        except InvalidTransition as exc:
            _finish(alert, Alert.Outcome.REJECTED, reason=str(exc))
    return done

"""Ingestion: a post becomes a stored Delivery, then Alerts, then runs, attempts and timeline events.

Order (DESIGN.md "Architecture"): commit the Delivery first (raw body, redacted; hash and size of
the bytes as received), then parse, then record and apply the alerts in post order. An alert is
recorded and applied in ONE transaction: its row, its run and attempt, their timeline events and
its outcome commit together or not at all. A single post's alert is one transaction; a batch is
applied in chunks of ``CHUNK_ALERTS`` alerts, one transaction per chunk (a chunk that fails on a
database error, e.g. a deadlock with a concurrent batch, is rolled back and redone alert by
alert, so every alert gets the outcome it would have had alone).

Nothing authenticated is lost: the Delivery is committed before parsing and stays ``received``
until its outcome is written, so a crash anywhere after that leaves a ``received`` delivery that
``delivery_sweep_received`` finishes by re-parsing the stored body (alerts already recorded are
skipped by their index); an alert left ``pending`` (``alert_reprocess`` interrupted) is finished by
``alert_sweep_pending``, which runs both sweeps; an unparseable post is kept ``rejected``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings as django_settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import DatabaseError, transaction
from django.db.models import F, Q
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
from runs.redaction import (
    body_secret_values,
    integration_redact_names,
    redact_body,
    redact_secret_keys,
    redact_text,
    redaction_scope,
)
from runs.services.attempts import (
    RUN_STATUS_FOR_ATTEMPT,
    AttemptReport,
    attempt_report_apply,
    run_status_refresh,
)
from runs.services.rows import row_insert_unless_conflict
from runs.services.timeline import timeline_event_record

logger = logging.getLogger(__name__)

NEUTRAL_TENANT_REASON = "tenant {slug!r} is not available to this integration key"
NEUTRAL_TENANT_ALIAS_HINT = (
    " (a label that cannot spell a tenant's slug needs an entry in this integration's `tenant_aliases`)"
)
# Alerts of a batch applied per transaction: a commit per alert costs more than the alert's own
# writes, and a long transaction holds its rows' locks longer (concurrent posts of the same runs wait).
CHUNK_ALERTS = 100
# ``IntegrationKey.last_used_at`` is refreshed at most this often: every post writing the key's row
# would make it the hottest lock of the ingestion path. The integration page shows it to the minute.
KEY_USED_RESOLUTION = timedelta(seconds=60)


@dataclass
class IngestResult:
    """What one post produced: the delivery, its alerts in post order, and a format error if any."""

    delivery: Delivery
    alerts: list[Alert] = field(default_factory=list)
    error: FormatError | None = None
    response: dict[str, Any] = field(default_factory=dict)


@dataclass
class _PostContext:
    """What every alert of one post shares: the key, the source's settings, and rows read once per post.

    A batch names the same job, tenants and targets again and again; each is read once here (a
    post is short, so a registration changed while it is being applied is picked up by the next post).
    ``runner_reports`` collects the RunnerReport rows of the open transaction, inserted together
    before it commits (``_runner_reports_write``): nothing reads them while a post is applied.
    """

    key: IntegrationKey
    settings: dict[str, Any]
    jobs: dict[str, Job | None] = field(default_factory=dict)
    tenants: dict[str, Tenant | None] = field(default_factory=dict)
    targets: dict[tuple[int, int, str], JobTarget | None] = field(default_factory=dict)
    runner_reports: list[RunnerReport] = field(default_factory=list)

    def prime(self, job_key: str, slug: str, environment: str) -> None:
        """Read the job, the tenant and their target in ONE query when the target exists (the usual
        case), so that ``job``, ``tenant`` and ``target`` below find them here; else do nothing and
        let those read what exists, one by one. The tenant is found only if available to the key.
        """
        slug_key = normalise_slug(slug).casefold()
        if job_key in self.jobs and slug_key in self.tenants:
            return
        targets = JobTarget.objects.select_related("job", "tenant").filter(
            job__key=job_key, tenant__slug_key=slug_key, environment=environment
        )
        if not self.key.all_tenants:
            targets = targets.filter(tenant__integration_keys=self.key)
        target = targets.first()
        if target is not None:
            self.jobs.setdefault(job_key, target.job)
            self.tenants.setdefault(slug_key, target.tenant)
            self.targets.setdefault((target.job_id, target.tenant_id, environment), target)

    def job(self, job_key: str) -> Job | None:
        if job_key not in self.jobs:
            self.jobs[job_key] = Job.objects.filter(key=job_key).first()
        return self.jobs[job_key]

    def tenant(self, slug: str) -> Tenant | None:
        """The tenant called ``slug`` if it is available to the key; None when unknown or not bound (alike)."""
        slug_key = normalise_slug(slug).casefold()
        if slug_key not in self.tenants:
            tenants = Tenant.objects.filter(slug_key=slug_key)
            if not self.key.all_tenants:
                tenants = tenants.filter(integration_keys=self.key)
            self.tenants[slug_key] = tenants.first()
        return self.tenants[slug_key]

    def target(self, job: Job, tenant: Tenant | None, environment: str | None) -> JobTarget | None:
        """The (job, tenant, environment) target, active or not (one row at most: it is unique)."""
        if tenant is None or not environment:
            return None
        ident = (job.pk, tenant.pk, environment)
        if ident not in self.targets:
            self.targets[ident] = JobTarget.objects.filter(job=job, tenant=tenant, environment=environment).first()
        return self.targets[ident]


def _json_safe(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


_NOT_DISPLAYED = frozenset({"problems", "dedup_key"})
_DISPLAYED_FIELDS = [f.name for f in dataclasses.fields(ParsedAlert) if f.name not in _NOT_DISPLAYED]
_EMPTY = (None, "", [], {})


def _display_value(value: Any) -> Any:
    """``value`` as JSON-ready data for display: times in UTC ISO 8601, every string (keys too) redacted."""
    if isinstance(value, str):
        # Labels, annotations and details are free text from the sender: they may carry e-mails or tokens.
        return redact_text(value)
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, dict):
        return {
            redact_text(k if isinstance(k, str) else json.dumps(k)): _display_value(v)  # JSON's key spelling
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_display_value(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _display_value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


def _record_fields(record: ParsedAlert) -> dict[str, Any]:
    """The record's non-empty fields (not its problems or dedup key) as shown on the alert, redacted.

    Built field by field: copying the whole record and redacting its JSON text cost more than the
    alert's SQL, and redacting each string keeps the redaction from ever meeting JSON escapes.
    """
    kept = {}
    for name in _DISPLAYED_FIELDS:
        value = getattr(record, name)
        if value not in _EMPTY:
            kept[name] = _display_value(value)
    # values under secret key names (and the integration's own redaction names) go as well
    return redact_secret_keys(kept)  # type: ignore[no-any-return]


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
    defer_outcome: bool = False,
) -> IngestResult:
    """Store one authenticated post, then parse, record and apply every record in it.

    ``body`` is the raw bytes (for an oversized post: its first 64 KiB, with ``size_bytes`` the
    size announced or read and ``is_body_truncated`` set -- such a delivery is stored ``rejected``
    and not parsed). Returns an ``IngestResult``; never raises for bad input. Side effects:
    Delivery, Alert, Run, Attempt, RunnerReport and TimelineEvent rows; the key's ``last_used_at``
    (at most once a minute). With ``defer_outcome`` the delivery's outcome is left for
    ``delivery_record_response`` to write together with the response (one UPDATE instead of two);
    until then the delivery reads ``received``, which is also what a crash would leave.
    """
    integration = key.integration
    adapter = get_adapter(integration.source)
    if adapter is None:  # an integration whose adapter was removed: keep the post anyway
        raise DomainError(f"No adapter for {integration.source!r}")
    received_at = received_at or timezone.now()
    delivery = Delivery(
        integration=integration,
        key=key,
        received_at=received_at,
        content_type=content_type[:200],
        size_bytes=size_bytes if size_bytes is not None else len(body),
        sha256=hashlib.sha256(body).hexdigest(),
        body=redact_body(body, adapter.REDACT_PATHS, integration_redact_names(integration.settings)),
        is_body_truncated=is_body_truncated,
    )
    # Store first: one INSERT in autocommit, committed before anything is parsed. The key's row is
    # not written in the same transaction (see KEY_USED_RESOLUTION).
    delivery.save(force_insert=True)
    _key_mark_used(key, received_at)
    result = IngestResult(delivery=delivery)
    # A secret of this post is redacted wherever it recurs in what is derived from it (error
    # summaries, alert fields, reasons), not only where the body holds it under a secret name.
    names = integration_redact_names(integration.settings)
    with redaction_scope(body_secret_values(body, adapter.REDACT_PATHS, names), names):
        _delivery_process(result, adapter, body, key)
    if not defer_outcome:
        _delivery_write(delivery)
    return result


def _key_mark_used(key: IntegrationKey, at: datetime) -> None:
    """Set the key's ``last_used_at`` unless it was set less than ``KEY_USED_RESOLUTION`` before ``at``.

    A guarded UPDATE of its own (autocommit): of several posts at once, one writes and the others
    find the guard false, so the key's row is never held for a whole delivery.
    """
    if key.last_used_at is not None and at - key.last_used_at < KEY_USED_RESOLUTION:
        return
    IntegrationKey.objects.filter(pk=key.pk).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lt=at - KEY_USED_RESOLUTION)
    ).update(last_used_at=at)
    key.last_used_at = at


def _delivery_process(
    result: IngestResult,
    adapter: ModuleType,
    body: bytes,
    key: IntegrationKey,
    *,
    recorded: frozenset[int] = frozenset(),
) -> None:
    """Parse the body and record and apply each record in post order; set the outcome (in memory).

    ``recorded``: indexes of records that already have their Alert (a sweep finishing a delivery):
    they are skipped, and ``result.alerts`` lists only the alerts recorded now.
    """
    delivery = result.delivery
    if delivery.is_body_truncated:
        limit = django_settings.HANDOVER_MAX_BODY_BYTES
        result.error = FormatError(f"The body is larger than {limit} bytes; its first 64 KiB are kept.")
        _delivery_set_outcome(delivery, Delivery.Outcome.REJECTED, reason=result.error.message)
        return
    ctx = _PostContext(key=key, settings=merged_settings(adapter.DEFAULT_SETTINGS, key.integration.settings))
    try:
        parsed = adapter.parse(body, settings=ctx.settings, received_at=delivery.received_at)
    except FormatError as exc:
        result.error = exc
        _delivery_set_outcome(delivery, Delivery.Outcome.REJECTED, reason=redact_text(exc.message))
        return
    todo = [(index, record) for index, record in enumerate(parsed.alerts) if index not in recorded]
    for start in range(0, len(todo), CHUNK_ALERTS):
        result.alerts.extend(_alerts_ingest(delivery, todo[start : start + CHUNK_ALERTS], ctx))
    result.response = dict(parsed.response)
    _delivery_set_outcome(delivery, Delivery.Outcome.PROCESSED, notes=_json_safe(parsed.notes))


def _delivery_set_outcome(
    delivery: Delivery, outcome: str, *, reason: str = "", notes: dict[str, Any] | None = None
) -> None:
    delivery.outcome, delivery.reason, delivery.notes = outcome, reason, notes or {}


def _delivery_write(delivery: Delivery, **response: Any) -> None:
    """Write the delivery's outcome (set in memory while it was processed), and the response if given."""
    Delivery.objects.filter(pk=delivery.pk).update(
        outcome=delivery.outcome, reason=delivery.reason, notes=delivery.notes, **response
    )


def delivery_record_response(*, delivery: Delivery, status: int, body: dict[str, Any]) -> None:
    """Keep the response given to the sender on the delivery (for the integration page).

    Writes the delivery's outcome in the same UPDATE (``delivery_receive(defer_outcome=True)``
    left it to this call).
    """
    if delivery.outcome == Delivery.Outcome.RECEIVED:  # never processed here: the sweep finishes it
        Delivery.objects.filter(pk=delivery.pk).update(response_status=status, response_body=body)
        return
    _delivery_write(delivery, response_status=status, response_body=body)


def delivery_sweep_received(*, older_than_seconds: int | None = None, limit: int = 100) -> int:
    """Finish deliveries a crash left ``received`` (older than the given age). Returns how many were finished.

    Each is claimed in a transaction of its own (``select_for_update(skip_locked=True)`` on
    PostgreSQL; on SQLite the immediate transaction serialises writers and the outcome is re-read
    inside it), its stored body is parsed again, the records that have no Alert yet are recorded and
    applied (those committed before the crash are skipped by their index), and its outcome is
    written -- all in that transaction, so a second sweep finds nothing left to do. The redacted
    body parses like the raw one for everything an adapter reads for identity (DESIGN.md). A delivery
    that fails is logged and tried again by the next sweep; the others go on.
    """
    age = older_than_seconds if older_than_seconds is not None else django_settings.HANDOVER_PENDING_SWEEP_AFTER_SECONDS
    cutoff = timezone.now() - timedelta(seconds=age)
    due = list(
        Delivery.objects.filter(outcome=Delivery.Outcome.RECEIVED, received_at__lt=cutoff)
        .order_by("received_at", "id")
        .values_list("pk", flat=True)[:limit]
    )
    done = 0
    for pk in due:
        try:
            done += _delivery_finish_received(pk)
        except Exception:  # noqa: BLE001 - one broken delivery must not stop the sweep; it stays received
            logger.exception("delivery %s: could not be finished; the next sweep tries again", pk)
    return done


def _delivery_finish_received(pk: int) -> bool:
    with transaction.atomic():
        delivery = (
            Delivery.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("key__integration")
            .filter(pk=pk, outcome=Delivery.Outcome.RECEIVED)
            .first()
        )
        if delivery is None:  # finished or claimed meanwhile
            return False
        key = delivery.key
        delivery.integration = key.integration
        adapter = get_adapter(key.integration.source)
        if adapter is None:
            _delivery_set_outcome(
                delivery, Delivery.Outcome.REJECTED, reason=f"no adapter for {key.integration.source!r} any more"
            )
        else:
            recorded = frozenset(delivery.alerts.values_list("index", flat=True))
            result = IngestResult(delivery=delivery)
            _delivery_process(result, adapter, delivery.body.encode(), key, recorded=recorded)
        _delivery_write(delivery)
    logger.info("delivery %s finished by the sweep: %s", delivery.public_id, delivery.outcome)
    return True


# --- alerts -----------------------------------------------------------------------------------


def _alerts_ingest(
    delivery: Delivery, chunk: list[tuple[int, ParsedAlert | InvalidItem]], ctx: _PostContext
) -> list[Alert]:
    """Record and apply ``chunk`` (records with their index in the post) in one transaction.

    If the chunk fails on a database error (a deadlock with a concurrent batch that holds some of
    the same runs, a constraint a record trips), it is rolled back and redone one alert per
    transaction, as a lone post of each would be: per-alert outcomes never depend on the chunking.
    """
    try:
        with transaction.atomic():
            alerts = [_alert_ingest(delivery, index, record, ctx) for index, record in chunk]
            _runner_reports_write(ctx)
            return alerts
    except DatabaseError as exc:
        ctx.runner_reports.clear()  # rows of the rolled-back transaction
        if len(chunk) == 1:
            raise
        logger.warning(
            "delivery %s: a chunk of %d alerts failed (%s); applying them one by one", delivery.pk, len(chunk), exc
        )
    alerts = []
    for index, record in chunk:
        try:
            with transaction.atomic():
                alerts.append(_alert_ingest(delivery, index, record, ctx))
                _runner_reports_write(ctx)
        finally:
            ctx.runner_reports.clear()
    return alerts


def _runner_reports_write(ctx: _PostContext) -> None:
    """Insert the runner reports collected in the open transaction, in one statement."""
    if ctx.runner_reports:
        RunnerReport.objects.bulk_create(ctx.runner_reports)
        ctx.runner_reports.clear()


def _alert_ingest(delivery: Delivery, index: int, record: ParsedAlert | InvalidItem, ctx: _PostContext) -> Alert:
    """Record one parsed record and, when it is a new original, apply it (inside the caller's transaction)."""
    alert, created = _alert_record(delivery=delivery, index=index, record=record)
    if created and alert.outcome == Alert.Outcome.PENDING and isinstance(record, ParsedAlert):
        alert = _alert_apply(alert, record, ctx)
    return alert


def _alert_record(*, delivery: Delivery, index: int, record: ParsedAlert | InvalidItem) -> tuple[Alert, bool]:
    """Insert the Alert row for one parsed record: ``pending``, ``duplicate`` or ``rejected``.

    Returns the alert and whether it was created now: a record whose (delivery, index) already has
    its Alert (recorded before a crash, or by a concurrent sweep) returns that one, unchanged.
    The partial unique index on (integration, dedup hash) decides which of several concurrent posts
    of one alert is the original (on PostgreSQL a loser's INSERT waits until the original's
    transaction -- which applies it too -- has committed); the others become ``duplicate`` rows
    pointing at it, with its run and attempt (a re-sent unmatched alert also bumps the original's
    ``repeat_count``, so the inbox shows one).
    """
    integration = delivery.integration
    if isinstance(record, InvalidItem):
        alert = Alert(
            delivery=delivery,
            integration=integration,
            index=index,
            source=integration.source,
            outcome=Alert.Outcome.REJECTED,
            reason=redact_text(f"{record.field}: {record.message}"),
            fields={"field": record.field},
            outcome_at=timezone.now(),
        )
        if row_insert_unless_conflict(alert):
            return alert, True
        return Alert.objects.get(delivery=delivery, index=index), False
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
    alert = Alert(**values, outcome=Alert.Outcome.PENDING)
    if row_insert_unless_conflict(alert):
        return alert, True
    holders = list(
        Alert.objects.filter(
            Q(delivery=delivery, index=index) | Q(integration=integration, dedup_hash=hashed, duplicate_of__isnull=True)
        ).select_related("run", "attempt")
    )
    for holder in holders:
        if holder.delivery_id == delivery.pk and holder.index == index:
            return holder, False
    if not holders:  # conflicting rows are committed before the INSERT gives up, and never deleted
        raise DatabaseError(f"alert {index} of delivery {delivery.pk} conflicts with a row that cannot be found")
    original = holders[0]
    Alert.objects.filter(pk=original.pk).update(repeat_count=F("repeat_count") + 1)
    duplicate = Alert(
        **values,
        duplicate_of=original,
        outcome=Alert.Outcome.DUPLICATE,
        reason=f"same alert as {original.public_id} (received {original.created_at:%Y-%m-%d %H:%M:%S}Z)",
        run=original.run,
        attempt=original.attempt,
        outcome_at=timezone.now(),
    )
    duplicate.save(force_insert=True)
    return duplicate, True


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
    ctx: _PostContext,
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
        # Unknown and unbound read the same, so a key cannot probe for tenants (DESIGN.md). The alias
        # hint depends only on the source's settings, never on whether the tenant exists.
        reason = NEUTRAL_TENANT_REASON.format(slug=slug)
        if "tenant_aliases" in settings:
            reason += NEUTRAL_TENANT_ALIAS_HINT
        problems.append(reason)
        return None
    return tenant


def _schedule_in_force(
    job: Job, tenant: Tenant | None, environment: str | None, ctx: _PostContext
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


def _identity(record: ParsedAlert, ctx: _PostContext, *, need_window: bool) -> _Identity:
    """Resolve job, tenant, environment and (when ``need_window``) the window; collect every reason it fails.

    Parsers list missing or garbled convention fields themselves (``runs/ingest/base.py``), so the
    mechanism's own "nothing named" reasons for job, tenant and environment are only a safety net for a
    record that came with no problem at all: the inbox never lists one missing label twice. Lookups only
    the mechanism can do are always added: job not registered, tenant not available, no window.
    """
    ident = _Identity(problems=list(record.problems))
    parser_reported = bool(record.problems)
    slug = record.tenant or ctx.settings.get("default_tenant")
    environment = record.environment or ctx.settings.get("default_environment")
    if record.job_key and slug and environment:
        ctx.prime(record.job_key, slug, environment)
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
    job = ident.job
    rule = record.details.get("scheduled_for_rule")
    if job is not None:
        _place_in_window(ident, record, job, rule, ctx)
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


def _place_in_window(ident: _Identity, record: ParsedAlert, job: Job, rule: str | None, ctx: _PostContext) -> None:
    """Fill the scheduled time and window of ``ident`` from the record and the schedule in force."""
    cron, zone, kwargs = _schedule_in_force(job, ident.tenant, ident.environment, ctx)
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


def _run_for(ident: _Identity, ctx: _PostContext, *, status: str | None = None) -> tuple[Run, bool]:
    """The run of ``ident``, created if new (``status``: the status a new run starts with, if known).

    Insert first: a new run costs one statement; an existing one, the refused INSERT and its SELECT.
    """
    assert ident.job and ident.tenant and ident.environment and ident.window_start and ident.window_end
    target = ctx.target(ident.job, ident.tenant, ident.environment)
    identity = {
        "job": ident.job,
        "tenant": ident.tenant,
        "environment": ident.environment,
        "window_start": ident.window_start,
        "window_end": ident.window_end,
    }
    run = Run(
        **identity,
        target=target if target is not None and target.is_active else None,
        scheduled_for=ident.scheduled_for,
    )
    if status is not None:
        run.status, run.status_changed_at = status, timezone.now()
    if row_insert_unless_conflict(run):
        return run, True
    run = Run.objects.get(**identity)  # an earlier alert created it (or a concurrent post, now committed)
    run.job, run.tenant = ident.job, ident.tenant  # the same rows: spares the timeline two lookups
    return run, False


def _new_run_status(record: ParsedAlert) -> str | None:
    """The status a run created by this alert starts with: that of the one attempt it reports.

    None when the alert reports several attempts (or none): the status is then refreshed from the
    attempts once they are applied (``run_status_refresh``), as for an existing run.
    """
    if record.kind != AlertKind.ATTEMPT or not record.execution_id or record.related_attempts:
        return None
    return RUN_STATUS_FOR_ATTEMPT.get(record.status)  # type: ignore[call-overload]


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
    request cannot apply the same alert twice. Returns the alert with its outcome. (A post's new
    alerts are applied in the transaction that records them: ``_alert_ingest``.)
    """
    with transaction.atomic():
        locked = Alert.objects.select_for_update().filter(pk=alert.pk, outcome=Alert.Outcome.PENDING).first()
        if locked is None:  # already applied by someone else
            alert.refresh_from_db()
            return alert
        ctx = _PostContext(key=key, settings=settings)
        alert = _alert_apply(alert, record, ctx)
        _runner_reports_write(ctx)
        return alert


def _alert_apply(alert: Alert, record: ParsedAlert, ctx: _PostContext) -> Alert:
    """``alert_apply`` inside the caller's transaction, for an alert no one else can be applying."""
    received_at = alert.delivery.received_at
    integration = ctx.key.integration

    if record.kind in (AlertKind.RESOLVE, AlertKind.ACKNOWLEDGE):
        return _apply_signal(alert, record, ctx, received_at)
    ident = _identity(record, ctx, need_window=record.kind != AlertKind.DEFINITION)
    if ident.problems:
        return _finish(alert, Alert.Outcome.UNMATCHED, reason="; ".join(ident.problems))
    assert ident.job is not None
    if record.kind == AlertKind.DEFINITION:
        return _apply_definition(alert, record, ident, integration, received_at, ctx)

    new_run_status = _new_run_status(record)
    run, created = _run_for(ident, ctx, status=new_run_status)
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

    status_is_set = created and new_run_status is not None
    return _apply_attempts(alert, record, run, ident, integration, received_at, ctx, run_status_is_set=status_is_set)


def _apply_attempts(
    alert: Alert,
    record: ParsedAlert,
    run: Run,
    ident: _Identity,
    integration: Integration,
    received_at: datetime,
    ctx: _PostContext,
    *,
    run_status_is_set: bool = False,
) -> Alert:
    """Create or move the attempts the alert reports, then the run's status.

    ``run_status_is_set``: the run was created by this alert with the status of its one attempt
    (``_new_run_status``), so there is nothing to refresh.
    """
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
        ctx.runner_reports.append(
            RunnerReport(
                attempt=attempt,
                alert=alert,
                attempted_ids=record.runner_items.get("attempted", []),
                completed_ids=record.runner_items.get("completed", []),
                failed_ids=record.runner_items.get("failed", []),
                reported_at=record.occurred_at or received_at,
            )
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
    if not run_status_is_set:
        run_status_refresh(run=run)
    reason = ""
    if own_result.stale:
        reason = (
            f"stale: attempt {attempt.number} is already {attempt.status}; this earlier-state report changes nothing"
        )
    return _finish(alert, Alert.Outcome.ACCEPTED, reason=reason, run=run, attempt=attempt, stale=own_result.stale)


def _apply_signal(alert: Alert, record: ParsedAlert, ctx: _PostContext, received_at: datetime) -> Alert:
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
        ident = _identity(record, ctx, need_window=True)
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
    alert: Alert,
    record: ParsedAlert,
    ident: _Identity,
    integration: Integration,
    received_at: datetime,
    ctx: _PostContext,
) -> Alert:
    """A job definition (Kubernetes CronJob): compare its schedule and zone with the schedule in force.

    The schedule in force is the job's with the target's overrides (``_schedule_in_force``) for the
    alert's tenant and environment. Agreement records nothing; a mismatch writes one job-level timeline
    event (with the tenant) and is named in the alert's reason. A definition without a time zone runs
    in the controller's zone (usually UTC), so it is compared as UTC. Never creates a run or attempt.
    """
    job = ident.job
    assert job is not None
    cron, zone, _ = _schedule_in_force(job, ident.tenant, ident.environment, ctx)
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
    """Finish what a crash left unfinished (older than the given age). Returns how many were finished.

    First the deliveries still ``received`` (``delivery_sweep_received``: a crash while a post was
    applied rolls its open transaction back, leaving the delivery and no alert), then the alerts
    still ``pending`` (an interrupted ``alert_reprocess``). Safe to run concurrently with requests
    and other sweeps: deliveries are claimed under their row lock, and ``alert_apply`` claims each
    alert under its row lock and skips one that is no longer pending.
    """
    age = older_than_seconds if older_than_seconds is not None else django_settings.HANDOVER_PENDING_SWEEP_AFTER_SECONDS
    done = delivery_sweep_received(older_than_seconds=age)
    cutoff = timezone.now() - timedelta(seconds=age)
    for alert in Alert.objects.filter(outcome=Alert.Outcome.PENDING, created_at__lt=cutoff).order_by("id")[:limit]:
        try:
            alert_reprocess(alert=alert)
            done += 1
        except InvalidTransition as exc:
            _finish(alert, Alert.Outcome.REJECTED, reason=str(exc))
    return done

"""Events that refer to earlier events (**correlation**, docs/custom-integrations.md "Correlation").

A record carrying a correlation key (a custom mapping's ``correlate_by``) but lacking its job, tenant, or
window and scheduled time takes them from the run of the earliest accepted alert of the same integration
with the same key. The fields taken are re-checked against the current key's binding (a tenant the key
may not write for leaves the alert ``unmatched``), and the fields the record names itself must agree with
them. A record whose earlier event has not arrived yet is stored ``unmatched`` as *waiting*; the
correlating alert, once accepted, reprocesses the alerts waiting on its key in its own transaction.

Concurrency: every alert with a correlation key takes a transaction-scoped lock on (integration, key)
before it looks anything up (PostgreSQL advisory lock; SQLite's immediate transactions already serialise
writers), so a waiting failure and its correlating start posted at once are decided one after the other:
either the failure finds the start, or the start finds the failure waiting.
"""

from __future__ import annotations

import hashlib
import logging

from django.db import connection, transaction

from runs.alerts.context import PostContext
from runs.alerts.identity import RecordIdentity
from runs.alerts.models import Alert
from runs.alerts.parsers.base import AlertKind, ParsedAlert
from runs.alerts.redaction import redact_text
from runs.catalog.models import normalise_slug

logger = logging.getLogger(__name__)

WAITING_PREFIX = "correlate_by: waiting for"
# Alerts reprocessed per correlating alert, in its transaction (an execution has a handful of events).
WAKE_LIMIT = 50


def correlation_lock(*, integration_id: int, key: str) -> None:
    """Hold a lock on (integration, correlation key) until the transaction ends (PostgreSQL advisory lock).

    A no-op on SQLite, whose immediate transactions already serialise every writer. Call inside a transaction.
    """
    if connection.vendor != "postgresql" or not key:
        return
    digest = hashlib.sha256(f"correlation:{integration_id}:{key}".encode()).digest()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [int.from_bytes(digest[:8], "big", signed=True)])


def record_correlates(record: ParsedAlert) -> bool:
    """True when ``record`` has a correlation key and lacks job, tenant, or both window and scheduled time."""
    if not record.correlation_key or record.kind not in (AlertKind.ATTEMPT, AlertKind.IDENTITY, AlertKind.MISSED):
        return False
    has_time = (record.window_start is not None and record.window_end is not None) or record.scheduled_for is not None
    return not (record.job_key and record.tenant and (has_time or record.details.get("starts_at")))


def correlated_identity(alert: Alert, record: ParsedAlert, ctx: PostContext) -> RecordIdentity:
    """The identity ``record`` takes from the earliest accepted alert of its integration with its correlation key.

    Job, tenant, environment, window and slot are the earlier alert's run's. Problems (short, each naming
    its field): the record's own parser problems; ``correlate_by`` waiting (no such earlier alert yet);
    ``tenant`` not available to this key (the binding is re-checked; the slug is not named, so a key cannot
    learn another key's tenants); ``job_key``/``tenant``/``environment`` named by the record and differing
    from the earlier event's. Reads at most two rows; writes nothing.
    """
    key = record.correlation_key
    ident = RecordIdentity(problems=list(record.problems))
    earlier = (
        Alert.objects.filter(
            integration_id=alert.integration_id,
            correlation_key=key,
            duplicate_of__isnull=True,
            outcome=Alert.Outcome.ACCEPTED,
            run__isnull=False,
        )
        .exclude(pk=alert.pk)
        .select_related("run__job", "run__tenant")
        .order_by("created_at", "id")
        .first()
    )
    if earlier is None or earlier.run is None:
        ident.problems.append(f"{WAITING_PREFIX} an earlier event with {key!r} to give job, tenant and window")
        return ident
    run = earlier.run
    tenant = ctx.tenant(run.tenant.slug)
    if tenant is None:
        ident.problems.append(
            f"tenant: the tenant of the earlier event with correlate_by {key!r} is not available to this "
            "integration key"
        )
    disagree = [
        (name, ours)
        for name, ours, theirs in (
            ("job_key", record.job_key, run.job.key),
            ("tenant", record.tenant and normalise_slug(record.tenant).casefold(), run.tenant.slug_key),
            ("environment", record.environment, run.environment),
        )
        if ours and ours != theirs
    ]
    for name, ours in disagree:
        ident.problems.append(f"{name}: {ours!r} differs from the earlier event with correlate_by {key!r}")
    ident.job, ident.tenant, ident.environment = run.job, tenant, run.environment
    ident.window_start, ident.window_end, ident.scheduled_for = run.window_start, run.window_end, run.scheduled_for
    return ident


def correlation_waiting_reprocess(*, alert: Alert) -> list[Alert]:
    """Reprocess the alerts waiting on an accepted ``alert``'s correlation key (oldest first, ``WAKE_LIMIT``).

    Call inside the transaction that accepted ``alert`` (it holds the key's lock: ``correlation_lock``).
    Each waiting alert is reprocessed in a savepoint of its own (``alert_reprocess``: its stored body, under
    its own delivery's key binding); one that fails is logged and stays as it was. Returns the alerts
    reprocessed, as they are afterwards.
    """
    # triage imports this slice's apply step, which calls this function: imported here to avoid the cycle
    from runs.alerts.triage import alert_reprocess

    if not alert.correlation_key or alert.outcome != Alert.Outcome.ACCEPTED or alert.run_id is None:
        return []
    waiting = list(
        Alert.objects.filter(
            integration_id=alert.integration_id,
            correlation_key=alert.correlation_key,
            duplicate_of__isnull=True,
            outcome=Alert.Outcome.UNMATCHED,
            reason__startswith=WAITING_PREFIX,
        )
        .exclude(pk=alert.pk)
        .select_related("integration")
        .order_by("created_at", "id")[:WAKE_LIMIT]
    )
    done = []
    for other in waiting:
        try:
            with transaction.atomic():
                done.append(alert_reprocess(alert=other))
        except Exception as exc:  # noqa: BLE001 - a waiting alert that cannot be applied must not fail this post
            error = redact_text(f"{type(exc).__name__}: {exc}")
            logger.warning("alert %s: reprocessing after its correlation failed: %s", other.public_id, error)
    return done

"""Triage of alerts: reprocess after a fix, a person's dismissal, and the sweep of what a crash left."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings as django_settings
from django.db import transaction
from django.utils import timezone

from handover.core.errors import Forbidden, InvalidTransition
from handover.core.people import Person
from runs.alerts.apply import alert_apply, alert_finish, original_reapply
from runs.alerts.context import PostContext, runner_reports_write
from runs.alerts.decoders import body_decode
from runs.alerts.models import Alert
from runs.alerts.parsers.base import FormatError, ParsedAlert
from runs.alerts.parsers.registry import get_adapter, integration_settings_in_force
from runs.alerts.receive import delivery_sweep_received
from runs.alerts.records import record_mend
from runs.alerts.redaction import redact_text
from runs.catalog.transport import integration_transport
from runs.permissions import may_reprocess_alert

logger = logging.getLogger(__name__)


def alert_reprocess(*, alert: Alert, actor: Person | None = None) -> Alert:
    """Parse a stored body again and re-apply an ``unmatched`` or ``pending`` original alert.

    Used after registering a job or fixing a mapping. The body applied is the newest one of the
    alert: an original's newest duplicate (a corrected re-send under the same dedup key) else its
    own, under that delivery's key binding. A duplicate whose original is ``unmatched`` or
    ``pending`` re-applies the original from the duplicate's own body (the corrected redelivery
    repairs it). Raises ``InvalidTransition`` for other outcomes and for duplicates of an original
    that is already applied, ``Forbidden`` (403) when a person (``actor``) is not staff
    (``runs.permissions.may_reprocess_alert``; ``actor`` None is the system: a command, a correlation
    wake-up). Returns the alert reprocessed (the original).
    """
    if actor is not None and not may_reprocess_alert(user=actor):
        raise Forbidden("Only admins reprocess alerts.")
    if alert.duplicate_of_id is not None:
        original = alert.duplicate_of
        assert original is not None
        if original.outcome not in Alert.TRANSITIONS["reprocess"][0]:
            raise InvalidTransition(
                f"This alert is a duplicate of {original.public_id}, which is {original.outcome}: nothing to reprocess."
            )
        source = alert
        alert = original
    else:
        if alert.outcome not in Alert.TRANSITIONS["reprocess"][0]:
            raise InvalidTransition(
                f"Only unmatched or pending original alerts can be reprocessed, not {alert.outcome}."
            )
        source = alert.duplicates.select_related("delivery__key").order_by("-created_at", "-id").first() or alert
    adapter = get_adapter(alert.source)
    delivery = source.delivery
    key = delivery.key
    if adapter is None:
        raise InvalidTransition(f"There is no adapter for {alert.source!r} any more.")
    settings, settings_wrong = integration_settings_in_force(alert.integration)
    # decoded as when it was received (``receive._delivery_process``): an ndjson, envelope or form post
    # is not JSON until its integration's decoder has read it
    decoder = integration_transport(integration=alert.integration).decoder
    method = str((delivery.notes or {}).get("method", "POST"))
    try:
        body = body_decode(delivery.body.encode(), decoder=decoder, method=method)
        parsed = adapter.parse(body, settings=settings, received_at=delivery.received_at)
    except FormatError as exc:
        raise InvalidTransition(f"The stored body no longer parses: {exc.message}") from exc
    record = parsed.alerts[source.index] if source.index < len(parsed.alerts) else None
    if not isinstance(record, ParsedAlert):
        raise InvalidTransition("The stored body no longer holds this alert.")
    record.problems.extend(settings_wrong)  # still not placed while a setting is wrong (as when received)
    mend = record_mend(record)  # as when it was received: what the database cannot hold is mended
    if source.pk != alert.pk:
        if mend.refusal:
            raise InvalidTransition(f"The newer body cannot be applied: {mend.refusal}")
        with transaction.atomic():
            locked = (
                Alert.objects.select_for_update(of=("self",)).select_related("delivery", "integration").get(pk=alert.pk)
            )
            if locked.outcome not in Alert.TRANSITIONS["reprocess"][0]:
                return locked
            ctx = PostContext(key=key, settings=settings)
            original_reapply(
                original=locked, source=source, record=mend.record, ctx=ctx, received_at=delivery.received_at
            )
            runner_reports_write(ctx)
        alert.refresh_from_db()
        logger.info("alert %s reprocessed from %s: %s", alert.public_id, source.public_id, alert.outcome)
        return alert
    Alert.objects.filter(pk=alert.pk, outcome=alert.outcome).update(
        outcome=Alert.Outcome.PENDING, mend_notes=mend.notes
    )
    alert.outcome, alert.mend_notes = Alert.Outcome.PENDING, mend.notes
    if mend.refusal:  # a changed mapping now reads an identity the database cannot hold
        return alert_finish(alert, Alert.Outcome.REJECTED, reason=mend.refusal)
    result = alert_apply(alert=alert, record=mend.record, key=key, settings=settings)
    logger.info("alert %s reprocessed: %s", alert.public_id, result.outcome)
    return result


def alert_ignore(*, alert: Alert, actor: Person, reason: str) -> Alert:
    """A person's dismissal of an ``unmatched`` alert, with a reason. Raises ``InvalidTransition``."""
    if not reason.strip():
        raise InvalidTransition("Say why the alert is ignored.")
    updated = Alert.objects.filter(pk=alert.pk, outcome__in=Alert.TRANSITIONS["ignore"][0]).update(
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
            alert_finish(alert, Alert.Outcome.REJECTED, reason=str(exc))
        except Exception as exc:  # noqa: BLE001 - one broken alert must not stop the others; the next sweep retries
            error = redact_text(f"{type(exc).__name__}: {exc}")
            logger.warning("alert %s: reprocessing failed: %s", alert.public_id, error)
    return done

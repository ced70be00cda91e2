"""Triage of alerts: reprocess after a fix, a person's dismissal, and the sweep of what a crash left."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings as django_settings
from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from handover.core.errors import InvalidTransition
from runs.alerts.apply import alert_apply, alert_finish
from runs.alerts.models import Alert
from runs.alerts.parsers.base import FormatError, ParsedAlert, merged_settings
from runs.alerts.parsers.registry import get_adapter
from runs.alerts.receive import delivery_sweep_received
from runs.alerts.records import record_mend
from runs.alerts.redaction import redact_text

logger = logging.getLogger(__name__)


def alert_reprocess(*, alert: Alert, actor: AbstractBaseUser | None = None) -> Alert:
    """Parse the stored body again and re-apply an ``unmatched`` or ``pending`` original alert.

    Used after registering a job or fixing a mapping. Raises ``InvalidTransition`` for other
    outcomes and for duplicates (reprocess their original). Returns the alert with its new outcome.
    """
    if alert.duplicate_of_id is not None or alert.outcome not in Alert.TRANSITIONS["reprocess"][0]:
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
    mend = record_mend(record)  # as when it was received: what the database cannot hold is mended
    Alert.objects.filter(pk=alert.pk, outcome=alert.outcome).update(
        outcome=Alert.Outcome.PENDING, mend_notes=mend.notes
    )
    alert.outcome, alert.mend_notes = Alert.Outcome.PENDING, mend.notes
    if mend.refusal:  # a changed mapping now reads an identity the database cannot hold
        return alert_finish(alert, Alert.Outcome.REJECTED, reason=mend.refusal)
    result = alert_apply(alert=alert, record=mend.record, key=key, settings=settings)
    logger.info("alert %s reprocessed: %s", alert.public_id, result.outcome)
    return result


def alert_ignore(*, alert: Alert, actor: AbstractBaseUser, reason: str) -> Alert:
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

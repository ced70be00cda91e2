"""The anonymous health endpoint (``/healthz``): database, broker, beat age and backlog counts."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone


def healthz(request: HttpRequest) -> HttpResponse:
    """Database, broker, beat heartbeat age and the backlogs (pending alerts, deliveries not finished,
    failed deliveries, overdue next-run checks), as JSON: counts only, never a delivery's error."""
    from handover.celery import app
    from runs.alerts.models import Alert, Delivery
    from runs.checks.models import NextRunCheck
    from runs.health.selectors import heartbeat_age_seconds

    report: dict[str, object] = {"time": timezone.now().isoformat()}
    status = 200
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        report["database"] = "ok"
        report["pending_alerts"] = Alert.objects.filter(outcome=Alert.Outcome.PENDING).count()
        # posts being applied right now, or left by a crash for the alert sweep to finish
        report["unfinished_deliveries"] = Delivery.objects.filter(outcome=Delivery.Outcome.RECEIVED).count()
        # posts whose processing kept failing: stored, shown in the inbox with their error (only the count here)
        report["failed_deliveries"] = Delivery.objects.filter(outcome=Delivery.Outcome.FAILED).count()
        # scheduled checks past their deadline: the next-run sweep has not settled them yet
        report["overdue_next_run_checks"] = NextRunCheck.objects.filter(
            status=NextRunCheck.Status.SCHEDULED, evidence_attempt__isnull=True, deadline_at__lte=timezone.now()
        ).count()
    except Exception as exc:  # noqa: BLE001 - a health check reports any failure
        report["database"] = f"error: {type(exc).__name__}"
        status = 503
    try:
        with app.connection_for_write() as broker:
            broker.ensure_connection(max_retries=1, timeout=2)
        report["broker"] = "ok"
    except Exception as exc:  # noqa: BLE001 - a health check reports any failure
        report["broker"] = f"error: {type(exc).__name__}"
        status = 503
    try:
        # the beat's heartbeat row, written each tick by whichever worker ran the alert sweep
        report["beat_age_seconds"] = heartbeat_age_seconds()
    except Exception:  # noqa: BLE001 - the database error is reported above
        report["beat_age_seconds"] = None
    return JsonResponse(report, status=status)

"""Shared HTML views: the viewer's preferences, and the health endpoint."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone

from handover.models.base import UserPreference, validate_time_zone
from handover.services.preferences import user_preference_set


class PreferenceForm(forms.Form):
    time_zone = forms.CharField(
        max_length=64, validators=[validate_time_zone], help_text="IANA zone, e.g. Europe/Berlin"
    )


@login_required
def preferences(request: HttpRequest) -> HttpResponse:
    """Let a person choose the zone times are shown in (UTC stays on hover)."""
    current = UserPreference.objects.filter(user=request.user).first()
    form = PreferenceForm(request.POST or None, initial={"time_zone": current.time_zone if current else "UTC"})
    if request.method == "POST" and form.is_valid():
        user_preference_set(user=request.user, time_zone=form.cleaned_data["time_zone"])
        messages.success(request, "Times are now shown in " + form.cleaned_data["time_zone"] + ".")
        return redirect("preferences")
    return render(request, "handover/preferences.html", {"form": form})


def healthz(request: HttpRequest) -> HttpResponse:
    """Database, broker, beat heartbeat age and the backlogs (pending alerts, deliveries not finished,
    overdue next-run checks), as JSON."""
    from handover.celery import app
    from runs.models.checks import NextRunCheck
    from runs.models.core import Alert, Delivery
    from runs.selectors.heartbeats import heartbeat_age_seconds

    report: dict[str, object] = {"time": timezone.now().isoformat()}
    status = 200
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        report["database"] = "ok"
        report["pending_alerts"] = Alert.objects.filter(outcome=Alert.Outcome.PENDING).count()
        # posts being applied right now, or left by a crash for the alert sweep to finish
        report["unfinished_deliveries"] = Delivery.objects.filter(outcome=Delivery.Outcome.RECEIVED).count()
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

"""The recurrence page (``/recurrence/``: jobs ranked by cost to the support desk, with their owners and trend)
and the supportability report (``/supportability/``, and its Markdown export for an engineering ticket)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils import timezone

from approvals.recurrence.filters import RecurrenceForm, tenants_named
from approvals.recurrence.selectors import recurrence_report
from approvals.recurrence.supportability import MISSING_FIELDS, supportability_report
from handover.core.links import base_url
from handover.core.replica import replica_reads
from runs.attempts.failures import PERIOD_DAYS, Period, period_ending
from runs.permissions import tenant_list_visible


def _filters(request: HttpRequest) -> tuple[RecurrenceForm, dict[str, Any], Period]:
    """The page's form and its cleaned values (invalid values fall back to their defaults), and the period."""
    form = RecurrenceForm(request.GET or None)
    values: dict[str, Any] = {}
    if form.is_bound and form.is_valid():
        values = {k: v for k, v in form.cleaned_data.items() if v not in (None, "")}
    period = period_ending(days=values.get("days") or 30, last_day=values.get("until"))
    return form, values, period


@login_required
@replica_reads
def recurrence_view(request: HttpRequest) -> HttpResponse:
    """Jobs ranked by cost to the support desk over 7, 30 or 90 days; per tenant and failure class; trend chart."""
    form, values, period = _filters(request)
    report = recurrence_report(
        user=request.user,
        period=period,
        tenants=tenants_named(values.get("tenant")),
        job_public_id=values.get("job"),
    )
    return render(
        request,
        "approvals/recurrence/recurrence.html",
        {
            "form": form,
            "report": report,
            "period": period,
            "values": values,
            "tenants": tenant_list_visible(user=request.user).order_by("slug_key"),
            "period_days": PERIOD_DAYS,
        },
    )


@login_required
@replica_reads
def supportability_view(request: HttpRequest) -> HttpResponse:
    """Jobs ranked by what their alerts lacked and by handovers their technical owner had to explain."""
    form, values, period = _filters(request)
    report = supportability_report(user=request.user, period=period, tenants=tenants_named(values.get("tenant")))
    return render(
        request,
        "approvals/recurrence/supportability.html",
        {
            "form": form,
            "report": report,
            "period": period,
            "missing_fields": [words for words, _ in MISSING_FIELDS.values()],
            "tenants": tenant_list_visible(user=request.user).order_by("slug_key"),
            "period_days": PERIOD_DAYS,
        },
    )


@login_required
@replica_reads
def supportability_export_view(request: HttpRequest) -> HttpResponse:
    """The supportability report as a Markdown file for an engineering ticket (same filters as the page)."""
    _form, values, period = _filters(request)
    tenants = tenants_named(values.get("tenant"))
    report = supportability_report(user=request.user, period=period, tenants=tenants)
    text = render_to_string(
        "approvals/recurrence/supportability.md",
        {"report": report, "tenant": tenants[0] if tenants else None, "base_url": base_url(request)},
    )
    response = HttpResponse(text.strip() + "\n", content_type="text/markdown; charset=utf-8")
    stamp = timezone.localdate().isoformat()
    response["Content-Disposition"] = f'attachment; filename="supportability-{period.days}d-{stamp}.md"'
    return response

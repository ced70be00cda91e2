"""HTML pages of the runs app: runs list, run page, alert inbox, integrations. Thin: selectors + services."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from handover.errors import DomainError
from runs.forms import AlertIgnoreForm, RunFilterForm
from runs.ingest import get_adapter
from runs.ingest.base import merged_settings
from runs.selectors import (
    alert_get,
    alert_inbox,
    delivery_list_recent,
    delivery_count_rejected,
    delivery_list_rejected,
    integration_list,
    run_get,
    run_list,
    tenant_list_visible,
)
from runs.services import alert_ignore, alert_reprocess


@login_required
def run_list_view(request: HttpRequest) -> HttpResponse:
    """Runs the viewer may see, newest window first, filterable and paginated (50 a page)."""
    form = RunFilterForm(request.GET or None)
    filters = form.cleaned_data if form.is_valid() else {}
    runs = run_list(
        user=request.user,
        tenant=filters.get("tenant") or None,
        job=filters.get("job") or None,
        environment=filters.get("environment") or None,
        status=filters.get("status") or None,
        window_from=filters.get("window_from"),
        window_to=filters.get("window_to"),
        search=filters.get("q") or None,
    )
    page = Paginator(runs, 50).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "runs/run_list.html",
        {
            "form": form,
            "page": page,
            "query": query.urlencode(),
            "tenants": tenant_list_visible(user=request.user),
        },
    )


@login_required
def run_detail_view(request: HttpRequest, id: str) -> HttpResponse:
    """One run: identity, every attempt, and the timeline in order. 404 when not visible."""
    run = run_get(user=request.user, public_id=id)
    if run is None:
        raise Http404("No such run")
    attempts = list(run.attempts.all())
    versions = {a.config_version for a in attempts if a.config_version}
    return render(
        request,
        "runs/run_detail.html",
        {
            "run": run,
            "attempts": attempts,
            "timeline": list(run.timeline.all()),
            "config_changed": len(versions) > 1,
            "first_config": next((a.config_version for a in attempts if a.config_version), ""),
        },
    )


@login_required
def alert_inbox_view(request: HttpRequest) -> HttpResponse:
    """Alert outcomes at a glance: counts, then original alerts with the unmatched ones first."""
    alerts, counts = alert_inbox(user=request.user)
    page = Paginator(alerts, 50).get_page(request.GET.get("page"))
    template = "runs/_inbox_rows.html" if request.htmx else "runs/alert_inbox.html"
    order = ["unmatched", "pending", "accepted", "duplicate", "rejected", "ignored"]
    rejected = delivery_list_rejected(limit=20) if request.user.is_staff else None
    return render(
        request,
        template,
        {
            "page": page,
            "counts": [(o, counts.get(o, 0)) for o in order],
            "ignore_form": AlertIgnoreForm(),
            "rejected_deliveries": list(rejected) if rejected is not None else None,
            "rejected_delivery_count": delivery_count_rejected() if rejected is not None else 0,
        },
    )


@login_required
def alert_detail_view(request: HttpRequest, id: str) -> HttpResponse:
    """One alert: its outcome and reason, normalised fields, the delivery it came in."""
    alert = alert_get(user=request.user, public_id=id)
    if alert is None:
        raise Http404("No such alert")
    return render(request, "runs/alert_detail.html", {"alert": alert, "ignore_form": AlertIgnoreForm()})


@staff_member_required
@require_POST
def alert_reprocess_view(request: HttpRequest, id: str) -> HttpResponse:
    """Admins: parse the stored body again and apply it (after registering the job)."""
    alert = alert_get(user=request.user, public_id=id)
    if alert is None:
        raise Http404("No such alert")
    try:
        alert = alert_reprocess(alert=alert, actor=request.user)
        messages.success(request, f"Reprocessed: {alert.outcome}. {alert.reason}".strip())
    except DomainError as exc:
        messages.error(request, exc.detail)
    return redirect("runs:alert-detail", id=alert.public_id)


@staff_member_required
@require_POST
def alert_ignore_view(request: HttpRequest, id: str) -> HttpResponse:
    """Admins: dismiss an unmatched alert with a reason."""
    alert = alert_get(user=request.user, public_id=id)
    if alert is None:
        raise Http404("No such alert")
    form = AlertIgnoreForm(request.POST)
    if form.is_valid():
        try:
            alert_ignore(alert=alert, actor=request.user, reason=form.cleaned_data["reason"])
            messages.success(request, "Alert ignored.")
        except DomainError as exc:
            messages.error(request, exc.detail)
    else:
        messages.error(request, "Say why the alert needs no action.")
    return redirect("runs:alert-detail", id=alert.public_id)


@staff_member_required
def integration_list_view(request: HttpRequest) -> HttpResponse:
    """Admins: every integration with its source, active keys and delivery count."""
    return render(request, "runs/integration_list.html", {"integrations": integration_list(user=request.user)})


@staff_member_required
def integration_detail_view(request: HttpRequest, id: str) -> HttpResponse:
    """Admins: an integration's effective settings, key prefixes and last use, recent deliveries."""
    integration = get_object_or_404(integration_list(user=request.user), public_id=id)
    adapter = get_adapter(integration.source)
    effective = merged_settings(adapter.DEFAULT_SETTINGS, integration.settings) if adapter else integration.settings
    keys = integration.keys.prefetch_related("tenants").order_by("-created_at")
    return render(
        request,
        "runs/integration_detail.html",
        {
            "integration": integration,
            "settings": sorted(effective.items()),
            "keys": keys,
            "deliveries": delivery_list_recent(integration=integration),
        },
    )

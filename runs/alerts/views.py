"""The alert inbox and one alert; admins reprocess or ignore an unmatched alert, and reprocess a failed post."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_required
from django.core.paginator import Page
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from handover.core.errors import DomainError
from handover.core.pagination import CappedPaginator
from handover.core.people import signed_in
from handover.core.replica import replica_reads
from handover.core.views import form_post, is_htmx
from runs.alerts.forms import AlertIgnoreForm
from runs.alerts.models import Alert, Delivery
from runs.alerts.receive import delivery_reprocess
from runs.alerts.selectors import (
    alert_get,
    alert_inbox,
    delivery_count_by_outcome,
    delivery_get_failed,
    delivery_list_failed,
    delivery_list_rejected,
)
from runs.alerts.triage import alert_ignore, alert_reprocess


@login_required
@replica_reads
def alert_inbox_view(request: HttpRequest) -> HttpResponse:
    """Alert outcomes at a glance: counts (failed posts too), then original alerts with the unmatched ones
    first; admins also see the latest rejected and failed posts (a post names no tenant)."""
    alerts, counts = alert_inbox(user=request.user)
    page: Page[Alert] = CappedPaginator(alerts, 50).get_page(request.GET.get("page"))
    polled = is_htmx(request)  # django-htmx's middleware sets it
    template = "runs/alerts/_inbox_rows.html" if polled else "runs/alerts/alert_inbox.html"
    order = ["unmatched", "pending", "accepted", "duplicate", "rejected", "ignored"]
    context = {
        "page": page,
        "counts": [(o, counts.get(o, 0)) for o in order],
        "ignore_form": AlertIgnoreForm(),
    }
    if not polled:  # the polled rows show no posts: their queries are the full page's only
        staff = request.user.is_staff
        posts = delivery_count_by_outcome()  # rejected and failed, one grouped query
        failed = posts.get(Delivery.Outcome.FAILED, 0)
        context |= {
            "rejected_deliveries": list(delivery_list_rejected(limit=20)) if staff else None,
            "rejected_delivery_count": posts.get(Delivery.Outcome.REJECTED, 0),
            # listed only when there are any (the usual page has none: no query for them)
            "failed_deliveries": (list(delivery_list_failed(limit=20)) if failed else []) if staff else None,
            "failed_delivery_count": failed,
        }
    return render(request, template, context)


@login_required
def alert_detail_view(request: HttpRequest, id: str) -> HttpResponse:
    """One alert: its outcome and reason, normalised fields, the delivery it came in."""
    alert = alert_get(user=request.user, public_id=id)
    if alert is None:
        raise Http404("No such alert")
    return render(request, "runs/alerts/alert_detail.html", {"alert": alert, "ignore_form": AlertIgnoreForm()})


@staff_member_required
@require_POST
def alert_reprocess_view(request: HttpRequest, id: str) -> HttpResponse:
    """Admins: parse the stored body again and apply it (after registering the job)."""
    alert = alert_get(user=request.user, public_id=id)
    if alert is None:
        raise Http404("No such alert")
    try:
        alert = alert_reprocess(alert=alert, actor=signed_in(request.user))
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
    return form_post(
        request,
        AlertIgnoreForm(request.POST),
        invalid="Say why the alert needs no action.",
        act=lambda data: alert_ignore(alert=alert, actor=signed_in(request.user), reason=data["reason"]),
        success=lambda _: "Alert ignored.",
        done=redirect("runs:alert-detail", id=alert.public_id),
    )


@staff_member_required
@require_POST
def delivery_reprocess_view(request: HttpRequest, id: str) -> HttpResponse:
    """Admins: process a failed post again from its stored body (after the cause was fixed)."""
    delivery = delivery_get_failed(public_id=id)
    if delivery is None:
        raise Http404("No such failed delivery")
    try:
        delivery = delivery_reprocess(delivery=delivery, actor=signed_in(request.user))
    except DomainError as exc:
        messages.error(request, exc.detail)
    else:
        if delivery.outcome == delivery.Outcome.RECEIVED:
            messages.error(request, f"Processing failed again ({delivery.last_error}); the sweep retries it.")
        else:
            messages.success(request, f"Delivery {delivery.public_id} reprocessed: {delivery.outcome}.")
    return redirect("runs:alert-inbox")

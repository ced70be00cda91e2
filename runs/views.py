"""HTML pages of the runs app: runs list, run page, alert inbox, integrations. Thin: selectors + services."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from handover.errors import DomainError
from runs.forms import (
    AlertIgnoreForm,
    NextRunCheckConfirmForm,
    NextRunCheckCreateForm,
    NextRunCheckWaiveForm,
    RunFilterForm,
)
from runs.ingest import get_adapter
from runs.ingest.base import merged_settings
from runs.models import NextRunCheck, Run
from runs.selectors import (
    alert_get,
    alert_inbox,
    check_get,
    check_list,
    check_list_for_run,
    check_sections,
    delivery_count_rejected,
    delivery_list_recent,
    delivery_list_rejected,
    integration_list,
    job_get,
    job_list_visible,
    run_get,
    run_list,
    target_list_visible,
    target_may_act,
    target_outage_list,
    tenant_list_visible,
)
from runs.services import (
    alert_ignore,
    alert_reprocess,
    job_schedule,
    next_run_check_confirm,
    next_run_check_schedule,
    next_run_check_waive,
    schedule_dst_sentences,
    schedule_fire_times,
    target_schedule,
)


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
            **_run_schedule_context(run),
        },
    )


def _run_schedule_context(run: Run) -> dict[str, object]:
    """The run page's schedule box: the next fire times of its job (the target's schedule in force) and its checks."""
    sched = target_schedule(target=run.target) if run.target else job_schedule(job=run.job)
    return {
        "schedule": sched,
        "fire_times": schedule_fire_times(sched=sched, after=timezone.now(), count=5),
        "run_checks": list(check_list_for_run(run=run)),
    }


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


# --- next-run checks and jobs -----------------------------------------------------------------

BEAT_SILENT_AFTER_SECONDS = 180


def _beat_warning() -> str:
    """A warning when the beat has not ticked for a while: due checks are then not being settled."""
    from runs.tasks import beat_heartbeat_age_seconds

    age = beat_heartbeat_age_seconds()
    if age is None:
        return "The Celery beat has never ticked here: next-run checks and missed runs are not being swept."
    if age > BEAT_SILENT_AFTER_SECONDS:
        return f"The Celery beat has been silent for {int(age)} s: next-run checks and missed runs are not being swept."
    return ""


@login_required
def check_list_view(request: HttpRequest) -> HttpResponse:
    """Next-run checks the viewer may see: due (deadline passed or awaiting a person), upcoming, failed, waived."""
    now = timezone.now()
    targets = target_list_visible(user=request.user).filter(is_active=True)
    found = check_sections(user=request.user, now=now)
    sections = [
        ("due", "Due", "Deadline passed (the sweep settles these every minute), or awaiting a person.", found["due"]),
        ("upcoming", "Upcoming", "Scheduled; the next run has not been due yet.", found["upcoming"]),
        ("failed", "Failed", "Reopen the handover; a late success is kept as evidence.", found["failed"]),
        ("waived", "Waived", "Waived with a checkpoint date and a named owner; never a pass.", found["waived"]),
        ("passed", "Recently passed", "", found["passed"]),
    ]
    return render(
        request,
        "runs/check_list.html",
        {
            "sections": sections,
            "now": now,
            "create_form": NextRunCheckCreateForm(targets=targets),
            "beat_warning": _beat_warning(),
        },
    )


@login_required
def check_detail_view(request: HttpRequest, id: str) -> HttpResponse:
    """One check: expected time and deadline, its evidence and result, and the waive / confirm forms."""
    check = check_get(user=request.user, public_id=id)
    if check is None:
        raise Http404("No such check")
    return render(
        request,
        "runs/check_detail.html",
        {
            "check": check,
            "now": timezone.now(),
            "may_act": target_may_act(user=request.user, target=check.target),
            "waive_form": NextRunCheckWaiveForm(),
            "confirm_form": NextRunCheckConfirmForm(),
        },
    )


@login_required
@require_POST
def check_create_view(request: HttpRequest) -> HttpResponse:
    """Schedule a check of a target's next fire time by hand (support or technical owner)."""
    targets = target_list_visible(user=request.user).filter(is_active=True)
    form = NextRunCheckCreateForm(request.POST, targets=targets)
    target = targets.filter(public_id=form.cleaned_data["target"]).first() if form.is_valid() else None
    if target is None:
        messages.error(request, "Choose a target.")
        return redirect("runs:check-list")
    if not target_may_act(user=request.user, target=target):
        raise PermissionDenied("Only support on this tenant or the job's technical owner may create checks.")
    try:
        check, created = next_run_check_schedule(target=target, after=timezone.now(), actor=request.user)
    except DomainError as exc:
        messages.error(request, exc.detail)
        return redirect("runs:check-list")
    messages.success(request, "Check scheduled." if created else "A check for that fire time already exists.")
    return redirect("runs:check-detail", id=check.public_id)


def _check_for_action(request: HttpRequest, id: str) -> NextRunCheck:
    """The check a person acts on: 404 when not visible, 403 without support or technical ownership."""
    check = check_get(user=request.user, public_id=id)
    if check is None:
        raise Http404("No such check")
    if not target_may_act(user=request.user, target=check.target):
        raise PermissionDenied("Only support on this tenant or the job's technical owner may do this.")
    return check


@login_required
@require_POST
def check_waive_view(request: HttpRequest, id: str) -> HttpResponse:
    """Waive a scheduled check with a checkpoint date, a reason and a named owner."""
    check = _check_for_action(request, id)
    form = NextRunCheckWaiveForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Give a checkpoint date, a reason and the owner's username.")
        return redirect("runs:check-detail", id=check.public_id)
    owner = get_user_model().objects.filter(username=form.cleaned_data["owner"]).first()
    try:
        next_run_check_waive(
            check=check,
            actor=request.user,
            owner=owner,
            checkpoint=form.cleaned_data["checkpoint"],
            reason=form.cleaned_data["reason"],
        )
        messages.success(request, "Check waived.")
    except DomainError as exc:
        messages.error(request, exc.detail)
    return redirect("runs:check-detail", id=check.public_id)


@login_required
@require_POST
def check_confirm_view(request: HttpRequest, id: str) -> HttpResponse:
    """Confirm that a next run without a ledger re-emitted nothing (the check then passes or fails)."""
    check = _check_for_action(request, id)
    form = NextRunCheckConfirmForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Say how duplicates were checked.")
        return redirect("runs:check-detail", id=check.public_id)
    try:
        check = next_run_check_confirm(check=check, actor=request.user, note=form.cleaned_data["note"])
        messages.success(request, f"Confirmed: the check is {check.status}.")
    except DomainError as exc:
        messages.error(request, exc.detail)
    return redirect("runs:check-detail", id=check.public_id)


@login_required
def job_list_view(request: HttpRequest) -> HttpResponse:
    """Jobs the viewer may see, with their schedule and zone."""
    return render(request, "runs/job_list.html", {"jobs": job_list_visible(user=request.user)})


@login_required
def job_detail_view(request: HttpRequest, id: str) -> HttpResponse:
    """A job: its schedule and DST policy in words, the next five fire times (job zone and UTC), its
    targets with their own schedule when overridden, outages with catch-up covered and omitted, and checks."""
    job = job_get(user=request.user, public_id=id)
    if job is None:
        raise Http404("No such job")
    now = timezone.now()
    sched = job_schedule(job=job)
    targets = []
    for target in target_list_visible(user=request.user, job=job):
        own = target_schedule(target=target)
        overridden = own != sched
        targets.append(
            {
                "target": target,
                "schedule": own,
                "overridden": overridden,
                "fire_times": schedule_fire_times(sched=own, after=now, count=5) if overridden else [],
                "dst_sentences": schedule_dst_sentences(sched=own, now=now) if overridden else [],
                "outages": target_outage_list(target=target, now=now) if target.reports_successes else [],
            }
        )
    return render(
        request,
        "runs/job_detail.html",
        {
            "job": job,
            "schedule": sched,
            "now": now,
            "dst_sentences": schedule_dst_sentences(sched=sched, now=now),
            "fire_times": schedule_fire_times(sched=sched, after=now, count=5),
            "targets": targets,
            "checks": list(check_list(user=request.user, job=job.key).order_by("-deadline_at", "-id")[:20]),
            "beat_warning": _beat_warning(),
        },
    )

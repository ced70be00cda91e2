"""HTML pages of the runs app: runs list, run page, alert inbox, integrations. Thin: selectors + services."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.text import slugify
from django.views.decorators.http import require_POST

from handover.errors import DomainError
from runs.forms import (
    AlertIgnoreForm,
    IntegrationCustomCreateForm,
    IntegrationKeyCreateForm,
    IntegrationMappingForm,
    NextRunCheckConfirmForm,
    NextRunCheckCreateForm,
    NextRunCheckWaiveForm,
    RunFailureClassForm,
    RunFilterForm,
    WorkItemChangeForm,
    WorkItemLoadForm,
    WorkItemSearchForm,
    WorkItemVerifyForm,
)
from runs.ingest import custom, get_adapter
from runs.ingest.base import merged_settings
from runs.ledger_files import LedgerInputError
from runs.models import Integration, NextRunCheck, Run, WorkItem, WorkItemLoad
from runs.selectors import (
    alert_completeness,
    alert_count_unmatched,
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
    run_get_for_ledger,
    run_ledger_writable,
    run_list,
    target_list_visible,
    target_may_act,
    target_outage_list,
    tenant_list_visible,
    work_item_list,
    work_item_load_get,
    work_item_load_list,
    work_item_load_progress,
    work_item_page,
    work_item_search,
)
from runs.services import (
    alert_ignore,
    alert_reprocess,
    integration_key_create,
    job_schedule,
    next_run_check_confirm,
    next_run_check_schedule,
    next_run_check_waive,
    schedule_dst_sentences,
    schedule_fire_times,
    target_schedule,
)
from runs.services.catalog import IssuedKey
from runs.services.ledger import (
    OPTION_NAMES,
    LoadFile,
    run_failure_class_confirm,
    work_item_change,
    work_item_loads_create,
    work_item_verify,
)
from runs.services.mapping import (
    MappingInvalid,
    Sample,
    integration_custom_create_with_key,
    integration_custom_update,
    integration_mapping_export,
    integration_reprocess_unmatched,
    mapping_from_json,
    mapping_preview,
    samples_from_deliveries,
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
            **_run_ledger_context(request, run),
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
    is_custom = integration.source == custom.SOURCE
    return render(
        request,
        "runs/integration_detail.html",
        {
            "integration": integration,
            # a custom integration's mapping is shown as JSON below, not as one settings row
            "settings": sorted((k, v) for k, v in effective.items() if not (is_custom and k == "mapping")),
            "keys": keys,
            "deliveries": delivery_list_recent(integration=integration),
            # issue 9: custom mappings, completeness, keys issued from the page
            "is_custom": is_custom,
            "mapping_json": _pretty(effective.get("mapping") or {}) if is_custom else "",
            "completeness": alert_completeness(integration=integration),
            "unmatched_count": alert_count_unmatched(integration=integration),
            "key_form": IntegrationKeyCreateForm(),
        },
    )


# --- custom integrations: create, keys, the mapping editor, reprocess (issue 9) ----------------------


def _pretty(document: object) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False)


def _key_issued(request: HttpRequest, integration: Integration, issued: IssuedKey) -> HttpResponse:
    # The secret is shown in this response and nowhere else: it is never stored (not even in the
    # session), so this page answers the POST directly instead of redirecting.
    response = render(
        request,
        "runs/integration_key_issued.html",
        {"integration": integration, "issued": issued, "endpoint": f"/api/v1/alerts/{integration.source}/"},
    )
    response["Cache-Control"] = "no-store"
    return response


@staff_member_required
def integration_create_view(request: HttpRequest) -> HttpResponse:
    """Admins: create a custom integration (name + mapping) and issue its first key, shown once."""
    form = IntegrationCustomCreateForm(request.POST or None, initial={"mapping": _pretty(custom.STARTER_MAPPING)})
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        samples = [Sample(label="pasted sample", body=data["sample"])] if data.get("sample") else []
        try:
            integration, issued = integration_custom_create_with_key(
                name=data["name"],
                mapping=mapping_from_json(data["mapping"]),
                samples=samples,
                tenants=data["key_tenants"],
                all_tenants=data["key_all_tenants"],
                label=data["key_label"],
                created_by=request.user,
            )
        except DomainError as exc:
            for path, errors in (exc.errors or {"__all__": [exc.detail]}).items():
                target = "name" if path == "name" else "mapping" if path.startswith("mapping") else None
                for error in errors:
                    form.add_error(target if target in form.fields else None, f"{path}: {error}")
        else:
            messages.success(request, f"Integration {integration.name!r} created.")
            return _key_issued(request, integration, issued)
    return render(
        request,
        "runs/integration_create.html",
        {"form": form, "fields": custom.FIELD_HELP, "reference": _mapping_reference()},
    )


@staff_member_required
@require_POST
def integration_key_create_view(request: HttpRequest, id: str) -> HttpResponse:
    """Admins: issue another key for an integration; the secret is shown once, on the answer to this post."""
    integration = get_object_or_404(integration_list(user=request.user), public_id=id)
    form = IntegrationKeyCreateForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(e for errors in form.errors.values() for e in errors))
        return redirect("runs:integration-detail", id=integration.public_id)
    data = form.cleaned_data
    try:
        issued = integration_key_create(
            integration=integration,
            tenants=data["key_tenants"],
            all_tenants=data["key_all_tenants"],
            label=data["key_label"],
            created_by=request.user,
        )
    except DomainError as exc:
        messages.error(request, exc.detail)
        return redirect("runs:integration-detail", id=integration.public_id)
    return _key_issued(request, integration, issued)


def _mapping_reference() -> dict[str, object]:
    return {
        "fields": custom.FIELD_HELP,
        "required": custom.REQUIRED,
        "statuses": custom.STATUSES,
        "signals": tuple(custom.SIGNALS),
        "triggers": custom.TRIGGERS,
        "time_formats": custom.TIME_FORMATS,
        "window_rules": custom.WINDOW_RULES,
        "scheduled_for_rules": custom.SCHEDULED_FOR_RULES,
        "functions": sorted(custom.FUNCTION_NAMES),
    }


@staff_member_required
def integration_mapping_view(request: HttpRequest, id: str) -> HttpResponse:
    """Admins: a custom integration's mapping editor.

    GET shows the mapping, a box for a pasted payload and the integration's recent deliveries
    (``?delivery=<id>`` picks one). An htmx POST answers the result fragment: every sample mapped,
    with each field and every error. A plain POST with ``action=save`` saves the mapping only when it
    has no error and every chosen sample maps (at least one sample); otherwise the page shows why.
    """
    integration = get_object_or_404(integration_list(user=request.user), public_id=id)
    if integration.source != custom.SOURCE:
        raise Http404("Only custom integrations have a mapping editor")
    recent = list(delivery_list_recent(integration=integration, limit=10))
    picked = [
        s.delivery_id
        for s in samples_from_deliveries(integration=integration, delivery_ids=[request.GET.get("delivery")])
    ]
    if picked and not any(str(d.public_id) == picked[0] for d in recent):
        recent += list(integration.deliveries.filter(public_id=picked[0]))
    choices = [
        (str(d.public_id), f"{d.received_at:%Y-%m-%d %H:%M:%S}Z · {d.outcome} · {d.size_bytes} B") for d in recent
    ]
    current = (integration.settings or {}).get("mapping") or {}
    initial = {"mapping": _pretty(current), "deliveries": picked or [str(d.public_id) for d in recent[:1]]}
    form = IntegrationMappingForm(request.POST or None, initial=initial, delivery_choices=choices)
    context: dict[str, object] = {
        "integration": integration,
        "form": form,
        "reference": _mapping_reference(),
        "unmatched_count": alert_count_unmatched(integration=integration),
    }
    if request.method != "POST":
        samples = samples_from_deliveries(integration=integration, delivery_ids=initial["deliveries"])
        context["preview"] = mapping_preview(mapping=current, samples=samples)
        return render(request, "runs/integration_mapping.html", context)
    if not form.is_valid():
        context["preview"] = None
        return render(request, "runs/integration_mapping.html", context, status=400)
    data = form.cleaned_data
    samples = samples_from_deliveries(integration=integration, delivery_ids=data["deliveries"])
    if data.get("sample", "").strip():
        samples.insert(0, Sample(label="pasted sample", body=data["sample"]))
    try:
        mapping = mapping_from_json(data["mapping"])
    except MappingInvalid as exc:
        context.update(preview=None, json_error=exc.detail)
    else:
        context["preview"] = mapping_preview(mapping=mapping, samples=samples)
        if data.get("action") == "save" and not request.htmx:
            try:
                integration_custom_update(
                    integration=integration, mapping=mapping, samples=samples, require_samples=True, actor=request.user
                )
            except DomainError as exc:
                context["save_errors"] = exc.errors or {"": [exc.detail]}
            else:
                messages.success(
                    request, f"Mapping saved: {len(samples)} sample(s) map. Reprocess unmatched alerts now."
                )
                return redirect("runs:integration-detail", id=integration.public_id)
    if request.htmx:
        return render(request, "runs/_integration_mapping_result.html", context)
    return render(request, "runs/integration_mapping.html", context, status=400 if context.get("save_errors") else 200)


@staff_member_required
def integration_mapping_export_view(request: HttpRequest, id: str) -> HttpResponse:
    """Admins: download the integration's mapping as JSON (paste it into another integration's editor to import)."""
    integration = get_object_or_404(integration_list(user=request.user), public_id=id)
    response = JsonResponse(
        integration_mapping_export(integration=integration), json_dumps_params={"indent": 2, "ensure_ascii": False}
    )
    response["Content-Disposition"] = (
        f'attachment; filename="{slugify(integration.name) or "integration"}-mapping.json"'
    )
    return response


@staff_member_required
@require_POST
def integration_reprocess_view(request: HttpRequest, id: str) -> HttpResponse:
    """Admins: reprocess this integration's unmatched alerts with its settings as they are now."""
    integration = get_object_or_404(integration_list(user=request.user), public_id=id)
    summary = integration_reprocess_unmatched(integration=integration, actor=request.user)
    messages.success(request, summary.sentence())
    for failure in summary.failures[:5]:
        messages.warning(request, failure)
    return redirect("runs:integration-detail", id=integration.public_id)


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


# --- work ledger (issue 4) -------------------------------------------------------------------------

LEDGER_PAGE_SIZE = 50
# the stacked bar's segments, in order: settled work first, then what still needs a person
LEDGER_SEGMENTS = [
    ("completed", "completed_count"),
    ("rejected", "rejected_count"),
    ("uncertain", "uncertain_count"),
    ("absent", "absent_count"),
    ("unverified", "unverified_count"),
    ("skipped", "skipped_count"),
]


def _ledger_headline(run: Run) -> tuple[str, str]:
    """``(css class, sentence)`` saying where the ledger stands; never "fine" while anything is unresolved."""
    if run.ledger_updated_at is None:
        return "muted", "No work ledger yet: load the eligible population to see which records reached the destination."
    if run.unresolved_count:
        parts = [
            f"{n:,} {word}"
            for n, word in (
                (run.uncertain_count, "uncertain"),
                (run.absent_count, "absent"),
                (run.unverified_count, "unverified"),
            )
            if n
        ]
        total = f"{run.unresolved_count:,} of {run.eligible_count:,}"
        return (
            "bad",
            f"Not reconciled: {total} eligible records unresolved ({', '.join(parts)}).",
        )
    if run.possible_duplicate_count:
        return "warn", (
            f"Nothing unresolved, but {run.possible_duplicate_count:,} possible duplicates need explaining."
        )
    if run.rejected_count:
        return "warn", f"Nothing unresolved; {run.rejected_count:,} rejected records need their cause fixed."
    return "ok", "Reconciled: every eligible record is confirmed in the destination or skipped."


def _run_ledger_context(request: HttpRequest, run: Run) -> dict[str, object]:
    """The run page's ledger section: totals and bar, possible duplicates, loads, one page of items.

    Queries: the item page (none when the filtered outcome's stored count is zero), the possible
    duplicates (none when there are none), the recent loads, and the permission check.
    """
    outcome = request.GET.get("outcome") or ""
    if outcome not in WorkItem.Outcome.values:
        outcome = ""
    only_duplicates = request.GET.get("duplicates") == "1"
    stored = {name: getattr(run, field) for name, field in LEDGER_SEGMENTS}
    # The stored counts answer an empty filter without a query (items not in the population are
    # completed but counted only as possible duplicates).
    known = stored.get(outcome, 0) + (run.possible_duplicate_count if outcome == "completed" else 0)
    empty = (
        run.ledger_updated_at is None
        or (bool(outcome) and not known)
        or (only_duplicates and not run.possible_duplicate_count)
    )
    page = (
        None
        if empty
        else work_item_page(
            run=run,
            outcome=outcome or None,
            possible_duplicate=True if only_duplicates else None,
            after=request.GET.get("after") or None,
            before=request.GET.get("before") or None,
            limit=LEDGER_PAGE_SIZE,
        )
    )
    population = sum(stored.values())
    segments = [
        {"outcome": name, "count": count, "percent": round(100 * count / population, 2)}
        for name, count in stored.items()
        if count and population
    ]
    css, headline = _ledger_headline(run)
    writable = run_ledger_writable(user=request.user, run=run)
    loads = list(work_item_load_list(run=run)[:5])
    return {
        "ledger": {
            "headline": headline,
            "headline_class": css,
            "segments": segments,
            "duplicates": list(work_item_list(run=run, possible_duplicate=True)[:20])
            if run.possible_duplicate_count
            else [],
            "page": page,
            "outcome": outcome,
            "only_duplicates": only_duplicates,
            "outcomes": WorkItem.Outcome.choices,
            "loads": [(load, work_item_load_progress(load=load)) for load in loads],
            "writable": writable,
            "load_form": WorkItemLoadForm() if writable else None,
            "change_form": WorkItemChangeForm() if writable else None,
            "failure_form": RunFailureClassForm(initial={"failure_class": run.failure_class_suggested})
            if writable
            else None,
            "failure_classes": dict(Run.FailureClass.choices),
        }
    }


def _ledger_run(request: HttpRequest, id: str) -> Run:
    run = run_get_for_ledger(user=request.user, public_id=id)
    if run is None:
        raise Http404("No such run")
    if not run_ledger_writable(user=request.user, run=run):
        raise PermissionDenied("You may read this run's ledger but not change it.")
    return run


def _to_ledger(run: Run) -> HttpResponse:
    return redirect(f"{reverse('runs:run-detail', kwargs={'id': run.public_id})}#ledger")


@login_required
@require_POST
def work_item_load_create_view(request: HttpRequest, id: str) -> HttpResponse:
    """Upload record-id files for a run (support, technical owners, admins); 403 for readers."""
    run = _ledger_run(request, id)
    form = WorkItemLoadForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, " ".join(e for errors in form.errors.values() for e in errors))
        return _to_ledger(run)
    data = form.cleaned_data
    try:
        loads = work_item_loads_create(
            user=request.user,
            run=run,
            files=[
                LoadFile(kind=kind, content=data[kind].read(), file_name=data[kind].name or kind)
                for kind in WorkItemLoad.Kind.values
                if data.get(kind)
            ],
            file_format=data["file_format"] or WorkItemLoad.Format.AUTO,
            id_column=data["id_column"],
            options={name: data.get(name) or "" for name in (*OPTION_NAMES, "destination_id_column")},
            is_destination_complete=data["is_destination_complete"],
        )
    except LedgerInputError as exc:
        messages.error(request, f"Nothing was loaded. {exc.detail}")
        return _to_ledger(run)
    except DomainError as exc:
        messages.error(request, exc.detail)
        return _to_ledger(run)
    if all(load.status == WorkItemLoad.Status.COMMITTED for load in loads):
        messages.success(request, "Loaded: " + ", ".join(f"{ld.get_kind_display()} ({ld.row_count:,})" for ld in loads))
    else:
        messages.info(request, "The files are large: they load in the background (progress below).")
    return _to_ledger(run)


@login_required
def work_item_load_progress_view(request: HttpRequest, id: str, load_id: str) -> HttpResponse:
    """The progress bar of one load (htmx polls it every second while the load is pending or running)."""
    run = run_get_for_ledger(user=request.user, public_id=id)
    if run is None:
        raise Http404("No such run")
    load = work_item_load_get(run=run, public_id=load_id)
    if load is None:
        raise Http404("No such load")
    response = render(
        request,
        "runs/_ledger_load_progress.html",
        {"run": run, "load": load, "progress": work_item_load_progress(load=load)},
    )
    if request.htmx and load.status == WorkItemLoad.Status.COMMITTED and request.GET.get("polling") == "1":
        response["HX-Refresh"] = "true"  # the totals, bar and table changed: show the new page
    return response


@login_required
@require_POST
def work_item_change_view(request: HttpRequest, id: str) -> HttpResponse:
    """A person changes one item's outcome, saying why."""
    run = _ledger_run(request, id)
    form = WorkItemChangeForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Give the record id, the new outcome and why.")
        return _to_ledger(run)
    try:
        item = work_item_change(user=request.user, run=run, **form.cleaned_data)
        messages.success(request, f"{item.record_id} is now {item.outcome}.")
    except DomainError as exc:
        messages.error(request, exc.detail)
    return _to_ledger(run)


@login_required
@require_POST
def work_item_verify_view(request: HttpRequest, id: str) -> HttpResponse:
    """Record a provider lookup for one uncertain item."""
    run = _ledger_run(request, id)
    form = WorkItemVerifyForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Give the record id and whether the provider found it.")
        return _to_ledger(run)
    try:
        item = work_item_verify(user=request.user, run=run, **form.cleaned_data)
        messages.success(request, f"{item.record_id} verified: {item.outcome}.")
    except DomainError as exc:
        messages.error(request, exc.detail)
    return _to_ledger(run)


@login_required
@require_POST
def run_failure_class_confirm_view(request: HttpRequest, id: str) -> HttpResponse:
    """A person confirms the run's failure class."""
    run = _ledger_run(request, id)
    form = RunFailureClassForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose a failure class.")
        return _to_ledger(run)
    try:
        run_failure_class_confirm(user=request.user, run=run, **form.cleaned_data)
        messages.success(request, "Failure class confirmed.")
    except DomainError as exc:
        messages.error(request, exc.detail)
    return _to_ledger(run)


@login_required
def work_item_search_view(request: HttpRequest) -> HttpResponse:
    """What happened to a record? Every item with that id in the runs the viewer may see."""
    form = WorkItemSearchForm(request.GET or None)
    items = None
    if form.is_valid():
        items = list(work_item_search(user=request.user, record_id=form.cleaned_data["record_id"])[:100])
    return render(request, "runs/work_item_search.html", {"form": form, "items": items})

"""Next-run checks: the list by section, one check, and a person's create, waive and confirm."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from handover.core.errors import DomainError
from handover.core.people import signed_in
from handover.core.views import form_post, refusals
from runs.catalog.selectors import target_list_visible
from runs.checks.decisions import next_run_check_confirm, next_run_check_require_actor, next_run_check_waive
from runs.checks.forms import NextRunCheckConfirmForm, NextRunCheckCreateForm, NextRunCheckWaiveForm
from runs.checks.models import NextRunCheck
from runs.checks.scheduling import next_run_check_schedule
from runs.checks.selectors import check_get, check_sections
from runs.health.selectors import heartbeat_age_seconds
from runs.permissions import act_filter, may_act_on_target

BEAT_SILENT_AFTER_SECONDS = 180
# The beat task that writes the heartbeat (handover/settings.py CELERY_BEAT_SCHEDULE): its first tick
# comes one interval after the beat starts, so "never ticked" is only said once that interval has passed.
HEARTBEAT_TASK = "runs-alert-sweep"
# When this web process started serving (the beat is started beside it, docs/production.md).
SERVING_SINCE = timezone.now()


def beat_tick_interval_seconds() -> float:
    """Seconds between two beat ticks that write the heartbeat (its CELERY_BEAT_SCHEDULE entry; 60 by default)."""
    schedule: Any = settings.CELERY_BEAT_SCHEDULE.get(HEARTBEAT_TASK, {}).get("schedule", 60.0)
    if isinstance(schedule, timedelta):
        return schedule.total_seconds()
    return float(schedule)


def beat_warning_text(*, now: datetime | None = None, serving_since: datetime | None = None) -> str:
    """A warning when the beat has not ticked for a while: due checks are then not being settled.

    No heartbeat yet is only a warning once a full tick interval has passed since this process started
    (``serving_since``, default ``SERVING_SINCE``): before that the beat, started beside it, has had no
    chance to tick. A heartbeat older than ``BEAT_SILENT_AFTER_SECONDS`` is a warning with its age.
    """
    now = now or timezone.now()
    age = heartbeat_age_seconds(now=now)
    if age is None:
        waited = (now - (serving_since or SERVING_SINCE)).total_seconds()
        if waited <= beat_tick_interval_seconds():
            return ""
        return "The Celery beat has never ticked here: next-run checks and missed runs are not being swept."
    if age > BEAT_SILENT_AFTER_SECONDS:
        return f"The Celery beat has been silent for {int(age)} s: next-run checks and missed runs are not being swept."
    return ""


@login_required
def check_list_view(request: HttpRequest) -> HttpResponse:
    """Next-run checks the viewer may see: due (deadline passed or awaiting a person), upcoming, failed, waived."""
    now = timezone.now()
    # the form offers only targets the person may schedule a check on (``act_filter``: may_act_on_target)
    targets = target_list_visible(user=request.user).filter(act_filter(user=request.user), is_active=True)
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
        "runs/checks/check_list.html",
        {
            "sections": sections,
            "now": now,
            "create_form": NextRunCheckCreateForm(targets=targets),
            "beat_warning": beat_warning_text(),
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
        "runs/checks/check_detail.html",
        {
            "check": check,
            "now": timezone.now(),
            "may_act": may_act_on_target(user=request.user, target=check.target),
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
    with refusals():
        next_run_check_require_actor(actor=signed_in(request.user), target=target)
    try:
        check, created = next_run_check_schedule(target=target, after=timezone.now(), actor=signed_in(request.user))
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
    with refusals():  # before the form is read: a reader learns nothing from a form error
        next_run_check_require_actor(actor=signed_in(request.user), target=check.target)
    return check


@login_required
@require_POST
def check_waive_view(request: HttpRequest, id: str) -> HttpResponse:
    """Waive a scheduled check with a checkpoint date, a reason and a named owner."""
    check = _check_for_action(request, id)
    return form_post(
        request,
        NextRunCheckWaiveForm(request.POST),
        invalid="Give a checkpoint date, a reason and the owner's username.",
        act=lambda data: next_run_check_waive(
            check=check,
            actor=signed_in(request.user),
            owner=get_user_model().objects.filter(username=data["owner"]).first(),
            checkpoint=data["checkpoint"],
            reason=data["reason"],
        ),
        success=lambda _: "Check waived.",
        done=redirect("runs:check-detail", id=check.public_id),
    )


@login_required
@require_POST
def check_confirm_view(request: HttpRequest, id: str) -> HttpResponse:
    """Confirm that a next run without a ledger re-emitted nothing (the check then passes or fails)."""
    check = _check_for_action(request, id)
    return form_post(
        request,
        NextRunCheckConfirmForm(request.POST),
        invalid="Say how duplicates were checked.",
        act=lambda data: next_run_check_confirm(check=check, actor=signed_in(request.user), note=data["note"]),
        success=lambda confirmed: f"Confirmed: the check is {confirmed.status}.",
        done=redirect("runs:check-detail", id=check.public_id),
    )

"""Jobs the viewer may see: the list, and a job's schedule, DST sentences, targets, outages, checks and,
for its admins and technical owners, its runner credentials with copy-paste ``curl`` for the runner API."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from handover.core.links import base_url
from runs.attempts.failures import PERIOD_DAYS, job_failure_trend, period_ending
from runs.attempts.models import Run
from runs.attempts.selectors import run_list
from runs.catalog.runner_credential_views import RunnerCredentialForm, runner_credential_issued_pop
from runs.catalog.selectors import (
    job_get,
    job_list_visible,
    runner_credential_list,
    target_list_visible,
    target_outage_list,
)
from runs.checks.schedules import job_schedule, schedule_dst_sentences, schedule_fire_times, target_schedule
from runs.checks.selectors import check_list
from runs.checks.slot_review import duration_warnings
from runs.checks.views import beat_warning_text
from runs.permissions import may_manage_runner_credentials, may_pause_job, run_visibility_filter


@login_required
def job_list_view(request: HttpRequest) -> HttpResponse:
    """Jobs the viewer may see, with their schedule and zone."""
    return render(request, "runs/catalog/job_list.html", {"jobs": job_list_visible(user=request.user)})


RECENT_RUNS = 20  # the job page's latest runs; the runs list (?job=<key>) has the rest


@login_required
def job_detail_view(request: HttpRequest, id: str) -> HttpResponse:
    """A job: its schedule and DST policy in words, the next five fire times (job's zone, UTC on hover),
    its targets with their own schedule when overridden, outages with catch-up covered and omitted, its
    checks, its latest runs (the runs list's columns), and the failure trend over the last 7, 30 or 90 days
    (``?days=``; 30 by default) on the runs the viewer sees."""
    job = job_get(user=request.user, public_id=id)
    if job is None:
        raise Http404("No such job")
    now = timezone.now()
    sched = job_schedule(job=job)
    targets = []
    warnings = {
        (w.tenant_id, w.environment): w
        for w in duration_warnings(runs=Run.objects.filter(run_visibility_filter(user=request.user), job=job), now=now)
    }
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
                "duration_warning": warnings.get((target.tenant_id, target.environment)),
            }
        )
    days = int(request.GET["days"]) if request.GET.get("days") in {str(d) for d in PERIOD_DAYS} else 30
    trend_period = period_ending(days=days)
    may_manage_credentials = may_manage_runner_credentials(user=request.user, job=job)
    issued = runner_credential_issued_pop(request, job) if may_manage_credentials else None
    response = render(
        request,
        "runs/catalog/job_detail.html",
        {
            "job": job,
            "schedule": sched,
            "now": now,
            "dst_sentences": schedule_dst_sentences(sched=sched, now=now),
            "fire_times": schedule_fire_times(sched=sched, after=now, count=5),
            "targets": targets,
            "checks": list(check_list(user=request.user, job=job.key).order_by("-deadline_at", "-id")[:20]),
            "recent_runs": list(run_list(user=request.user, job=job.key)[:RECENT_RUNS]),
            "beat_warning": beat_warning_text(),
            "may_manage_credentials": may_manage_credentials,
            "may_pause": may_pause_job(user=request.user, job=job),
            "credentials": list(runner_credential_list(job=job)) if may_manage_credentials else [],
            "issued": issued,
            "credential_form": RunnerCredentialForm(),
            "base_url": base_url(request),
            "trend_period": trend_period,
            "trend_days": PERIOD_DAYS,
            "trend": job_failure_trend(user=request.user, job=job, period=trend_period),
        },
    )
    if issued is not None:
        response["Cache-Control"] = "no-store"
    return response

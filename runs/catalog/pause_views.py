"""Pausing and resuming a job (its technical owners, admins) or one target of it (support on its tenant
too) from the browser. The refusals come from the services (runs/catalog/pause.py): a Forbidden
becomes a 403 page, a NotFound a 404; the page shows only the forms the person may use."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from handover.core.errors import DomainError
from handover.core.people import signed_in
from handover.core.views import refusals
from runs.catalog.models import Job, JobTarget
from runs.catalog.pause import job_pause, job_resume, target_pause, target_resume
from runs.catalog.pause_forms import JobPauseForm, JobResumeForm
from runs.catalog.selectors import job_get, target_get, target_list_visible
from runs.permissions import may_pause_job, may_pause_target


def _job(request: HttpRequest, id: str) -> Job:
    job = job_get(user=request.user, public_id=id)
    if job is None:
        raise Http404("No such job")
    return job


def _back(request: HttpRequest, default: str) -> str:
    # a path on this site only: ``redirect`` takes a bare word ("abc") for a URL name and reverses it
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target.startswith("/") and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return target
    return default


@login_required
def job_pause_view(request: HttpRequest, id: str) -> HttpResponse:
    """Show the job's pause state and its targets'; POST pauses the job with a reason (on the job's timeline)."""
    job = _job(request, id)
    form = JobPauseForm(request.POST or None)
    if request.method == "POST":
        reason = form.cleaned_data["reason"] if form.is_valid() else ""  # the service says what is missing
        try:
            with refusals():
                job_pause(job=job, actor=signed_in(request.user), reason=reason)
            messages.success(request, f"{job.key} is paused: replays are blocked until it is resumed.")
        except DomainError as exc:
            messages.error(request, exc.detail)
        return redirect(_back(request, request.path))
    job = Job.objects.select_related("paused_by").get(pk=job.pk)
    targets = list(target_list_visible(user=request.user, job=job).select_related("paused_by"))
    rows = [(t, may_pause_target(user=request.user, target=t)) for t in targets]
    return render(
        request,
        "runs/catalog/job_pause.html",
        {
            "job": job,
            "form": form,
            "resume_form": JobResumeForm(),
            "target_form": JobPauseForm(prefix="target"),
            "may_pause": may_pause_job(user=request.user, job=job),
            "target_rows": rows,
            "next": _back(request, ""),
        },
    )


@login_required
def job_resume_view(request: HttpRequest, id: str) -> HttpResponse:
    """POST: resume a paused job."""
    job = _job(request, id)
    if request.method != "POST":
        return redirect("handover:job-pause", id=job.public_id)
    form = JobResumeForm(request.POST)
    note = form.cleaned_data["note"] if form.is_valid() else ""
    with refusals():
        job_resume(job=job, actor=signed_in(request.user), note=note)
    messages.success(request, f"{job.key} is running again.")
    return redirect(_back(request, reverse("handover:job-pause", kwargs={"id": job.public_id})))


def _target_post(request: HttpRequest, id: str, act: Callable[[JobTarget], str]) -> HttpResponse:
    target = target_get(user=request.user, public_id=id)
    if target is None:
        raise Http404("No such target")
    try:
        with refusals():
            messages.success(request, act(target))
    except DomainError as exc:
        messages.error(request, exc.detail)
    return redirect(_back(request, reverse("handover:job-pause", kwargs={"id": target.job.public_id})))


@login_required
@require_POST
def target_pause_view(request: HttpRequest, id: str) -> HttpResponse:
    """POST: pause one target (its tenant's part of the job) with a reason; back to the job's pause page."""
    form = JobPauseForm(request.POST, prefix="target")
    reason = form.cleaned_data["reason"] if form.is_valid() else ""

    def act(target: JobTarget) -> str:
        target_pause(target=target, actor=signed_in(request.user), reason=reason)
        return f"{target.job.key} for {target.tenant.slug} ({target.environment}) is paused."

    return _target_post(request, id, act)


@login_required
@require_POST
def target_resume_view(request: HttpRequest, id: str) -> HttpResponse:
    """POST: resume a paused target; back to the job's pause page."""

    def act(target: JobTarget) -> str:
        target_resume(target=target, actor=signed_in(request.user), note=request.POST.get("note", "")[:2000])
        return f"{target.job.key} for {target.tenant.slug} ({target.environment}) is running again."

    return _target_post(request, id, act)

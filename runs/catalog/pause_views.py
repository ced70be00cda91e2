"""Pausing and resuming a job from the browser (support on a tenant of the job, or its technical owner)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from handover.core.errors import DomainError
from runs.catalog.models import Job
from runs.catalog.pause import job_pause, job_resume
from runs.catalog.pause_forms import JobPauseForm, JobResumeForm
from runs.catalog.selectors import job_get
from runs.permissions import may_pause_job


def _job(request: HttpRequest, id: str) -> Job:
    job = job_get(user=request.user, public_id=id)
    if job is None:
        raise Http404("No such job")
    return job


def _back(request: HttpRequest, default: str) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return target
    return default


@login_required
def job_pause_view(request: HttpRequest, id: str) -> HttpResponse:
    """Show the job's pause state; POST pauses it with a reason (written on the job's timeline)."""
    job = _job(request, id)
    may_pause = may_pause_job(user=request.user, job=job)
    form = JobPauseForm(request.POST or None)
    if request.method == "POST":
        if not may_pause:
            raise PermissionDenied("Only the job's technical owners and admins pause the whole job.")
        if form.is_valid():
            try:
                job_pause(job=job, actor=request.user, reason=form.cleaned_data["reason"])
                messages.success(request, f"{job.key} is paused: replays are blocked until it is resumed.")
            except DomainError as exc:
                messages.error(request, exc.detail)
            return redirect(_back(request, request.path))
    job = Job.objects.select_related("paused_by").get(pk=job.pk)
    return render(
        request,
        "runs/catalog/job_pause.html",
        {"job": job, "form": form, "resume_form": JobResumeForm(), "may_pause": may_pause, "next": _back(request, "")},
    )


@login_required
def job_resume_view(request: HttpRequest, id: str) -> HttpResponse:
    """POST: resume a paused job."""
    job = _job(request, id)
    if request.method != "POST":
        return redirect("handover:job-pause", id=job.public_id)
    if not may_pause_job(user=request.user, job=job):
        raise PermissionDenied("Only the job's technical owners and admins resume the whole job.")
    form = JobResumeForm(request.POST)
    note = form.cleaned_data["note"] if form.is_valid() else ""
    job_resume(job=job, actor=request.user, note=note)
    messages.success(request, f"{job.key} is running again.")
    return redirect(_back(request, reverse("handover:job-pause", kwargs={"id": job.public_id})))

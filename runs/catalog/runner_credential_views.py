"""A job's runner credentials on the job page: issue (shown once), revoke; admins and technical owners.

Issuing is POST -> redirect -> GET, so a reload never issues another credential. The secret is
carried to that one GET by ``handover.core.one_time`` (the cache under a random one-time name, five
minutes at most, deleted when read), never in the URL, the session or a log; the job page shows it once.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from handover.core.once import submission_once
from handover.core.one_time import one_time_pop, one_time_stash
from handover.core.people import signed_in
from handover.core.views import refusals
from runs.catalog.models import Job
from runs.catalog.selectors import job_get, runner_credential_list
from runs.catalog.services import (
    runner_credential_create,
    runner_credential_require_manager,
    runner_credential_revoke,
)

ISSUED_SCOPE = "runner-credential"


class RunnerCredentialForm(forms.Form):
    label = forms.CharField(
        max_length=100, required=False, help_text="Which runner uses it, e.g. “invoice runner, prod”."
    )


def _managed_job(request: HttpRequest, id: str) -> Job:
    job = job_get(user=request.user, public_id=id)
    if job is None:
        raise Http404("No such job")
    with refusals():  # the credential services' refusal, before the form is read
        runner_credential_require_manager(actor=signed_in(request.user), job=job)
    return job


def runner_credential_issued_pop(request: HttpRequest, job: Job) -> dict[str, str] | None:
    """The credential just issued for ``job`` by this person, once: ``{"prefix", "secret"}`` or None.

    Read from the one-time cache entry named by the ``issued`` query parameter and deleted at once, so a
    reload of the page shows it no more.
    """
    value = one_time_pop(request, scope=ISSUED_SCOPE, nonce=request.GET.get("issued", ""))
    if value is None or value.get("job") != str(job.public_id):
        return None
    return {"prefix": value["prefix"], "secret": value["secret"]}


@login_required
@require_POST
def runner_credential_create_view(request: HttpRequest, id: str) -> HttpResponse:
    """POST: issue a runner credential for the job, then redirect to the job page, which shows it once."""
    job = _managed_job(request, id)
    form = RunnerCredentialForm(request.POST)
    label = form.cleaned_data["label"] if form.is_valid() else ""
    url = reverse("runs:job-detail", kwargs={"id": job.public_id})
    with submission_once(request) as sent:  # a double click issues one credential, and shows it
        if sent.earlier is not None:
            messages.info(request, sent.notice)
            return redirect(sent.earlier or f"{url}#runner-credentials")
        record, secret = runner_credential_create(job=job, created_by=request.user, label=label)  # type: ignore[arg-type]
        nonce = one_time_stash(
            request,
            scope=ISSUED_SCOPE,
            payload={"job": str(job.public_id), "prefix": record.prefix, "secret": secret},
        )
        sent.record(f"{url}?issued={nonce}#runner-credentials")
    return redirect(sent.place)


@login_required
@require_POST
def runner_credential_revoke_view(request: HttpRequest, id: str, prefix: str) -> HttpResponse:
    """POST: revoke one of the job's runner credentials; back to the job page."""
    job = _managed_job(request, id)
    credential = runner_credential_list(job=job).filter(prefix=prefix).first()
    if credential is None:
        raise Http404("No such runner credential")
    runner_credential_revoke(credential=credential, actor=request.user)  # type: ignore[arg-type]
    messages.success(request, f"Runner credential {credential.prefix}… is revoked: its claims and reports get 401.")
    return redirect(reverse("runs:job-detail", kwargs={"id": job.public_id}) + "#runner-credentials")

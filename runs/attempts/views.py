"""The runs list and the run page (identity, attempts, timeline, schedule box, work ledger)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from handover.core.pagination import CappedPaginator, count_reach
from handover.core.people import signed_in
from handover.core.polling import list_page
from handover.core.replica import replica_reads
from handover.core.views import form_post, refusals
from runs.attempts.corrections import (
    attempt_correction_require,
    attempt_duplicate_trigger_explain,
    attempt_replace_slot,
    run_conflicting_report_explain,
    run_refire_explain,
)
from runs.attempts.forms import AttemptReplaceSlotForm, DuplicateTriggerExplainForm, RunFilterForm
from runs.attempts.models import Attempt, Run
from runs.attempts.selectors import run_get, run_list, run_list_state
from runs.attempts.services import source_number_twins
from runs.checks.schedules import job_schedule, schedule_fire_times, target_schedule
from runs.checks.selectors import check_list_for_run
from runs.checks.slot_review import run_identity_flags
from runs.ledger.views import run_ledger_context
from runs.permissions import tenant_list_visible

RUNS_PER_PAGE = 50


@login_required
@replica_reads
def run_list_view(request: HttpRequest) -> HttpResponse:
    """Runs the viewer may see, newest window first, filterable and paginated (50 a page).

    Polled by htmx every 30 seconds: the list's fragment, or 304 while the filtered runs and their
    timelines are unchanged (``handover.core.polling``).
    """
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

    def context() -> dict[str, object]:
        query = request.GET.copy()
        query.pop("page", None)
        return {
            "form": form,
            "page": CappedPaginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page")),
            "query": query.urlencode(),
            "tenants": tenant_list_visible(user=request.user),
        }

    return list_page(
        request,
        template="runs/attempts/run_list.html",
        fragment="runs/attempts/_run_list_rows.html",
        context=context,
        state=lambda: run_list_state(runs=runs, reach=count_reach(request.GET.get("page"), RUNS_PER_PAGE)),
    )


@login_required
def run_detail_view(request: HttpRequest, id: str) -> HttpResponse:
    """One run: identity, every attempt, and the timeline in order. 404 when not visible."""
    run = run_get(user=request.user, public_id=id)
    if run is None:
        raise Http404("No such run")
    attempts = list(run.attempts.all())
    ledger = run_ledger_context(request, run)
    box = ledger["ledger"]
    may_correct = isinstance(box, dict) and bool(box["writable"])  # the same people correct attempts
    versions = {a.config_version for a in attempts if a.config_version}
    # the business state's facts (run_get annotates them): flags a person must explain, no extra query
    refire_unexplained = bool(run.bs_refire)  # type: ignore[attr-defined]
    conflicting_unexplained = bool(run.bs_conflicting_report)  # type: ignore[attr-defined]
    twins = source_number_twins(attempts)
    for attempt in attempts:  # "source #2 also reported by attempt 1": two executions claim one try
        attempt.source_number_twins = twins.get(attempt.pk, [])  # type: ignore[attr-defined]
    return render(
        request,
        "runs/attempts/run_detail.html",
        {
            "run": run,
            "attempts": attempts,
            "timeline": list(run.timeline.all()),
            "config_changed": len(versions) > 1,
            "may_correct": may_correct,
            "slot_choices": _slot_choices(run)
            if may_correct and any(a.is_slot_late or a.is_slot_inferred or a.slot_hint for a in attempts)
            else [],
            "first_config": next((a.config_version for a in attempts if a.config_version), ""),
            "identity_flags": run_identity_flags(
                run=run,
                now=timezone.now(),
                refire_unexplained=refire_unexplained,
                conflicting_unexplained=conflicting_unexplained,
            ),
            "refire_unexplained": refire_unexplained,
            "conflicting_unexplained": conflicting_unexplained,
            **_run_schedule_context(run),
            **ledger,
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


def _attempt_to_correct(request: HttpRequest, id: str, attempt_id: str) -> Attempt:
    """The attempt a person corrects: 404 when the run is not visible, 403 when it is only readable."""
    run = run_get(user=request.user, public_id=id)
    if run is None:
        raise Http404("No such run")
    with refusals():  # the correction services' refusal, before the form is read
        attempt_correction_require(actor=signed_in(request.user), run=run)
    attempt = Attempt.objects.filter(run=run, public_id=attempt_id).select_related("run__job", "run__tenant").first()
    if attempt is None:
        raise Http404("No such attempt")
    return attempt


def _to_attempts(attempt: Attempt) -> HttpResponse:
    return redirect(f"{reverse('runs:run-detail', kwargs={'id': attempt.run.public_id})}#attempts")


@login_required
@require_POST
def attempt_explain_duplicate_view(request: HttpRequest, id: str, attempt_id: str) -> HttpResponse:
    """A person explains a duplicate trigger (reason and evidence reference) from the run page."""
    attempt = _attempt_to_correct(request, id, attempt_id)
    return form_post(
        request,
        DuplicateTriggerExplainForm(request.POST),
        invalid="An explanation needs a reason and an evidence reference.",
        act=lambda data: attempt_duplicate_trigger_explain(attempt=attempt, actor=request.user, **data),  # type: ignore[arg-type]  # signed in: the view's permission refuses anonymous users
        success=lambda a: f"Duplicate trigger of attempt {a.number} explained.",
        done=_to_attempts(attempt),
    )


def _slot_choices(run: Run) -> list[tuple[str, str]]:
    """Fire times around the run's slot (about three before, three after), as (ISO UTC, time in the job's zone)."""
    if run.scheduled_for is None:
        return []
    sched = target_schedule(target=run.target) if run.target else job_schedule(job=run.job)
    after = schedule_fire_times(sched=sched, after=run.scheduled_for, count=3)
    if not after:
        return []
    start = run.scheduled_for - 4 * (after[0].utc - run.scheduled_for)
    times = {f.utc: f.local for f in [*schedule_fire_times(sched=sched, after=start, count=4), *after]}
    times.pop(run.scheduled_for, None)
    return [(utc.isoformat(), f"{local:%Y-%m-%d %H:%M %Z}") for utc, local in sorted(times.items())]


@login_required
@require_POST
def attempt_replace_slot_view(request: HttpRequest, id: str, attempt_id: str) -> HttpResponse:
    """A person moves an attempt flagged late, inferred or with a hint to another slot, from the run page."""
    attempt = _attempt_to_correct(request, id, attempt_id)
    return form_post(
        request,
        AttemptReplaceSlotForm(request.POST, slots=_slot_choices(attempt.run)),
        invalid="Choose a slot and say why.",
        act=lambda data: attempt_replace_slot(attempt=attempt, actor=request.user, **data),  # type: ignore[arg-type]  # signed in: the view's permission refuses anonymous users
        success=lambda a: f"Attempt moved to the run of {a.run.scheduled_for:%Y-%m-%d %H:%M}Z.",
        done=_to_attempts(attempt),
    )


@login_required
@require_POST
def run_explain_refire_view(request: HttpRequest, id: str) -> HttpResponse:
    """A person explains a run's re-fires (reason and evidence reference) from the run page."""
    run = run_get(user=request.user, public_id=id)
    if run is None:
        raise Http404("No such run")
    with refusals():  # the correction services' refusal, before the form is read
        attempt_correction_require(actor=signed_in(request.user), run=run)
    return form_post(
        request,
        DuplicateTriggerExplainForm(request.POST),
        invalid="An explanation needs a reason and an evidence reference.",
        act=lambda data: run_refire_explain(run=run, actor=request.user, **data),  # type: ignore[arg-type]  # signed in: the view's permission refuses anonymous users
        success=lambda r: "Re-fire explained.",
        done=redirect(reverse("runs:run-detail", kwargs={"id": run.public_id})),
    )


@login_required
@require_POST
def run_explain_conflicting_report_view(request: HttpRequest, id: str) -> HttpResponse:
    """A person explains a run's conflicting reports (reason and evidence reference) from the run page."""
    run = run_get(user=request.user, public_id=id)
    if run is None:
        raise Http404("No such run")
    with refusals():  # the correction services' refusal, before the form is read
        attempt_correction_require(actor=signed_in(request.user), run=run)
    return form_post(
        request,
        DuplicateTriggerExplainForm(request.POST),
        invalid="An explanation needs a reason and an evidence reference.",
        act=lambda data: run_conflicting_report_explain(run=run, actor=request.user, **data),  # type: ignore[arg-type]  # signed in: the view's permission refuses anonymous users
        success=lambda r: "Conflicting report explained.",
        done=redirect(reverse("runs:run-detail", kwargs={"id": run.public_id})),
    )

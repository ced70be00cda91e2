"""The clean-run rule of a problem (docs/problems.md "Clean runs"): is the fix proven by the runs after it?

A problem's **targets** are the distinct ``(job, tenant, environment)`` of the runs of its linked
handovers (a run need not have a registered JobTarget, so the triple is used, not the row). After
``fix_deployed_at``, each target's runs are read in slot order (``scheduled_for``, else the window's
end, at or after the deployment):

- a run whose business state is ``ok`` (``runs.attempts.business_state``) adds one clean run;
- a finished run that is not ``ok`` (``failed``, ``missed``, or ``attention``: succeeded with something
  unresolved or unexplained) **resets** the target's count to 0: only clean runs after the latest
  bad one count, so a fix that fails once must prove itself N times again;
- a run not finished yet (``expected``, ``running``, ``unknown``) neither counts nor resets.

The problem's clean count is the smallest count over its targets, and the rule holds when it has at
least one target and every target has ``clean_runs_required`` clean runs. The business state is
computed now, so a run that becomes ``ok`` later (a ledger item settled) counts from then on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth.models import AnonymousUser
from django.db.models import DateTimeField, Q
from django.db.models.functions import Coalesce

from handover.core.people import Person
from handover.problems.models import Problem
from runs.attempts.business_state import run_business_state, run_business_state_annotate
from runs.attempts.models import Run
from runs.catalog.models import Job, Tenant
from runs.permissions import run_visibility_filter

User = Person | AnonymousUser
FINISHED = frozenset({Run.Status.SUCCEEDED, Run.Status.FAILED, Run.Status.MISSED})


@dataclass
class TargetProgress:
    """One target's runs since the fix was deployed (oldest first) and its clean count.

    ``runs``: pairs (run, business state word); ``reset_by``: the latest finished run that was not
    ``ok`` (the count restarted after it), or None; ``pending``: runs not finished yet.
    """

    job: Job
    tenant: Tenant
    environment: str
    clean: int = 0
    pending: int = 0
    reset_by: Run | None = None
    runs: list[tuple[Run, str]] = field(default_factory=list)


@dataclass
class CleanRuns:
    """The clean-run figures of a problem: per target, the smallest count, N, and whether the rule holds.

    ``targets`` holds only what the viewer may see when computed for a person (the counts then cover
    only visible runs); for the system (the sweep) it holds every target.
    """

    targets: list[TargetProgress]
    required: int
    deployed: bool

    @property
    def clean(self) -> int:
        return min((t.clean for t in self.targets), default=0)

    @property
    def satisfied(self) -> bool:
        return self.deployed and bool(self.targets) and all(t.clean >= self.required for t in self.targets)


def problem_target_runs(*, problem: Problem, user: User | None = None) -> list[Run]:
    """The runs of ``problem``'s linked handovers (oldest window first), those ``user`` may see when given.

    Queries: one.
    """
    runs = Run.objects.filter(handover_links__handover__problem_links__problem=problem)
    if user is not None:
        runs = runs.filter(run_visibility_filter(user=user))
    return list(runs.select_related("job", "tenant").distinct().order_by("window_start", "id"))


def problem_clean_runs(*, problem: Problem, user: User | None = None) -> CleanRuns:
    """The clean-run figures of ``problem`` (module docstring), for ``user`` (visible targets and runs
    only) or for the system (``user`` None: every target, what the verify sweep decides on).

    Before the fix is deployed (``fix_deployed_at`` empty) every target shows 0 and the rule does not
    hold. Queries: one for the linked runs, one per target after deployment.
    """
    targets: dict[tuple[int, int, str], TargetProgress] = {}
    for run in problem_target_runs(problem=problem, user=user):
        key = (run.job_id, run.tenant_id, run.environment)
        if key not in targets:
            targets[key] = TargetProgress(job=run.job, tenant=run.tenant, environment=run.environment)
    deployed_at = problem.fix_deployed_at
    if deployed_at is not None:
        for (job_id, tenant_id, environment), progress in targets.items():
            runs = run_business_state_annotate(
                Run.objects.annotate(slot_at=Coalesce("scheduled_for", "window_end", output_field=DateTimeField()))
                .filter(Q(slot_at__gte=deployed_at), job_id=job_id, tenant_id=tenant_id, environment=environment)
                .order_by("slot_at", "id")
            )
            if user is not None:
                runs = runs.filter(run_visibility_filter(user=user))
            for run in runs:
                state = run_business_state(run).state
                progress.runs.append((run, state))
                if run.status not in FINISHED:
                    progress.pending += 1
                elif state == "ok":
                    progress.clean += 1
                else:
                    progress.clean = 0
                    progress.reset_by = run
    return CleanRuns(
        targets=sorted(targets.values(), key=lambda t: (t.job.key, t.tenant.slug_key, t.environment)),
        required=problem.clean_runs_required,
        deployed=deployed_at is not None,
    )

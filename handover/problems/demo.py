"""The demo's problem: the ledger gateway losing acknowledgements, behind two handovers of the night of 2026-11-27.

Called by ``manage.py load_demo`` after the demo handover (``handover.handovers.demo``). It drafts a second
handover, for ironbridge-telecom's failed run of the same window, and opens one problem linked to both, owned
by the team "Invoicing platform" (``handover.ownership.demo``), its fix in progress. Written on fixed times
(the handover drafted 2026-11-28 08:30 UTC, the problem opened at 09:10, its fix started 2026-11-30 10:00),
so the problem's age and history read the same whenever the demo is loaded. Idempotent: once the problem
exists nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from django.contrib.auth import get_user_model
from django.db import transaction

from handover.handovers.models import Handover, HandoverRun
from handover.notifications.models import Team
from handover.problems.models import Problem
from runs.attempts.models import Run

DEMO_JOB_KEY = "nightly-invoice-export"
DEMO_TENANTS = ("acme-foods", "ironbridge-telecom")
# window 2026-11-27T00:00+01:00 → 2026-11-28T00:00+01:00 (Europe/Berlin), stored in UTC
DEMO_WINDOW_START = datetime(2026, 11, 26, 23, 0, tzinfo=UTC)
DEMO_HANDOVER_AT = datetime(2026, 11, 28, 8, 30, tzinfo=UTC)
DEMO_OPENED_AT = datetime(2026, 11, 28, 9, 10, tzinfo=UTC)
DEMO_FIX_STARTED_AT = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
DEMO_TEAM = "Invoicing platform"
DEMO_TITLE = "Ledger gateway drops acknowledgements under load"
DEMO_DEFECT = "https://tickets.example.internal/PRB-2041"
DEMO_DESCRIPTION = (
    "Under the nightly export's load the ledger gateway accepts invoices but its acknowledgement times out or "
    "it answers 503, so runs fail after a partial commit. Engineering is adding an idempotency key and a "
    "longer acknowledgement timeout."
)


def demo_problem_load(*, log: Callable[[str], None] = lambda _: None) -> Problem | None:
    """Open the demo problem (fix in progress) linked to the handovers of acme-foods' and ironbridge-telecom's
    failed runs of the 2026-11-27 window; draft ironbridge-telecom's handover first when it has none.

    Written by the demo user ``tech-owner``; owned by the team ``DEMO_TEAM`` when it exists (the ownership
    demo creates it first; without it the problem has no owning team). Returns the problem, or None when it
    already exists or its runs, handovers or users are missing (nothing changes then).
    """
    from handover.handovers.services import handover_create
    from handover.problems.services import problem_create, problem_transition

    if Problem.objects.filter(title=DEMO_TITLE).exists():
        log("  problem: already opened")
        return None
    runs = {
        run.tenant.slug: run
        for run in Run.objects.filter(
            job__key=DEMO_JOB_KEY,
            tenant__slug_key__in=DEMO_TENANTS,
            environment="prod",
            window_start=DEMO_WINDOW_START,
        ).select_related("tenant", "job")
    }
    User = get_user_model()
    owner = User.objects.filter(username="tech-owner").first()
    if set(runs) != set(DEMO_TENANTS) or owner is None:
        log("  problem: the demo runs or users are missing; no demo problem")
        return None
    with transaction.atomic():
        handovers: list[Handover] = []
        for slug in DEMO_TENANTS:
            link = HandoverRun.objects.filter(run=runs[slug]).select_related("handover").order_by("id").first()
            handovers.append(
                link.handover
                if link is not None
                else handover_create(actor=owner, runs=[runs[slug]], at=DEMO_HANDOVER_AT)
            )
        problem = problem_create(
            actor=owner,
            title=DEMO_TITLE,
            defect_ref=DEMO_DEFECT,
            description=DEMO_DESCRIPTION,
            owning_team=Team.objects.filter(name=DEMO_TEAM).first(),
            handovers=handovers,
            at=DEMO_OPENED_AT,
        )
        problem = problem_transition(problem=problem, action="start_fix", actor=owner, at=DEMO_FIX_STARTED_AT).obj
    log(f"  problem: {problem.title} ({problem.get_status_display().lower()}) /problems/{problem.public_id}/")
    return problem

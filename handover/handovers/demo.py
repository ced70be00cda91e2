"""The demo's handover: acme-foods' partially committed run of the night of 2026-11-27 (``load_demo``).

Called by ``manage.py load_demo`` after ``runs.demo.loader.demo_load`` posted the stories. Written on fixed
times (drafted 2026-11-28 07:40 UTC, the morning after the failure, handed over 20 minutes later), so the
recurrence figures (time to handover) are the same whenever the demo is loaded. Idempotent: a run that
already has a handover is left alone.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import transaction

from handover.handovers.models import Handover, HandoverRun
from runs.attempts.models import Run

DEMO_JOB_KEY = "nightly-invoice-export"
DEMO_TENANT = "acme-foods"
# window 2026-11-27T00:00+01:00 → 2026-11-28T00:00+01:00 (Europe/Berlin), stored in UTC
DEMO_WINDOW_START = datetime(2026, 11, 26, 23, 0, tzinfo=UTC)
# drafted the morning after the failure (the run failed at 2026-11-28 02:31 Europe/Berlin)
DEMO_WRITTEN_AT = datetime(2026, 11, 28, 7, 40, tzinfo=UTC)

BUSINESS_IMPACT = (
    "Acme Foods' invoices for orders of 27 November: the first two reached the ledger gateway, the other two "
    "did not or may not have. Acme's accounts-receivable team cannot send the day's dunning run until every "
    "invoice of the window is in the ledger; a duplicate invoice would be sent to a customer."
)
DEADLINES = (
    "Acme's dunning run starts 2026-11-28 14:00 Europe/Berlin: the invoices must be complete by 12:00.\n"
    "Waiting downstream: the month-end revenue report (reads the ledger at 18:00)."
)


def demo_handover_load(*, log: Callable[[str], None] = lambda _: None) -> Handover | None:
    """Draft and hand over the demo handover for acme-foods' run of the 2026-11-27 window.

    Written by the demo user ``support`` with ``tech-owner`` as escalation owner. Returns the
    handover, or None when the run is missing or already has a handover (nothing changes then).
    """
    from handover.handovers.services import handover_create, handover_hand_over, handover_update

    run = (
        Run.objects.filter(
            job__key=DEMO_JOB_KEY,
            tenant__slug_key=DEMO_TENANT,
            environment="prod",
            window_start=DEMO_WINDOW_START,
        )
        .select_related("job", "tenant")
        .first()
    )
    if run is None:
        log("  handover: the acme-foods run of 2026-11-27 is not loaded; no demo handover")
        return None
    if HandoverRun.objects.filter(run=run).exists():
        log("  handover: already written for acme-foods 2026-11-27")
        return None
    User = get_user_model()
    support = User.objects.filter(username="support").first()
    owner = User.objects.filter(username="tech-owner").first()
    if support is None or owner is None:
        log("  handover: demo users missing; no demo handover")
        return None
    with transaction.atomic():
        handover = handover_create(actor=support, runs=[run], at=DEMO_WRITTEN_AT)
        handover = handover_update(
            handover=handover,
            actor=support,
            sections={"business_impact": BUSINESS_IMPACT, "deadlines": DEADLINES},
            fields={
                "escalation_owner": owner,
                "customer_update_owner": support,
                "defect_ref": "https://tickets.example.internal/PRB-2041",
                "is_supportability_defect": True,
                "supportability_ticket": "https://tickets.example.internal/SUP-88 (the runner reports claims, "
                "not what the ledger gateway acknowledged)",
            },
            at=DEMO_WRITTEN_AT + timedelta(minutes=12),
        )
        handover = handover_hand_over(handover=handover, actor=support, at=DEMO_WRITTEN_AT + timedelta(minutes=20))
    log(f"  handover: {handover.title} ({handover.get_status_display().lower()}) /handovers/{handover.public_id}/")
    return handover

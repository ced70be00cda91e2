"""The demo's replays: dunmore-pharmacy's failed run of the night of 2026-11-27 (``load_demo``).

Called by ``manage.py load_demo`` after the stories, the acme-foods ledger and handover.
Gives the run a small ledger through the ledger services, then tells the road back:

1. support asks to replay the three absent invoices *and* DUN-3003, which the runner claims done
   but the destination cannot confirm (uncertain) -- refused by rule 2, "verify first", and the
   refusal is in the audit trail;
2. support asks for the absent invoices only; the business owner approves, the technical owner
   approves too and explicitly accepts the job's unknown repeat safety with a reason;
3. a simulated job runner claims the replay through the API with the job's runner credential,
   reports its attempt running, then succeeded;
4. the destination's next export holds the replayed invoices, and the request is completed (its
   next-run check scheduled).

Idempotent: a run that already has a replay request is left alone.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from approvals.replays.decisions import replay_request_approve
from approvals.replays.models import ReplayRequest
from approvals.replays.requests import replay_request_complete_if_confirmed, replay_request_create
from approvals.replays.rules import ReplayRefused
from runs.attempts.models import Run
from runs.ledger.models import WorkItemLoad

DEMO_JOB_KEY = "nightly-invoice-export"
DEMO_TENANT = "dunmore-pharmacy"
# window 2026-11-27T00:00+01:00 → 2026-11-28T00:00+01:00 (Europe/Berlin), stored in UTC
DEMO_WINDOW_START = datetime(2026, 11, 26, 23, 0, tzinfo=UTC)
ABSENT = ["DUN-3004", "DUN-3005", "DUN-3006"]

POPULATION = b"""record_id,customer
DUN-3001,Apotheke am Markt
DUN-3002,Praxis Dr. Lindqvist
DUN-3003,Sanitaetshaus Ostend
DUN-3004,Pflegeheim Abendrot
DUN-3005,Tierarztpraxis Hahn
DUN-3006,Hospiz St. Clara
"""
RUNNER_REPORT = b"""record_id,status
DUN-3001,completed
DUN-3002,completed
DUN-3003,completed
"""
DESTINATION = b"""record_id,reference
DUN-3001,lg-91d0-3001
DUN-3002,lg-91d0-3002
"""
PROVIDER_LOOKUP = b"""record_id,found,reference
DUN-3004,no,
DUN-3005,no,
DUN-3006,no,
"""
DESTINATION_AFTER_REPLAY = (
    DESTINATION
    + b"""DUN-3004,lg-9a77-3004
DUN-3005,lg-9a77-3005
DUN-3006,lg-9a77-3006
"""
)


def demo_replay_load(*, log: Callable[[str], None] = lambda _: None) -> ReplayRequest | None:
    """Tell the replay story on dunmore-pharmacy's run of 2026-11-27; returns the completed request.

    Returns None (and changes nothing) when the run or the demo people are missing, or when the
    run already has a replay request.
    """
    from runs.catalog.services import runner_credential_create
    from runs.ledger.loads import LoadFile, work_item_loads_create

    run = (
        Run.objects.filter(
            job__key=DEMO_JOB_KEY, tenant__slug_key=DEMO_TENANT, environment="prod", window_start=DEMO_WINDOW_START
        )
        .select_related("job", "tenant", "target")
        .first()
    )
    User = get_user_model()
    people = {
        u.get_username(): u for u in User.objects.filter(username__in=["support", "business-owner", "tech-owner"])
    }
    if run is None or len(people) != 3:
        log("  replays: the dunmore-pharmacy run of 2026-11-27 or the demo people are missing; skipped")
        return None
    if ReplayRequest.objects.filter(run=run).exists():
        log("  replays: already loaded")
        return None
    support, business, technical = people["support"], people["business-owner"], people["tech-owner"]

    if not WorkItemLoad.objects.filter(run=run, status=WorkItemLoad.Status.COMMITTED).exists():
        work_item_loads_create(
            actor=support,
            run=run,
            files=[
                LoadFile(kind="population", content=POPULATION, file_name="population.csv"),
                LoadFile(kind="runner_report", content=RUNNER_REPORT, file_name="runner-report.csv"),
                LoadFile(kind="destination", content=DESTINATION, file_name="destination.csv"),
            ],
        )
        work_item_loads_create(
            actor=support,
            run=run,
            files=[LoadFile(kind="provider_lookup", content=PROVIDER_LOOKUP, file_name="provider-lookup.csv")],
        )

    # 1. refused: an uncertain invoice in scope (rule 2: verify first)
    try:
        replay_request_create(
            actor=support,
            run=run,
            kind=ReplayRequest.Kind.ABSENT_ITEMS,
            reason="Resend every invoice of the night the ledger gateway does not hold.",
            record_ids=["DUN-3003", *ABSENT],
        )
    except ReplayRefused as refused:
        log(f"  replays: refused as expected — {refused.detail}")

    # 2. the absent invoices only; both approvals (the approvers re-entered their passwords)
    request = replay_request_create(
        actor=support,
        run=run,
        kind=ReplayRequest.Kind.ABSENT_ITEMS,
        reason="The provider confirmed DUN-3004..3006 were never sent; the pharmacy needs them for month end.",
        all_items=True,
    )
    replay_request_approve(
        request=request,
        actor=business,
        kind="business",
        scope_fingerprint=request.scope_fingerprint,
        reauthenticated_at=timezone.now(),
        comment="Three customers are waiting; resend them tonight.",
    )
    request = replay_request_approve(
        request=request,
        actor=technical,
        kind="technical",
        scope_fingerprint=request.scope_fingerprint,
        reauthenticated_at=timezone.now(),
        accepts_unknown_repeat_safety=True,
        acceptance_reason="The ledger gateway rejects a second invoice with the same invoice id, and the runner "
        "sends the replay's idempotency key; the customer e-mail step is off for replays.",
    )

    # 3. a simulated job runner claims it and reports its attempt through the API
    _, key = runner_credential_create(job=run.job, created_by=technical, label="demo runner")
    runner = Client(SERVER_NAME="localhost", HTTP_AUTHORIZATION=f"Bearer {key}")
    claimed = runner.post(f"/api/v1/replays/{request.public_id}/claim/")
    replay_key = claimed.json()["idempotency_key"]
    for status in ("running", "succeeded"):
        runner.post(
            f"/api/v1/replays/{request.public_id}/runner-report/",
            data={
                "idempotency_key": replay_key,
                "execution_id": f"replay-{str(request.public_id)[:8]}",
                "status": status,
            },
            content_type="application/json",
        )

    # 4. the destination's next export holds them: the ledger confirms the scope
    work_item_loads_create(
        actor=support,
        run=run,
        files=[
            LoadFile(kind="destination", content=DESTINATION_AFTER_REPLAY, file_name="destination-after-replay.csv")
        ],
    )
    request, _ = replay_request_complete_if_confirmed(request=request)
    log(f"  replays: {request.item_count} invoices of dunmore-pharmacy approved, claimed and {request.status}")
    return request

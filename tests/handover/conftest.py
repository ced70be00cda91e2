"""Fixtures of the handover tests: a failed run with two attempts, people with roles, and a small ledger."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.utils import timezone

from handover.handovers.models import Handover
from handover.handovers.services import handover_create
from runs.attempts.models import Run
from runs.catalog.models import SideEffect
from runs.catalog.services import role_grant
from runs.ledger.models import WorkItem
from tests.factories import AttemptFactory, JobFactory, JobTargetFactory, RunFactory, TenantFactory, UserFactory
from tests.handover.helpers import WINDOW_END, WINDOW_START, LedgerLoader, World


@pytest.fixture
def world(db: None) -> World:
    job = JobFactory(
        key="nightly-invoice-export",
        expected_output="One invoice per billable order, delivered to the ledger gateway.",
        verification="Query the ledger gateway's export for the window.",
    )
    SideEffect.objects.create(
        job=job, description="posts invoices to the ledger gateway", repeat_safety="not_idempotent"
    )
    tenant = TenantFactory(slug="acme-foods", name="Acme Foods")
    other = TenantFactory(slug="borealis-retail", name="Borealis Retail")
    target = JobTargetFactory(job=job, tenant=tenant)
    run = RunFactory(
        job=job,
        tenant=tenant,
        target=target,
        window_start=WINDOW_START,
        window_end=WINDOW_END,
        scheduled_for=datetime(2026, 11, 28, 1, 0, tzinfo=UTC),
        status=Run.Status.FAILED,
    )
    first = AttemptFactory(
        run=run,
        execution_id="exp-a1",
        number=1,
        status="failed",
        started_at=datetime(2026, 11, 28, 1, 3, 11, tzinfo=UTC),
        ended_at=datetime(2026, 11, 28, 1, 19, 40, tzinfo=UTC),
        error_summary="Timeout waiting for acknowledgement from ledger gateway",
        config_version="export-cfg@40",
    )
    retry = AttemptFactory(
        run=run,
        execution_id="exp-a2",
        number=2,
        trigger="automatic_retry",
        status="failed",
        started_at=datetime(2026, 11, 28, 1, 29, 40, tzinfo=UTC),
        ended_at=datetime(2026, 11, 28, 1, 31, 2, tzinfo=UTC),
        error_summary="Ledger gateway returned 503",
        config_version="export-cfg@41",
    )
    support = UserFactory(username="sam-support", email="sam@example.com")
    auditor = UserFactory(username="ada-auditor", email="ada@example.com")
    owner = UserFactory(username="olga-owner", email="olga@example.com")
    stranger = UserFactory(username="stan-stranger", email="stan@example.com")
    role_grant(user=support, role="support", obj=tenant)
    role_grant(user=auditor, role="auditor", obj=tenant)
    role_grant(user=owner, role="technical_owner", obj=job)
    role_grant(user=stranger, role="support", obj=other)
    return World(job, tenant, target, run, first, retry, support, auditor, owner, stranger, other)


@pytest.fixture
def load_ledger() -> LedgerLoader:
    """``load_ledger(run, completed=[...], absent=[...], uncertain=[...], unverified=[...], duplicates=[...])``.

    Writes work items as the ledger service would leave them and stores the run totals.
    """

    def _load(run: Run, **outcomes: list[str]) -> Run:
        now = timezone.now()
        duplicates = outcomes.pop("duplicates", [])
        for outcome, ids in outcomes.items():
            for record_id in ids:
                WorkItem.objects.update_or_create(
                    run=run,
                    record_id=record_id,
                    defaults={
                        "outcome": outcome,
                        "evidence_kind": "" if outcome == "unverified" else "destination_query",
                        "evidence_at": None if outcome == "unverified" else now,
                    },
                )
        for record_id in duplicates:
            WorkItem.objects.update_or_create(
                run=run,
                record_id=record_id,
                defaults={
                    "outcome": "completed",
                    "evidence_kind": "destination_query",
                    "is_possible_duplicate": True,
                    "destination_count": 2,
                },
            )
        items = WorkItem.objects.filter(run=run)
        count = {o: items.filter(outcome=o).count() for o in WorkItem.Outcome.values}
        Run.objects.filter(pk=run.pk).update(
            eligible_count=items.exclude(outcome="skipped").count(),
            completed_count=count["completed"],
            rejected_count=count["rejected"],
            skipped_count=count["skipped"],
            unverified_count=count["unverified"],
            absent_count=count["absent"],
            uncertain_count=count["uncertain"],
            unresolved_count=count["unverified"] + count["absent"] + count["uncertain"],
            possible_duplicate_count=items.filter(is_possible_duplicate=True).count(),
            ledger_updated_at=now,
        )
        run.refresh_from_db()
        return run

    return _load


@pytest.fixture
def draft(world: World) -> Handover:
    """A draft handover of the world's run, written by support."""
    return handover_create(actor=world.support, runs=[world.run])

"""Fixtures of the replay tests: a failed run with a small ledger, people with roles, a runner credential.

The ledger (``INV-1``..``INV-9``): five absent, one completed, one uncertain, one rejected, one
unverified. Support requests; a business owner of the tenant and a technical owner of the job
approve; the job's one side effect is idempotent with a key unless a test says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.utils import timezone

from approvals.replays import tasks
from approvals.replays.decisions import replay_request_approve
from approvals.replays.models import ReplayRequest
from approvals.replays.requests import replay_request_create
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Job, JobTarget, RunnerCredential, SideEffect, Tenant
from runs.catalog.services import role_grant, runner_credential_create
from runs.ledger.models import WorkItem
from tests.factories import AttemptFactory, JobFactory, JobTargetFactory, RunFactory, TenantFactory, UserFactory

PASSWORD = "correct-horse-battery"
LEDGER = {
    "absent": ["INV-1", "INV-2", "INV-3", "INV-4", "INV-5"],
    "completed": ["INV-6"],
    "uncertain": ["INV-7"],
    "rejected": ["INV-8"],
    "unverified": ["INV-9"],
}
ABSENT = LEDGER["absent"]


@dataclass
class World:
    job: Job
    tenant: Tenant
    other_tenant: Tenant
    target: JobTarget
    run: Run
    attempt: Attempt
    support: AbstractBaseUser
    business: AbstractBaseUser
    technical: AbstractBaseUser
    both: AbstractBaseUser  # business owner of the tenant AND technical owner of the job
    other_business: AbstractBaseUser  # business owner of another tenant
    auditor: AbstractBaseUser
    admin: AbstractBaseUser
    credential: RunnerCredential
    credential_key: str
    items: dict[str, WorkItem] = field(default_factory=dict)


def work_item(run: Run, record_id: str, outcome: str) -> WorkItem:
    """An item as the ledger would leave it (every outcome but unverified and skipped carries evidence)."""
    evidence = "" if outcome in ("unverified", "skipped") else "destination_query"
    return WorkItem.objects.create(
        run=run,
        record_id=record_id,
        outcome=outcome,
        evidence_kind=evidence,
        evidence_at=timezone.now() if evidence else None,
    )


def set_outcome(world: World, record_id: str, outcome: str) -> None:
    """Change an item's outcome directly (what a later ledger load or verification would do)."""
    evidence = "" if outcome in ("unverified", "skipped") else "destination_query"
    WorkItem.objects.filter(run=world.run, record_id=record_id).update(outcome=outcome, evidence_kind=evidence)


@pytest.fixture(autouse=True)
def _own_cache(settings: Any) -> Iterator[None]:
    """Password re-entries and failure counts live in the cache: give each test its own, empty one
    (the default file cache in var/ is shared with every other process on the machine)."""
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "replays"}}
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def world(db: None) -> World:
    job = JobFactory(key="nightly-invoice-export")
    SideEffect.objects.create(
        job=job, description="posts invoices to the ledger gateway", repeat_safety="idempotent_with_key"
    )
    tenant = TenantFactory(slug="acme-foods")
    other = TenantFactory(slug="borealis-retail")
    target = JobTargetFactory(job=job, tenant=tenant)
    run = RunFactory(
        job=job,
        tenant=tenant,
        target=target,
        window_start=datetime(2026, 11, 27, 0, 0, tzinfo=UTC),
        window_end=datetime(2026, 11, 28, 0, 0, tzinfo=UTC),
        scheduled_for=datetime(2026, 11, 28, 1, 0, tzinfo=UTC),
        status=Run.Status.FAILED,
    )
    attempt = AttemptFactory(run=run, execution_id="exp-a1", number=1, status="failed")
    users = {
        name: UserFactory(username=name, email=f"{name}@example.com")
        for name in ("sam-support", "bea-business", "tom-technical", "bo-both", "oscar-other", "ada-auditor")
    }
    admin = UserFactory(username="root-admin", email="root@example.com", admin=True)
    role_grant(user=users["sam-support"], role="support", obj=tenant)
    role_grant(user=users["bea-business"], role="business_owner", obj=tenant)
    role_grant(user=users["tom-technical"], role="technical_owner", obj=job)
    role_grant(user=users["bo-both"], role="business_owner", obj=tenant)
    role_grant(user=users["bo-both"], role="technical_owner", obj=job)
    role_grant(user=users["oscar-other"], role="business_owner", obj=other)
    role_grant(user=users["ada-auditor"], role="auditor", obj=tenant)
    credential, key = runner_credential_create(job=job, label="runner")
    world = World(
        job=job,
        tenant=tenant,
        other_tenant=other,
        target=target,
        run=run,
        attempt=attempt,
        support=users["sam-support"],
        business=users["bea-business"],
        technical=users["tom-technical"],
        both=users["bo-both"],
        other_business=users["oscar-other"],
        auditor=users["ada-auditor"],
        admin=admin,
        credential=credential,
        credential_key=key,
    )
    for outcome, ids in LEDGER.items():
        for record_id in ids:
            world.items[record_id] = work_item(run, record_id, outcome)
    return world


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """Record what the on-commit callbacks hand to the approvals tasks instead of sending messages."""
    calls: dict[str, list[Any]] = {"dispatch": [], "deliver": [], "notify": []}
    monkeypatch.setattr(tasks.replay_request_dispatch, "delay", lambda pk: calls["dispatch"].append(pk))
    monkeypatch.setattr(tasks.dispatch_webhook_deliver, "delay", lambda pk: calls["deliver"].append(pk))
    monkeypatch.setattr(tasks.replay_request_notify, "delay", lambda pk, reason: calls["notify"].append((pk, reason)))
    return calls


MakeRequest = Callable[..., ReplayRequest]
Approve = Callable[..., ReplayRequest]


@pytest.fixture
def make_request(world: World, enqueued: dict[str, list[Any]]) -> MakeRequest:
    """``make_request(record_ids=[...], kind=..., actor=...)``: a request made through the service."""

    def _make(
        record_ids: list[str] | None = None,
        kind: str = ReplayRequest.Kind.ABSENT_ITEMS,
        actor: AbstractBaseUser | None = None,
        all_items: bool = False,
        fix_reference: str = "",
        reason: str = "the ledger gateway was down; these invoices never arrived",
    ) -> ReplayRequest:
        return replay_request_create(
            actor=actor or world.support,
            run=world.run,
            kind=kind,
            reason=reason,
            record_ids=record_ids if record_ids is not None else (None if all_items else ["INV-1", "INV-2"]),
            all_items=all_items,
            fix_reference=fix_reference,
        )

    return _make


@pytest.fixture
def approve(world: World) -> Approve:
    """``approve(request, user, kind, **kwargs)``: an approval with a fresh password re-entry."""

    def _approve(request: ReplayRequest, user: AbstractBaseUser, kind: str, **kwargs: Any) -> ReplayRequest:
        request.refresh_from_db()
        return replay_request_approve(
            request=request,
            actor=user,
            kind=kind,
            scope_fingerprint=kwargs.pop("scope_fingerprint", request.scope_fingerprint),
            reauthenticated_at=kwargs.pop("reauthenticated_at", timezone.now()),
            **kwargs,
        )

    return _approve


@pytest.fixture
def approved(world: World, make_request: MakeRequest, approve: Approve) -> ReplayRequest:
    """A request of INV-1 and INV-2 with both approvals (its dispatch task was only recorded, not run)."""
    request = make_request()
    approve(request, world.business, "business")
    return approve(request, world.technical, "technical")

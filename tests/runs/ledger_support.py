"""Shared pieces of the work-ledger tests: a failed run, its people, and loading CSV text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser

from runs.attempts.models import Attempt, Run
from runs.catalog.services import role_grant
from runs.ledger.loads import LoadFile, work_item_loads_create
from runs.ledger.models import WorkItem, WorkItemLoad
from tests.factories import AttemptFactory, RunFactory, UserFactory


@dataclass
class LedgerWorld:
    """A failed run with one started attempt; support and auditor on its tenant; an outsider."""

    run: Run
    attempt: Attempt
    support: AbstractBaseUser
    auditor: AbstractBaseUser
    business_owner: AbstractBaseUser
    tech_owner: AbstractBaseUser
    outsider: AbstractBaseUser
    admin: AbstractBaseUser


@pytest.fixture
def ledger_world(db: None) -> LedgerWorld:
    run = RunFactory(failed=True)
    attempt = AttemptFactory(run=run, failed=True, started_at=run.scheduled_for)
    support, auditor, owner, tech, outsider = (UserFactory() for _ in range(5))
    role_grant(user=support, role="support", obj=run.tenant)
    role_grant(user=auditor, role="auditor", obj=run.tenant)
    role_grant(user=owner, role="business_owner", obj=run.tenant)
    role_grant(user=tech, role="technical_owner", obj=run.job)
    other = RunFactory()
    role_grant(user=outsider, role="support", obj=other.tenant)
    return LedgerWorld(run, attempt, support, auditor, owner, tech, outsider, UserFactory(admin=True))


def csv(*lines: str) -> bytes:
    """CSV bytes from lines (LF endings, trailing newline)."""
    return ("\n".join(lines) + "\n").encode()


def load(world: LedgerWorld, user: Any = None, complete: bool = False, **files: bytes) -> list[WorkItemLoad]:
    """Load the given files (kind=bytes) together as ``user`` (support by default)."""
    return work_item_loads_create(
        actor=user or world.support,
        run=world.run,
        files=[LoadFile(kind=kind, content=content, file_name=f"{kind}.csv") for kind, content in files.items()],
        is_destination_complete=complete,
    )


def outcomes(run: Run) -> dict[str, str]:
    """record_id -> outcome of every item of the run."""
    return dict(WorkItem.objects.filter(run=run).values_list("record_id", "outcome"))


POPULATION = csv("record_id,customer", "A1,x", "A2,x", "A3,x", "A4,x", "A5,x")

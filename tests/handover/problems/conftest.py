"""Fixtures of the problem tests: two tenants' failed runs of one job, a handover for each, people with roles."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import AbstractBaseUser

from handover.handovers.models import Handover
from handover.handovers.services import handover_create
from runs.attempts.models import Run
from runs.catalog.models import Job, Tenant
from runs.catalog.services import role_grant
from tests.factories import JobFactory, JobTargetFactory, RunFactory, TenantFactory, UserFactory

NIGHT = datetime(2026, 11, 27, 23, 0, tzinfo=UTC)


@dataclass
class ProblemWorld:
    """One job failing for two tenants on one night, a handover each; people of every role."""

    job: Job
    acme: Tenant
    borealis: Tenant
    acme_run: Run
    borealis_run: Run
    acme_handover: Handover
    borealis_handover: Handover
    admin: AbstractBaseUser
    support: AbstractBaseUser  # support on acme only
    borealis_support: AbstractBaseUser  # support on borealis only
    owner: AbstractBaseUser  # technical owner of the job
    auditor: AbstractBaseUser  # auditor on acme
    business: AbstractBaseUser  # business owner on acme
    nobody: AbstractBaseUser

    def next_run(self, tenant: Tenant, *, day: int, status: str = Run.Status.SUCCEEDED) -> Run:
        """A later run of ``tenant``'s target: ``day`` nights after the failed one."""
        start = NIGHT + timedelta(days=day)
        return RunFactory(
            job=self.job,
            tenant=tenant,
            window_start=start,
            window_end=start + timedelta(days=1),
            scheduled_for=start + timedelta(days=1, hours=2),
            status=status,
        )


@pytest.fixture
def pw(db: None) -> ProblemWorld:
    job = JobFactory(key="nightly-invoice-export")
    acme = TenantFactory(slug="acme-foods")
    borealis = TenantFactory(slug="borealis-retail")
    runs = {}
    for tenant in (acme, borealis):
        target = JobTargetFactory(job=job, tenant=tenant)
        runs[tenant.slug] = RunFactory(
            job=job,
            tenant=tenant,
            target=target,
            window_start=NIGHT,
            window_end=NIGHT + timedelta(days=1),
            scheduled_for=NIGHT + timedelta(days=1, hours=2),
            status=Run.Status.FAILED,
        )
    admin = UserFactory(username="pat-admin", admin=True)
    people = {name: UserFactory(username=name) for name in ("sam", "bo", "olga", "ada", "bea", "nobody")}
    role_grant(user=people["sam"], role="support", obj=acme)
    role_grant(user=people["bo"], role="support", obj=borealis)
    role_grant(user=people["olga"], role="technical_owner", obj=job)
    role_grant(user=people["ada"], role="auditor", obj=acme)
    role_grant(user=people["bea"], role="business_owner", obj=acme)
    return ProblemWorld(
        job=job,
        acme=acme,
        borealis=borealis,
        acme_run=runs["acme-foods"],
        borealis_run=runs["borealis-retail"],
        acme_handover=handover_create(actor=admin, runs=[runs["acme-foods"]]),
        borealis_handover=handover_create(actor=admin, runs=[runs["borealis-retail"]]),
        admin=admin,
        support=people["sam"],
        borealis_support=people["bo"],
        owner=people["olga"],
        auditor=people["ada"],
        business=people["bea"],
        nobody=people["nobody"],
    )

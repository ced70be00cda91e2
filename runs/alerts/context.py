"""What every alert of one post shares while it is applied, and what the post produced."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from runs.alerts.models import Alert, Delivery
from runs.alerts.parsers.base import FormatError
from runs.attempts.models import RunnerReport
from runs.catalog.models import IntegrationKey, Job, JobTarget, Tenant, normalise_slug


@dataclass
class IngestResult:
    """What one post produced: the delivery, its alerts in post order, a format error if any, and
    ``failure`` -- in words, when its processing failed and the sweep tries again ("" otherwise)."""

    delivery: Delivery
    alerts: list[Alert] = field(default_factory=list)
    error: FormatError | None = None
    response: dict[str, Any] = field(default_factory=dict)
    failure: str = ""


# At most this many (job, tenant, environment) combinations are read in one ``prime_many`` query.
PRIME_COMBINATIONS = 1000


@dataclass
class PostContext:
    """What every alert of one post shares: the key, the source's settings, and rows read once per post.

    A batch names the same job, tenants and targets again and again; each is read once here (a
    post is short, so a registration changed while it is being applied is picked up by the next post).
    ``runner_reports`` collects the RunnerReport rows of the open transaction, inserted together
    before it commits (``runner_reports_write``): nothing reads them while a post is applied.
    """

    key: IntegrationKey
    settings: dict[str, Any]
    jobs: dict[str, Job | None] = field(default_factory=dict)
    tenants: dict[str, Tenant | None] = field(default_factory=dict)
    targets: dict[tuple[int, int, str], JobTarget | None] = field(default_factory=dict)
    primed: set[tuple[str, str, str]] = field(default_factory=set)  # (job key, casefolded slug, environment)
    runner_reports: list[RunnerReport] = field(default_factory=list)

    def prime(self, job_key: str, slug: str, environment: str) -> None:
        """Read the job, the tenant and their target in ONE query when the target exists (the usual
        case), so that ``job``, ``tenant`` and ``target`` below find them here; else do nothing and
        let those read what exists, one by one. The tenant is found only if available to the key.
        """
        self.prime_many([(job_key, slug, environment)])

    def prime_many(self, names: Iterable[tuple[str, str, str]]) -> None:
        """``prime`` for every (job key, tenant slug, environment) of ``names`` at once: ONE query for those
        not looked for yet, when at most ``PRIME_COMBINATIONS`` (job, tenant, environment) combinations
        could match them (a batch for one job and many tenants, or the reverse); else one query each. A
        target not found is not looked for again in this post (``job`` and ``tenant`` then say why).
        """
        wanted = {(job_key, normalise_slug(slug).casefold(), environment) for job_key, slug, environment in names}
        wanted -= self.primed
        self.primed |= wanted
        job_keys = {job_key for job_key, _, _ in wanted}
        slug_keys = {slug_key for _, slug_key, _ in wanted}
        environments = {environment for _, _, environment in wanted}
        if len(job_keys) * len(slug_keys) * len(environments) <= PRIME_COMBINATIONS:
            self._targets_read(job_keys, slug_keys, environments)
        else:
            for job_key, slug_key, environment in sorted(wanted):
                self._targets_read({job_key}, {slug_key}, {environment})

    def _targets_read(self, job_keys: set[str], slug_keys: set[str], environments: set[str]) -> None:
        """Read, in one query, the targets of every combination of ``job_keys``, ``slug_keys`` (casefolded)
        and ``environments`` whose tenant is available to the key; keep each with its job and tenant."""
        if not job_keys:
            return
        targets = JobTarget.objects.select_related("job", "tenant").filter(
            job__key__in=job_keys, tenant__slug_key__in=slug_keys, environment__in=environments
        )
        if not self.key.all_tenants:
            targets = targets.filter(tenant__integration_keys=self.key)
        for target in targets:  # a combination no record named is a registered target all the same
            self.jobs.setdefault(target.job.key, target.job)
            self.tenants.setdefault(target.tenant.slug_key, target.tenant)
            self.targets.setdefault((target.job_id, target.tenant_id, target.environment), target)

    def job(self, job_key: str) -> Job | None:
        if job_key not in self.jobs:
            self.jobs[job_key] = Job.objects.filter(key=job_key).first()
        return self.jobs[job_key]

    def tenant(self, slug: str) -> Tenant | None:
        """The tenant called ``slug`` if it is available to the key; None when unknown or not bound (alike)."""
        slug_key = normalise_slug(slug).casefold()
        if slug_key not in self.tenants:
            tenants = Tenant.objects.filter(slug_key=slug_key)
            if not self.key.all_tenants:
                tenants = tenants.filter(integration_keys=self.key)
            self.tenants[slug_key] = tenants.first()
        return self.tenants[slug_key]

    def target(self, job: Job, tenant: Tenant | None, environment: str | None) -> JobTarget | None:
        """The (job, tenant, environment) target, active or not (one row at most: it is unique)."""
        if tenant is None or not environment:
            return None
        ident = (job.pk, tenant.pk, environment)
        if ident not in self.targets:
            self.targets[ident] = JobTarget.objects.filter(job=job, tenant=tenant, environment=environment).first()
        return self.targets[ident]


def runner_reports_write(ctx: PostContext) -> None:
    """Insert the runner reports collected in the open transaction, in one statement."""
    if ctx.runner_reports:
        RunnerReport.objects.bulk_create(ctx.runner_reports)
        ctx.runner_reports.clear()

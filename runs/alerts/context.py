"""What every alert of one post shares while it is applied, and what the post produced."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, cast

from django.db import connection, models
from django.db.models import Field, Model

from handover.core.rows import rows_insert
from runs.alerts.models import Alert, Delivery
from runs.alerts.parsers.base import FormatError
from runs.attempts.models import RunnerReport
from runs.catalog.models import IntegrationKey, Job, JobTarget, Tenant, normalise_slug


@dataclass
class IngestResult:
    """What one post produced: the delivery, its alerts in post order, a format error if any,
    ``failure`` -- in words, when its processing failed and the sweep tries again ("" otherwise) -- and
    the answer kept on the delivery when ``delivery_receive`` was given one."""

    delivery: Delivery
    alerts: list[Alert] = field(default_factory=list)
    error: FormatError | None = None
    response: dict[str, Any] = field(default_factory=dict)
    failure: str = ""
    answer: tuple[int, dict[str, Any]] | None = None  # (HTTP status, body) the sender is told, when asked for
    is_outcome_written: bool = False  # written in the transaction of the post's last chunk


# What the sender of a post is told, built from its result: (HTTP status, JSON body).
Answer = Callable[[IngestResult], tuple[int, dict[str, Any]]]


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
        if connection.vendor == "postgresql":
            targets: Iterable[JobTarget] = targets_read_postgresql(
                job_keys, slug_keys, environments, key=None if self.key.all_tenants else self.key
            )
        else:
            query = JobTarget.objects.select_related("job", "tenant").filter(
                job__key__in=job_keys, tenant__slug_key__in=slug_keys, environment__in=environments
            )
            targets = query if self.key.all_tenants else query.filter(tenant__integration_keys=self.key)
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
        rows_insert(ctx.runner_reports)
        ctx.runner_reports.clear()


def targets_read_postgresql(
    job_keys: set[str], slug_keys: set[str], environments: set[str], *, key: IntegrationKey | None
) -> list[JobTarget]:
    """The job targets of every combination of ``job_keys``, ``slug_keys`` (casefolded) and ``environments``
    whose tenant is bound to ``key`` (any tenant when None), each with its ``job`` and ``tenant`` loaded:
    what ``JobTarget.objects.select_related("job", "tenant").filter(job__key__in=…, tenant__slug_key__in=…,
    environment__in=…[, tenant__integration_keys=key])`` reads, in one statement whose text is the same
    for every post (``= ANY(%s)`` over arrays), so Django does not compile it again for each one (it was the
    largest single cost of a one-alert post in ``bench/ingest.py``'s profile). PostgreSQL only.
    """
    with connection.cursor() as cursor:
        params: list[Any] = [list(job_keys), list(slug_keys), list(environments)]
        cursor.execute(_targets_sql(bound=key is not None), params + ([key.pk] if key is not None else []))
        rows = cursor.fetchall()
    return [_target_from_row(row) for row in rows]


@cache
def _targets_sql(*, bound: bool) -> str:
    """The statement of ``targets_read_postgresql``: the target's, the job's and the tenant's columns (each
    model's concrete fields in order), with the key's tenant binding when ``bound``."""
    quote = connection.ops.quote_name

    def columns(model: type[Model], alias: str) -> str:
        return ", ".join(f"{alias}.{quote(str(column.column))}" for column in model._meta.concrete_fields)

    def column(model: type[Model], name: str) -> str:
        return quote(str(getattr(model._meta.get_field(name), "column", name)))  # concrete fields only

    job_pk, tenant_pk = quote(_pk_column(Job)), quote(_pk_column(Tenant))
    sql = (
        f"SELECT {columns(JobTarget, 't')}, {columns(Job, 'j')}, {columns(Tenant, 'n')} "
        f"FROM {quote(JobTarget._meta.db_table)} t "
        f"JOIN {quote(Job._meta.db_table)} j ON j.{job_pk} = t.{column(JobTarget, 'job')} "
        f"JOIN {quote(Tenant._meta.db_table)} n ON n.{tenant_pk} = t.{column(JobTarget, 'tenant')} "
        f"WHERE j.{column(Job, 'key')} = ANY(%s) AND n.{column(Tenant, 'slug_key')} = ANY(%s) "
        f"AND t.{column(JobTarget, 'environment')} = ANY(%s)"
    )
    if bound:
        bindings = IntegrationKey._meta.get_field("tenants")
        assert isinstance(bindings, models.ManyToManyField)
        bound_through = bindings.remote_field.through
        assert bound_through is not None
        through = quote(bound_through._meta.db_table)
        tenant_of, key_of = quote(bindings.m2m_reverse_name()), quote(bindings.m2m_column_name())
        sql += f" AND EXISTS (SELECT 1 FROM {through} b WHERE b.{tenant_of} = n.{tenant_pk} AND b.{key_of} = %s)"
    return sql


def _pk_column(model: type[Model]) -> str:
    assert model._meta.pk is not None
    return model._meta.pk.column


def _target_from_row(row: tuple[Any, ...]) -> JobTarget:
    """A row of ``_targets_sql`` as its JobTarget with the ``job`` and ``tenant`` it names loaded, each built
    as Django builds a fetched row (``Model.from_db`` after each field's ``from_db_value``)."""
    loaded: list[Model] = []
    start = 0
    for model in (JobTarget, Job, Tenant):
        columns = model._meta.concrete_fields
        values = [_converted(f, value) for f, value in zip(columns, row[start : start + len(columns)], strict=True)]
        loaded.append(model.from_db(connection.alias, [f.attname for f in columns], values))
        start += len(columns)
    target, job, tenant = loaded
    JobTarget._meta.get_field("job").set_cached_value(target, job)
    JobTarget._meta.get_field("tenant").set_cached_value(target, tenant)
    return cast(JobTarget, target)


def _converted(model_field: Field[Any, Any], value: Any) -> Any:
    """``value`` as the ORM loads it into ``model_field``: the converters Django's compiler applies to the
    field's column (``SQLCompiler.get_converters``: the backend's, then the field's ``from_db_value``)."""
    column = model_field.cached_col
    for converter in connection.ops.get_db_converters(column) + column.get_db_converters(connection):
        value = converter(value, column, connection)
    return value

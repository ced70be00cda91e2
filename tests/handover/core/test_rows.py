"""The ingestion path's own INSERT (``handover.core.rows``) and target read (``targets_read_postgresql``) store
and load exactly what Django's ORM would: same rows, same defaults and ``auto_now`` values, same refusals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db.models.functions import Now

from handover.core import rows
from handover.core.rows import rows_insert, rows_insert_unless_conflict
from runs.alerts.context import PostContext, targets_read_postgresql
from runs.alerts.models import Delivery
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Integration, IntegrationKey, Job, JobTarget, Tenant
from runs.catalog.services import integration_get_or_create, integration_key_create, tenant_get_or_create
from runs.timeline.models import TimelineEvent, TimelineEventKind
from runs.timeline.services import timeline_event_build
from tests.conftest import is_postgres

pytestmark = pytest.mark.django_db
WHEN = datetime(2026, 3, 29, 1, 30, tzinfo=UTC)
SKIP = {"id", "public_id", "created_at", "updated_at"}


@pytest.fixture
def key() -> IntegrationKey:
    integration = integration_get_or_create(source="generic", name="rows")
    return integration_key_create(integration=integration, all_tenants=True).record


def deliveries(key: IntegrationKey, count: int, label: str) -> list[Delivery]:
    """Unsaved deliveries with text, JSON, NUL-free Unicode and a None, as ingestion builds them."""
    return [
        Delivery(
            integration=key.integration,
            key=key,
            received_at=WHEN + timedelta(seconds=n),
            content_type="application/json; charset=utf-8",
            size_bytes=100 + n,
            sha256=f"{label}{n:060d}"[:64],
            body=f'{{"tenant": "café-lumière", "n": {n}}}',
            notes={"decoded": "utf-8", "nested": {"list": [1, "zwei", None]}, "n": n},
        )
        for n in range(count)
    ]


def stored(model: type[Any], pks: list[int]) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in row.items() if k not in SKIP}
        for row in model.objects.filter(pk__in=pks).order_by("pk").values()
    ]


@pytest.mark.parametrize("count", [1, 3])
def test_rows_insert_stores_what_bulk_create_stores(key: IntegrationKey, count: int) -> None:
    mine, django = deliveries(key, count, "a"), deliveries(key, count, "a")
    before = datetime.now(UTC)
    rows_insert(mine)
    Delivery.objects.bulk_create(django)
    assert all(d.pk is not None and not d._state.adding and d._state.db == "default" for d in mine)
    assert stored(Delivery, [d.pk for d in mine]) == stored(Delivery, [d.pk for d in django])
    fresh = Delivery.objects.get(pk=mine[-1].pk)
    assert fresh.updated_at >= before  # auto_now set by the field's pre_save, as the compiler does
    assert fresh.updated_at == mine[-1].updated_at
    assert fresh.notes == {"decoded": "utf-8", "nested": {"list": [1, "zwei", None]}, "n": count - 1}
    assert fresh.public_id == mine[-1].public_id


def test_rows_insert_takes_a_related_row_saved_after_it_was_assigned(story_job: Job) -> None:
    tenant, _ = tenant_get_or_create(slug="rows-tenant")
    run = Run(job=story_job, tenant=tenant, environment="prod", window_start=WHEN, window_end=WHEN + timedelta(days=1))
    attempt = Attempt(
        run=run, execution_id="exec-1", number=1, status=Attempt.Status.FAILED
    )  # assigned while the run has no id
    assert attempt.run_id is None
    rows_insert_unless_conflict([run]) if is_postgres() else run.save()
    rows_insert([attempt])
    assert Attempt.objects.get(pk=attempt.pk).run_id == run.pk


def test_rows_insert_refuses_a_related_row_never_saved(story_job: Job) -> None:
    tenant, _ = tenant_get_or_create(slug="rows-tenant")
    run = Run(job=story_job, tenant=tenant, environment="prod", window_start=WHEN, window_end=WHEN + timedelta(days=1))
    with pytest.raises(ValueError, match="unsaved related object 'run'"):
        rows_insert([Attempt(run=run, execution_id="exec-1", number=1, status=Attempt.Status.FAILED)])
    assert not Attempt.objects.exists()


def test_a_query_expression_goes_through_djangos_compiler(key: IntegrationKey) -> None:
    (delivery,) = deliveries(key, 1, "e")
    delivery.received_at = Now()  # type: ignore[assignment]  # an expression, as .save() accepts
    rows_insert([delivery])
    assert abs(Delivery.objects.get(pk=delivery.pk).received_at - datetime.now(UTC)) < timedelta(minutes=5)


def test_timeline_events_are_inserted_in_one_statement(story_job: Job, django_assert_num_queries: Any) -> None:
    events = [
        timeline_event_build(job=story_job, kind=TimelineEventKind.ACKNOWLEDGED, occurred_at=WHEN, summary=f"e{n}")
        for n in range(4)
    ]
    with django_assert_num_queries(1):
        rows_insert(events)
    saved = TimelineEvent.objects.filter(pk__in=[e.pk for e in events]).order_by("pk")
    assert [(e.summary, e.actor_kind, e.occurred_at) for e in saved] == [(f"e{n}", "system", WHEN) for n in range(4)]


def test_statements_are_built_once_per_shape(key: IntegrationKey) -> None:
    if not is_postgres():
        pytest.skip("the statement cache is PostgreSQL's path")
    rows._STATEMENTS.clear()
    rows_insert(deliveries(key, 2, "s"))
    rows_insert(deliveries(key, 2, "t"))
    rows_insert(deliveries(key, 1, "u"))
    assert sorted(several for (model, several, _, _) in rows._STATEMENTS if model is Delivery) == [False, True]
    sql = {several: statement[0] for (model, several, _, _), statement in rows._STATEMENTS.items() if statement}
    assert "UNNEST" in sql[True] and "VALUES" in sql[False]


def test_the_target_read_loads_what_the_orm_loads(story_tenants: dict[str, Tenant], story_job: Job) -> None:
    if not is_postgres():
        pytest.skip("PostgreSQL's read; SQLite reads through the ORM")
    integration = integration_get_or_create(source="generic", name="bound")
    bound = integration_key_create(integration=integration, tenants=[story_tenants["acme-foods"]]).record
    slugs = {tenant.slug_key for tenant in story_tenants.values()}
    for key in (bound, None):
        mine = sorted(targets_read_postgresql({story_job.key, "nope"}, slugs, {"prod", "qa"}, key=key), key=_pk)
        query = JobTarget.objects.select_related("job", "tenant").filter(
            job__key__in=[story_job.key, "nope"], tenant__slug_key__in=slugs, environment__in=["prod", "qa"]
        )
        orm = sorted(query if key is None else query.filter(tenant__integration_keys=key), key=_pk)
        assert [_loaded(t) for t in mine] == [_loaded(t) for t in orm]
        assert len(mine) == (1 if key is not None else len(story_tenants) - 1)
        assert all(JobTarget.job.is_cached(t) and JobTarget.tenant.is_cached(t) for t in mine)  # no query later


def test_a_post_context_reads_its_targets_in_one_query(
    story_tenants: dict[str, Tenant], story_job: Job, django_assert_num_queries: Any
) -> None:
    integration = Integration.objects.create(source="generic", name="ctx")
    key = integration_key_create(integration=integration, all_tenants=True).record
    ctx = PostContext(key=key, settings={})
    with django_assert_num_queries(1):
        ctx.prime_many([(story_job.key, "ACME-FOODS", "prod"), (story_job.key, "borealis-retail", "prod")])
        tenant = ctx.tenant("acme-foods")
        assert tenant is not None and ctx.target(story_job, tenant, "prod") is not None
        assert ctx.job(story_job.key) == story_job


def _pk(target: JobTarget) -> int:
    return target.pk


def _loaded(target: JobTarget) -> tuple[dict[str, Any], ...]:
    return tuple({k: v for k, v in vars(obj).items() if k != "_state"} for obj in (target, target.job, target.tenant))

"""Constraints hold when rows are written directly through the ORM."""

from __future__ import annotations

import importlib
import types
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction

from runs.alerts.models import Alert
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Tenant
from runs.timeline.models import TimelineEvent
from runs.timeline.services import timeline_event_record
from tests.factories import AttemptFactory, JobFactory, RunFactory, TenantFactory

pytestmark = pytest.mark.django_db


def test_run_identity_is_unique() -> None:
    run = RunFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(
            job=run.job,
            tenant=run.tenant,
            environment=run.environment,
            window_start=run.window_start,
            window_end=run.window_end,
        )


def test_run_window_must_not_be_empty() -> None:
    run = RunFactory.build(job=JobFactory(), tenant=TenantFactory())
    run.window_end = run.window_start
    with pytest.raises(IntegrityError), transaction.atomic():
        run.save()


def test_attempt_is_unique_per_run_and_execution_id() -> None:
    attempt = AttemptFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        Attempt.objects.create(run=attempt.run, execution_id=attempt.execution_id, status="failed")


@pytest.mark.parametrize(("field", "value"), [("status", "exploded"), ("trigger", "whim")])
def test_attempt_enums_are_checked_by_the_database(field: str, value: str) -> None:
    attempt = AttemptFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        Attempt.objects.filter(pk=attempt.pk).update(**{field: value})


def test_abandoned_attempt_needs_a_reason() -> None:
    attempt = AttemptFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        Attempt.objects.filter(pk=attempt.pk).update(status="abandoned")


def test_tenant_slugs_are_unique_case_insensitively_after_nfc() -> None:
    Tenant.objects.create(slug="café-x", name="A")
    with pytest.raises(IntegrityError), transaction.atomic():
        Tenant.objects.create(slug="CAFE\u0301-X", name="B")


def test_one_original_alert_per_integration_and_dedup_key(
    story_tenants: object, make_key: object, post_alert: object
) -> None:
    from tests.conftest import fixture_path

    key = make_key("generic", all_tenants=True)  # type: ignore[operator]
    post_alert("generic", fixture_path("generic", "01-first-failure.json"), key)  # type: ignore[operator]
    original = Alert.objects.get()
    with pytest.raises(IntegrityError), transaction.atomic():
        Alert.objects.create(
            delivery=original.delivery,
            integration=original.integration,
            index=7,
            source="generic",
            dedup_hash=original.dedup_hash,
            outcome="accepted",
        )
    with pytest.raises(IntegrityError), transaction.atomic():
        Alert.objects.create(
            delivery=original.delivery,
            integration=original.integration,
            index=8,
            source="generic",
            dedup_hash="x",
            outcome="duplicate",
        )


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="the append-only trigger exists on PostgreSQL only")
def test_the_timeline_refuses_update_and_delete_on_postgresql() -> None:
    run = RunFactory()
    event = timeline_event_record(job=run.job, run=run, kind=TimelineEvent.Kind.JOB_PAUSED, summary="kept forever")
    with pytest.raises(IntegrityError), transaction.atomic():
        TimelineEvent.objects.filter(pk=event.pk).update(summary="rewritten")
    with pytest.raises(IntegrityError), transaction.atomic():
        TimelineEvent.objects.filter(pk=event.pk).delete()
    assert TimelineEvent.objects.get(pk=event.pk).summary == "kept forever"


def test_a_person_actor_needs_a_user() -> None:
    run = RunFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        TimelineEvent.objects.create(
            job=run.job,
            kind=TimelineEvent.Kind.JOB_PAUSED,
            summary="x",
            occurred_at=run.window_start,
            recorded_at=run.window_start + timedelta(seconds=1),
            actor_kind="person",
        )


def test_a_timeline_kind_outside_the_enumeration_is_refused() -> None:
    run = RunFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        TimelineEvent.objects.create(
            job=run.job,
            kind="note",
            summary="x",
            occurred_at=run.window_start,
            recorded_at=run.window_start,
            actor_kind="system",
        )
    event = TimelineEvent.objects.create(
        job=run.job,
        kind=TimelineEvent.Kind.JOB_PAUSED,
        summary="x",
        occurred_at=run.window_start,
        recorded_at=run.window_start,
        actor_kind="system",
    )
    assert TimelineEvent.objects.get(pk=event.pk).kind == "job_paused"


def test_an_alert_kind_outside_the_enumeration_is_refused(
    story_tenants: object, make_key: object, post_alert: object
) -> None:
    from tests.conftest import fixture_path

    key = make_key("generic", all_tenants=True)  # type: ignore[operator]
    post_alert("generic", fixture_path("generic", "01-first-failure.json"), key)  # type: ignore[operator]
    original = Alert.objects.get()
    assert original.kind == Alert.Kind.ATTEMPT
    with pytest.raises(IntegrityError), transaction.atomic():
        Alert.objects.create(
            delivery=original.delivery, integration=original.integration, index=7, source="generic", kind="page"
        )


def test_the_kind_migration_lists_stored_kinds_outside_the_enumerations_and_stops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The migration adding the kind constraints refuses to run over a kind it does not know (nothing rewritten)."""
    from django.apps import apps

    migration = importlib.import_module("runs.migrations.0020_timeline_alert_kind_enums")
    run = RunFactory()
    timeline_event_record(job=run.job, run=run, kind=TimelineEvent.Kind.JOB_PAUSED, summary="p")
    timeline_event_record(job=run.job, run=run, kind=TimelineEvent.Kind.JOB_PAUSED, summary="p")
    editor = types.SimpleNamespace(connection=connection)
    migration.refuse_unknown_kinds(apps, editor)  # every stored kind is known: passes
    known = tuple(k for k in migration.TIMELINE_EVENT_KINDS if k != "job_paused")
    monkeypatch.setattr(migration, "TIMELINE_EVENT_KINDS", known)
    with pytest.raises(RuntimeError, match=r"TimelineEvent.kind 'job_paused': 2 row\(s\)"):
        migration.refuse_unknown_kinds(apps, editor)
    assert TimelineEvent.objects.filter(kind="job_paused").count() == 2


__all__ = ["connection"]

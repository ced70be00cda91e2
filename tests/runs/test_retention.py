"""Retention: old delivery bodies are blanked, old ledger items removed, counts on the timeline and audit."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from runs.models import Alert, AuditEvent, Delivery, TimelineEvent, WorkItem, WorkItemChange, WorkItemLoad
from runs.services import integration_get_or_create, integration_key_create
from runs.services.retention import retention_purge
from runs.tasks import retention_purge as retention_purge_task
from tests.factories import RunFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _delivery(run: object | None, *, days_old: int, outcome: str = Alert.Outcome.ACCEPTED) -> Delivery:
    integration = integration_get_or_create(source="generic")
    key = integration_key_create(integration=integration, all_tenants=True).record
    delivery = Delivery.objects.create(
        integration=integration,
        key=key,
        received_at=NOW - timedelta(days=days_old),
        size_bytes=9,
        sha256="a" * 64,
        body='{"a": 1}',
        outcome=Delivery.Outcome.PROCESSED,
    )
    Alert.objects.create(
        delivery=delivery,
        integration=integration,
        index=0,
        source="generic",
        dedup_hash=uuid.uuid4().hex,
        outcome=outcome,
        run=run,
    )
    return delivery


def test_retention_blanks_old_bodies_keeps_rows_and_waiting_ones_and_records_counts() -> None:
    run = RunFactory(window_start=NOW - timedelta(days=200), window_end=NOW - timedelta(days=199))
    old = _delivery(run, days_old=100)
    fresh = _delivery(run, days_old=10)
    waiting = _delivery(None, days_old=100, outcome=Alert.Outcome.UNMATCHED)

    result = retention_purge(older_than_days=90, now=NOW)

    assert result.delivery_bodies == 1
    old.refresh_from_db()
    assert old.body == "" and old.notes["body_purged_at"] == NOW.isoformat()
    assert (old.size_bytes, old.sha256) == (9, "a" * 64)  # what was received is still described
    assert Delivery.objects.get(pk=fresh.pk).body == '{"a": 1}'
    assert Delivery.objects.get(pk=waiting.pk).body == '{"a": 1}'  # still in the inbox for triage
    event = TimelineEvent.objects.get(kind="retention_purged")
    assert event.job_id == run.job_id and event.actor_kind == "system"
    assert event.data["delivery_bodies"] == 1 and "1 delivery bodies blanked" in event.summary
    audit = AuditEvent.objects.get(action="retention_purge")
    assert audit.actor is None and audit.data["delivery_bodies"] == 1


def test_retention_removes_old_ledger_items_nothing_points_at_and_blanks_failed_load_files() -> None:
    person = UserFactory()
    old_run = RunFactory(window_start=NOW - timedelta(days=120), window_end=NOW - timedelta(days=119))
    new_run = RunFactory(job=old_run.job, window_start=NOW - timedelta(days=5), window_end=NOW - timedelta(days=4))
    WorkItem.objects.bulk_create([WorkItem(run=old_run, record_id=f"INV-{i}") for i in range(3)])
    kept = WorkItem.objects.create(run=old_run, record_id="INV-CHANGED", outcome="absent", evidence_kind="manual")
    WorkItemChange.objects.create(
        work_item=kept,
        run=old_run,
        kind="change",
        from_outcome="unverified",
        to_outcome="absent",
        evidence_kind="manual",
        note="checked by hand",
        changed_by=person,
        changed_at=NOW - timedelta(days=119),
    )
    WorkItem.objects.create(run=new_run, record_id="INV-NEW")
    load = WorkItemLoad.objects.create(
        run=old_run,
        kind="population",
        status="failed",
        error="line 1: bad",
        content=b"record_id\nINV-1\n",
        created_by=person,
        created_at=NOW - timedelta(days=119),
    )
    totals_before = (old_run.eligible_count, old_run.unresolved_count)

    result = retention_purge(older_than_days=90, now=NOW)

    assert (result.work_items, result.load_files) == (3, 1)
    assert sorted(WorkItem.objects.values_list("record_id", flat=True)) == ["INV-CHANGED", "INV-NEW"]
    assert bytes(WorkItemLoad.objects.get(pk=load.pk).content) == b""
    old_run.refresh_from_db()
    assert (old_run.eligible_count, old_run.unresolved_count) == totals_before  # stored totals stay
    event = TimelineEvent.objects.get(kind="retention_purged")
    assert event.data["work_items"] == 3 and event.data["load_files"] == 1


def test_retention_twice_purges_nothing_twice_and_zero_days_is_off() -> None:
    run = RunFactory(window_start=NOW - timedelta(days=200), window_end=NOW - timedelta(days=199))
    _delivery(run, days_old=100)

    assert retention_purge(older_than_days=0, now=NOW).total == 0
    assert retention_purge(older_than_days=90, now=NOW).total == 1
    assert retention_purge(older_than_days=90, now=NOW).total == 0
    assert TimelineEvent.objects.filter(kind="retention_purged").count() == 1
    assert AuditEvent.objects.filter(action="retention_purge").count() == 1


def test_retention_task_uses_the_configured_age() -> None:
    tenant = TenantFactory()
    run = RunFactory(tenant=tenant, window_start=timezone.now() - timedelta(days=40), window_end=timezone.now())
    delivery = _delivery(run, days_old=0)
    Delivery.objects.filter(pk=delivery.pk).update(received_at=timezone.now() - timedelta(days=31))

    with override_settings(HANDOVER_RETENTION_DAYS=60):
        assert retention_purge_task() == {"delivery_bodies": 0, "work_items": 0, "load_files": 0}
    with override_settings(HANDOVER_RETENTION_DAYS=30):
        assert retention_purge_task()["delivery_bodies"] == 1
        assert retention_purge_task()["delivery_bodies"] == 0  # idempotent

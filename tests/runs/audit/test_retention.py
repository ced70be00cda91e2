"""Retention: old delivery bodies are blanked, old ledger items removed, counts on the timeline and audit."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
import time_machine
from django.core.management import CommandError, call_command
from django.db import OperationalError
from django.test import override_settings
from django.utils import timezone

from runs.alerts.models import Alert, Delivery
from runs.audit import tasks as audit_tasks
from runs.audit.models import AuditEvent
from runs.audit.retention import retention_purge
from runs.catalog.services import integration_get_or_create, integration_key_create
from runs.ledger.models import WorkItem, WorkItemChange, WorkItemLoad
from runs.management.commands import purge_retention
from runs.timeline.models import TimelineEvent
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
        assert audit_tasks.retention_purge() == {"delivery_bodies": 0, "work_items": 0, "load_files": 0}
    with override_settings(HANDOVER_RETENTION_DAYS=30):
        assert audit_tasks.retention_purge()["delivery_bodies"] == 1
        assert audit_tasks.retention_purge()["delivery_bodies"] == 0  # idempotent


def _command(*args: str) -> str:
    out = StringIO()
    call_command("purge_retention", *args, stdout=out)
    return out.getvalue()


def _old_data() -> tuple[Delivery, WorkItem]:
    run = RunFactory(window_start=NOW - timedelta(days=200), window_end=NOW - timedelta(days=199))
    delivery = _delivery(run, days_old=100)
    _delivery(run, days_old=5)
    item = WorkItem.objects.create(run=run, record_id="INV-OLD")
    return delivery, item


def test_purge_retention_dry_run_prints_the_counts_per_kind_and_changes_nothing() -> None:
    delivery, item = _old_data()

    with time_machine.travel(NOW, tick=False):
        out = _command("--dry-run", "--older-than-days", "90")

    assert out.splitlines() == [
        "Would purge data older than 90 days (before 2026-08-31 12:00:00Z):",
        "  delivery bodies: 1",
        "  work items: 1",
        "  ledger files: 0",
        "  total: 2",
    ]
    assert Delivery.objects.get(pk=delivery.pk).body == '{"a": 1}' and WorkItem.objects.filter(pk=item.pk).exists()
    assert not TimelineEvent.objects.filter(kind="retention_purged").exists()
    assert not AuditEvent.objects.filter(action="retention_purge").exists()


def test_purge_retention_purges_with_the_configured_age_records_counts_and_is_idempotent() -> None:
    delivery, item = _old_data()

    with time_machine.travel(NOW, tick=False), override_settings(HANDOVER_RETENTION_DAYS=90):
        first = _command()
        preview_after = _command("--dry-run")
        second = _command()

    assert "Purged data older than 90 days" in first and "  delivery bodies: 1\n  work items: 1\n" in first
    assert "  total: 2 (counts on the timeline of 1 jobs, and in the audit)" in first
    assert "  total: 0\n" in preview_after and "  total: 0 " in second
    assert Delivery.objects.get(pk=delivery.pk).body == "" and not WorkItem.objects.filter(pk=item.pk).exists()
    event = TimelineEvent.objects.get(kind="retention_purged")
    assert (event.data["delivery_bodies"], event.data["work_items"], event.data["older_than_days"]) == (1, 1, 90)
    assert AuditEvent.objects.get(action="retention_purge").data["work_items"] == 1


def test_purge_retention_with_zero_days_purges_nothing() -> None:
    delivery, _ = _old_data()
    with override_settings(HANDOVER_RETENTION_DAYS=0):
        assert "Retention is off" in _command()
    assert "Retention is off" in _command("--older-than-days", "0")
    assert Delivery.objects.get(pk=delivery.pk).body == '{"a": 1}'


# an age past year 1 (or past timedelta's range) was an OverflowError traceback, not a CommandError
@pytest.mark.parametrize("days", ["-1", "ninety", "1.5", "36501", "800000", "1000000000"])
def test_purge_retention_refuses_a_bad_age(days: str) -> None:
    with pytest.raises(CommandError, match="--older-than-days"):
        _command("--older-than-days", days)


def test_purge_retention_turns_a_database_failure_into_a_command_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(**kwargs: object) -> None:
        raise OperationalError("database is locked")

    monkeypatch.setattr(purge_retention, "retention_purge", fail)
    with pytest.raises(CommandError, match="Retention purge failed: OperationalError: database is locked"):
        _command("--older-than-days", "30")

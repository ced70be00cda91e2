"""Stored text written before today's redaction rules is redacted again: by the migration (on its
historical models, with the timeline's append-only trigger on PostgreSQL) and by the command."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from handover.handovers.models import Handover, HandoverRevision
from runs.alerts.models import Alert, Delivery
from runs.alerts.redaction import redaction_token
from runs.audit.models import AuditEvent
from runs.catalog.services import integration_get_or_create, integration_key_create
from runs.timeline.models import TimelineEvent
from tests.factories import AttemptFactory, RunFactory, UserFactory

MIGRATION = ("runs", "0013_redact_stored_text")
SECRETS = {
    "stripe": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dcFAKE0123",
    "email": "jane.doe@example.com",
    "routing": "R0UT1NGKEYR0UT1NGKEYR0UT1NGKEY12",
    "password": "Hunter2Hunter2",
}
CANARY = "ORD-2026-000123"


def _seed() -> dict[str, Any]:
    """Rows as older code wrote them: secrets in clear (written with the ORM, past every service)."""
    stripe, email, routing, password = SECRETS.values()
    integration = integration_get_or_create(source="pagerduty")
    key = integration_key_create(integration=integration, all_tenants=True).record
    body = json.dumps({"routing_key": routing, "payload": {"summary": f"{CANARY} failed for {email}"}})
    now = timezone.now()
    delivery = Delivery.objects.create(
        integration=integration,
        key=key,
        received_at=now,
        size_bytes=len(body),
        sha256="0" * 64,
        body=body,
        outcome="processed",
    )
    head = Delivery.objects.create(
        integration=integration,
        key=key,
        received_at=now,
        size_bytes=9_000_000,
        sha256="1" * 64,
        body=f'{{"routing_key": "{routing}", "payload": {{"custom_details": {{"password": "{password}", "x',
        is_body_truncated=True,
        outcome="rejected",
    )
    attempt = AttemptFactory(
        run=RunFactory(),
        error_summary=f"charge with {stripe} refused ({CANARY})",
        log_url=f"https://logs.example.com/q?user={email}",
    )
    alert = Alert.objects.create(
        delivery=delivery,
        integration=integration,
        index=0,
        source="pagerduty",
        dedup_key=f"{CANARY}#{email}",
        dedup_hash="2" * 64,
        summary=f"{CANARY}: {stripe}",
        fields={"summary": f"{CANARY} for {email}", "details": {"password": password}},
        outcome="accepted",
    )
    event = TimelineEvent.objects.create(
        job=attempt.run.job,
        run=attempt.run,
        kind="attempt_failed",
        summary=f"Attempt 1 failed: {stripe} ({CANARY})",
        occurred_at=attempt.created_at,
        recorded_at=attempt.created_at,
        actor_kind="system",
    )
    user = UserFactory()
    handover = Handover.objects.create(
        job=attempt.run.job,
        title="t",
        status_changed_at=attempt.created_at,
        created_by=user,
        business_impact=f"password={password}; {CANARY}",
    )
    revision = HandoverRevision.objects.create(
        handover=handover, section="business_impact", text=handover.business_impact, created_at=attempt.created_at
    )
    return {
        "delivery": delivery,
        "head": head,
        "attempt": attempt,
        "alert": alert,
        "event": event,
        "handover": handover,
        "revision": revision,
    }


def _rerun_migration() -> None:
    executor = MigrationExecutor(connection)
    before = executor.loader.graph.node_map[MIGRATION].parents
    executor.migrate([sorted(p.key for p in before if p.key[0] == "runs")[-1]])
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def _trigger_enabled() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tgenabled FROM pg_trigger WHERE tgname = 'runs_timelineevent_append_only'")
        return cursor.fetchone() == ("O",)


@pytest.mark.django_db(transaction=True)
def test_the_migration_redacts_seeded_rows_writes_one_audit_event_and_keeps_the_canaries() -> None:
    rows = _seed()

    _rerun_migration()

    for name, row in rows.items():
        row.refresh_from_db()
        text = json.dumps({k: str(v) for k, v in vars(row).items()}, ensure_ascii=False)
        leaked = [label for label, secret in SECRETS.items() if secret in text]
        assert not leaked, f"{name} still holds {leaked}"
    assert CANARY in rows["delivery"].body and CANARY in rows["attempt"].error_summary
    assert CANARY in rows["event"].summary and CANARY in rows["handover"].business_impact
    assert json.loads(rows["delivery"].body)["routing_key"] == redaction_token(SECRETS["routing"])
    assert rows["attempt"].log_url == f"https://logs.example.com/q?user={redaction_token(SECRETS['email'])}"
    event = AuditEvent.objects.get(action=AuditEvent.Action.REDACTION_RERUN)
    assert event.actor is None and event.is_all_tenants
    assert event.data["rows"]["runs.TimelineEvent"] == 1 and event.data["rows"]["runs.Delivery"] == 2
    if connection.vendor == "postgresql":
        assert _trigger_enabled()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_timeline_stays_append_only_after_the_migration() -> None:
    from django.db import IntegrityError, transaction

    if connection.vendor != "postgresql":
        pytest.skip("the append-only trigger exists on PostgreSQL only")
    rows = _seed()
    _rerun_migration()

    with pytest.raises(IntegrityError), transaction.atomic():
        TimelineEvent.objects.filter(pk=rows["event"].pk).update(summary="rewritten")


@pytest.mark.django_db(transaction=True)
def test_the_command_counts_then_redacts_then_finds_nothing_left() -> None:
    _seed()

    dry = StringIO()
    call_command("redact_stored_text", "--dry-run", stdout=dry)
    assert "Total: 7 row(s) would change." in dry.getvalue()
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.REDACTION_RERUN).exists()

    out = StringIO()
    call_command("redact_stored_text", stdout=out)
    assert "Total: 7 row(s) changed." in out.getvalue() and "Compacted:" in out.getvalue()
    again = StringIO()
    call_command("redact_stored_text", stdout=again)
    assert "Total: 0 row(s) changed." in again.getvalue()
    assert AuditEvent.objects.filter(action=AuditEvent.Action.REDACTION_RERUN).count() == 1

"""Alerts written straight into the database for the list tests (no ingestion): the inbox's and the API's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from runs.alerts.models import Alert, Delivery
from runs.attempts.models import Run
from runs.catalog.models import Integration, IntegrationKey
from tests.factories import AttemptFactory

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def make_alerts(
    integration: Integration, specs: list[tuple[str, int, Run | None, str]], *, attempt_on_first: bool = False
) -> list[Alert]:
    """One delivery with an alert per ``(outcome, minutes after T0, run, tenant slug)``; a
    ``duplicate`` points at the newest original made before it. ``attempt_on_first``: the first
    alert, when it has a run, is linked to a new attempt of that run."""
    key = IntegrationKey.objects.create(integration=integration, prefix="hk_test", secret_hash="0" * 64)
    delivery = Delivery.objects.create(
        integration=integration, key=key, received_at=T0, size_bytes=2, sha256="0" * 64, body="{}"
    )
    alerts: list[Alert] = []
    for index, (outcome, minutes, run, tenant_slug) in enumerate(specs):
        original = next((a for a in reversed(alerts) if a.duplicate_of_id is None), None)
        is_duplicate = outcome == Alert.Outcome.DUPLICATE
        alerts.append(
            Alert.objects.create(
                delivery=delivery,
                integration=integration,
                index=index,
                source="generic",
                dedup_hash="" if is_duplicate else f"{index:064x}",
                duplicate_of=original if is_duplicate else None,
                outcome=outcome,
                run=run,
                attempt=AttemptFactory(run=run) if attempt_on_first and run is not None and index == 0 else None,
                tenant_slug=tenant_slug,
                created_at=T0 + timedelta(minutes=minutes),
            )
        )
    return alerts

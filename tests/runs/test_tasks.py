"""Celery tasks of the runs app: the beat's heartbeat, written by the sweep task and read by /healthz."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.db import IntegrityError
from django.test import Client

from runs.alerts import tasks as alert_tasks
from runs.health.models import Heartbeat
from runs.health.selectors import heartbeat_age_seconds
from runs.health.services import heartbeat_record

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)


def test_alert_sweep_task_upserts_one_beat_heartbeat_row_each_tick() -> None:
    with time_machine.travel(NOW, tick=False):
        assert alert_tasks.alert_sweep_pending() == 0
    with time_machine.travel(NOW + timedelta(minutes=1), tick=False):
        assert alert_tasks.alert_sweep_pending() == 0  # the next tick (or a redelivered one) updates the same row

    [beat] = Heartbeat.objects.all()
    assert beat.name == Heartbeat.BEAT and beat.beat_at == NOW + timedelta(minutes=1)


def test_healthz_reports_the_beat_age_from_the_heartbeat_row() -> None:
    heartbeat_record(name=Heartbeat.BEAT, at=NOW)

    with time_machine.travel(NOW + timedelta(seconds=90), tick=False):
        body = Client().get("/healthz").json()

    assert body["beat_age_seconds"] == 90.0


def test_healthz_reports_a_null_beat_age_when_the_beat_never_ticked() -> None:
    Heartbeat.objects.create(name="another-process", beat_at=NOW)

    body = Client().get("/healthz").json()

    assert body["beat_age_seconds"] is None
    assert heartbeat_age_seconds(name="another-process", now=NOW + timedelta(seconds=1.26)) == 1.3


def test_healthz_on_another_host_sees_the_heartbeat_a_worker_wrote(settings: Any, tmp_path: Path) -> None:
    # The heartbeat used to be a file in HANDOVER_VAR_DIR, so a web host without the workers' folder read null.
    settings.VAR_DIR = tmp_path / "worker"
    settings.VAR_DIR.mkdir()
    with time_machine.travel(NOW, tick=False):
        alert_tasks.alert_sweep_pending()
    settings.VAR_DIR = tmp_path / "web"

    with time_machine.travel(NOW + timedelta(seconds=30), tick=False):
        assert Client().get("/healthz").json()["beat_age_seconds"] == 30.0
    assert not list(tmp_path.rglob("beat-heartbeat"))


def test_heartbeat_name_is_unique_in_the_database() -> None:
    Heartbeat.objects.create(name=Heartbeat.BEAT, beat_at=NOW)

    with pytest.raises(IntegrityError):
        Heartbeat.objects.create(name=Heartbeat.BEAT, beat_at=NOW + timedelta(seconds=1))

"""Unique alerts in three real formats for the topology benchmark (``bench/topology.py``).

Each body is one of the demo fixtures (``runs/demo/alerts/<source>/01-*.json``: a failed first
attempt) moved to the benchmark's job ``load-hourly-export`` (cron ``0 * * * *`` UTC, hourly
windows), one of ``TENANT_COUNT`` tenants and an hourly window of its own: alert ``i`` is for
tenant ``i % TENANT_COUNT`` and the window ``BASE + (i // TENANT_COUNT) hours``, so every alert is a
new original alert that opens its own run with one attempt (nothing is a duplicate), whatever its
format. With 40 tenants, 350,000 alerts fill one year of windows (all in the past).

- ``generic``: the project's own format; the execution id is ``load-<i>``.
- ``alertmanager``: a webhook notification (version 4) carrying one alert; job, tenant, window,
  execution id and times come from labels and annotations (the integration's default settings),
  the fingerprint is unique per alert (it is the dedup key's core).
- ``grafana``: a unified-alerting webhook notification carrying one alert; Grafana names no window
  or execution, so the app derives the scheduled time (the target's latest fire time at or before
  ``startsAt``: 20 minutes after the window ends) and infers the execution id from the fingerprint.

No Django import: the client processes build bodies as they send.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

from bench import alerts

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "runs" / "demo" / "alerts"
SOURCES = ("generic", "alertmanager", "grafana")
TEMPLATES = {
    "generic": FIXTURES / "generic" / "01-first-failure.json",
    "alertmanager": FIXTURES / "alertmanager" / "01-first-failure.json",
    "grafana": FIXTURES / "grafana" / "01-first-failure.json",
}
JOB_KEY = "load-hourly-export"
JOB_DEFAULTS = {
    "name": "Load-test hourly export",
    "schedule": "0 * * * *",
    "timezone": "UTC",
    "grace_seconds": 1800,
    "window_alignment": "hour",
}
TENANT_COUNT = 40
TENANTS = [f"load-tenant-{n:02d}" for n in range(TENANT_COUNT)]
ENVIRONMENT = "prod"
BASE = datetime(2025, 1, 1, tzinfo=UTC)


@cache
def template(source: str) -> dict[str, Any]:
    return json.loads(TEMPLATES[source].read_text())


def identity(index: int) -> tuple[str, datetime, datetime]:
    """Tenant slug, window start and window end of alert ``index``."""
    window_start = BASE + timedelta(hours=index // TENANT_COUNT)
    return TENANTS[index % TENANT_COUNT], window_start, window_start + timedelta(hours=1)


def generic(index: int) -> dict[str, Any]:
    tenant, window_start, _ = identity(index)
    return alerts.generic_alert(
        template("generic"),
        job=JOB_KEY,
        tenant=tenant,
        window_start=window_start,
        execution_id=f"load-{index:09d}",
        index=index,
    )


def alertmanager(index: int) -> dict[str, Any]:
    tenant, window_start, window_end = identity(index)
    execution_id = f"load-am-{index:09d}"
    document = copy.deepcopy(template("alertmanager"))
    alert = document["alerts"][0]
    alert["labels"].update(job_name=JOB_KEY, tenant=tenant, env=ENVIRONMENT, execution_id=execution_id)
    alert["annotations"].update(
        summary=f"{JOB_KEY} failed for {tenant} ({ENVIRONMENT})",
        description=f"Attempt 1 for window {alerts.stamp(window_start)} .. {alerts.stamp(window_end)} failed: "
        "Timeout waiting for acknowledgement from ledger gateway",
        scheduled_for=alerts.stamp(window_end),
        window_start=alerts.stamp(window_start),
        window_end=alerts.stamp(window_end),
        started_at=alerts.stamp(window_end + timedelta(seconds=3, milliseconds=482)),
        ended_at=alerts.stamp(window_end + timedelta(minutes=16, seconds=29)),
        log_url=f"https://logs.example.internal/q/{execution_id}",
        correlation_id=f"lg-am-{index:x}",
    )
    alert["startsAt"] = alerts.stamp(window_end + timedelta(minutes=17))
    alert["fingerprint"] = f"{index:016x}"
    document["groupLabels"].update(job_name=JOB_KEY, tenant=tenant)
    document["commonLabels"] = dict(alert["labels"])
    document["commonAnnotations"] = dict(alert["annotations"])
    document["groupKey"] = (
        '{}/{severity="critical"}:{alertname="ScheduledJobFailed", env="prod", '
        f'job_name="{JOB_KEY}", tenant="{tenant}"}}'
    )
    return document


def grafana(index: int) -> dict[str, Any]:
    tenant, _window_start, window_end = identity(index)
    document = copy.deepcopy(template("grafana"))
    alert = document["alerts"][0]
    alert["labels"].update(job_name=JOB_KEY, tenant=tenant, env=ENVIRONMENT)
    alert["annotations"]["summary"] = f"{JOB_KEY} failed for {tenant} ({ENVIRONMENT})"
    # the app derives the scheduled time: the target's latest fire time at or before startsAt
    alert["startsAt"] = alerts.stamp(window_end + timedelta(minutes=20))
    alert["fingerprint"] = f"{index:016x}"
    document["commonLabels"] = dict(alert["labels"])
    document["title"] = f"[FIRING:1] Scheduled job failed Batch jobs ({ENVIRONMENT} {JOB_KEY} {tenant})"
    return document


BUILDERS = {"generic": generic, "alertmanager": alertmanager, "grafana": grafana}


def body(source: str, index: int) -> bytes:
    """One post of ``source`` carrying alert ``index`` alone."""
    return json.dumps(BUILDERS[source](index), separators=(",", ":")).encode()

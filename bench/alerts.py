"""Unique generic-format alerts for the ingestion benchmark.

Each alert is the first-failure fixture (``runs/demo/alerts/generic/01-first-failure.json``: a
failed first attempt with an error, a correlation id, a log link and runner items) moved to the
benchmark's job, one of ``TENANT_COUNT`` tenants and an hourly window of its own. Alert ``i`` has
execution id ``bench-<i>`` and the window ``BASE + (i // TENANT_COUNT) hours`` for tenant
``i % TENANT_COUNT``: every alert is a new original alert (no duplicate) that opens its own run
with one attempt -- the common case of a failure report.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE_PATH = ROOT / "runs" / "demo" / "alerts" / "generic" / "01-first-failure.json"
JOB_KEY = "bench-hourly-export"
JOB_DEFAULTS = {
    "name": "Benchmark hourly export",
    "schedule": "0 * * * *",
    "timezone": "UTC",
    "grace_seconds": 1800,
    "window_alignment": "hour",
}
TENANT_COUNT = 10
TENANTS = [f"bench-tenant-{n:02d}" for n in range(TENANT_COUNT)]
ENVIRONMENT = "prod"
BASE = datetime(2026, 1, 1, tzinfo=UTC)

_template: dict[str, Any] | None = None


def stamp(moment: datetime) -> str:
    """``moment`` (aware) as UTC ISO 8601 with milliseconds and ``Z``, as the fixtures write it."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def template() -> dict[str, Any]:
    global _template
    if _template is None:
        _template = json.loads(TEMPLATE_PATH.read_text())
    return _template


def alert(index: int) -> dict[str, Any]:
    """The generic alert number ``index`` (unique dedup key, run and attempt)."""
    window_start = BASE + timedelta(hours=index // TENANT_COUNT)
    return generic_alert(
        template(),
        job=JOB_KEY,
        tenant=TENANTS[index % TENANT_COUNT],
        window_start=window_start,
        execution_id=f"bench-{index:09d}",
        index=index,
    )


def generic_alert(
    item: dict[str, Any], *, job: str, tenant: str, window_start: datetime, execution_id: str, index: int
) -> dict[str, Any]:
    """A copy of the generic fixture ``item`` for one hourly window (UTC) and one execution of ``job``.

    Times follow the fixture's story: scheduled at the window's end, started 3.482 s later, ended
    after 16 min 29 s, sent a second after that; ``index`` makes the correlation id unique.
    """
    window_end = window_start + timedelta(hours=1)
    return {
        **item,
        "job": job,
        "tenant": tenant,
        "environment": ENVIRONMENT,
        "window_start": stamp(window_start),
        "window_end": stamp(window_end),
        "scheduled_for": stamp(window_end),
        "execution_id": execution_id,
        "started_at": stamp(window_end + timedelta(seconds=3, milliseconds=482)),
        "ended_at": stamp(window_end + timedelta(minutes=16, seconds=29)),
        "sent_at": stamp(window_end + timedelta(minutes=16, seconds=30)),
        "log_url": f"https://logs.example.internal/q/{execution_id}",
        "correlation_id": f"lg-{index:x}",
    }


def body(first: int, count: int) -> bytes:
    """One post: alert ``first`` alone (count 1) or ``{"alerts": [first .. first+count-1]}``."""
    if count == 1:
        return json.dumps(alert(first), separators=(",", ":")).encode()
    return json.dumps({"alerts": [alert(first + n) for n in range(count)]}, separators=(",", ":")).encode()

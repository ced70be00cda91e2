"""Ingestion: a post becomes a stored Delivery, then Alerts, then runs, attempts and timeline events.

Order (DESIGN.md "Architecture"): commit the Delivery first (raw body, redacted; hash and size of
the bytes as received), then parse, then record and apply the alerts in post order. An alert is
recorded and applied in ONE transaction: its row, its run and attempt, their timeline events and
its outcome commit together or not at all. A single post's alert is one transaction; a batch is
applied in chunks of ``CHUNK_ALERTS`` alerts, one transaction per chunk (a chunk that fails on a
database error, e.g. a deadlock with a concurrent batch, is rolled back and redone alert by
alert, so every alert gets the outcome it would have had alone).

Nothing authenticated is lost: the Delivery is committed before parsing and stays ``received``
until its outcome is written, so a crash anywhere after that leaves a ``received`` delivery that
``delivery_sweep_received`` finishes by re-parsing the stored body (alerts already recorded are
skipped by their index); an alert left ``pending`` (``alert_reprocess`` interrupted) is finished by
``alert_sweep_pending``, which runs both sweeps; an unparseable post is kept ``rejected``.

A package split by step, re-exporting the public names here (``from runs.services.ingest import ...``):

- ``context``: what one post shares while it is applied (key, settings, rows read once) and its result;
- ``delivery``: storing a post, parsing it, recording and applying its alerts in chunks, and the sweep
  of deliveries a crash left ``received``;
- ``records``: the Alert row of one parsed record (original, duplicate or rejected), its display fields;
- ``identity``: job, tenant, environment and window of a record, and its run;
- ``apply``: applying one alert (attempts, resolve/acknowledge signals, job definitions);
- ``triage``: a person's reprocess and ignore, and the sweep of ``pending`` alerts.
"""

from __future__ import annotations

from runs.services.ingest.apply import alert_apply
from runs.services.ingest.context import IngestResult
from runs.services.ingest.delivery import (
    CHUNK_ALERTS,
    delivery_receive,
    delivery_record_response,
    delivery_refusal_count,
    delivery_sweep_received,
)
from runs.services.ingest.records import dedup_hash
from runs.services.ingest.triage import alert_ignore, alert_reprocess, alert_sweep_pending

__all__ = [
    "CHUNK_ALERTS",
    "IngestResult",
    "alert_apply",
    "alert_ignore",
    "alert_reprocess",
    "alert_sweep_pending",
    "dedup_hash",
    "delivery_receive",
    "delivery_record_response",
    "delivery_refusal_count",
    "delivery_sweep_received",
]

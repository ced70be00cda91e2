"""SQL per post, counted in-process: one post through Django's test client under CaptureQueriesContext.

Deterministic (no timing): what each mode costs the database in statements and transactions. In
gunicorn each request also runs one ``SELECT 1`` health check first (``CONN_HEALTH_CHECKS``),
which is not counted here (the baseline pays it too).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from bench import alerts

KINDS = ("SELECT", "INSERT", "UPDATE", "DELETE", "SAVEPOINT", "RELEASE", "BEGIN", "COMMIT", "ROLLBACK")


@dataclass
class SqlCount:
    name: str
    alerts: int
    status: int = 0
    statements: int = 0  # every round trip, BEGIN/COMMIT/SAVEPOINT included
    transactions: int = 0  # COMMITs plus statements run in autocommit
    kinds: Counter = field(default_factory=Counter)
    select_for_update: int = 0
    sql: list[str] = field(default_factory=list)

    def per_alert(self, value: float) -> float:
        return value / self.alerts if self.alerts else 0.0


def count(captured: list[dict], name: str, alerts_in_post: int, status: int) -> SqlCount:
    result = SqlCount(name=name, alerts=alerts_in_post, status=status)
    in_transaction = False
    for query in captured:
        sql = query["sql"].lstrip()
        kind = sql.split(None, 1)[0].upper() if sql else ""
        result.statements += 1
        result.kinds[kind if kind in KINDS else "other"] += 1
        result.sql.append(sql)
        if kind == "SELECT" and " FOR UPDATE" in sql.upper():
            result.select_for_update += 1
        if kind == "BEGIN":
            in_transaction = True
        elif kind in ("COMMIT", "ROLLBACK"):
            in_transaction = False
            result.transactions += 1
        elif not in_transaction:
            result.transactions += 1
    return result


def post_once(token: str, first_alert: int, per_post: int, path: str, urlconf: str | None = None) -> SqlCount:
    """Post alerts ``first_alert``.. once through the test client; count the SQL it ran."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, override_settings

    client = Client(SERVER_NAME="localhost")
    body = alerts.body(first_alert, per_post)

    def send():  # noqa: ANN202 - a test-client response
        return client.post(path, data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")

    with CaptureQueriesContext(connection) as captured:
        if urlconf:
            with override_settings(ROOT_URLCONF=urlconf):
                response = send()
        else:
            response = send()
    return count(captured.captured_queries, "", per_post, response.status_code)


@dataclass
class RedactionCost:
    """What redaction and the one JSON parse cost per alert, in-process (µs of this process's time)."""

    alerts: int  # alerts per post
    parse_us: float  # ``json_body``: the post's one parse, per alert
    body_us: float  # ``redact_body_secrets`` of the parsed body (the stored body and its secrets), per alert
    record_us: float  # ``record_redacted`` of each parsed record, once
    compile_us: float  # ``integration_redaction`` the first time (then cached per settings version)

    @property
    def total_us(self) -> float:
        return self.body_us + self.record_us


def redaction_cost(integration_name: str, first_alert: int, per_post: int, rounds: int = 30) -> RedactionCost:
    """Time the redaction of a ``generic`` post of ``per_post`` bench alerts, as ``delivery_receive`` runs it:
    the body parsed once, redacted with its secrets found, then each parsed record redacted; the best of
    ``rounds`` (timings on a shared machine only ever get slower). No database writes."""
    import time
    from datetime import UTC, datetime
    from types import SimpleNamespace

    from runs.alerts.parsers import generic
    from runs.alerts.parsers.base import json_body, json_preparsed, merged_settings
    from runs.alerts.redaction import (
        integration_redaction,
        record_redacted,
        redact_body_secrets,
        redaction_scope,
        text_rules,
    )
    from runs.catalog.models import Integration

    integration = Integration.objects.get(name=integration_name)
    body = alerts.body(first_alert, per_post)
    text_rules.cache_clear()  # compiled from scratch, as for an integration's first post (or new settings)
    unsaved = SimpleNamespace(pk=None, updated_at=None, settings=integration.settings)  # kept in no cache
    started = time.perf_counter()
    integration_redaction(unsaved, generic.REDACT_PATHS)
    compile_us = (time.perf_counter() - started) * 1e6
    compiled = integration_redaction(integration, generic.REDACT_PATHS)
    settings = merged_settings(generic.DEFAULT_SETTINGS, integration.settings)
    best = [float("inf")] * 3
    for _ in range(rounds):
        t0 = time.perf_counter()
        parsed = json_body(body)
        t1 = time.perf_counter()
        _stored, secrets = redact_body_secrets(body, generic.REDACT_PATHS, compiled.names, parsed=parsed)
        t2 = time.perf_counter()
        with redaction_scope(secrets, compiled.names):
            with json_preparsed(body, parsed):
                records = generic.parse(body, settings=settings, received_at=datetime.now(UTC)).alerts
            t3 = time.perf_counter()
            for record in records:
                if not hasattr(record, "problems") or not hasattr(record, "details"):
                    continue
                record_redacted(record)
            t4 = time.perf_counter()
        for i, spent in enumerate((t1 - t0, t2 - t1, t4 - t3)):
            best[i] = min(best[i], spent)
    return RedactionCost(
        alerts=per_post,
        parse_us=best[0] / per_post * 1e6,
        body_us=best[1] / per_post * 1e6,
        record_us=best[2] / per_post * 1e6,
        compile_us=compile_us,
    )

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

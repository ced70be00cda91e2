"""The demo's history: several weeks of nightly failures of two more jobs on fixed dates, posted through the real
ingestion API (``load_demo``).

So that ``/recurrence/`` and ``/supportability/`` have something to rank: from 2026-10-26 to 2026-11-29,

- ``nightly-payment-sync`` (owned by ``tech-owner``) fails for acme-foods about twice a week and now and
  then for borealis-retail; some nights its automatic retry succeeds. Its runner reports no window, no
  correlation id and no business impact: the supportability report names those fields. Two of its
  failures got handovers in which the technical owner had to explain what the job did (written by the
  services when the demo is loaded, so their times are the load's);
- ``weekly-statement-mail`` (no technical owner named) fails twice, each alert complete.

Posted as two batches of the generic format with an integration key labelled ``demo-history``;
idempotent: nothing is posted again once that key has a delivery. About two dozen runs.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import Client

from runs.alerts.models import Delivery
from runs.attempts.models import Run
from runs.catalog.services import (
    integration_get_or_create,
    integration_key_create,
    job_get_or_create,
    job_target_get_or_create,
    role_grant,
    tenant_get_or_create,
)

KEY_LABEL = "demo-history"
ZONE = ZoneInfo("Europe/Berlin")
TENANTS = ("acme-foods", "borealis-retail", "cedar-health")
PAYMENT_SYNC_KEY = "nightly-payment-sync"
PAYMENT_SYNC: dict[str, Any] = {
    "name": "Nightly payment sync",
    "schedule": "30 3 * * *",
    "timezone": "Europe/Berlin",
    "grace_seconds": 1800,
    "window_alignment": "day",
    "expected_output": "Every settled card payment of the window booked against its invoice in the ledger.",
    "verification": "Compare the payment provider's settlement report with the ledger's bookings (read-only).",
}
STATEMENT_MAIL_KEY = "weekly-statement-mail"
STATEMENT_MAIL: dict[str, Any] = {
    "name": "Weekly statement mail",
    "schedule": "0 6 * * 1",
    "timezone": "Europe/Berlin",
    "grace_seconds": 3600,
    "window_alignment": "day",
    "expected_output": "One account statement e-mailed to each customer with activity in the week.",
    "verification": "The mail provider's send log for the week's statements.",
}
# (local day of the slot, tenant, attempts' statuses in order) for nightly-payment-sync
PAYMENT_NIGHTS = [
    (date(2026, 10, 27), "acme-foods", ["failed"]),
    (date(2026, 10, 30), "acme-foods", ["failed", "succeeded"]),
    (date(2026, 11, 3), "acme-foods", ["failed", "failed"]),
    (date(2026, 11, 5), "borealis-retail", ["timed_out"]),
    (date(2026, 11, 6), "acme-foods", ["failed"]),
    (date(2026, 11, 10), "acme-foods", ["failed", "succeeded"]),
    (date(2026, 11, 12), "acme-foods", ["failed"]),
    (date(2026, 11, 13), "borealis-retail", ["failed", "succeeded"]),
    (date(2026, 11, 17), "acme-foods", ["failed", "failed"]),
    (date(2026, 11, 19), "acme-foods", ["succeeded"]),
    (date(2026, 11, 20), "acme-foods", ["failed"]),
    (date(2026, 11, 24), "acme-foods", ["failed", "succeeded"]),
    (date(2026, 11, 25), "borealis-retail", ["failed"]),
    (date(2026, 11, 26), "acme-foods", ["failed"]),
    (date(2026, 11, 28), "cedar-health", ["succeeded"]),
]
# (Monday of the slot, tenant, status) for weekly-statement-mail
STATEMENT_WEEKS = [
    (date(2026, 10, 26), "cedar-health", "succeeded"),
    (date(2026, 11, 2), "cedar-health", "failed"),
    (date(2026, 11, 9), "cedar-health", "succeeded"),
    (date(2026, 11, 16), "cedar-health", "succeeded"),
    (date(2026, 11, 23), "cedar-health", "failed"),
]
PAYMENT_ERRORS = [
    "Provider settlement API answered 503",
    "Ledger booking lock not acquired within 300 s",
    "Settlement file truncated at line 1,204",
]


def _at(day: date, hour: int, minute: int, second: int = 0) -> str:
    """The wall time on ``day`` in Europe/Berlin as RFC 3339 with its offset."""
    return datetime.combine(day, time(hour, minute, second), tzinfo=ZONE).isoformat()


def _payment_items() -> list[dict[str, Any]]:
    """The payment sync's alerts: execution id and slot only (no window, correlation id or impact)."""
    items = []
    for night, (day, tenant, statuses) in enumerate(PAYMENT_NIGHTS):
        slot = datetime.combine(day, time(3, 30), tzinfo=ZONE)
        for number, status in enumerate(statuses, start=1):
            started = slot + timedelta(minutes=1 + 20 * (number - 1))
            item = {
                "schema": "handover.alert/v1",
                "job": PAYMENT_SYNC_KEY,
                "tenant": tenant,
                "scheduled_for": slot.isoformat(),
                "execution_id": f"pay-{day:%Y%m%d}-{tenant[:4]}-{number}",
                "attempt": number,
                "status": status,
                "started_at": started.isoformat(),
                "ended_at": (started + timedelta(minutes=9)).isoformat(),
            }
            if status != "succeeded":
                item["error"] = PAYMENT_ERRORS[(night + number) % len(PAYMENT_ERRORS)]
            items.append(item)
    return items


def _statement_items() -> list[dict[str, Any]]:
    """The statement mail's alerts: complete, with window, correlation id, log link and business impact."""
    items = []
    for monday, tenant, status in STATEMENT_WEEKS:
        start = monday - timedelta(days=7)
        item = {
            "schema": "handover.alert/v1",
            "job": STATEMENT_MAIL_KEY,
            "tenant": tenant,
            "window_start": _at(start, 0, 0),
            "window_end": _at(monday, 0, 0),
            "scheduled_for": _at(monday, 6, 0),
            "execution_id": f"stmt-{monday:%Y%m%d}",
            "status": status,
            "started_at": _at(monday, 6, 0, 12),
            "ended_at": _at(monday, 6, 14, 40),
            "correlation_id": f"mailer-batch-{monday:%Y%m%d}",
            "log_url": f"https://logs.example.internal/q/stmt-{monday:%Y%m%d}",
        }
        if status == "failed":
            item["error"] = "Mail provider rejected the batch: quota exceeded"
            item["business_impact"] = (
                "Cedar Health's patients get no account statement this week; the billing desk expects calls."
            )
        items.append(item)
    return items


def demo_history_load(*, log: Callable[[str], None] = lambda _: None) -> bool:
    """Register the two jobs and their targets, then post the history once; True when it posted.

    Needs the demo people (``runs.demo.loader.demo_load`` first): ``tech-owner`` becomes the payment
    sync's technical owner, ``support`` writes the two handovers. Returns False (nothing posted) when
    the history is already loaded or the demo people are missing. Side effects: rows through the
    services, and two HTTP posts through Django's test client to the real ingestion endpoint.
    """
    User = get_user_model()
    people = {u.get_username(): u for u in User.objects.filter(username__in=["support", "tech-owner"])}
    if len(people) != 2:
        log("  history: the demo people are missing; skipped")
        return False
    integration = integration_get_or_create(source="generic")
    if Delivery.objects.filter(integration=integration, key__label=KEY_LABEL).exists():
        log("  history: already loaded")
        return False
    with transaction.atomic():
        payment, _ = job_get_or_create(key=PAYMENT_SYNC_KEY, defaults=PAYMENT_SYNC)
        statement, _ = job_get_or_create(key=STATEMENT_MAIL_KEY, defaults=STATEMENT_MAIL)
        tenants = [tenant_get_or_create(slug=slug)[0] for slug in TENANTS]
        for tenant in tenants:
            job_target_get_or_create(job=payment, tenant=tenant, environment="prod")
        job_target_get_or_create(job=statement, tenant=tenants[2], environment="prod")
        role_grant(user=people["tech-owner"], role="technical_owner", obj=payment)
        issued = integration_key_create(integration=integration, tenants=tenants, label=KEY_LABEL)
    client = Client(SERVER_NAME="localhost")
    for name, items in (("payment sync", _payment_items()), ("statement mail", _statement_items())):
        response = client.post(
            "/api/v1/alerts/generic/",
            data={"alerts": items},
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {issued.key}",
        )
        log(f"  history: {name}, {len(items)} alerts: {response.status_code}")
    _handovers(people=people, job=payment, log=log)
    return True


def _handovers(*, people: dict[str, Any], job: Any, log: Callable[[str], None]) -> None:
    """Two handed-over handovers on acme-foods' payment sync failures, each a supportability defect."""
    from handover.handovers.services import handover_create, handover_hand_over, handover_update

    support, owner = people["support"], people["tech-owner"]
    texts = {
        date(2026, 11, 17): "SUP-97: the sync logs no settlement batch id; the owner had to read the provider's "
        "console to say which payments were booked",
        date(2026, 11, 26): "SUP-98: no window in the alert; the owner had to say which settlement day the run covered",
    }
    for day, ticket in texts.items():
        run = Run.objects.filter(job=job, tenant__slug_key="acme-foods", scheduled_for__date=day).first()
        if run is None or run.handover_links.exists():
            continue
        with transaction.atomic():
            handover = handover_create(actor=support, runs=[run])
            handover = handover_update(
                handover=handover,
                actor=support,
                sections={
                    "business_impact": "Acme Foods' card payments of the night are not booked: open invoices "
                    "show as unpaid and dunning may start."
                },
                fields={"escalation_owner": owner, "is_supportability_defect": True, "supportability_ticket": ticket},
            )
            handover_hand_over(handover=handover, actor=support)
        log(f"  history: handover for acme-foods {day}")

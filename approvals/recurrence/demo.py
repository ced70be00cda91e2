"""The demo's history: several weeks of nightly failures of two more jobs on fixed dates, posted through the real
ingestion API (``load_demo``).

So that ``/recurrence/`` and ``/supportability/`` have something to rank: from 2026-10-26 to 2026-11-29,

- ``nightly-payment-sync`` (technical owner ``tech-owner``; owning team "Payments platform", escalation
  owner ``tech-owner``) fails for acme-foods about twice a week and now and then for borealis-retail;
  some nights its automatic retry succeeds. Its runner reports no window, no correlation id and no
  business impact: the supportability report names those fields. Two of its failures got handovers, on
  fixed times the morning after, in which the technical owner had to explain what the job did;
- ``weekly-statement-mail`` (no technical owner named; owning team "Customer communications", escalation
  owner ``support``) fails twice, each alert complete.

The owners are named on a fixed date (2026-10-19 09:00 UTC) through the ownership services. Every date
is fixed, so the figures are the same whenever the demo is loaded; the pages show them over the period
ending 2026-11-30 (``DEMO_LAST_DAY``: ``/recurrence/?days=30&until=2026-11-30``), and over the default
period (the last 30 days) while that still reaches back to them.

Posted as two batches of the generic format with an integration key labelled ``demo-history`` (through the
real ingestion endpoint: the alerts are received when the demo is loaded, and the reports count them by
their runs' times); idempotent: nothing is posted again once that key has a delivery, and owners already
named are left as they are. About two dozen runs.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import Client

from handover.notifications.models import Team
from handover.ownership.services import job_ownership_set
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
# the last day of the period the demo's history is read over (``load_demo`` prints the links)
DEMO_LAST_DAY = date(2026, 11, 30)
OWNERS_SET_AT = datetime(2026, 10, 19, 9, 0, tzinfo=UTC)
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
# job key -> (owning team, its members, escalation owner)
HISTORY_OWNERS = {
    PAYMENT_SYNC_KEY: ("Payments platform", ["tech-owner", "support"], "tech-owner"),
    STATEMENT_MAIL_KEY: ("Customer communications", ["support"], "support"),
}
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
    sync's technical owner, ``support`` writes the two handovers, ``admin`` names the owning teams
    (``HISTORY_OWNERS``). Returns False (nothing posted) when the history is already loaded or the demo
    people are missing. Side effects: rows through the services, and two HTTP posts through Django's
    test client to the real ingestion endpoint.
    """
    User = get_user_model()
    people = {u.get_username(): u for u in User.objects.filter(username__in=["support", "tech-owner", "admin"])}
    if len(people) != 3:
        log("  history: the demo people are missing; skipped")
        return False
    integration = integration_get_or_create(source="generic")
    loaded = Delivery.objects.filter(integration=integration, key__label=KEY_LABEL).exists()
    with transaction.atomic():
        payment, _ = job_get_or_create(key=PAYMENT_SYNC_KEY, defaults=PAYMENT_SYNC)
        statement, _ = job_get_or_create(key=STATEMENT_MAIL_KEY, defaults=STATEMENT_MAIL)
        tenants = [tenant_get_or_create(slug=slug)[0] for slug in TENANTS]
        for tenant in tenants:
            job_target_get_or_create(job=payment, tenant=tenant, environment="prod")
        job_target_get_or_create(job=statement, tenant=tenants[2], environment="prod")
        role_grant(user=people["tech-owner"], role="technical_owner", obj=payment)
        _owners(people=people, jobs={PAYMENT_SYNC_KEY: payment, STATEMENT_MAIL_KEY: statement})
        if loaded:
            log("  history: already loaded")
            return False
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


def _owners(*, people: dict[str, Any], jobs: dict[str, Any]) -> None:
    """Name each history job's owning team and escalation owner (``HISTORY_OWNERS``) on ``OWNERS_SET_AT``.

    Idempotent: a team that exists is reused, and the ownership services write nothing when the owners
    are already the same.
    """
    User = get_user_model()
    for key, (team_name, members, escalation) in HISTORY_OWNERS.items():
        team, _ = Team.objects.get_or_create(name=team_name)
        team.members.add(*User.objects.filter(username__in=members))
        job_ownership_set(
            actor=people["admin"],
            job=jobs[key],
            team=team,
            escalation_owner=User.objects.get(username=escalation),
            at=OWNERS_SET_AT,
        )


def _handovers(*, people: dict[str, Any], job: Any, log: Callable[[str], None]) -> None:
    """Two handed-over handovers on acme-foods' payment sync failures, each a supportability defect."""
    from handover.handovers.services import handover_create, handover_hand_over, handover_update

    support, owner = people["support"], people["tech-owner"]
    # the failures ended by 05:00 Europe/Berlin; the handovers were written that morning (UTC)
    written = {
        date(2026, 11, 17): datetime(2026, 11, 17, 8, 15, tzinfo=UTC),
        date(2026, 11, 26): datetime(2026, 11, 26, 13, 40, tzinfo=UTC),
    }
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
            handover = handover_create(actor=support, runs=[run], at=written[day])
            handover = handover_update(
                handover=handover,
                actor=support,
                sections={
                    "business_impact": "Acme Foods' card payments of the night are not booked: open invoices "
                    "show as unpaid and dunning may start."
                },
                fields={"escalation_owner": owner, "is_supportability_defect": True, "supportability_ticket": ticket},
                at=written[day] + timedelta(minutes=10),
            )
            handover_hand_over(handover=handover, actor=support, at=written[day] + timedelta(minutes=15))
        log(f"  history: handover for acme-foods {day}")

"""A chunk's job targets read together (``PostContext.prime_many``) change no outcome: every hostile batch
here is posted twice -- as ingestion does it, and with the chunk-level read left out (each record then
reads its own target as it is applied, as before) -- and the alerts, runs and attempts must be the same."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import transaction

from runs.alerts import context as context_module  # PRIME_COMBINATIONS
from runs.alerts import receive as receive_module  # _target_names, the chunk-level read's names
from runs.alerts.models import Alert, Delivery
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Integration, Job, Tenant
from runs.catalog.services import job_get_or_create, job_target_get_or_create, tenant_get_or_create
from runs.timeline.models import TimelineEvent
from tests.conftest import STORY_JOB_DEFAULTS, UNICODE_TENANT, fixture_path, is_postgres

pytestmark = pytest.mark.django_db
TIMES = ("window_start", "window_end", "scheduled_for", "started_at", "ended_at", "sent_at")
JOB = "nightly-invoice-export"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
RECEIVED = re.compile(r"received \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ")
NFD_CAFE = "cafe\u0301-lumie\u0300re-mu\u0308nchen"  # UNICODE_TENANT decomposed (NFD)


def alert(n: int, **names: Any) -> dict[str, Any]:
    """The generic first-failure fixture moved ``n`` days on (its own window and execution), with ``names``
    (job, tenant, environment) laid over it; a name given as None is left out of the alert."""
    item = json.loads(fixture_path("generic", "01-first-failure.json").read_text())
    for name in TIMES:
        item[name] = (datetime.fromisoformat(item[name]) + timedelta(days=n)).isoformat()
    item["execution_id"] += f"-{n}"
    for name, value in names.items():
        if value is None:
            item.pop(name)
        else:
            item[name] = value
    return item


@pytest.fixture
def catalog(story_tenants: dict[str, Tenant]) -> dict[str, Tenant]:
    """The story tenants plus tenants whose slugs fold in special ways, each with a prod target of the story
    job; a second job with a target only for acme-foods; an inactive ``qa`` target; a ``staging``
    environment registered nowhere."""
    job = Job.objects.get(key=JOB)
    tenants = dict(story_tenants)
    for slug in ("straße", "ﬁsh-co", "istanbul", "ıstanbul"):
        tenants[slug], _ = tenant_get_or_create(slug=slug)
    for slug in ("straße", "ﬁsh-co", "istanbul", "ıstanbul", UNICODE_TENANT):
        job_target_get_or_create(job=job, tenant=tenants[slug], environment="prod")
    job_target_get_or_create(job=job, tenant=tenants["acme-foods"], environment="qa", defaults={"is_active": False})
    other, _ = job_get_or_create(
        key="weekly-ledger-close",
        defaults=STORY_JOB_DEFAULTS,
    )
    job_target_get_or_create(job=other, tenant=tenants["acme-foods"], environment="prod")
    return tenants


HOSTILE_NAMES: list[dict[str, Any]] = [
    {},  # the plain case: acme-foods, prod
    {"tenant": "ACME-FOODS"},
    {"tenant": "  acme-foods\t"},
    {"tenant": "Acme-Foods", "environment": "PROD"},
    {"tenant": "acme-foods", "environment": "prod "},
    {"tenant": "borealis-retail"},
    {"tenant": "dunmore-pharmacy"},  # not bound to the key (unless it holds all tenants)
    {"tenant": "nobody-at-all"},
    {"tenant": UNICODE_TENANT},
    {"tenant": NFD_CAFE},
    {"tenant": NFD_CAFE.upper()},
    {"tenant": "STRASSE"},
    {"tenant": "strasse"},
    {"tenant": "ﬁsh-co"},
    {"tenant": "FISH-CO"},
    {"tenant": "İSTANBUL"},
    {"tenant": "ISTANBUL"},
    {"tenant": "ıstanbul"},
    {"job": "Nightly-Invoice-Export"},
    {"job": " nightly-invoice-export"},
    {"job": "no-such-job"},
    {"job": "weekly-ledger-close"},
    {"job": "weekly-ledger-close", "tenant": "borealis-retail"},  # a job with no target for that tenant
    {"environment": "staging"},
    {"environment": "qa"},  # an inactive target
    {"tenant": None},  # the integration's default tenant, if any
    {"environment": None},  # the integration's default environment, if any
    {"tenant": None, "environment": None},
    {"tenant": "acme\x00foods"},
    {"job": "nightly\x00invoice-export"},
    {"environment": "pr\x00od"},
    {"tenant": "acme-foods\ud800"},
    {"job": "\udfffnightly-invoice-export"},
    {"environment": "prod\ud800"},
    {"tenant": "a" * 5000},
    {"job": "j" * 400},
    {"environment": "e" * 300},
    {"tenant": "acme-foods" + " " * 200},
    {"tenant": "b" * 250},
    {"job": 123},
    {"tenant": 5},
    {"tenant": True},
    {"tenant": ["acme-foods"]},
    {"environment": {"prod": 1}},
    {"tenant": ""},
    {"tenant": "   "},
    {"environment": ""},
    {"job": ""},
    {"job": "n" * 200, "tenant": "ACME-FOODS"},
]


def hostile_batch(*, repeat: int = 1) -> dict[str, Any]:
    """Every name of ``HOSTILE_NAMES`` ``repeat`` times (each its own alert), the first alert sent twice in a
    row and the first five again at the end (in the last chunk)."""
    names = HOSTILE_NAMES * repeat
    alerts = [alert(n, **named) for n, named in enumerate(names)]
    return {"alerts": [alerts[0], *alerts, *alerts[:5]]}


def world() -> dict[str, Any]:
    """What the posts wrote, without row ids: each alert's outcome, reason, run and attempt, the runs with
    their target, the attempts, the timeline events' kinds, and the deliveries' outcomes."""

    def run_of(run: Run | None) -> tuple[Any, ...] | None:
        if run is None:
            return None
        target = run.target
        target_names = (target.job.key, target.tenant.slug, target.environment) if target else None
        return (
            run.job.key,
            run.tenant.slug,
            run.environment,
            run.window_start,
            run.window_end,
            run.status,
            target_names,
        )

    alerts = list(Alert.objects.select_related("run__job", "run__tenant", "attempt").order_by("delivery_id", "index"))
    deliveries = {pk: n for n, pk in enumerate(sorted({alert.delivery_id for alert in alerts}))}
    place = {str(alert.public_id): f"<alert {deliveries[alert.delivery_id]}:{alert.index}>" for alert in alerts}

    def reason_of(alert: Alert) -> str:  # the alerts a reason names by their place, not their id
        reason = RECEIVED.sub("received <time>", alert.reason)
        return UUID.sub(lambda found: place.get(found.group(0), "<other>"), reason)

    runs = Run.objects.select_related("job", "tenant", "target__job", "target__tenant")
    attempts = Attempt.objects.select_related("run__job", "run__tenant")
    return {
        "alerts": [
            (
                alert.index,
                alert.outcome,
                reason_of(alert),
                alert.job_key,
                alert.tenant_slug,
                alert.environment,
                alert.repeat_count,
                run_of(alert.run),
                alert.attempt.execution_id if alert.attempt else None,
            )
            for alert in alerts
        ],
        "runs": sorted(map(repr, map(run_of, runs))),
        "attempts": sorted(repr((run_of(a.run), a.number, a.execution_id, a.status)) for a in attempts),
        "events": sorted(TimelineEvent.objects.values_list("kind", flat=True)),
        "deliveries": list(Delivery.objects.order_by("id").values_list("outcome", "response_status", "try_count")),
    }


def posted_both_ways(
    post_alert: Any, key: str, bodies: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """Post ``bodies`` in turn as ingestion does, then (rolled back in between) with no chunk-level read of
    targets; assert both left the same world, and return it. Also asserts the chunk-level read did happen."""
    primed: list[int] = []
    target_names = receive_module._target_names

    def counted(chunk: Any, ctx: Any) -> list[tuple[str, str, str]]:
        names = target_names(chunk, ctx)
        primed.append(len(names))
        return names

    def posted() -> dict[str, Any]:
        with transaction.atomic():
            for body in bodies:
                response = post_alert("generic", body, key)
                assert response.status_code == 202, response.content[:500]
            seen = world()
            transaction.set_rollback(True)
        return seen

    with monkeypatch.context() as patch:
        patch.setattr(receive_module, "_target_names", counted)
        together = posted()
    assert sum(primed) > 0
    with monkeypatch.context() as patch:
        patch.setattr(receive_module, "_target_names", lambda chunk, ctx: [])
        one_by_one = posted()
    assert Alert.objects.count() == 0  # the first way was rolled back before the second
    assert together["alerts"] == one_by_one["alerts"]
    assert together == one_by_one
    return together


@pytest.mark.parametrize("combinations", [1000, 1])
@pytest.mark.parametrize("all_tenants", [False, True])
def test_a_hostile_batch_reads_the_same_targets_together_as_one_by_one(
    catalog: dict[str, Tenant],
    make_key: Any,
    post_alert: Any,
    monkeypatch: pytest.MonkeyPatch,
    combinations: int,
    all_tenants: bool,
) -> None:
    # Three chunks of mixed names, then the same post again (a re-send): every alert's outcome, reason,
    # run and attempt are those of reading each record's target alone.
    monkeypatch.setattr(context_module, "PRIME_COMBINATIONS", combinations)
    bound = [catalog[slug] for slug in catalog if slug != "dunmore-pharmacy"]
    key = make_key("generic", tenants=[] if all_tenants else bound, all_tenants=all_tenants)
    body = hostile_batch(repeat=7)  # over 300 alerts: four chunks
    seen = posted_both_ways(post_alert, key, [body, body], monkeypatch)

    alerts = seen["alerts"]
    assert len(alerts) == 2 * len(body["alerts"])
    outcomes = {row[1] for row in alerts}
    assert {Alert.Outcome.ACCEPTED, Alert.Outcome.DUPLICATE, Alert.Outcome.UNMATCHED} <= outcomes
    accepted = [row for row in alerts if row[1] == Alert.Outcome.ACCEPTED]
    assert {row[7][1] for row in accepted} >= {"acme-foods", "straße", "ﬁsh-co", UNICODE_TENANT}


# The integration's defaults as an admin may set them; a NUL only where the settings column can hold it
# (SQLite's JSON text: PostgreSQL's jsonb refuses the setting itself, so no post can ever read it there).
DEFAULTS = [
    {"default_tenant": " ACME-Foods ", "default_environment": "prod"},
    {"default_tenant": NFD_CAFE, "default_environment": "PROD"},
    {"default_tenant": "dunmore-pharmacy", "default_environment": "qa"},
    *([] if is_postgres() else [{"default_tenant": "acme\x00foods", "default_environment": "prod"}]),
]


@pytest.mark.parametrize("defaults", DEFAULTS)
def test_the_integrations_defaults_read_together_as_one_by_one(
    catalog: dict[str, Tenant],
    make_key: Any,
    post_alert: Any,
    monkeypatch: pytest.MonkeyPatch,
    defaults: dict[str, str],
) -> None:
    # Records naming no tenant or no environment take the integration's defaults, in the chunk-level read
    # as when each record is applied.
    key = make_key("generic", tenants=[catalog[slug] for slug in catalog if slug != "dunmore-pharmacy"])
    integration = Integration.objects.get(name="generic")
    integration.settings = {**integration.settings, **defaults}
    integration.save(update_fields=["settings"])
    body = {"alerts": [alert(n, **named) for n, named in enumerate(HOSTILE_NAMES)]}

    seen = posted_both_ways(post_alert, key, [body], monkeypatch)

    assert len(seen["alerts"]) == len(HOSTILE_NAMES)
    assert Alert.Outcome.ACCEPTED in {row[1] for row in seen["alerts"]}


@pytest.mark.parametrize("default_tenant", [5, ["acme-foods"]])
def test_a_default_tenant_that_is_not_text_leaves_no_post_stuck_and_places_nothing(
    catalog: dict[str, Tenant], make_key: Any, post_alert: Any, monkeypatch: pytest.MonkeyPatch, default_tenant: Any
) -> None:
    # An integration's settings are free JSON: a default tenant set to a number or a list. It once failed
    # the whole post (a TypeError on every try, the delivery left ``received``). Now the post is answered
    # on both paths: a record refused before it is resolved (an execution id no column holds) keeps its
    # own reason, and every other record is stored unmatched naming the setting (settings_in_force).
    key = make_key("generic", tenants=[catalog["acme-foods"]])
    Integration.objects.filter(name="generic").update(settings={"default_tenant": default_tenant})
    body = {"alerts": [alert(0, tenant=None, execution_id="x" * 400), alert(1)]}

    seen = posted_both_ways(post_alert, key, [body], monkeypatch)

    assert seen["deliveries"] == [(Delivery.Outcome.PROCESSED, 202, 0)]
    assert [row[1] for row in seen["alerts"]] == [Alert.Outcome.REJECTED, Alert.Outcome.UNMATCHED]
    assert "the execution id is 400 characters long" in seen["alerts"][0][2]
    assert "this integration's setting `default_tenant` is " in seen["alerts"][1][2]
    assert seen["runs"] == []

"""The six source stories (``runs/demo/alerts/<source>/STORY.md``), file by file, alone and all together.

Each story test registers what its STORY.md lists (the job, the tenants with their targets, one
integration with the source's default settings -- which are the conventions the STORY describes --
and one key bound as the STORY says), then posts every file in name order through the real API with
the clock frozen, and checks after each file exactly what the STORY states: the answer, the alerts
and their reasons, the run, every attempt field, the timeline, the Delivery rows, and that a
duplicate changes nothing. Times are written in Berlin time, as the STORYs write them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.test import Client

from runs.alerts.models import Alert, Delivery
from runs.alerts.redaction import redaction_token
from runs.alerts.triage import alert_reprocess
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Integration, IntegrationKey, JobTarget, Tenant
from runs.catalog.services import job_get_or_create, job_target_get_or_create
from runs.timeline.models import TimelineEvent
from tests.conftest import UNICODE_TENANT, PostAlert, fixture_files, fixture_path
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

BERLIN = ZoneInfo("Europe/Berlin")
RECEIVED = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)  # when a post arrives unless a test says otherwise
PAGERDUTY_PLACEHOLDER = b"R0ACMEF00DSPR0DBATCHJ0BS00000001"
SOURCES = ["generic", "alertmanager", "grafana", "eventbridge-scheduler", "airflow", "pagerduty", "kubernetes"]
# What each STORY.md binds the source's key to.
KEY_TENANTS = {
    "generic": ["acme-foods", "borealis-retail", "cedar-health"],
    "alertmanager": ["dunmore-pharmacy", UNICODE_TENANT],
    "grafana": ["elmwood-books", UNICODE_TENANT],
    "eventbridge-scheduler": ["fjord-freight"],
    "airflow": ["glenrock-energy", UNICODE_TENANT],
    "pagerduty": ["harbor-dental"],
    "kubernetes": ["ironbridge-telecom"],
}


def berlin(*parts: int) -> datetime:
    """An aware Berlin wall-clock time (the fixtures' November dates are all at +01:00)."""
    return datetime(*parts, tzinfo=BERLIN)  # type: ignore[arg-type, misc]


DAY_27 = (berlin(2026, 11, 27), berlin(2026, 11, 28))  # the story's day-aligned window
DAY_28 = (berlin(2026, 11, 28), berlin(2026, 11, 29))  # the next night's window
FIRE_28 = berlin(2026, 11, 28, 2)
FIRE_29 = berlin(2026, 11, 29, 2)


# --- helpers -------------------------------------------------------------------------------------


@dataclass
class Story:
    """One source's story: its key, and posting its files through the API at a frozen time."""

    source: str
    key: str
    post_alert: PostAlert

    def body(self, name: str) -> bytes:
        """The file's bytes; PagerDuty carries the issued key as ``routing_key`` (placeholder replaced)."""
        raw = fixture_path(self.source, name).read_bytes()
        if self.source == "pagerduty":
            return raw.replace(PAGERDUTY_PLACEHOLDER, self.key.encode())
        return raw

    def stored(self, name: str) -> str:
        """The body as the Delivery keeps it: as sent, with the routing key redacted."""
        return self.body(name).decode().replace(self.key, redaction_token(self.key))

    def post(self, name: str, *, at: datetime = RECEIVED) -> Any:
        """POST one file; PagerDuty senders authenticate through ``routing_key`` only, the others by Bearer."""
        bearer = None if self.source == "pagerduty" else self.key
        with time_machine.travel(at, tick=False):
            return self.post_alert(self.source, self.body(name), bearer)

    @property
    def key_record(self) -> IntegrationKey:
        return IntegrationKey.objects.get(prefix=self.key[:12])


StoryFactory = Callable[[str], Story]


@pytest.fixture
def story(story_tenants: dict[str, Tenant], make_key: Any, post_alert: PostAlert) -> StoryFactory:
    """``story(source)``: the registered world of that source's STORY.md and a key bound as it says."""

    def _make(source: str) -> Story:
        key = make_key(source, tenants=[story_tenants[slug] for slug in KEY_TENANTS[source]])
        return Story(source=source, key=key, post_alert=post_alert)

    return _make


def alerts_of(response: Any) -> list[Alert]:
    """The Alert rows of one post, in post order (PagerDuty's answer lists none: read the delivery)."""
    return list(delivery_of(response).alerts.order_by("index"))


def delivery_of(response: Any) -> Delivery:
    return Delivery.objects.get(public_id=response.json()["delivery"])


def run_fields(run: Run) -> dict[str, Any]:
    return {
        "job": run.job.key,
        "tenant": run.tenant.slug,
        "environment": run.environment,
        "window": (run.window_start, run.window_end),
        "scheduled_for": run.scheduled_for,
        "status": run.status,
    }


def attempt_fields(attempt: Attempt) -> dict[str, Any]:
    attempt.refresh_from_db()
    return {
        "execution_id": attempt.execution_id,
        "source_number": attempt.source_number,
        "trigger": attempt.trigger,
        "status": attempt.status,
        "scheduled_at": attempt.scheduled_at,
        "started_at": attempt.started_at,
        "ended_at": attempt.ended_at,
        "error_summary": attempt.error_summary,
        "correlation_ref": attempt.correlation_ref,
        "log_url": attempt.log_url,
        "config_version": attempt.config_version,
    }


def events(run: Run) -> list[tuple[str, datetime, int | None]]:
    """The run's timeline as (kind, occurred at, the attempt's source number), in the run page's order."""
    return [
        (event.kind, event.occurred_at, event.attempt.source_number if event.attempt else None)
        for event in run.timeline.select_related("attempt").order_by("occurred_at", "recorded_at", "id")
    ]


def world() -> tuple[list[Any], ...]:
    """Everything an alert may change (an original's repeat count aside), to prove a post changed nothing."""
    return (
        list(Run.objects.order_by("id").values_list("id", "status", "scheduled_for", "window_start", "window_end")),
        list(
            Attempt.objects.order_by("id").values_list(
                "id", "number", "status", "scheduled_at", "started_at", "ended_at", "error_summary", "updated_at"
            )
        ),
        list(TimelineEvent.objects.order_by("id").values_list("id", "kind", "occurred_at")),
        list(
            Alert.objects.filter(duplicate_of__isnull=True)
            .order_by("id")
            .values_list("id", "outcome", "reason", "run_id", "attempt_id")
        ),
    )


def assert_accepted(response: Any, count: int = 1) -> list[Alert]:
    assert response.status_code == 202, response.content
    alerts = alerts_of(response)
    assert [(a.outcome, a.reason) for a in alerts] == [(Alert.Outcome.ACCEPTED, "")] * count
    return alerts


def assert_duplicates_change_nothing(story: Story, name: str, originals: list[Alert]) -> Any:
    """Post ``name``; every alert is a ``duplicate`` of the given original, and nothing else changes."""
    before = world()
    response = story.post(name)

    assert response.status_code == 202
    duplicates = alerts_of(response)
    assert [a.outcome for a in duplicates] == [Alert.Outcome.DUPLICATE] * len(originals)
    assert [a.duplicate_of_id for a in duplicates] == [o.pk for o in originals]
    assert [(a.run_id, a.attempt_id) for a in duplicates] == [(o.run_id, o.attempt_id) for o in originals]
    assert world() == before
    delivery = delivery_of(response)
    assert delivery.outcome == Delivery.Outcome.PROCESSED
    assert delivery.body == story.stored(name)
    return response


def assert_unmatched(response: Any, *fragments: str, absent: tuple[str, ...] = ()) -> Alert:
    """One ``unmatched`` alert whose reason names every fragment (all reasons listed) and none of ``absent``."""
    assert response.status_code == 202, response.content
    [alert] = alerts_of(response)
    assert alert.outcome == Alert.Outcome.UNMATCHED
    assert alert.run is None and alert.attempt is None
    for fragment in fragments:
        assert fragment in alert.reason, (fragment, alert.reason)
    for fragment in absent:
        assert fragment not in alert.reason, (fragment, alert.reason)
    if "alerts" in response.json():
        assert response.json()["alerts"][0]["reason"] == alert.reason
    return alert


def assert_rejected_delivery(story: Story, response: Any, name: str, size: int) -> Delivery:
    """A 400 whose Delivery is stored ``rejected`` with its raw body and no alerts."""
    assert response.status_code == 400
    delivery = delivery_of(response)
    assert delivery.outcome == Delivery.Outcome.REJECTED and delivery.reason
    assert delivery.body == story.stored(name)
    assert delivery.size_bytes == size == len(story.body(name))
    assert not delivery.is_body_truncated
    assert not delivery.alerts.exists()
    assert delivery.response_status == 400
    return delivery


def fixture_json(source: str, name: str) -> Any:
    return json.loads(fixture_path(source, name).read_bytes())


# --- Alertmanager -------------------------------------------------------------------------------


def test_alertmanager_story_file_by_file(story: StoryFactory) -> None:
    am = story("alertmanager")

    # 01: a new run from the annotations, attempt 1 failed; nanoseconds kept to µs, Go zero time is null.
    response = am.post("01-first-failure.json")
    [first] = assert_accepted(response)
    body = response.json()
    run = Run.objects.get()
    a1 = run.attempts.get()
    assert body["alerts"] == [
        {
            "id": str(first.public_id),
            "outcome": "accepted",
            "reason": "",
            "run": str(run.public_id),
            "attempt": str(a1.public_id),
        }
    ]
    details = first.fields["details"]
    assert (details["fingerprint"], details["status"]) == ("a3f1c09e7b2d4e58", "firing")
    assert details["starts_at"] == "2026-11-28T01:20:15.118736+00:00"
    assert details["ends_at"] is None
    assert run_fields(run) == {
        "job": "nightly-invoice-export",
        "tenant": "dunmore-pharmacy",
        "environment": "prod",
        "window": DAY_27,
        "scheduled_for": FIRE_28,
        "status": Run.Status.FAILED,
    }
    assert run.target == JobTarget.objects.get(tenant__slug="dunmore-pharmacy")
    assert attempt_fields(a1) == {
        "execution_id": "exp-20261128-0200-a1",
        "source_number": 1,
        "trigger": "scheduled",
        "status": "failed",
        "scheduled_at": None,
        "started_at": berlin(2026, 11, 28, 2, 3, 11, 482000),
        "ended_at": berlin(2026, 11, 28, 2, 19, 40),
        "error_summary": "Timeout waiting for acknowledgement from ledger gateway",
        "correlation_ref": "lg-7f3a9c",
        "log_url": "https://logs.example.internal/q/exp-20261128-0200-a1",
        "config_version": "",
    }
    assert (first.run, first.attempt) == (run, a1)
    assert events(run) == [("attempt_failed", berlin(2026, 11, 28, 2, 19, 40), 1)]

    # 02: a1 again is a duplicate; a2 (read per alert, not from commonAnnotations) is attempt 2.
    response = am.post("02-retry-failure.json")
    assert response.status_code == 202
    again, second = alerts_of(response)
    assert (again.outcome, again.duplicate_of, again.attempt) == (Alert.Outcome.DUPLICATE, first, a1)
    assert (second.outcome, second.reason) == (Alert.Outcome.ACCEPTED, "")
    a2 = run.attempts.get(number=2)
    assert second.attempt == a2 and second.fields["details"]["fingerprint"] == "5c8e2b71d09f3a64"
    assert attempt_fields(a2) == {
        "execution_id": "exp-20261128-0200-a2",
        "source_number": 2,
        "trigger": "automatic_retry",
        "status": "failed",
        "scheduled_at": None,
        "started_at": berlin(2026, 11, 28, 2, 29, 40),
        "ended_at": berlin(2026, 11, 28, 2, 31, 2),
        "error_summary": "Ledger gateway returned 503 Service Unavailable",
        "correlation_ref": "lg-7f3b11",
        "log_url": "https://logs.example.internal/q/exp-20261128-0200-a2",
        "config_version": "",
    }
    assert attempt_fields(a1)["status"] == "failed"
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert events(run) == [
        ("attempt_failed", berlin(2026, 11, 28, 2, 19, 40), 1),
        ("attempt_failed", berlin(2026, 11, 28, 2, 31, 2), 2),
    ]

    # 03: byte-identical to 02: both duplicates, the delivery is kept, nothing else changes.
    assert_duplicates_change_nothing(am, "03-duplicate-redelivery.json", [first, second])

    # 04: both resolved: accepted (state differs), a "resolved" event on each attempt, never a success.
    response = am.post("04-next-run-ok.json")
    resolved = assert_accepted(response, 2)
    assert [(a.kind, a.run, a.attempt) for a in resolved] == [("resolve", run, a1), ("resolve", run, a2)]
    assert events(run)[2:] == [
        ("resolved", berlin(2026, 11, 29, 2, 13, 30, 118736), 1),
        ("resolved", berlin(2026, 11, 29, 2, 13, 30, 118736), 2),
    ]
    assert "a resolve is not a success" in run.timeline.filter(kind="resolved").first().summary
    assert [attempt_fields(a)["status"] for a in (a1, a2)] == ["failed", "failed"]
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert Run.objects.count() == 1 and not Run.objects.filter(window_start=DAY_28[0]).exists()
    assert not Attempt.objects.filter(status=Attempt.Status.SUCCEEDED).exists()

    # 91: a Kubernetes Job name is not a job key; no tenant, env, execution id, window: all listed.
    before = world()
    alert = assert_unmatched(
        am.post("91-missing-labels.json"),
        "job 'nightly-invoice-export-29930460' is not registered",
        "no `tenant` label",
        "no `env` label",
        "no `execution_id` label",
        "no window",
        # each missing label is named once, not again by the mechanism's safety net
        absent=("no tenant: the alert names none", "no environment: the alert names none"),
    )
    assert alert.job_key == "nightly-invoice-export-29930460"
    assert alert.fields["details"]["generator_url"] == ""
    assert alert.fields["details"]["starts_at"] == "2026-11-28T01:22:30.500000+00:00"
    assert alert.fields["details"]["namespace"] == "dunmore-pharmacy-prod"
    assert world()[:3] == before[:3]

    # 92: every garbled convention listed; the tenant, the Unicode id and the offset parse anyway.
    before = world()
    response = am.post("92-offsets-unicode-truncated.json")
    alert = assert_unmatched(
        response,
        "job 'nächtlicher-rechnungsexport' is not registered",
        "`scheduled_for` annotation: '2026-11-28T02:00:00' has no UTC offset",
        "`window_start` annotation: '2026-11-27' is a date, not a timestamp",
        "`window_end` annotation is missing",
        "`attempt` annotation 'eins' is not an integer",
        absent=("not available", "no window:"),
    )
    assert (alert.tenant_slug, alert.environment) == (UNICODE_TENANT, "prod")
    assert alert.execution_id == "exp-20261128-0200-é1"
    assert alert.fields["details"]["starts_at"] == "2026-11-28T01:20:15.118736+00:00"
    description = fixture_json("alertmanager", "92-offsets-unicode-truncated.json")["alerts"][0]["annotations"][
        "description"
    ]
    delivery = delivery_of(response)
    assert len(description) == 3039
    assert json.loads(delivery.body)["alerts"][0]["annotations"]["description"] == description
    assert alert.fields["error_summary"] == description[:2000]
    assert delivery.notes == {"truncated_alerts": 7}
    assert world()[:3] == before[:3]

    # 93: invalid JSON: 400 problem details, kept rejected with its 1,605 bytes, nothing parsed.
    before = world()
    response = am.post("93-truncated-body.json")
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["status"] == 400 and "not valid JSON" in response.json()["detail"]
    assert_rejected_delivery(am, response, "93-truncated-body.json", 1605)
    assert world() == before


def test_alertmanager_truncated_alerts_show_in_the_inbox(story: StoryFactory, client: Client) -> None:
    story("alertmanager").post("92-offsets-unicode-truncated.json")
    client.force_login(UserFactory(admin=True))

    page = client.get("/inbox/").content.decode()

    assert "7 alerts left out by the sender" in page
    assert "nächtlicher-rechnungsexport" in page


# --- Grafana ------------------------------------------------------------------------------------

GRAFANA_REPEAT_RECEIVED = datetime(2026, 11, 28, 5, 20, tzinfo=UTC)  # repeat_interval (4 h) after 01:20Z


def test_grafana_story_file_by_file(story: StoryFactory) -> None:
    grafana = story("grafana")

    # 01: the latest fire time at or before startsAt (02:20) is 02:00: the run of 2026-11-27.
    [first] = assert_accepted(grafana.post("01-first-failure.json"))
    details = first.fields["details"]
    assert (details["fingerprint"], details["status"], details["values"]) == (
        "e41b7c2d90a3f658",
        "firing",
        {"A": 1, "B": 1},
    )
    assert (
        details["generator_url"]
        == "https://grafana.ops.elmwood-books.example/alerting/grafana/fe3k9xq2ab7cwd/view?orgId=1"
    )
    assert details["annotations"]["description"].startswith("1 failed attempt(s)")  # rule text stays on the alert
    run = Run.objects.get()
    assert run_fields(run) == {
        "job": "nightly-invoice-export",
        "tenant": "elmwood-books",
        "environment": "prod",
        "window": DAY_27,
        "scheduled_for": FIRE_28,
        "status": Run.Status.FAILED,
    }
    a1 = run.attempts.get()
    no_details = dict.fromkeys(("scheduled_at", "started_at", "ended_at"), None) | dict.fromkeys(
        ("error_summary", "correlation_ref", "log_url", "config_version"), ""
    )
    assert attempt_fields(a1) == {
        "execution_id": "e41b7c2d90a3f658#1",
        "source_number": 1,
        "trigger": "scheduled",
        "status": "failed",
        **no_details,
    }
    assert first.attempt == a1
    assert events(run) == [("attempt_failed", berlin(2026, 11, 28, 2, 20), 1)]

    # 02: a repeat notification with A=2 is a second failure, not a duplicate; it has no time: received.
    [second] = assert_accepted(grafana.post("02-retry-failure-repeat-notification.json", at=GRAFANA_REPEAT_RECEIVED))
    assert second.fields["details"]["values"] == {"A": 2, "B": 1}
    assert second.fields["details"]["starts_at"] == details["starts_at"]
    a2 = run.attempts.get(number=2)
    assert attempt_fields(a2) == {
        "execution_id": "e41b7c2d90a3f658#2",
        "source_number": 2,
        "trigger": "automatic_retry",
        "status": "failed",
        **no_details,
    }
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert events(run) == [
        ("attempt_failed", berlin(2026, 11, 28, 2, 20), 1),
        ("attempt_failed", GRAFANA_REPEAT_RECEIVED, 2),
    ]

    # 03: byte-identical to 02.
    assert_duplicates_change_nothing(grafana, "03-duplicate-redelivery.json", [second])

    # 04: resolved (A=0): a "resolved" on attempt 2, the last this episode reported; never a success.
    [resolved] = assert_accepted(grafana.post("04-next-run-ok.json"))
    assert (resolved.kind, resolved.run, resolved.attempt) == ("resolve", run, a2)
    assert resolved.fields["details"]["values"] == {"A": 0, "B": 0}
    assert events(run)[-1] == ("resolved", berlin(2026, 11, 29, 2, 13), 2)
    assert len(events(run)) == 3
    assert [attempt_fields(a)["status"] for a in (a1, a2)] == ["failed", "failed"]
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert Run.objects.count() == 1 and not Attempt.objects.filter(status=Attempt.Status.SUCCEEDED).exists()

    # 91: DatasourceError is an evaluation problem, never a job failure; rulename is not a job.
    before = world()
    alert = assert_unmatched(
        grafana.post("91-datasource-error.json"),
        "no `job_name` label",
        "no `tenant` label",
        "no `env` label",
        "DatasourceError",
        "never recorded as a job failure",
        absent=("no job key in the alert", "no tenant: the alert names none"),
    )
    assert alert.job_key == "" and alert.fields["details"]["labels"]["rulename"] == "Scheduled job failed"
    assert alert.fields["details"]["evaluation_error"] == (
        "[sse.dataQueryError] failed to execute query [A]: dial tcp 10.42.9.3:5432: connect: connection refused"
    )
    assert alert.fields["details"]["values"] is None
    assert world()[:3] == before[:3]

    # 92: NoData is an evaluation problem too; the Unicode tenant and the +01:00 offset parse.
    before = world()
    alert = assert_unmatched(
        grafana.post("92-nodata-unicode-offset.json"),
        "no `job_name` label",
        "no `env` label",
        "DatasourceNoData",
        absent=("not available", "no `tenant` label"),
    )
    details = alert.fields["details"]
    assert alert.tenant_slug == UNICODE_TENANT
    assert details["starts_at"] == "2026-11-28T01:40:00+00:00"
    assert (details["org_id"], details["values"]) == (3, {})
    assert all(details[name].startswith("https://") for name in ("image_url", "dashboard_url", "panel_url"))
    assert details["grafana_folder"] == "Stapelverarbeitung"
    assert alert.summary == "firing: Keine Laufdaten für „nächtlicher-rechnungsexport“ seit 26 h ⏰"
    assert world()[:3] == before[:3]

    # 93: a custom payload template is not the webhook format: 400 naming what it lacks, body kept.
    before = world()
    response = grafana.post("93-custom-payload-template.json")
    assert response["Content-Type"] == "application/problem+json"
    assert {"version", "status", "alerts[].labels", "alerts[].fingerprint"} <= set(response.json()["errors"])
    assert_rejected_delivery(grafana, response, "93-custom-payload-template.json", 275)
    assert world() == before


# --- EventBridge Scheduler ----------------------------------------------------------------------


def test_eventbridge_scheduler_story_file_by_file(story: StoryFactory) -> None:
    eb = story("eventbridge-scheduler")

    # 01: retries exhausted: attempt 2 (RETRY_ATTEMPTS "1") failed, never started; two timeline notes.
    response = eb.post("01-exhausted-retries-receive-message.json")
    [first] = assert_accepted(response)
    assert first.fields["details"]["message_id"] == "6f2c9e1a-4b7d-4d3e-9a8f-0c5b1e7d2a94"
    assert first.fields["details"]["suggested_failure_class"] == "never_started"
    assert delivery_of(response).notes == {"wrapper": "receive_message"}
    run = Run.objects.get()
    assert run_fields(run) == {
        "job": "nightly-invoice-export",
        "tenant": "fjord-freight",
        "environment": "prod",
        "window": DAY_27,
        "scheduled_for": FIRE_28,
        "status": Run.Status.FAILED,
    }
    a2 = run.attempts.get()
    assert attempt_fields(a2) == {
        "execution_id": "c4e19a7b02d85f36",
        "source_number": 2,
        "trigger": "automatic_retry",
        "status": "failed",
        "scheduled_at": FIRE_28,
        "started_at": None,
        "ended_at": None,
        "error_summary": "KmsThrottled: The request was denied due to request throttling by AWS KMS for key "
        "arn:aws:kms:eu-central-1:210987654321:key/0b6f3e1a-7c2d-4e9f-a8b5-3d1c6e0f9a27.",
        "correlation_ref": "c4e19a7b02d85f36",
        "log_url": "",
        "config_version": "",
    }
    sent = berlin(2026, 11, 28, 2, 1, 5, 742000)  # SentTimestamp 1795827665742
    assert events(run) == [("attempt_failed", sent, 2), ("retries_exhausted", sent, 2)]
    note = run.timeline.get(kind="retries_exhausted").summary
    assert "MaximumRetryAttempts" in note and "1 earlier invocation also failed" in note

    # 02: the same message as a Lambda record: same fields, same key, a duplicate.
    response = assert_duplicates_change_nothing(eb, "02-same-message-lambda-event-record.json", [first])
    assert delivery_of(response).notes == {"wrapper": "lambda"}
    [lambda_record] = alerts_of(response)
    assert lambda_record.dedup_hash == first.dedup_hash
    assert {k: v for k, v in lambda_record.fields.items() if k != "details"} == {
        k: v for k, v in first.fields.items() if k != "details"
    }

    # 03: the same MessageId with a new receipt handle.
    assert_duplicates_change_nothing(eb, "03-duplicate-redelivery.json", [first])

    # 04: the next night failed at once (no EXHAUSTED_RETRY_CONDITION): a run of its own, no notes.
    [next_night] = assert_accepted(eb.post("04-next-run-permanent-error.json"))
    assert next_night.fields["details"]["message_id"] == "0d8b4e7f-2a1c-4f96-b3e5-7c9a1d6f0e28"
    run_29 = Run.objects.get(window_start=DAY_28[0])
    assert run_fields(run_29) == {
        "job": "nightly-invoice-export",
        "tenant": "fjord-freight",
        "environment": "prod",
        "window": DAY_28,
        "scheduled_for": FIRE_29,
        "status": Run.Status.FAILED,
    }
    assert attempt_fields(run_29.attempts.get()) == {
        "execution_id": "9a7d03e5b1c64f28",
        "source_number": 1,
        "trigger": "scheduled",
        "status": "failed",
        "scheduled_at": FIRE_29,
        "started_at": None,
        "ended_at": None,
        "error_summary": "AWS.SimpleQueueService.NonExistentQueue: The specified queue does not exist for this wsdl "
        "version.",
        "correlation_ref": "9a7d03e5b1c64f28",
        "log_url": "",
        "config_version": "",
    }
    assert events(run_29) == [("attempt_failed", berlin(2026, 11, 29, 2, 0, 0, 481000), 1)]

    # 91: 01:00 is not a fire time: by the Slot rule its slot is 2026-11-27 02:00 (23 h after it, 1 h before
    # the next, beyond the early tolerance): a run of its own, flagged late by 23 h with the time-zone hint.
    response = eb.post("91-plaintext-truncated-body.json")
    [late] = assert_accepted(response)
    late_run = late.run
    assert late_run != run and late.tenant_slug == "fjord-freight"  # the body's café tenant is never read
    assert late.fields["details"]["payload_truncated"] is True
    assert late.fields["details"]["body_is_json"] is False
    assert UNICODE_TENANT in delivery_of(response).body  # kept as text
    assert run_fields(late_run) == {
        "job": "nightly-invoice-export",
        "tenant": "fjord-freight",
        "environment": "prod",
        "window": (berlin(2026, 11, 26), berlin(2026, 11, 27)),
        "scheduled_for": berlin(2026, 11, 27, 2),
        "status": Run.Status.FAILED,
    }
    a38 = late_run.attempts.get()
    assert attempt_fields(a38) == {
        "execution_id": "0f3a6c9e2b7d1458",
        "source_number": 38,
        "trigger": "automatic_retry",
        "status": "timed_out",
        "scheduled_at": berlin(2026, 11, 28, 1),
        "started_at": None,
        "ended_at": None,
        "error_summary": "ThrottlingException: Rate exceeded",
        "correlation_ref": "0f3a6c9e2b7d1458",
        "log_url": "",
        "config_version": "",
    }
    assert (a38.number, a38.is_slot_late, a38.slot_offset_seconds) == (1, True, 23 * 3600)
    assert a38.slot_hint == "time-zone or DST policy mismatch?"
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and Run.objects.count() == 3
    timed_out = berlin(2026, 11, 28, 2, 0, 12, 4000)
    assert events(late_run) == [
        ("attempt_timed_out", timed_out, 38),
        ("retries_exhausted", timed_out, 38),
        ("schedule_mismatch", timed_out, 38),
    ]
    mismatch = late_run.timeline.get(kind="schedule_mismatch").summary
    assert "reported 01:00:00, 23 hours late: slot 2026-11-27 02:00" in mismatch
    assert "time-zone or DST policy mismatch?" in mismatch
    assert "37 earlier invocations also failed" in late_run.timeline.get(kind="retries_exhausted", attempt=a38).summary

    # 92: no schedule group and no SCHEDULED_TIME: both reasons; the rest parses, the body is not read.
    before = world()
    alert = assert_unmatched(
        eb.post("92-arn-without-group-number-type.json"),
        "has no schedule group",
        "no SCHEDULED_TIME attribute",
        absent=("no tenant: the alert names none", "no window:"),
    )
    assert (alert.job_key, alert.execution_id) == ("nightly-invoice-export", "5b0e7c2a9d1f3e64")
    assert alert.fields["attempt_number"] == 3
    assert alert.fields["error_summary"] == (
        "AWS.Scheduler.InternalServerError: Unexpected error occurred while processing the request.\n"
        '{"requestId":"3c1f8e2a"}'
    )
    assert world()[:3] == before[:3]

    # 93: an empty receive: 202 with no alerts; only the delivery is stored.
    before = world()
    response = eb.post("93-empty-receive.json")
    assert response.status_code == 202 and response.json()["alerts"] == []
    assert delivery_of(response).outcome == Delivery.Outcome.PROCESSED
    assert world() == before


# --- Airflow ------------------------------------------------------------------------------------

AIRFLOW_27 = (berlin(2026, 11, 27, 2), berlin(2026, 11, 28, 2))  # Airflow's own data interval
AIRFLOW_28 = (berlin(2026, 11, 28, 2), berlin(2026, 11, 29, 2))
AIRFLOW_LOG = (
    "https://airflow.ops.glenrock-energy.example/dags/nightly-invoice-export/grid?"
    "dag_run_id=scheduled__2026-11-27T01%3A00%3A00%2B00%3A00&task_id=export_invoices&map_index=-1&tab=logs"
)
TRY = "scheduled__2026-11-27T01:00:00+00:00/export_invoices/-1/"


def test_airflow_story_file_by_file(story: StoryFactory) -> None:
    airflow = story("airflow")

    # 01: try 1 failed (up_for_retry) and next_retry_datetime queues try 2: the run is running.
    [first] = assert_accepted(airflow.post("01-task-retry-callback.json"))
    run = Run.objects.get()
    assert run_fields(run) == {
        "job": "nightly-invoice-export",
        "tenant": "glenrock-energy",
        "environment": "prod",
        "window": AIRFLOW_27,
        "scheduled_for": FIRE_28,
        "status": Run.Status.RUNNING,
    }
    a1, a2 = run.attempts.order_by("number")
    assert attempt_fields(a1) == {
        "execution_id": TRY + "1",
        "source_number": 1,
        "trigger": "scheduled",
        "status": "failed",
        "scheduled_at": FIRE_28,
        "started_at": berlin(2026, 11, 28, 2, 3, 11, 482000),
        "ended_at": berlin(2026, 11, 28, 2, 19, 40),
        "error_summary": "billing.ledger.AckTimeout: Timeout waiting for acknowledgement from ledger gateway",
        "correlation_ref": "",
        "log_url": AIRFLOW_LOG,
        "config_version": "export-cfg@41",
    }
    queued = {
        "execution_id": TRY + "2",
        "source_number": 2,
        "trigger": "automatic_retry",
        "status": "queued",
        "scheduled_at": berlin(2026, 11, 28, 2, 29, 40),
        "started_at": None,
        "ended_at": None,
        "error_summary": "",
        "correlation_ref": "",
        "log_url": "",
        "config_version": "export-cfg@41",
    }
    assert attempt_fields(a2) == queued
    assert first.attempt == a1
    assert events(run) == [
        ("attempt_failed", berlin(2026, 11, 28, 2, 19, 40), 1),
        ("attempt_queued", berlin(2026, 11, 28, 2, 29, 40), 2),
    ]
    assert "queued for 2026-11-28 01:29:40Z" in run.timeline.get(kind="attempt_queued").summary

    # 02: try 2 goes queued -> failed; its announced scheduled time (02:29:40) is kept.
    [second] = assert_accepted(airflow.post("02-task-failure-callback.json"))
    assert second.attempt == a2
    assert attempt_fields(a2) == {
        **queued,
        "status": "failed",
        "started_at": berlin(2026, 11, 28, 2, 29, 40),
        "ended_at": berlin(2026, 11, 28, 2, 31, 2),
        "error_summary": "billing.ledger.GatewayError: Ledger gateway returned 503 Service Unavailable",
        "log_url": AIRFLOW_LOG,
    }
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert events(run)[2:] == [("attempt_failed", berlin(2026, 11, 28, 2, 31, 2), 2)]

    # 03: the sender retried its POST.
    assert_duplicates_change_nothing(airflow, "03-duplicate-redelivery.json", [second])

    # 04: the DAG run failed: linked to the run, to no attempt; the never-run last task is no attempt.
    before = world()
    [dag_failed] = assert_accepted(airflow.post("04-dag-run-failure-callback.json"))
    assert (dag_failed.kind, dag_failed.run, dag_failed.attempt) == ("run", run, None)
    assert world()[1] == before[1]  # attempts unchanged
    assert events(run)[3:] == [("run_reported", berlin(2026, 11, 28, 2, 31, 3, 448120), None)]
    assert "reason task_failure" in run.timeline.get(kind="run_reported").summary
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED

    # 05: the next night's DAG run succeeded: one attempt for the DAG run itself.
    [success] = assert_accepted(airflow.post("05-next-run-success-callback.json"))
    run_28 = Run.objects.get(window_start=AIRFLOW_28[0])
    assert run_fields(run_28) == {
        "job": "nightly-invoice-export",
        "tenant": "glenrock-energy",
        "environment": "prod",
        "window": AIRFLOW_28,
        "scheduled_for": FIRE_29,
        "status": Run.Status.SUCCEEDED,
    }
    assert attempt_fields(run_28.attempts.get()) == {
        "execution_id": "scheduled__2026-11-28T01:00:00+00:00",
        "source_number": 1,
        "trigger": "scheduled",
        "status": "succeeded",
        "scheduled_at": FIRE_29,
        "started_at": berlin(2026, 11, 29, 2, 0, 4),
        "ended_at": berlin(2026, 11, 29, 2, 12, 56, 118903),
        "error_summary": "",
        "correlation_ref": "",
        "log_url": "",
        "config_version": "export-cfg@41",
    }
    assert success.attempt == run_28.attempts.get()
    assert events(run_28) == [("attempt_succeeded", berlin(2026, 11, 29, 2, 12, 56, 118903), 1)]

    # 91: an Airflow 3 manual run with a conf window: a separate, day-aligned run, flagged as unapproved.
    [manual] = assert_accepted(airflow.post("91-airflow3-listener-manual-run-null-logical-date.json"))
    run_manual = Run.objects.get(window_start=DAY_27[0])
    assert run_manual != run and manual.run == run_manual
    assert run_fields(run_manual) == {
        "job": "nightly-invoice-export",
        "tenant": "glenrock-energy",
        "environment": "prod",
        "window": DAY_27,
        "scheduled_for": FIRE_28,
        "status": Run.Status.FAILED,
    }
    assert attempt_fields(run_manual.attempts.get()) == {
        "execution_id": "manual__2026-11-28T09:15:22.481516+00:00/export_invoices/-1/1",
        "source_number": 1,
        "trigger": "manual_rerun",
        "status": "failed",
        "scheduled_at": berlin(2026, 11, 28, 10, 15, 22, 481516),
        "started_at": berlin(2026, 11, 28, 10, 15, 24, 5118),
        "ended_at": berlin(2026, 11, 28, 10, 16, 2, 338471),
        "error_summary": "billing.ledger.GatewayError: Ledger gateway returned 503 Service Unavailable",
        "correlation_ref": "019ac9e2-7b41-7c3a-9e58-2f0d6a1b4c93",
        "log_url": "",
        "config_version": "",
    }
    assert events(run_manual) == [
        ("manual_replay_unapproved", berlin(2026, 11, 28, 10, 15, 24, 5118), 1),
        ("attempt_failed", berlin(2026, 11, 28, 10, 16, 2, 338471), 1),
    ]

    # 92: the job is not registered; the local offsets and the long Unicode traceback parse anyway.
    before = world()
    alert = assert_unmatched(airflow.post("92-local-offsets-unicode-long-exception.json"))
    assert alert.reason == "job 'nächtlicher_rechnungsexport' is not registered (register it, then reprocess)"
    assert (alert.tenant_slug, alert.environment) == (UNICODE_TENANT, "prod")
    fields = alert.fields
    assert (fields["window_start"], fields["window_end"]) == ("2026-11-27T01:00:00+00:00", "2026-11-28T01:00:00+00:00")
    assert (fields["attempt_number"], fields["status"]) == (2, "failed")
    assert (fields["started_at"], fields["ended_at"]) == (
        "2026-11-28T01:29:40.500000+00:00",
        "2026-11-28T01:31:02+00:00",
    )
    context = fixture_json("airflow", "92-local-offsets-unicode-long-exception.json")
    assert len(context["exception"]) == 6095
    assert fields["error_summary"] == f"{context['exception_type']}: {context['exception']}"[:2000]
    assert fields["details"]["dag_display_name"] == context["dag_display_name"]
    assert "„Café Lumière“" in json.dumps(context, ensure_ascii=False)
    assert world()[:3] == before[:3]

    # 93: a mapped task instance is an attempt of its own on the run of 01/02.
    [mapped] = assert_accepted(airflow.post("93-mapped-task-failure.json"))
    assert mapped.run == run and mapped.fields["details"]["rendered_map_index"] == "shard=eu-3"
    shard = run.attempts.get(execution_id="scheduled__2026-11-27T01:00:00+00:00/export_invoices_for_shard/3/2")
    assert attempt_fields(shard) == {
        "execution_id": "scheduled__2026-11-27T01:00:00+00:00/export_invoices_for_shard/3/2",
        "source_number": 2,
        "trigger": "automatic_retry",
        "status": "failed",
        "scheduled_at": None,
        "started_at": berlin(2026, 11, 28, 2, 29, 55, 120044),
        "ended_at": berlin(2026, 11, 28, 2, 30, 27, 774310),
        "error_summary": "KeyError: 'invoice_currency'",
        "correlation_ref": "",
        "log_url": AIRFLOW_LOG.replace(
            "task_id=export_invoices&map_index=-1", "task_id=export_invoices_for_shard&map_index=3"
        ),
        "config_version": "export-cfg@41",
    }
    assert attempt_fields(a2)["status"] == "failed" and run.attempts.count() == 3
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert ("attempt_failed", berlin(2026, 11, 28, 2, 30, 27, 774310), 2) in events(run)
    assert run.timeline.filter(attempt=shard).count() == 1


def test_airflow_unregistered_job_becomes_its_run_after_registering_and_reprocessing(story: StoryFactory) -> None:
    airflow = story("airflow")
    [alert] = alerts_of(airflow.post("92-local-offsets-unicode-long-exception.json"))
    assert alert.outcome == Alert.Outcome.UNMATCHED

    job, _ = job_get_or_create(
        key="nächtlicher_rechnungsexport",
        defaults={"schedule": "0 2 * * *", "timezone": "Europe/Berlin", "window_alignment": "day"},
    )
    target, _ = job_target_get_or_create(job=job, tenant=Tenant.objects.get(slug=UNICODE_TENANT))
    alert = alert_reprocess(alert=alert)

    assert (alert.outcome, alert.reason) == (Alert.Outcome.ACCEPTED, "")
    run = Run.objects.get()
    assert run_fields(run) == {
        "job": "nächtlicher_rechnungsexport",
        "tenant": UNICODE_TENANT,
        "environment": "prod",
        "window": AIRFLOW_27,
        "scheduled_for": FIRE_28,
        "status": Run.Status.FAILED,
    }
    assert run.target == target and alert.run == run
    attempt = run.attempts.get()
    assert attempt_fields(attempt) | {"error_summary": None, "log_url": None} == {
        "execution_id": "scheduled__2026-11-27T01:00:00+00:00/export_rechnungen/-1/2",
        "source_number": 2,
        "trigger": "automatic_retry",
        "status": "failed",
        "scheduled_at": None,
        "started_at": berlin(2026, 11, 28, 2, 29, 40, 500000),
        "ended_at": berlin(2026, 11, 28, 2, 31, 2),
        "error_summary": None,
        "correlation_ref": "",
        "log_url": None,
        "config_version": "",
    }
    assert len(attempt.error_summary) == 2000 and attempt.error_summary.startswith("billing.ledger.GatewayError: ")
    assert attempt.log_url.startswith("https://") and "task_id=export_rechnungen" in attempt.log_url
    assert events(run) == [("attempt_failed", berlin(2026, 11, 28, 2, 31, 2), 2)]


# --- PagerDuty ----------------------------------------------------------------------------------

PD_KEY = "harbor-dental/prod/nightly-invoice-export/2026-11-27T00:00:00+01:00"
PD_RESOLVE_RECEIVED = datetime(2026, 11, 29, 1, 20, tzinfo=UTC)  # after the next night went well
PD_ACK_RECEIVED = datetime(2026, 11, 29, 1, 25, tzinfo=UTC)  # received after the resolve


def test_pagerduty_story_file_by_file(story: StoryFactory) -> None:
    pd = story("pagerduty")

    # 01: PagerDuty's own answer; the key came in routing_key and is redacted from the stored body.
    response = pd.post("01-trigger-attempt1.json")
    assert response.status_code == 202
    delivery = delivery_of(response)
    assert response.json() == {
        "status": "success",
        "message": "Event processed",
        "dedup_key": PD_KEY,
        "delivery": str(delivery.public_id),
    }
    assert delivery.key == pd.key_record and delivery.response_status == 202
    assert pd.key not in delivery.body and f'"routing_key": "{redaction_token(pd.key)}"' in delivery.body
    [first] = assert_accepted(response)
    assert first.fields["details"]["exception"] == "billing.ledger.AckTimeout"
    run = Run.objects.get()
    assert run_fields(run) == {
        "job": "nightly-invoice-export",
        "tenant": "harbor-dental",
        "environment": "prod",
        "window": DAY_27,
        "scheduled_for": FIRE_28,
        "status": Run.Status.FAILED,
    }
    a1 = run.attempts.get()
    assert attempt_fields(a1) == {
        "execution_id": "exp-20261128-0200-a1",
        "source_number": 1,
        "trigger": "scheduled",
        "status": "failed",
        "scheduled_at": None,
        "started_at": berlin(2026, 11, 28, 2, 3, 11, 482000),
        "ended_at": berlin(2026, 11, 28, 2, 19, 40),
        "error_summary": "Timeout waiting for acknowledgement from ledger gateway",
        "correlation_ref": "lg-7f3a9c",
        "log_url": "https://logs.example.internal/q/exp-20261128-0200-a1",
        "config_version": "export-cfg@41",
    }
    assert events(run) == [("attempt_failed", berlin(2026, 11, 28, 2, 19, 40), 1)]

    # 02: the same PagerDuty dedup_key, another execution: accepted, not a duplicate.
    response = pd.post("02-trigger-attempt2-same-dedup-key.json")
    assert response.json()["dedup_key"] == PD_KEY
    [second] = assert_accepted(response)
    assert second.fields["details"]["severity"] == "critical"
    a2 = run.attempts.get(number=2)
    assert attempt_fields(a2) == {
        "execution_id": "exp-20261128-0200-a2",
        "source_number": 2,
        "trigger": "automatic_retry",
        "status": "failed",
        "scheduled_at": None,
        "started_at": berlin(2026, 11, 28, 2, 29, 40),
        "ended_at": berlin(2026, 11, 28, 2, 31, 2),
        "error_summary": "Ledger gateway returned 503 Service Unavailable",
        "correlation_ref": "lg-7f3b11",
        "log_url": "https://logs.example.internal/q/exp-20261128-0200-a2",
        "config_version": "export-cfg@41",
    }
    assert second.fields["details"]["exception"] == "billing.ledger.GatewayError"
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert events(run)[1:] == [("attempt_failed", berlin(2026, 11, 28, 2, 31, 2), 2)]

    # 03: the sender retried after a timeout: PagerDuty's shape, a duplicate.
    response = assert_duplicates_change_nothing(pd, "03-duplicate-redelivery.json", [second])
    assert (response.status_code, response.json()["status"], response.json()["dedup_key"]) == (202, "success", PD_KEY)

    # 04: a bare resolve, found through its dedup_key: a "resolved" on attempt 2 at receipt; no success.
    response = pd.post("04-resolve-next-run-ok.json", at=PD_RESOLVE_RECEIVED)
    assert response.json()["dedup_key"] == PD_KEY
    [resolved] = assert_accepted(response)
    assert (resolved.kind, resolved.run, resolved.attempt) == ("resolve", run, a2)
    assert events(run)[2:] == [("resolved", PD_RESOLVE_RECEIVED, 2)]
    assert [attempt_fields(a)["status"] for a in (a1, a2)] == ["failed", "failed"]
    assert Run.objects.count() == 1 and not Attempt.objects.filter(status=Attempt.Status.SUCCEEDED).exists()

    # 91: no dedup_key: a generated one is returned, as PagerDuty does; free text is never a source.
    response = pd.post("91-trigger-without-dedup-key.json")
    generated = response.json()["dedup_key"]
    assert response.json()["status"] == "success" and len(generated) == 32 and int(generated, 16) >= 0
    alert = assert_unmatched(
        response,
        "no `payload.component`",
        "no `payload.group` or `payload.custom_details.tenant`",
        "no `payload.custom_details.env`",
        "no `payload.custom_details.execution_id`",
        "`payload.custom_details` is text, not an object",
        absent=("no job key in the alert", "no tenant: the alert names none"),
    )
    assert alert.job_key == "" and alert.group_ref == generated
    assert alert.fields["details"]["custom_details"] == (
        "exit code 1 after 988s; see /var/log/batch/nightly-invoice-export.log"
    )

    # 92: an acknowledge with a bad severity: accepted (not validated), placed by its own time.
    before = world()
    [ack] = assert_accepted(pd.post("92-acknowledge-offset-bad-severity.json", at=PD_ACK_RECEIVED))
    assert (ack.kind, ack.run, ack.attempt) == ("acknowledge", run, a2)
    assert any("'CRITICAL'" in note for note in ack.fields["details"]["notes"])
    assert events(run) == [
        ("attempt_failed", berlin(2026, 11, 28, 2, 19, 40), 1),
        ("attempt_failed", berlin(2026, 11, 28, 2, 31, 2), 2),
        ("acknowledged", berlin(2026, 11, 28, 3, 15, 10), 2),  # before the resolve, though received after it
        ("resolved", PD_RESOLVE_RECEIVED, 2),
    ]
    assert "acknowledged by on-call" in run.timeline.get(kind="acknowledged").summary
    assert world()[1] == before[1] and world()[0] == before[0]  # no status changes

    # 93: over PagerDuty's own limits: 400 "invalid event" naming both fields; the body kept, Unicode intact.
    before = world()
    response = pd.post("93-oversized-unicode.json")
    assert response.status_code == 400
    answer = response.json()
    assert (answer["status"], answer["message"]) == ("invalid event", "Event object is invalid")
    assert len(answer["errors"]) == 2
    assert any("'dedup_key' is too long (305" in e for e in answer["errors"])
    assert any("'payload.summary' is too long (1719" in e for e in answer["errors"])
    delivery = delivery_of(response)
    posted = pd.body("93-oversized-unicode.json")
    assert delivery.outcome == Delivery.Outcome.REJECTED and not delivery.alerts.exists()
    assert delivery.body == pd.stored("93-oversized-unicode.json")
    assert "„Café Lumière München“" in delivery.body and "請求書エクスポート失敗" in delivery.body
    assert delivery.size_bytes == len(posted) and not delivery.is_body_truncated
    assert world() == before


def test_pagerduty_bearer_header_wins_over_routing_key(
    story: StoryFactory, make_key: Any, post_alert: PostAlert
) -> None:
    pd = story("pagerduty")
    other = make_key("pagerduty", tenants=[Tenant.objects.get(slug="harbor-dental")], name="pagerduty-other")
    body = (
        fixture_path("pagerduty", "01-trigger-attempt1.json")
        .read_bytes()
        .replace(PAGERDUTY_PLACEHOLDER, other.encode())
    )

    response = post_alert("pagerduty", body, pd.key)

    assert response.status_code == 202 and response.json()["status"] == "success"
    delivery = delivery_of(response)
    assert delivery.key == pd.key_record
    assert delivery.integration == Integration.objects.get(name="pagerduty")
    assert IntegrationKey.objects.get(prefix=other[:12]).last_used_at is None
    # A wrong header is not rescued by a valid routing_key: the header is the credential.
    refused = post_alert("pagerduty", body.replace(other.encode(), pd.key.encode()), "hk_" + "x" * 43)
    assert refused.status_code == 401
    assert Delivery.objects.count() == 1


# --- Kubernetes ---------------------------------------------------------------------------------

JOB_UID = "7c4e1a9b-2d5f-4b8e-a3c6-9f0d1e2b3c4d"
NEXT_UID = "b8d2f6a0-3c7e-4a19-8e5b-2d4f6a8c0e13"
K8S_FIRST_RECEIVED = datetime(2026, 11, 28, 1, 10, tzinfo=UTC)  # while pod 2 runs


def test_kubernetes_story_file_by_file(story: StoryFactory) -> None:
    k8s = story("kubernetes")

    # 01: pod 1 failed, pod 2 running; the object has no pod times: both events at receipt.
    [first] = assert_accepted(k8s.post("01-job-attempt1-failed-pod-retrying.json", at=K8S_FIRST_RECEIVED))
    run = Run.objects.get()
    assert run_fields(run) == {
        "job": "nightly-invoice-export",
        "tenant": "ironbridge-telecom",
        "environment": "prod",
        "window": DAY_27,
        "scheduled_for": FIRE_28,
        "status": Run.Status.RUNNING,
    }
    a1, a2 = run.attempts.order_by("number")
    pod_1 = {
        "execution_id": f"{JOB_UID}#1",
        "source_number": 1,
        "trigger": "scheduled",
        "status": "failed",
        "scheduled_at": FIRE_28,
        "started_at": FIRE_28,
        "ended_at": None,
        "error_summary": "",
        "correlation_ref": "",
        "log_url": "",
        "config_version": "export-cfg@41",
    }
    assert attempt_fields(a1) == pod_1
    assert attempt_fields(a2) == {
        "execution_id": f"{JOB_UID}#2",
        "source_number": 2,
        "trigger": "automatic_retry",
        "status": "running",
        "scheduled_at": None,
        "started_at": None,
        "ended_at": None,
        "error_summary": "",
        "correlation_ref": JOB_UID,
        "log_url": "",
        "config_version": "export-cfg@41",
    }
    assert first.attempt == a2
    assert events(run) == [("attempt_failed", K8S_FIRST_RECEIVED, 1), ("attempt_running", K8S_FIRST_RECEIVED, 2)]

    # 02: Failed (after FailureTarget): pod 2 failed -- one event; pod 1, re-reported failed, writes none.
    [second] = assert_accepted(k8s.post("02-job-failed-backoff-limit.json"))
    assert second.attempt == a2
    assert attempt_fields(a1) == pod_1
    assert attempt_fields(a2)["status"] == "failed"
    assert attempt_fields(a2)["ended_at"] == berlin(2026, 11, 28, 2, 21, 14)
    assert attempt_fields(a2)["error_summary"] == "BackoffLimitExceeded: Job has reached the specified backoff limit"
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert events(run)[2:] == [("attempt_failed", berlin(2026, 11, 28, 2, 21, 14), 2)]

    # 03: the same object as a watch MODIFIED event.
    assert_duplicates_change_nothing(k8s, "03-duplicate-redelivery-watch-event.json", [second])

    # 04: the next night's Job completed: a run of its own that succeeded, one event.
    [complete] = assert_accepted(k8s.post("04-next-run-ok-job-complete.json"))
    run_29 = Run.objects.get(window_start=DAY_28[0])
    assert run_fields(run_29) == {
        "job": "nightly-invoice-export",
        "tenant": "ironbridge-telecom",
        "environment": "prod",
        "window": DAY_28,
        "scheduled_for": FIRE_29,
        "status": Run.Status.SUCCEEDED,
    }
    assert attempt_fields(run_29.attempts.get()) == {
        "execution_id": f"{NEXT_UID}#1",
        "source_number": 1,
        "trigger": "scheduled",
        "status": "succeeded",
        "scheduled_at": FIRE_29,
        "started_at": FIRE_29,
        "ended_at": berlin(2026, 11, 29, 2, 12, 56),
        "error_summary": "",
        "correlation_ref": NEXT_UID,
        "log_url": "",
        "config_version": "export-cfg@41",
    }
    assert complete.attempt == run_29.attempts.get()
    assert events(run_29) == [("attempt_succeeded", berlin(2026, 11, 29, 2, 12, 56), 1)]

    # 05: the CronJob is the job definition: compared with the target's schedule, agrees, records nothing.
    before = world()
    [cronjob] = assert_accepted(k8s.post("05-cronjob.json"))
    assert (cronjob.kind, cronjob.run, cronjob.attempt) == ("definition", None, None)
    details = cronjob.fields["details"]
    assert (details["uid"], details["schedule"], details["timeZone"]) == (
        "0f6c2b9e-4a7d-4e13-9b58-c1d2e3f4a5b6",
        "0 2 * * *",
        "Europe/Berlin",
    )
    assert (details["concurrencyPolicy"], details["startingDeadlineSeconds"]) == ("Forbid", 600)
    assert details["lastSuccessfulTime"] == "2026-11-29T01:12:56Z"
    assert world()[:3] == before[:3] and not TimelineEvent.objects.filter(run__isnull=True).exists()

    # 91: unregistered job and a transliterated tenant label: both reasons, with the alias hint.
    before = world()
    alert = assert_unmatched(
        k8s.post("91-no-timezone-utc-deadline-exceeded.json"),
        "job 'rechnungsexport' is not registered",
        "tenant 'cafe-lumiere-muenchen' is not available to this integration key",
        "`tenant_aliases`",
    )
    fields = alert.fields
    assert fields["scheduled_for"] == "2026-11-28T02:00:00+00:00"  # 03:00 Berlin: the CronJob has no timeZone
    assert fields["details"]["name_suffix_time"] == "2026-11-28T02:00:00+00:00"
    assert (fields["execution_id"], fields["status"]) == ("2e9a4c6f-8b1d-4f37-a0c5-6e8d2b4f1a97#1", "timed_out")
    assert (fields["started_at"], fields["ended_at"]) == ("2026-11-28T02:00:00+00:00", "2026-11-28T02:30:31+00:00")
    assert fields["details"]["display_name"] == "Nächtlicher Rechnungsexport – Café Lumière"
    assert (fields["details"]["reason"], fields["details"]["activeDeadlineSeconds"]) == ("DeadlineExceeded", 1800)
    assert world()[:3] == before[:3]

    # 92: a watch ERROR is not a Job: unmatched, telling the forwarder to re-list.
    alert = assert_unmatched(
        k8s.post("92-watch-error-event.json"),
        "re-list Jobs",
        "after resourceVersion 48213377 may have been missed",
        absent=("tenant", "no job key"),
    )
    assert alert.fields["details"]["code"] == 410

    # 93: a manual Job has no scheduled time: no window, and a manual run outside the approval process.
    alert = assert_unmatched(
        k8s.post("93-manual-job-pod-failure-policy.json"),
        "no window",
        "a manual run, outside the approval process: no replay key",
        absent=("not registered", "not available"),
    )
    fields = alert.fields
    assert (fields["job_key"], fields["tenant"], fields["environment"]) == (
        "nightly-invoice-export",
        "ironbridge-telecom",
        "prod",
    )
    assert (fields["execution_id"], fields["trigger"], fields["status"]) == (
        "5d1f3b7e-9a2c-4e68-b4d0-7f9e1c3a5b82#1",
        "manual_rerun",
        "failed",
    )
    assert (fields["started_at"], fields["ended_at"]) == ("2026-11-28T09:12:44+00:00", "2026-11-28T09:13:30+00:00")
    assert fields["error_summary"] == (
        "PodFailurePolicy: Container export for pod ironbridge-telecom-prod/nightly-invoice-export-manual-7xk2p-8zq4d "
        "failed with exit code 42 matching FailJob rule at index 0"
    )
    assert Run.objects.count() == 2 and Attempt.objects.count() == 3


def test_kubernetes_cronjob_that_disagrees_with_the_target_writes_one_job_level_event(story: StoryFactory) -> None:
    k8s = story("kubernetes")
    JobTarget.objects.filter(tenant__slug="ironbridge-telecom").update(schedule_override="30 1 * * *")

    response = k8s.post("05-cronjob.json")

    assert response.status_code == 202
    [alert] = alerts_of(response)
    assert (alert.outcome, alert.run, alert.attempt) == (Alert.Outcome.ACCEPTED, None, None)
    assert alert.reason == "schedule '0 2 * * *' (registered '30 1 * * *')"
    event = TimelineEvent.objects.get()
    assert (event.kind, event.job.key, event.tenant.slug, event.run, event.attempt, event.alert) == (
        "definition_mismatch",
        "nightly-invoice-export",
        "ironbridge-telecom",
        None,
        None,
        alert,
    )
    assert event.occurred_at == RECEIVED


def test_kubernetes_transliterated_tenant_matches_after_an_alias_and_reprocessing(story: StoryFactory) -> None:
    k8s = story("kubernetes")
    [alert] = alerts_of(k8s.post("91-no-timezone-utc-deadline-exceeded.json"))
    assert alert.outcome == Alert.Outcome.UNMATCHED

    # The admin registers the job as the cluster runs it (no timeZone: UTC), binds the key to the
    # tenant and maps the ASCII label to the slug on the integration.
    job_get_or_create(
        key="rechnungsexport", defaults={"schedule": "0 2 * * *", "timezone": "UTC", "window_alignment": "day"}
    )
    k8s.key_record.tenants.add(Tenant.objects.get(slug=UNICODE_TENANT))
    Integration.objects.filter(name="kubernetes").update(
        settings={"tenant_aliases": {"cafe-lumiere-muenchen": UNICODE_TENANT}}
    )
    alert = alert_reprocess(alert=Alert.objects.get(pk=alert.pk))

    assert (alert.outcome, alert.reason) == (Alert.Outcome.ACCEPTED, "")
    run = Run.objects.get()
    assert run_fields(run) == {
        "job": "rechnungsexport",
        "tenant": UNICODE_TENANT,
        "environment": "prod",
        "window": (datetime(2026, 11, 27, tzinfo=UTC), datetime(2026, 11, 28, tzinfo=UTC)),
        "scheduled_for": datetime(2026, 11, 28, 2, tzinfo=UTC),
        "status": Run.Status.FAILED,
    }
    assert run.target is None  # no target expects it; the run exists anyway
    assert attempt_fields(run.attempts.get()) == {
        "execution_id": "2e9a4c6f-8b1d-4f37-a0c5-6e8d2b4f1a97#1",
        "source_number": 1,
        "trigger": "scheduled",
        "status": "timed_out",
        "scheduled_at": datetime(2026, 11, 28, 2, tzinfo=UTC),
        "started_at": datetime(2026, 11, 28, 2, tzinfo=UTC),
        "ended_at": datetime(2026, 11, 28, 2, 30, 31, tzinfo=UTC),
        "error_summary": "DeadlineExceeded: Job was active longer than specified deadline",
        "correlation_ref": "2e9a4c6f-8b1d-4f37-a0c5-6e8d2b4f1a97",
        "log_url": "",
        "config_version": "export-cfg@41",
    }
    assert events(run) == [("attempt_timed_out", datetime(2026, 11, 28, 2, 30, 31, tzinfo=UTC), 1)]


# --- all seven stories in one database, as the demo loads them -------------------------------------

# Per source, after one round: (deliveries, rejected deliveries, alerts by outcome).
ROUND_ONE = {
    "generic": (9, 2, {"accepted": 7, "duplicate": 1, "unmatched": 1}),
    "alertmanager": (7, 1, {"accepted": 4, "duplicate": 3, "unmatched": 2}),
    "grafana": (7, 1, {"accepted": 3, "duplicate": 1, "unmatched": 2}),
    "eventbridge-scheduler": (7, 0, {"accepted": 3, "duplicate": 2, "unmatched": 1}),
    "airflow": (8, 0, {"accepted": 6, "duplicate": 1, "unmatched": 1}),
    "pagerduty": (7, 1, {"accepted": 4, "duplicate": 1, "unmatched": 1}),
    "kubernetes": (8, 0, {"accepted": 4, "duplicate": 1, "unmatched": 3}),
}
# Per tenant: (runs, attempts, timeline events).
TENANT_TOTALS = {
    "acme-foods": (2, 4, 5),
    "borealis-retail": (1, 1, 2),
    "cedar-health": (1, 1, 1),
    "dunmore-pharmacy": (1, 2, 4),
    "elmwood-books": (1, 2, 3),
    "fjord-freight": (3, 3, 6),
    "glenrock-energy": (3, 5, 8),
    "harbor-dental": (1, 2, 4),
    "ironbridge-telecom": (2, 3, 4),
}


def _post_every_story(stories: dict[str, Story]) -> list[tuple[str, str, int, list[str]]]:
    """Post every folder in order; returns (source, file, status, alert outcomes) per post."""
    results = []
    for source in SOURCES:
        for path in fixture_files(source):
            response = stories[source].post(path.name)
            outcomes = [a.outcome for a in alerts_of(response)]
            results.append((source, path.name, response.status_code, outcomes))
    return results


def _outcome_counts(source: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for outcome in Alert.objects.filter(source=source).values_list("outcome", flat=True):
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts


def test_all_seven_stories_load_side_by_side_and_a_second_round_changes_nothing(story: StoryFactory) -> None:
    stories = {source: story(source) for source in SOURCES}

    first_round = _post_every_story(stories)

    assert [r for r in first_round if r[2] >= 500] == []
    assert [r[:3] for r in first_round if r[2] >= 400] == [
        ("generic", "91-naive-timestamp.json", 400),
        ("generic", "92-missing-job.json", 400),
        ("alertmanager", "93-truncated-body.json", 400),
        ("grafana", "93-custom-payload-template.json", 400),
        ("pagerduty", "93-oversized-unicode.json", 400),
    ]
    for source, (deliveries, rejected, outcomes) in ROUND_ONE.items():
        assert Delivery.objects.filter(integration__source=source).count() == deliveries, source
        assert Delivery.objects.filter(integration__source=source, outcome="rejected").count() == rejected, source
        assert _outcome_counts(source) == outcomes, source
    assert (Run.objects.count(), Attempt.objects.count(), TimelineEvent.objects.count()) == (15, 23, 37)
    for slug, totals in TENANT_TOTALS.items():
        found = (
            Run.objects.filter(tenant__slug=slug).count(),
            Attempt.objects.filter(run__tenant__slug=slug).count(),
            TimelineEvent.objects.filter(tenant__slug=slug).count(),
        )
        assert found == totals, slug
    assert set(Run.objects.values_list("job__key", flat=True)) == {"nightly-invoice-export"}
    # Each story's first night failed and stayed failed; the next night succeeded where the format says so.
    assert {
        (r.tenant.slug, r.status)
        for r in Run.objects.filter(window_start=DAY_28[0]).select_related("tenant")
        | Run.objects.filter(window_start=AIRFLOW_28[0]).select_related("tenant")
    } == {
        ("acme-foods", "succeeded"),
        ("fjord-freight", "failed"),
        ("glenrock-energy", "succeeded"),
        ("ironbridge-telecom", "succeeded"),
    }
    counts = (Run.objects.count(), Attempt.objects.count(), TimelineEvent.objects.count())
    originals = world()[3]

    second_round = _post_every_story(stories)

    assert [r[2] for r in second_round] == [r[2] for r in first_round]  # the same answers, 400s included
    outcomes = [o for r in second_round for o in r[3]]
    assert outcomes and set(outcomes) == {Alert.Outcome.DUPLICATE}  # no `accepted`, nothing unmatched twice
    assert (Run.objects.count(), Attempt.objects.count(), TimelineEvent.objects.count()) == counts
    assert world()[3] == originals
    assert Alert.objects.filter(duplicate_of__isnull=True).exclude(outcome="duplicate").count() == 42
    unmatched = Alert.objects.filter(outcome=Alert.Outcome.UNMATCHED)
    assert unmatched.count() == 11 and set(unmatched.values_list("repeat_count", flat=True)) == {1}


# --- the integration page -------------------------------------------------------------------------


def test_integration_page_shows_settings_key_prefixes_with_last_use_and_recent_deliveries(
    story: StoryFactory, client: Client
) -> None:
    am = story("alertmanager")
    am.post("01-first-failure.json", at=datetime(2026, 11, 28, 1, 20, 16, tzinfo=UTC))
    am.post("93-truncated-body.json", at=datetime(2026, 11, 28, 1, 21, tzinfo=UTC))
    integration = Integration.objects.get(name="alertmanager")
    client.force_login(UserFactory(admin=True))

    page = client.get(f"/integrations/{integration.public_id}/")

    assert page.status_code == 200
    html = page.content.decode()
    # settings in force: the source defaults the STORY describes
    assert "job_from" in html and "labels.job_name" in html and "tenant_from" in html and "labels.tenant" in html
    # key prefix and its last use (the latest post), tenants it is bound to
    key = am.key_record
    assert f"<code>{key.prefix}…</code>" in html
    assert 'datetime="2026-11-28T01:21:00+00:00"' in html
    assert "dunmore-pharmacy" in html and UNICODE_TENANT in html
    assert am.key not in html
    # recent deliveries, newest first, with outcome, answer and reason
    assert html.index("badge-rejected") < html.index("badge-processed")
    assert ">400<" in html and ">202<" in html
    assert "the body is not valid JSON" in html
    assert "1605 B" in html


def test_integration_page_is_for_staff_only(story: StoryFactory, client: Client) -> None:
    story("alertmanager")
    integration = Integration.objects.get(name="alertmanager")
    url = f"/integrations/{integration.public_id}/"

    assert client.get(url).status_code == 302  # anonymous: to the login page
    client.force_login(UserFactory())
    response = client.get(url)
    assert response.status_code == 302 and "login" in response["Location"]

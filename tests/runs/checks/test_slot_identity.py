"""Run identity on real schedulers and monitors, through the generic format, Alertmanager and Grafana:
the missed-run sweep and next-run checks on the slot rules, alert instances (HA peers, stale firings,
re-fires), duplicates that change details or repair an unmatched original, durations over the interval,
made-up windows and repeated source attempt numbers. Each test names the public report it comes from."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.test import Client

from handover.handovers.attention import attention_sections
from runs.alerts.models import Alert
from runs.attempts.corrections import run_refire_explain
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Job, JobTarget
from runs.checks.missed_runs import run_sweep_missed
from runs.checks.models import NextRunCheck
from runs.checks.scheduling import next_run_check_schedule
from runs.checks.slot_review import duration_warnings, fabricated_window_runs, unexplained_refires
from runs.checks.sweep import next_run_check_sweep
from runs.timeline.models import TimelineEvent
from tests.factories import JobTargetFactory, TenantFactory, UserFactory
from tests.runs.custom_support import admin_api

pytestmark = pytest.mark.django_db

BERLIN = ZoneInfo("Europe/Berlin")


def berlin(*args: int) -> datetime:
    return datetime(*args, tzinfo=BERLIN)  # type: ignore[misc]


def iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


@pytest.fixture
def target(story_job: Job) -> JobTarget:
    return JobTargetFactory(job=story_job, tenant=TenantFactory(slug="harbor"), created_at=berlin(2026, 11, 1))


@pytest.fixture
def send(target: JobTarget, make_key: Any, post_alert: Any) -> Any:
    """``send(source, body, at)`` -> the response's alerts; one key per source, bound to the tenant."""
    keys: dict[str, str] = {}

    def _send(source: str, body: dict[str, Any], at: datetime) -> list[dict[str, Any]]:
        if source not in keys:
            keys[source] = make_key(source, tenants=[target.tenant])
        with time_machine.travel(at, tick=False):
            response = post_alert(source, body, keys[source])
        assert response.status_code == 202, response.content
        return response.json()["alerts"]

    return _send


def generic(**fields: Any) -> dict[str, Any]:
    body = {"schema": "handover.alert/v1", "job": "nightly-invoice-export", "tenant": "harbor", "environment": "prod"}
    body.update({k: iso(v) if isinstance(v, datetime) else v for k, v in fields.items()})
    return body


def am_alert(fp: str, starts: str, *, status: str = "firing", **annotations: Any) -> dict[str, Any]:
    labels = {"alertname": "JobFailed", "job_name": "nightly-invoice-export", "tenant": "harbor", "env": "prod"}
    labels["execution_id"] = annotations.pop("execution_id", "exp-1")
    if annotations.pop("no_tenant", False):
        labels.pop("tenant")
    return {
        "status": status,
        "labels": labels,
        "annotations": {k: iso(v) if isinstance(v, datetime) else v for k, v in annotations.items()},
        "startsAt": starts,
        "endsAt": "0001-01-01T00:00:00Z" if status == "firing" else "2026-11-28T03:00:00Z",
        "generatorURL": "",
        "fingerprint": fp,
    }


def am_body(*alerts: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": "4",
        "status": alerts[0]["status"],
        "receiver": "handover",
        "groupKey": "{}",
        "alerts": list(alerts),
    }


def gf_alert(fp: str, starts: str, *, count: int = 1, status: str = "firing", **extra: Any) -> dict[str, Any]:
    alert = am_alert(fp, starts, status=status, **extra)
    alert["labels"].pop("execution_id")
    alert["values"] = {"A": count} if status == "firing" else {"A": 0}
    return alert


def gf_body(*alerts: dict[str, Any]) -> dict[str, Any]:
    return {**am_body(*alerts), "version": "1", "orgId": 1}


# --- item 1: the missed-run sweep and next-run checks place by the slot rules ----------------------


@pytest.mark.parametrize(
    ("source", "body"),
    [
        ("generic", generic(scheduled_for=berlin(2026, 11, 28, 1, 59, 59), execution_id="e1", status="succeeded")),
        (
            "alertmanager",
            am_body(am_alert("a1", "2026-11-28T01:05:00Z", scheduled_for=berlin(2026, 11, 28, 1, 59, 59))),
        ),
        ("grafana", gf_body(gf_alert("g1", iso(berlin(2026, 11, 28, 2, 0, 30))))),
    ],
)
def test_an_early_report_covers_its_real_slot_which_the_sweep_never_marks_missed(
    target: JobTarget, send: Any, source: str, body: dict[str, Any]
) -> None:
    """https://github.com/healthchecks/healthchecks/issues/830 — a job scheduled 22:51 sent its OK a
    second early; the monitor put it on the previous period and reported the real run missing. Here a
    report at 01:59:59 (or Grafana's startsAt 02:00:30) is the 02:00 slot of the 28th: the sweep on
    the 29th walks the 28th and the 29th and finds only the 29th missed."""
    send(source, body, berlin(2026, 11, 28, 3))
    assert Run.objects.get().scheduled_for == berlin(2026, 11, 28, 2)
    JobTarget.objects.filter(pk=target.pk).update(created_at=berlin(2026, 11, 26, 12))
    with time_machine.travel(berlin(2026, 11, 29, 3), tick=False):
        created = run_sweep_missed()
    missed = list(Run.objects.filter(status=Run.Status.MISSED).order_by("scheduled_for"))
    assert created == 1
    assert [r.scheduled_for for r in missed] == [berlin(2026, 11, 29, 2)]


def test_a_run_stored_with_a_made_up_window_covers_its_slot_and_is_listed_for_a_person(target: JobTarget) -> None:
    """The issue's own report: before slot placement, a scheduled time a second early made a run whose
    window *ends* at that time. The sweep places that stored time on its slot (02:00 is not missed),
    and the run is listed in *needs attention* with the slot it belongs to, not merged silently."""
    early = berlin(2026, 11, 28, 1, 59, 59)
    legacy = Run.objects.create(
        job=target.job,
        tenant=target.tenant,
        environment="prod",
        target=target,
        window_start=berlin(2026, 11, 28, 1, 59, 42),  # a 17-second window
        window_end=early,
        scheduled_for=early,
        status=Run.Status.SUCCEEDED,
    )
    JobTarget.objects.filter(pk=target.pk).update(created_at=berlin(2026, 11, 27, 12))
    now = berlin(2026, 11, 28, 12)
    with time_machine.travel(now, tick=False):
        assert run_sweep_missed() == 0
    listed = fabricated_window_runs(runs=Run.objects.all(), now=now)
    assert [(item.run, item.slot) for item in listed] == [(legacy, berlin(2026, 11, 28, 2))]
    sections = attention_sections(user=UserFactory(admin=True), now=now)
    assert [i.url for i in sections["run_identity"]] == [f"/runs/{legacy.public_id}/"]
    assert "its slot is 2026-11-28 01:00Z" in sections["run_identity"][0].detail


def test_made_up_windows_are_listed_newest_first_across_targets_among_runs_on_their_slots(target: JobTarget) -> None:
    """Two targets of one job (their slots at the same times), runs on their slots and two runs with a
    made-up window: only those two are listed, newest first, each whole and with its slot; ``limit``
    stops the scan."""
    other = JobTargetFactory(job=target.job, tenant=TenantFactory(slug="fjord"), created_at=berlin(2026, 11, 1))

    def run(on: JobTarget, start: datetime, end: datetime) -> Run:
        return Run.objects.create(
            job=on.job,
            tenant=on.tenant,
            environment="prod",
            target=on,
            window_start=start,
            window_end=end,
            scheduled_for=end,
            status=Run.Status.SUCCEEDED,
        )

    for on in (target, other):
        for day in (26, 27):
            run(on, berlin(2026, 11, day - 1, 2), berlin(2026, 11, day, 2))  # on its slot
    older = run(other, berlin(2026, 11, 25, 1, 59, 30), berlin(2026, 11, 25, 1, 59, 59))
    newer = run(target, berlin(2026, 11, 27, 1, 59, 30), berlin(2026, 11, 27, 1, 59, 59))
    now = berlin(2026, 11, 28, 12)

    listed = fabricated_window_runs(runs=Run.objects.all(), now=now)

    assert [(item.run, item.slot) for item in listed] == [
        (newer, berlin(2026, 11, 27, 2)),
        (older, berlin(2026, 11, 25, 2)),
    ]
    assert [(item.run.job.key, item.run.tenant.slug) for item in listed] == [
        (target.job.key, "harbor"),
        (target.job.key, "fjord"),
    ]
    assert [item.run for item in fabricated_window_runs(runs=Run.objects.all(), now=now, limit=1)] == [newer]
    assert (
        fabricated_window_runs(runs=Run.objects.filter(tenant=target.tenant, window_end__lt=newer.window_end), now=now)
        == []
    )


@pytest.mark.parametrize("source", ["generic", "alertmanager", "grafana"])
def test_a_check_on_a_slot_skipped_under_latest_only_moves_to_the_slot_that_ran(
    target: JobTarget, send: Any, source: str
) -> None:
    """https://github.com/kubernetes/kubernetes/issues/42649 — a CronJob whose controller was down ran
    only the latest start time once back. Under ``latest_only`` the skipped 29th is folded into a missed
    streak; the next-run check expected on the 29th does not fail at its deadline but moves to the
    30th, which ran (a ``next_run_check_moved`` event), and settles on that run's success."""
    Job.objects.filter(pk=target.job_id).update(missed_run_policy="latest_only")
    target.refresh_from_db()
    with time_machine.travel(berlin(2026, 11, 28, 12), tick=False):
        check, _ = next_run_check_schedule(target=target, after=berlin(2026, 11, 28, 12))
    assert check.expected_at == berlin(2026, 11, 29, 2)
    result = next_run_check_sweep(now=berlin(2026, 11, 29, 2, 45))  # past the deadline, nothing ran
    check.refresh_from_db()
    assert (check.status, result.failed, result.waiting) == (NextRunCheck.Status.SCHEDULED, 0, 1)
    slot = berlin(2026, 11, 30, 2)
    if source == "generic":
        body = generic(scheduled_for=slot, execution_id="e30", status="succeeded", ended_at=slot + timedelta(minutes=9))
    elif source == "alertmanager":  # it reports failures only: the run that ran is the 30th, even if it failed
        body = am_body(am_alert("a30", "2026-11-30T01:20:00Z", execution_id="e30", scheduled_for=slot))
    else:  # Grafana: placed by its detection time (startsAt), the 30th's slot
        body = gf_body(gf_alert("g30", "2026-11-30T01:10:00Z"))
    send(source, body, berlin(2026, 11, 30, 2, 20))
    result = next_run_check_sweep(now=berlin(2026, 11, 30, 2, 25))
    check.refresh_from_db()
    assert result.moved == 1
    assert (check.expected_at, check.deadline_at) == (slot, slot + timedelta(minutes=30))
    moved = TimelineEvent.objects.get(kind="next_run_check_moved")
    assert "2026-11-29 02:00 CET" in moved.summary and "latest_only" in moved.summary
    if source == "generic":
        assert check.evidence_attempt == Attempt.objects.get(execution_id="e30")
    else:
        assert check.evidence_attempt is None and check.status == NextRunCheck.Status.SCHEDULED


# --- item 3: alert instances -----------------------------------------------------------------------


def test_ha_peers_with_different_starts_at_fold_into_one_attempt_alertmanager(target: JobTarget, send: Any) -> None:
    """https://github.com/prometheus/alertmanager/issues/1718 and https://github.com/thanos-io/thanos/issues/861
    — two Prometheus replicas evaluate one rule; each peer's alert carries its own startsAt (here 30 s
    apart), so dedup keys differ. The second is a ``duplicate`` of the first ("same instance; the peer's
    startsAt differs"): one attempt, one ``attempt_failed`` event."""
    slot = berlin(2026, 11, 28, 2)
    first = send("alertmanager", am_body(am_alert("f1", "2026-11-28T01:20:15Z", scheduled_for=slot)), slot)
    peer = send("alertmanager", am_body(am_alert("f1", "2026-11-28T01:20:45Z", scheduled_for=slot)), slot)
    assert first[0]["outcome"] == "accepted"
    assert peer[0]["outcome"] == "duplicate" and "the peer's startsAt differs" in peer[0]["reason"]
    assert Attempt.objects.count() == 1
    assert TimelineEvent.objects.filter(kind="attempt_failed").count() == 1
    original = Alert.objects.get(pk=Alert.objects.get(public_id=first[0]["id"]).pk)
    assert original.repeat_count == 1 and Alert.objects.get(public_id=peer[0]["id"]).duplicate_of == original


def test_ha_peers_with_different_starts_at_fold_into_one_attempt_grafana(target: JobTarget, send: Any) -> None:
    """https://github.com/grafana/grafana/pull/92611 — in HA mode every Grafana instance evaluates the
    rule and notifies; the peers' startsAt differ by an evaluation interval. Same count (A=1), so the
    same inferred execution: one attempt, the peer a duplicate."""
    at = berlin(2026, 11, 28, 2, 30)
    send("grafana", gf_body(gf_alert("g1", "2026-11-28T01:20:00Z")), at)
    peer = send("grafana", gf_body(gf_alert("g1", "2026-11-28T01:20:10Z")), at)
    assert peer[0]["outcome"] == "duplicate" and "the peer's startsAt differs" in peer[0]["reason"]
    assert Attempt.objects.count() == 1


def test_a_firing_sent_again_after_its_resolve_is_stale_and_changes_nothing(target: JobTarget, send: Any) -> None:
    """https://github.com/prometheus/alertmanager/issues/2447 — after the resolve notification, other
    cluster nodes re-sent the same firing alert (same startsAt). It is a duplicate marked stale: no new
    attempt, no details change even though its text differs, no re-fire."""
    slot = berlin(2026, 11, 28, 2)
    starts = "2026-11-28T01:20:15Z"
    send("alertmanager", am_body(am_alert("f1", starts, scheduled_for=slot, error="first")), slot)
    send("alertmanager", am_body(am_alert("f1", starts, status="resolved", scheduled_for=slot)), slot)
    again = send("alertmanager", am_body(am_alert("f1", starts, scheduled_for=slot, error="changed")), slot)
    assert again[0]["outcome"] == "duplicate"
    assert Alert.objects.get(public_id=again[0]["id"]).is_stale is True
    assert Attempt.objects.get().error_summary == "first"
    assert not TimelineEvent.objects.filter(kind__in=["refire", "attempt_details_changed"]).exists()


def test_a_refire_on_the_execution_the_payload_names_is_flagged_until_a_person_explains_it(
    target: JobTarget, send: Any
) -> None:
    """https://github.com/OpsiMate/OpsiMate/pull/739 — a source fired again after a resolve; a claimed
    start after the resolve is a genuine new episode, yet it was folded into the old one silently.
    Alertmanager names the execution in a label, so the re-fire belongs to that attempt: a ``refire``
    event, the run listed in needs attention until a person explains it."""
    slot = berlin(2026, 11, 28, 2)
    send("alertmanager", am_body(am_alert("f1", "2026-11-28T01:20:15Z", scheduled_for=slot)), slot)
    send("alertmanager", am_body(am_alert("f1", "2026-11-28T01:20:15Z", status="resolved", scheduled_for=slot)), slot)
    refire = send("alertmanager", am_body(am_alert("f1", "2026-11-28T02:40:00Z", scheduled_for=slot)), slot)
    run = Run.objects.get()
    assert refire[0]["outcome"] == "accepted" and Attempt.objects.count() == 1
    event = TimelineEvent.objects.get(kind="refire")
    assert event.data["same_attempt"] is True and "a person must explain it" in event.summary
    assert list(unexplained_refires(Run.objects.all())) == [run]
    support = UserFactory(admin=True)
    assert [i.url for i in attention_sections(user=support, now=slot)["run_identity"]] == [f"/runs/{run.public_id}/"]
    run_refire_explain(run=run, actor=support, reason="flapping exporter", evidence_ref="OPS-7")
    assert not unexplained_refires(Run.objects.all()).exists()


def test_a_refire_with_an_adapter_derived_id_is_a_new_attempt(target: JobTarget, send: Any) -> None:
    """https://github.com/OpsiMate/OpsiMate/pull/739 (as above), through Grafana, whose execution id is
    derived (``<fingerprint>#<count>``): the re-fired instance (A=1 again) is a new attempt
    ``<fingerprint>#<startsAt>`` on the same slot with a ``refire`` event, not merged into attempt 1."""
    at = berlin(2026, 11, 28, 2, 30)
    send("grafana", gf_body(gf_alert("g1", "2026-11-28T01:20:00Z")), at)
    send("grafana", gf_body(gf_alert("g1", "2026-11-28T01:20:00Z", status="resolved")), at)
    send("grafana", gf_body(gf_alert("g1", "2026-11-28T01:50:00Z")), at + timedelta(minutes=25))
    rows = list(Attempt.objects.order_by("number").values_list("number", "execution_id"))
    assert rows == [(1, "g1#1"), (2, "g1#2026-11-28T01:50:00Z")]
    assert TimelineEvent.objects.get(kind="refire").data["same_attempt"] is False
    assert not unexplained_refires(Run.objects.all()).exists()


@pytest.mark.parametrize("source", ["generic", "alertmanager"])
def test_a_duplicate_whose_details_changed_is_kept_as_an_event(target: JobTarget, send: Any, source: str) -> None:
    """https://github.com/prometheus/alertmanager/issues/534 — a rule's annotation changed while the
    alert fired; the re-sent alert (same fingerprint, startsAt and state: the same dedup key) carries
    the new text. It stays a duplicate, and its new error is a ``attempt_details_changed`` event."""
    slot = berlin(2026, 11, 28, 2)
    for error in ("timeout", "timeout after 3 retries"):
        if source == "generic":
            body = generic(scheduled_for=slot, execution_id="e1", status="failed", error=error, dedup_key="k1")
        else:
            body = am_body(am_alert("f1", "2026-11-28T01:20:15Z", scheduled_for=slot, error=error))
        outcome = send(source, body, slot)[0]["outcome"]
    assert outcome == "duplicate"
    attempt = Attempt.objects.get()
    assert attempt.error_summary == "timeout after 3 retries"
    event = TimelineEvent.objects.get(kind="attempt_details_changed")
    assert event.alert is not None and event.alert.outcome == "duplicate"


@pytest.mark.parametrize("source", ["generic", "alertmanager", "grafana"])
def test_a_corrected_redelivery_repairs_its_unmatched_original(target: JobTarget, send: Any, source: str) -> None:
    """https://github.com/prometheus/alertmanager/issues/534 (the rule's labels fixed, the alert re-sent
    under the same fingerprint and startsAt): the first body lacked the tenant, so it was unmatched; the
    corrected one has the same dedup key. The original is applied again from the newer body (one attempt),
    the redelivery points at it, and reprocessing the duplicate answers 200, not 409."""
    slot = berlin(2026, 11, 28, 2)

    def body(tenant: bool) -> dict[str, Any]:
        if source == "generic":
            return generic(
                tenant="harbor" if tenant else "nobody",
                scheduled_for=slot,
                execution_id="e1",
                status="failed",
                dedup_key="k1",
            )
        if source == "grafana":
            return gf_body(gf_alert("g1", "2026-11-28T01:20:15Z", no_tenant=not tenant))
        return am_body(am_alert("f1", "2026-11-28T01:20:15Z", scheduled_for=slot, no_tenant=not tenant))

    first = send(source, body(False), slot + timedelta(hours=1))[0]
    assert first["outcome"] == "unmatched"
    again = send(source, body(True), slot + timedelta(hours=1, minutes=5))[0]
    original = Alert.objects.get(public_id=first["id"])
    assert again["outcome"] == "duplicate" and original.outcome == "accepted"
    attempt = Attempt.objects.get()
    assert original.attempt == attempt and Alert.objects.get(public_id=again["id"]).attempt == attempt
    api = admin_api()
    response = api.post(f"/api/v1/alerts/{again['id']}/reprocess/", content_type="application/json")
    assert response.status_code == 409  # the original is applied now: nothing left to reprocess
    Alert.objects.filter(pk=original.pk).update(outcome="unmatched", attempt=None, run=None)
    response = api.post(f"/api/v1/alerts/{again['id']}/reprocess/", content_type="application/json")
    assert response.status_code == 200, response.content
    assert Alert.objects.get(pk=original.pk).outcome == "accepted" and Attempt.objects.count() == 1


# --- item 4: durations over the interval ------------------------------------------------------------


@pytest.mark.parametrize("source", ["generic", "alertmanager"])
def test_runs_that_outlast_the_interval_are_warned_about(
    target: JobTarget, send: Any, source: str, api_client: Client
) -> None:
    """https://github.com/pelican/panel/pull/1012 — a `* * * * *` job took longer than its minute, so
    supercronic warned "job took too long to run" and the job effectively ran every 2 minutes. Here an
    hourly job whose runs last 70 and 65 minutes: "2 of the last 2 runs lasted longer than the interval"
    on the run page, the job page and in needs attention."""
    Job.objects.filter(pk=target.job_id).update(schedule="0 * * * *", timezone="UTC", window_alignment="none")
    for hour, minutes in ((1, 70), (2, 65)):
        slot = datetime(2026, 11, 28, hour, tzinfo=UTC)
        times = {"scheduled_for": slot, "started_at": slot, "ended_at": slot + timedelta(minutes=minutes)}
        if source == "generic":
            body = generic(execution_id=f"e{hour}", status="failed", **times)
        else:
            body = am_body(
                am_alert(f"f{hour}", iso(slot + timedelta(minutes=minutes)), execution_id=f"e{hour}", **times)
            )
        send(source, body, slot + timedelta(minutes=minutes + 1))
    now = datetime(2026, 11, 28, 4, tzinfo=UTC)
    (warning,) = duration_warnings(runs=Run.objects.all(), now=now)
    assert (warning.over, warning.of, warning.longest_seconds, warning.interval_seconds) == (2, 2, 4200, 3600)
    assert "longest 1 hour 10 minutes, interval 1 hour" in warning.text
    admin = UserFactory(admin=True)
    assert [i.title for i in attention_sections(user=admin, now=now)["outlasting_runs"]] == [
        "nightly-invoice-export · prod"
    ]
    api_client.force_login(admin)
    with time_machine.travel(now, tick=False):
        page = api_client.get(f"/runs/{Run.objects.order_by('scheduled_for').first().public_id}/")  # type: ignore[union-attr]
        job_page = api_client.get(f"/jobs/{target.job.public_id}/")
    assert "2 of the last 2 runs lasted longer than the interval" in page.content.decode()
    assert "2 of the last 2 runs lasted longer than the interval" in job_page.content.decode()


# --- item 6: one source attempt number, two executions ---------------------------------------------


@pytest.mark.parametrize("source", ["generic", "alertmanager"])
def test_two_executions_reporting_one_source_attempt_number_are_flagged(
    target: JobTarget, send: Any, source: str, api_client: Client
) -> None:
    """https://github.com/apache/airflow/pull/1939 ([AIRFLOW-679]) — two processes ran one task
    instance concurrently, both as the same try. Two executions of one slot that report source attempt
    number 1 each: Handover numbers them 1 and 2, and the second carries a ``source_number_repeated``
    event; the run page flags both."""
    slot = berlin(2026, 11, 28, 2)
    for n, execution in enumerate(("p1", "p2")):
        start = slot + timedelta(seconds=5 + n)
        if source == "generic":
            body = generic(scheduled_for=slot, started_at=start, execution_id=execution, status="running", attempt=1)
        else:
            body = am_body(
                am_alert(f"f{n}", iso(start), execution_id=execution, scheduled_for=slot, started_at=start, attempt="1")
            )
        send(source, body, slot + timedelta(minutes=1))
    rows = list(Attempt.objects.order_by("number").values_list("number", "source_number"))
    assert rows == [(1, 1), (2, 1)]
    event = TimelineEvent.objects.get(kind="source_number_repeated")
    assert event.attempt == Attempt.objects.get(number=2) and event.data["attempts"] == [1]
    api_client.force_login(UserFactory(admin=True))
    page = api_client.get(f"/runs/{Run.objects.get().public_id}/").content.decode()
    assert page.count("also reported by attempt") == 2

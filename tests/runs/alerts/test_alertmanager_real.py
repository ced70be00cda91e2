"""A real Prometheus Alertmanager (Debian's ``prometheus-alertmanager``, 0.25) posting to the product.

Alertmanager runs on loopback with the configuration of docs/integrations/alertmanager.md (its YAML
block read from the guide, only the address, the key file and the intervals changed so the test
finishes in seconds), first alone, then as an HA pair peered with ``--cluster.peer``. Alerts are added
with ``amtool`` carrying the labels and annotations the guide documents: a first failure, its
repeat, a group of several, its resolve, a corrected rule (same fingerprint and ``startsAt``, changed
annotations, which repairs the ``unmatched`` original), a wrong key, and one execution reported by
both peers with different ``startsAt``. The product's records (deliveries, alert outcomes, runs,
attempts, refused-request counters) are then checked against Alertmanager's own notification
counters (``/metrics``).

Slow suite, PostgreSQL only (the live server and the test share real transactions). Skipped when
the binaries are missing, except in CI (``CI=true``), where ``.ci/run`` installs them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from datetime import time as dtime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import yaml
from django.conf import settings

from runs.alerts.models import Alert, Delivery, RefusedRequestCount
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Integration, Tenant
from runs.catalog.services import (
    integration_get_or_create,
    integration_key_create,
    job_get_or_create,
    job_target_get_or_create,
    tenant_get_or_create,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        "postgresql" not in settings.DATABASES["default"]["ENGINE"],
        reason="the real-client test runs on PostgreSQL (SQLite skips it)",
    ),
]

ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
AMTOOL = shutil.which("amtool")
GUIDE = Path(__file__).resolve().parents[3] / "docs" / "integrations" / "alertmanager.md"
BERLIN = ZoneInfo("Europe/Berlin")
JOB = "am-real-export"
TENANT = "dunmore-pharmacy"
WRONG_KEY_TENANT = "wrong-key-tenant"
WAIT_S = 30.0  # the longest any one step waits for Alertmanager


@pytest.fixture(autouse=True)
def _binaries() -> None:
    if ALERTMANAGER and AMTOOL:
        return
    if os.environ.get("CI") == "true":
        pytest.fail("prometheus-alertmanager is required in CI (.ci/run installs Debian's package)")
    pytest.skip("prometheus-alertmanager and amtool are not installed (apt-get install prometheus-alertmanager)")


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def guide_config(*, url: str, key_file: Path, wrong_key_file: Path) -> dict[str, Any]:
    """The guide's Alertmanager configuration (its first YAML block holding ``webhook_configs``).

    Changed for the test only: the address (the live server), the key file, the intervals (seconds,
    not minutes) and one extra route sending ``tenant=wrong-key-tenant`` with a wrong key.
    """
    blocks = re.findall(r"```yaml\n(.*?)```", GUIDE.read_text(), flags=re.S)
    config = next(yaml.safe_load(block) for block in blocks if "webhook_configs" in block)
    route, [receiver] = config["route"], config["receivers"]
    assert route["group_by"] == ["alertname", "tenant", "env", "job_name"]
    webhook = receiver["webhook_configs"][0]
    assert webhook["http_config"]["authorization"]["type"] == "Bearer"
    assert webhook["send_resolved"] is True
    webhook["url"] = url
    webhook["http_config"]["authorization"]["credentials_file"] = str(key_file)
    route.update(group_wait="1s", group_interval="2s", repeat_interval="3s")
    wrong = json.loads(json.dumps(receiver))
    wrong["name"] = "handover-wrong-key"
    wrong["webhook_configs"][0]["http_config"]["authorization"]["credentials_file"] = str(wrong_key_file)
    config["receivers"].append(wrong)
    route["routes"] = [{"receiver": "handover-wrong-key", "matchers": [f'tenant="{WRONG_KEY_TENANT}"']}]
    return config


class Alertmanager:
    """One ``prometheus-alertmanager`` process on loopback with its own data folder."""

    def __init__(
        self, folder: Path, config: dict[str, Any], *, name: str, peers: tuple[str, ...] = (), cluster: bool = False
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cluster_address = f"127.0.0.1:{free_port()}" if cluster else ""
        data = folder / name
        data.mkdir()
        config_file = data / "alertmanager.yml"
        config_file.write_text(yaml.safe_dump(config))
        command = [
            str(ALERTMANAGER),
            f"--config.file={config_file}",
            f"--storage.path={data}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            f"--web.external-url={self.url}",
            f"--cluster.listen-address={self.cluster_address}",
        ]
        if cluster:
            # a short settle so notifications start at once; a slow gossip so both peers notify (the
            # duplicates an HA pair sends when its gossip lags, which the product must fold)
            command += [
                "--cluster.settle-timeout=1s",
                "--cluster.peer-timeout=100ms",
                "--cluster.gossip-interval=20s",
                "--cluster.pushpull-interval=60s",
                *[f"--cluster.peer={peer}" for peer in peers],
            ]
        self.log = (data / "alertmanager.log").open("wb")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)
        until(lambda: self._ready(), what=f"{name} to answer /-/ready")

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"alertmanager exited with {self.process.returncode}: see {self.log.name}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def add(self, alertname: str, labels: dict[str, str], annotations: dict[str, str], **times: datetime) -> None:
        """``amtool alert add`` with the labels and annotations; ``start``/``end`` as RFC 3339 when given."""
        command = [str(AMTOOL), f"--alertmanager.url={self.url}", "alert", "add", alertname]
        command += [f"{name}={value}" for name, value in labels.items()]
        command += [f"--annotation={name}={value}" for name, value in annotations.items()]
        command += [
            f"--{name}={value.astimezone(UTC).isoformat().replace('+00:00', 'Z')}" for name, value in times.items()
        ]
        subprocess.run(command, check=True, capture_output=True, timeout=10)

    def counters(self) -> dict[str, float]:
        """The webhook integration's notification counters from ``/metrics``."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=5) as answer:
            text = answer.read().decode()
        found = {}
        for name in (
            "alertmanager_notifications_total",
            "alertmanager_notifications_failed_total",
            "alertmanager_notification_requests_total",
            "alertmanager_notification_requests_failed_total",
        ):
            match = re.search(rf'^{name}{{integration="webhook"}} (\S+)$', text, flags=re.M)
            found[name] = float(match.group(1)) if match else 0.0
        return found

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def until(check: Callable[[], Any], *, what: str, timeout: float = WAIT_S) -> Any:
    """Poll ``check`` every 0.1 s until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"waited {timeout:.0f} s for {what}")


def slot(days_ago: int) -> dict[str, str]:
    """The annotations of a daily 02:00 Berlin run whose window is the day ``days_ago`` before today."""
    day = datetime.now(BERLIN).date() - timedelta(days=days_ago)
    start = datetime.combine(day, dtime(0), tzinfo=BERLIN)
    end = datetime.combine(day + timedelta(days=1), dtime(0), tzinfo=BERLIN)
    fire = end.replace(hour=2)
    return {
        "window_start": start.isoformat(),
        "window_end": end.isoformat(),
        "scheduled_for": fire.isoformat(),
        "attempt": "1",
        "started_at": (fire + timedelta(minutes=1)).isoformat(),
        "ended_at": (fire + timedelta(minutes=9)).isoformat(),
    }


def labels(execution_id: str, tenant: str = TENANT) -> dict[str, str]:
    return {"job_name": JOB, "tenant": tenant, "env": "prod", "execution_id": execution_id, "severity": "page"}


def alerts_of(execution_id: str, **filters: Any) -> list[Alert]:
    return list(Alert.objects.filter(execution_id=execution_id, **filters).order_by("created_at", "id"))


def origin(alert: Alert) -> str:
    """The ``externalURL`` of the Alertmanager whose post carried ``alert``."""
    return str(json.loads(alert.delivery.body)["externalURL"])


@pytest.fixture
def world(db: None) -> Iterator[tuple[Integration, str]]:
    """The job, its tenant's target and an ``alertmanager`` integration with a key bound to the tenant."""
    job, _ = job_get_or_create(
        key=JOB,
        defaults={
            "schedule": "0 2 * * *",
            "timezone": "Europe/Berlin",
            "grace_seconds": 1800,
            "window_alignment": "day",
        },
    )
    tenant: Tenant = tenant_get_or_create(slug=TENANT)[0]
    tenant_get_or_create(slug=WRONG_KEY_TENANT)
    job_target_get_or_create(job=job, tenant=tenant, environment="prod")
    integration = integration_get_or_create(source="alertmanager", name="Prometheus (real)")
    yield integration, integration_key_create(integration=integration, tenants=[tenant]).key


def test_real_alertmanager_single_and_ha_pair_match_its_own_counters(
    world: tuple[Integration, str], live_server: Any, tmp_path: Path
) -> None:
    started = time.monotonic()
    integration, key = world
    key_file, wrong_key_file = tmp_path / "handover-key", tmp_path / "wrong-key"
    key_file.write_text(key + "\n")
    wrong_key_file.write_text("hk_" + "0" * 40 + "\n")
    config = guide_config(
        url=f"{live_server.url}/api/v1/alerts/alertmanager/", key_file=key_file, wrong_key_file=wrong_key_file
    )
    managers: list[Alertmanager] = []
    try:
        single = Alertmanager(tmp_path, config, name="single")
        managers.append(single)

        # first failure: one run, attempt 1 failed, the alert accepted
        single.add(
            "BatchJobExecutionFailed", labels("am-1"), {"summary": "export failed", "error": "disk full", **slot(2)}
        )
        [first] = until(lambda: alerts_of("am-1"), what="the first failure")
        assert (first.outcome, first.kind, first.reason) == (Alert.Outcome.ACCEPTED, "attempt", "")
        run = Run.objects.get(pk=first.run_id)
        assert (run.status, run.job.key, run.tenant.slug, run.environment) == (Run.Status.FAILED, JOB, TENANT, "prod")
        attempt = run.attempts.get()
        assert (attempt.execution_id, attempt.number, attempt.status, attempt.error_summary) == (
            "am-1",
            1,
            Attempt.Status.FAILED,
            "disk full",
        )

        # its repeat (repeat_interval): a duplicate that changes nothing
        until(lambda: len(alerts_of("am-1")) >= 2, what="the repeat notification")
        repeat = alerts_of("am-1")[1]
        assert (repeat.outcome, repeat.duplicate_of_id, repeat.attempt_id) == (
            Alert.Outcome.DUPLICATE,
            first.pk,
            attempt.pk,
        )
        assert run.attempts.count() == 1

        # a group of several: one post carrying three alerts, three runs
        for number, days_ago in ((1, 3), (2, 4), (3, 5)):
            single.add("BatchJobGroupFailed", labels(f"am-g{number}"), {"summary": "group", **slot(days_ago)})
        until(lambda: Alert.objects.filter(execution_id__startswith="am-g").count() >= 3, what="the whole group")
        group_delivery = Alert.objects.filter(execution_id="am-g1").earliest("created_at").delivery
        assert sorted(a.execution_id for a in group_delivery.alerts.all()) == ["am-g1", "am-g2", "am-g3"]
        assert {a.outcome for a in group_delivery.alerts.all()} == {Alert.Outcome.ACCEPTED}
        assert Run.objects.filter(job__key=JOB).count() == 4

        # resolve: accepted as a resolve of attempt 1, never a success
        single.add(
            "BatchJobExecutionFailed",
            labels("am-1"),
            {"summary": "export failed", "error": "disk full", **slot(2)},
            end=datetime.now(UTC),
        )
        [resolve] = until(lambda: alerts_of("am-1", kind="resolve"), what="the resolve")[:1]
        assert (resolve.outcome, resolve.attempt_id) == (Alert.Outcome.ACCEPTED, attempt.pk)
        assert run.timeline.filter(kind="resolved").count() == 1
        run.refresh_from_db()
        attempt.refresh_from_db()
        assert (run.status, attempt.status) == (Run.Status.FAILED, Attempt.Status.FAILED)

        # a corrected rule: the first version's window annotation is a date, so the alert is unmatched;
        # the fixed rule sends the same fingerprint and startsAt with corrected annotations
        fixed_start = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=5)
        broken = {**slot(6), "window_start": slot(6)["window_start"][:10], "summary": "fix me"}
        single.add("BatchJobFixedRule", labels("am-fix"), broken, start=fixed_start)
        [original] = until(lambda: alerts_of("am-fix"), what="the broken rule's alert")
        assert original.outcome == Alert.Outcome.UNMATCHED and "window_start" in original.reason
        single.add("BatchJobFixedRule", labels("am-fix"), {**slot(6), "summary": "fixed"}, start=fixed_start)

        def repaired() -> Alert | None:
            original.refresh_from_db()
            return original if original.outcome == Alert.Outcome.ACCEPTED else None

        until(repaired, what="the corrected alert to repair the unmatched original")
        assert original.attempt is not None and original.attempt.execution_id == "am-fix"
        correction = Alert.objects.filter(duplicate_of=original, attempt=original.attempt).first()
        assert correction is not None and "applied again from this newer body" in correction.reason

        # a wrong key: refused (401), counted per source, nothing stored; retried every group_interval
        single.add("BatchJobExecutionFailed", labels("am-wrong", tenant=WRONG_KEY_TENANT), slot(2))
        until(lambda: single.counters()["alertmanager_notification_requests_failed_total"] >= 2, what="two refusals")
        assert not alerts_of("am-wrong")

        # an HA pair: both peers are sent the same alert (as Prometheus does), each with its own startsAt
        peer_a = Alertmanager(tmp_path, config, name="peer-a", cluster=True)
        managers.append(peer_a)
        peer_b = Alertmanager(tmp_path, config, name="peer-b", cluster=True, peers=(peer_a.cluster_address,))
        managers.append(peer_b)
        ha = {"summary": "ha", "error": "lost the lock", **slot(7)}
        peer_a.add("BatchJobHaFailed", labels("am-ha"), ha)
        time.sleep(1.1)  # so peer b's startsAt differs
        peer_b.add("BatchJobHaFailed", labels("am-ha"), ha)
        until(lambda: {origin(a) for a in alerts_of("am-ha")} == {peer_a.url, peer_b.url}, what="both peers")
        ha_alerts = alerts_of("am-ha")
        starts = {a.fields["details"]["starts_at"] for a in ha_alerts}
        assert len(starts) == 2, "the peers' startsAt differ"
        assert [a.outcome for a in ha_alerts if a.duplicate_of_id is None].count(Alert.Outcome.ACCEPTED) == 1
        assert Attempt.objects.filter(execution_id="am-ha").count() == 1
        folded = [
            a for a in ha_alerts if a.fields["details"]["starts_at"] != ha_alerts[0].fields["details"]["starts_at"]
        ]
        assert folded and {a.outcome for a in folded} == {Alert.Outcome.DUPLICATE}

        # the product's records against Alertmanager's own counters, read between two equal readings
        def settled() -> tuple[dict[str, float], int, int] | None:
            before = [m.counters() for m in managers]
            stored = Delivery.objects.filter(integration=integration).count()
            refused = sum(
                RefusedRequestCount.objects.filter(
                    source="alertmanager", reason=RefusedRequestCount.Reason.WRONG_KEY
                ).values_list("count", flat=True)
            )
            after = [m.counters() for m in managers]
            if before != after:
                return None
            total = {name: sum(c[name] for c in after) for name in after[0]}
            return total, stored, refused

        def agree() -> tuple[dict[str, float], int, int] | None:
            reading = settled()
            if reading is None:
                return None
            total, stored, refused = reading
            sent = total["alertmanager_notifications_total"] - total["alertmanager_notifications_failed_total"]
            return (
                reading
                if stored == sent and refused == total["alertmanager_notification_requests_failed_total"]
                else None
            )

        total, stored, refused = until(agree, what="the product's records to match Alertmanager's counters")
        # no 5xx: every failed notification was one refused request (401 is not retried within a notify)
        assert total["alertmanager_notifications_failed_total"] == refused
        assert total["alertmanager_notification_requests_total"] == stored + refused
        assert stored >= 8 and refused >= 2
        assert not Delivery.objects.filter(integration=integration).exclude(outcome=Delivery.Outcome.PROCESSED).exists()
        # every stored post was answered 202, as the guide says (unmatched alerts included)
        assert set(Delivery.objects.filter(integration=integration).values_list("response_status", flat=True)) == {202}
        # one attempt per execution, whichever peer or repeat reported it
        executions = ["am-1", "am-g1", "am-g2", "am-g3", "am-fix", "am-ha"]
        assert {e: Attempt.objects.filter(execution_id=e).count() for e in executions} == dict.fromkeys(executions, 1)
        assert Run.objects.filter(job__key=JOB).count() == 6
        accepted_originals = Alert.objects.filter(integration=integration, duplicate_of__isnull=True)
        assert set(accepted_originals.values_list("outcome", flat=True)) == {Alert.Outcome.ACCEPTED}
    finally:
        for manager in managers:
            manager.stop()
    elapsed = time.monotonic() - started
    print(f"\nreal Alertmanager test: {elapsed:.1f} s, {stored} deliveries, {refused} refused, counters {total}")
    assert elapsed < 300

"""The replay loop end to end with a real Celery worker: request -> approvals -> claim -> report, and every
person receives exactly the notifications their preferences select, once.

PostgreSQL (transactions the worker thread sees), Celery's own test worker on an in-memory broker, the
locmem mail backend, and a chat/push target (Apprise ``json://``) on a local HTTP server that the test
settings allow-list. The runner uses a credential its technical owner issued through the API.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from django.core import mail
from django.db import connection  # noqa: F401 - read by the skipif condition
from django.test import Client, override_settings

from approvals.replays.models import ReplayRequest
from approvals.replays.requests import replay_request_create
from handover.celery import app
from handover.notifications.models import Notification, NotificationDelivery
from handover.notifications.services import apprise_target_add, notification_preferences_set
from tests.approvals.conftest import PASSWORD, Approve, World, set_outcome

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif("connection.vendor != 'postgresql'", reason="a worker thread sees only committed rows"),
]
EVENTS_OFF = ["approval_needed", "replay_approved", "replay_dispatched", "replay_completed", "replay_failed"]


class _Chat(BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        length = int(self.headers.get("Content-Length", 0))
        type(self).received.append(json.loads(self.rfile.read(length) or b"{}"))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def chat_server() -> Iterator[str]:
    _Chat.received = []
    server = HTTPServer(("127.0.0.1", 0), _Chat)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def celery_worker_thread() -> Iterator[None]:
    """Celery's test worker (a real consumer in a thread) on an in-memory broker; tasks are not eager."""
    from celery.contrib.testing.worker import start_worker

    saved = {key: app.conf.get(key) for key in ("broker_url", "broker_transport_options", "task_always_eager")}
    app.conf.update(broker_url="memory://", broker_transport_options={}, task_always_eager=False)
    app._pool = None  # noqa: SLF001 - drop a pool made for another broker
    app.amqp._producer_pool = None  # noqa: SLF001
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
        yield
    app.conf.update(saved)
    app._pool = None  # noqa: SLF001
    app.amqp._producer_pool = None  # noqa: SLF001


def wait_until_settled(timeout: float = 60.0) -> None:
    """Until no delivery is pending (the worker sent or refused every one)."""
    deadline = time.monotonic() + timeout
    while NotificationDelivery.objects.filter(status="pending").exists():
        assert time.monotonic() < deadline, list(NotificationDelivery.objects.filter(status="pending").values())
        time.sleep(0.2)


def test_request_approvals_claim_report_tell_each_person_what_they_chose_once(
    world: World, approve: Approve, chat_server: str, celery_worker_thread: None
) -> None:
    with override_settings(
        HANDOVER_APPRISE_SCHEMES=["json"],
        HANDOVER_APPRISE_GENERIC_HOSTS=["127.0.0.1"],
        HANDOVER_APPRISE_PRIVATE_HOSTS=["127.0.0.1"],
        EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend",
    ):
        # preferences: tom is told on chat (and not by mail) when asked to act, and of completions;
        # bo only in the app; sam also by mail when the replay completes; bea keeps the defaults.
        apprise_target_add(url=f"json://{chat_server}/tom", user=world.technical, label="tom's phone")
        notification_preferences_set(
            user=world.technical,
            choices={("approval_needed", "email"): False, ("replay_completed", "chat"): True},
        )
        notification_preferences_set(user=world.both, choices={(e, "email"): False for e in EVENTS_OFF})
        notification_preferences_set(user=world.support, choices={("replay_completed", "email"): True})

        request = replay_request_create(
            actor=world.support,
            run=world.run,
            kind=ReplayRequest.Kind.ABSENT_ITEMS,
            reason="the ledger gateway was down; these invoices never arrived",
            record_ids=["INV-1", "INV-2"],
        )
        approve(request, world.business, "business")
        approve(request, world.technical, "technical")

        owner = Client()
        assert owner.login(username=world.technical.username, password=PASSWORD)
        issued = owner.post(
            f"/api/v1/jobs/{world.job.public_id}/runner-credentials/",
            {"label": "invoice runner"},
            content_type="application/json",
        )
        assert issued.status_code == 201, issued.content
        runner = Client(HTTP_AUTHORIZATION=f"Bearer {issued.json()['credential']}")
        claimable = runner.get(issued.json()["claimable_url"]).json()
        assert [row["id"] for row in claimable] == [str(request.public_id)]
        claim = runner.post(f"/api/v1/replays/{request.public_id}/claim/").json()
        report_url = claim["replay"]["report_url"]
        assert report_url.startswith("http://testserver/")
        key = claim["idempotency_key"]
        started = runner.post(
            report_url,
            {"idempotency_key": key, "execution_id": "replay-1", "status": "running"},
            content_type="application/json",
        )
        assert started.status_code == 200, started.content
        set_outcome(world, "INV-1", "completed")  # the ledger confirms the scope
        set_outcome(world, "INV-2", "completed")
        done = runner.post(
            report_url,
            {"idempotency_key": key, "execution_id": "replay-1", "status": "succeeded"},
            content_type="application/json",
        ).json()
        assert done["replay_status"] == "completed"

        wait_until_settled()

    in_app = Counter(
        (n.recipient.username, n.event) for n in Notification.objects.filter(in_app=True).select_related("recipient")
    )
    assert in_app == Counter(
        {
            ("bea-business", "approval_needed"): 1,
            ("tom-technical", "approval_needed"): 1,
            ("bo-both", "approval_needed"): 1,
            ("sam-support", "replay_approved"): 1,
            ("bea-business", "replay_approved"): 1,
            ("tom-technical", "replay_approved"): 1,
            ("sam-support", "replay_dispatched"): 1,
            ("bea-business", "replay_dispatched"): 1,
            ("tom-technical", "replay_dispatched"): 1,
            ("bo-both", "replay_dispatched"): 1,
            ("sam-support", "replay_completed"): 1,
            ("bea-business", "replay_completed"): 1,
            ("tom-technical", "replay_completed"): 1,
        }
    )
    mails = sorted((m.to[0], m.subject.split(":")[0]) for m in mail.outbox)
    assert mails == [
        ("bea-business@example.com", "[Handover] Replay waiting for your approval"),
        ("sam-support@example.com", "[Handover] Replay completed"),
    ]
    chats = sorted(m["title"].split(":")[0] for m in _Chat.received)
    assert chats == ["[Handover] Replay completed", "[Handover] Replay waiting for your approval"]
    sent = Counter(NotificationDelivery.objects.values_list("channel", "status"))
    assert sent == Counter({("email", "sent"): 2, ("chat", "sent"): 2})
    assert Notification.objects.filter(recipient=world.other_business).count() == 0  # another tenant's owner

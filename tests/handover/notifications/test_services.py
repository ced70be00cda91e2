"""Notifications: once per person and event (a DB constraint), the channels each person's preferences select,
"not deliverable" recorded instead of hidden, a digest during a storm, the in-app list over the API and the
page's unread count, and an e-mail change that needs the password and a verification mail."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core import mail
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.test import Client, override_settings
from django.utils import timezone

from handover.notifications import tasks
from handover.notifications.models import Notification, NotificationDelivery, NotificationEmail, Team
from handover.notifications.services import (
    apprise_target_add,
    notification_digests_send,
    notification_email_change,
    notification_preferences_set,
    notify,
)
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
PASSWORD = "correct-horse-battery"


@pytest.fixture(autouse=True)
def _own_cache(settings: Any) -> Iterator[None]:
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "n"}}
    cache.clear()
    yield


@pytest.fixture
def delivered(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    ids: list[int] = []
    monkeypatch.setattr(tasks.notification_deliver, "delay", lambda pk: ids.append(pk))
    return ids


def tell(people: list[Any], key: str = "replay:1", event: str = "approval_needed") -> Any:
    return notify(event=event, recipients=people, dedup_key=key, subject="Replay waiting", body="b", link="/replays/")


def test_each_person_is_told_once_per_event_even_when_asked_twice(
    delivered: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    bea = UserFactory(username="bea", email="bea@example.com")
    with django_capture_on_commit_callbacks(execute=True):
        first = tell([bea, bea])
        again = tell([bea])
    assert [t.username for t in first] == ["bea"] and again == []
    assert Notification.objects.count() == 1 and NotificationDelivery.objects.count() == 1
    assert len(delivered) == 1
    with pytest.raises(IntegrityError), transaction.atomic():  # the database keeps it once, whoever writes
        Notification.objects.create(
            recipient=bea, event="approval_needed", dedup_key="replay:1", subject="x", created_at=timezone.now()
        )


def test_preferences_select_the_channels_and_missing_addresses_are_marked_undeliverable(delivered: list[int]) -> None:
    bea = UserFactory(username="bea", email="bea@example.com")
    tom = UserFactory(username="tom", email="")
    quiet = UserFactory(username="quiet", email="q@example.com")
    notification_preferences_set(
        user=quiet, choices={("approval_needed", "in_app"): False, ("approval_needed", "email"): False}
    )
    notification_preferences_set(user=tom, choices={("approval_needed", "chat"): True})
    told = {t.username: t for t in tell([bea, tom, quiet])}
    assert set(told) == {"bea", "tom"}  # quiet chose nothing for this event
    assert told["bea"].channels == ["in_app"] and told["bea"].queued == ["email"]
    assert told["tom"].missing == [
        "e-mail not deliverable: no verified address",
        "chat not deliverable: no chat/push URL",
    ]
    rows = {(d.notification.recipient.username, d.channel): d for d in NotificationDelivery.objects.all()}
    assert rows[("bea", "email")].status == "pending"
    assert rows[("tom", "email")].status == "undeliverable" and rows[("tom", "chat")].status == "undeliverable"
    assert not Notification.objects.filter(recipient=quiet).exists()


@override_settings(HANDOVER_APPRISE_SCHEMES=["slack"])
def test_a_team_channel_carries_an_event_once_for_all_its_members(delivered: list[int]) -> None:
    team = Team.objects.create(name="billing")
    bea, tom = UserFactory(username="bea", email=""), UserFactory(username="tom", email="")
    team.members.set([bea, tom])
    apprise_target_add(url="slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ", team=team)
    tell([bea, tom], event="check_failed")
    chat = NotificationDelivery.objects.filter(channel="chat", status="pending")
    assert chat.count() == 1 and chat.get().shown_as.startswith("slack://")


@override_settings(HANDOVER_NOTIFICATION_STORM_COUNT=2, HANDOVER_NOTIFICATION_STORM_MINUTES=10)
def test_a_storm_is_held_and_sent_as_one_digest(delivered: list[int], django_capture_on_commit_callbacks: Any) -> None:
    bea = UserFactory(username="bea", email="bea@example.com")
    with django_capture_on_commit_callbacks(execute=True):
        for n in range(5):
            tell([bea], key=f"check:{n}", event="check_failed")
    statuses = [tasks.notification_deliver(pk) for pk in delivered]
    assert statuses == ["sent", "sent", "held", "held", "held"]
    assert len(mail.outbox) == 2
    assert notification_digests_send() == 1
    assert len(mail.outbox) == 3 and "3 notifications (digest)" in mail.outbox[-1].subject
    assert NotificationDelivery.objects.filter(status="sent", via_digest=True).count() == 3
    assert notification_digests_send() == 0


def test_the_api_lists_counts_and_marks_read_only_the_callers_own(delivered: list[int]) -> None:
    bea = UserFactory(username="bea", email="bea@example.com")
    other = UserFactory(username="other", email="o@example.com")
    tell([bea, other], key="replay:1")
    tell([bea], key="replay:2", event="replay_approved")
    client = Client()
    assert client.login(username="bea", password=PASSWORD)
    assert client.get("/api/v1/notifications/unread-count/").json() == {"unread": 2}
    page = client.get("/api/v1/notifications/", {"unread": "true"}).json()
    assert page["count"] == 2 and page["results"][0]["url"] == "http://testserver/replays/"
    assert {d["channel"] for d in page["results"][0]["deliveries"]} <= {"email"}
    first = page["results"][0]["id"]
    answer = client.post("/api/v1/notifications/read/", {"ids": [first]}, content_type="application/json").json()
    assert answer == {"marked": 1, "unread": 1}
    html = client.get("/notifications/").content.decode()
    assert 'data-testid="unread-count">1<' in html
    assert client.post("/api/v1/notifications/read/", {}, content_type="application/json").json()["unread"] == 0
    assert Notification.objects.filter(recipient=other, read_at__isnull=True).count() == 1


def test_an_email_change_needs_the_password_and_goes_there_only_once_verified(delivered: list[int]) -> None:
    bea = UserFactory(username="bea", email="bea@example.com")
    client = Client()
    assert client.login(username="bea", password=PASSWORD)
    refused = client.post("/profile/email/", {"email": "new@example.com", "password": "wrong"})
    assert refused.status_code == 400 and not NotificationEmail.objects.filter(pending="new@example.com").exists()

    path = notification_email_change(user=bea, password=PASSWORD, address="new@example.com")
    assert mail.outbox[-1].to == ["new@example.com"] and path in mail.outbox[-1].body
    tell([bea], key="replay:before")
    assert NotificationDelivery.objects.get().shown_as == "b…@example.com"  # still the verified one (masked)

    stranger = Client()
    UserFactory(username="mallory", email="m@example.com")
    assert stranger.login(username="mallory", password=PASSWORD)
    stranger.get(path)  # another account cannot use bea's link
    assert NotificationEmail.objects.get(user=bea).pending == "new@example.com"
    assert client.get(path).status_code == 302
    bea.refresh_from_db()
    assert bea.email == "new@example.com" and NotificationEmail.objects.get(user=bea).verified == "new@example.com"
    tell([bea], key="replay:after")
    assert NotificationDelivery.objects.order_by("pk").last().shown_as == "n…@example.com"
    assert client.get(path).status_code == 302  # a used link changes nothing
    assert NotificationEmail.objects.get(user=bea).verified == "new@example.com"


def test_the_time_zone_comes_from_the_iana_list() -> None:
    UserFactory(username="bea")
    client = Client()
    assert client.login(username="bea", password=PASSWORD)
    assert client.post("/profile/time-zone/", {"time_zone": "Mars/Olympus"}).status_code == 400
    assert client.post("/profile/time-zone/", {"time_zone": "Europe/Berlin"}).status_code == 302
    assert 'value="Europe/Berlin"' in client.get("/profile/").content.decode()


@override_settings(HANDOVER_APPRISE_SCHEMES=["jsons"], HANDOVER_APPRISE_GENERIC_HOSTS=["hooks.example.com"])
def test_a_chat_target_whose_name_stops_resolving_is_retried_not_failed(
    delivered: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    from handover.notifications.services import DeliveryTransientError, notification_delivery_send

    public = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", 443))]
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: public)
    bea = UserFactory(username="bea", email="")
    apprise_target_add(url="jsons://hooks.example.com/bea", user=bea)
    tell([bea], event="check_failed")
    chat = NotificationDelivery.objects.get(channel="chat")

    def no_dns(*args: Any, **kwargs: Any) -> Any:
        raise OSError("temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    with pytest.raises(DeliveryTransientError):
        notification_delivery_send(delivery_id=chat.pk)
    chat.refresh_from_db()
    assert chat.status == "pending" and chat.claimed_at is None and chat.attempt_count == 1

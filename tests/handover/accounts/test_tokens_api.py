"""``/api/v1/tokens/``: the caller's own personal API tokens over the API (session or token auth)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client
from django.utils import timezone
from knox.crypto import hash_token
from knox.models import AuthToken

from handover.accounts.models import ApiTokenLabel
from handover.accounts.services import api_token_create, api_token_use_record
from runs.audit.models import AuditEvent
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

API = "/api/v1/tokens/"
FIELDS = {"prefix", "label", "created_at", "expires_at", "last_used_at", "is_expired"}


@pytest.fixture
def alice() -> AbstractBaseUser:
    return UserFactory(username="alice")


def token_client(raw: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Token {raw}")


def session_client(user: AbstractBaseUser) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_list_shows_only_the_callers_tokens_without_secrets(alice: AbstractBaseUser) -> None:
    mine = api_token_create(user=alice, label="nightly export check")
    theirs = api_token_create(user=UserFactory(username="bob"), label="bob's").token
    used_at = timezone.now() - timedelta(hours=1)
    api_token_use_record(token=mine.token, at=used_at)

    body = session_client(alice).get(API).json()

    assert body["count"] == 1
    [row] = body["results"]
    assert set(row) == FIELDS
    assert row["prefix"] == mine.token.token_key and row["label"] == "nightly export check"
    assert row["last_used_at"] == used_at.isoformat().replace("+00:00", "Z")
    assert row["is_expired"] is False
    text = str(body)
    assert theirs.token_key not in text and mine.token.digest not in text and mine.raw not in text


def test_create_answers_the_secret_once_and_stores_its_hash(alice: AbstractBaseUser) -> None:
    response = session_client(alice).post(
        API, {"label": "deploy script", "expires_in_days": 7}, content_type="application/json"
    )

    assert response.status_code == 201 and "no-store" in response["Cache-Control"]
    body = response.json()
    assert set(body) == FIELDS | {"token"}
    token = AuthToken.objects.get(user=alice)
    assert token.digest == hash_token(body["token"]) and body["prefix"] == token.token_key
    assert ApiTokenLabel.objects.get(token=token).label == "deploy script"
    assert token.expiry is not None and timedelta(days=7) - (token.expiry - timezone.now()) < timedelta(minutes=1)
    event = AuditEvent.objects.get(action="api_token_create")
    assert event.actor == alice and event.object_ref == token.token_key
    # it works, and the list never shows the secret again
    listed = token_client(body["token"]).get(API)
    assert listed.status_code == 200 and body["token"] not in listed.content.decode()


def test_create_refuses_a_lifetime_off_the_list(alice: AbstractBaseUser) -> None:
    response = session_client(alice).post(API, {"label": "x", "expires_in_days": 3650}, content_type="application/json")

    assert response.status_code == 400 and response["Content-Type"] == "application/problem+json"
    assert "expires_in_days" in response.json()["errors"]
    assert not AuthToken.objects.exists() and not AuditEvent.objects.exists()


def test_a_token_cannot_mint_a_longer_lived_one(alice: AbstractBaseUser) -> None:
    parent = api_token_create(user=alice, label="parent", expires_in_days=7)

    response = token_client(parent.raw).post(
        API, {"label": "child", "expires_in_days": 90}, content_type="application/json"
    )

    assert response.status_code == 201
    child = AuthToken.objects.get(token_key=response.json()["prefix"])
    assert parent.token.expiry is not None and child.expiry == parent.token.expiry


def test_delete_revokes_the_callers_token_and_it_then_gets_401(alice: AbstractBaseUser) -> None:
    issued = api_token_create(user=alice, label="nightly")
    client = token_client(issued.raw)
    assert client.get(API).status_code == 200

    response = client.delete(f"{API}{issued.token.token_key}/")

    assert response.status_code == 204
    assert not AuthToken.objects.filter(pk=issued.token.pk).exists()
    event = AuditEvent.objects.get(action="api_token_revoke")
    assert event.actor == alice and event.object_ref == issued.token.token_key
    assert client.get(API).status_code == 401


def test_delete_of_another_persons_token_answers_404_and_keeps_it(alice: AbstractBaseUser) -> None:
    theirs = api_token_create(user=alice, label="alice's").token
    for person in (UserFactory(username="bob"), UserFactory(username="root", admin=True)):
        response = session_client(person).delete(f"{API}{theirs.token_key}/")
        assert response.status_code == 404 and response["Content-Type"] == "application/problem+json"
    assert AuthToken.objects.filter(pk=theirs.pk).exists()
    assert not AuditEvent.objects.filter(action="api_token_revoke").exists()


def test_an_expired_token_gets_401(alice: AbstractBaseUser) -> None:
    issued = api_token_create(user=alice, label="old", expires_in_days=7)
    AuthToken.objects.filter(pk=issued.token.pk).update(expiry=timezone.now() - timedelta(seconds=1))

    assert token_client(issued.raw).get(API).status_code == 401
    assert not AuthToken.objects.filter(pk=issued.token.pk).exists()  # knox clears it when presented


def test_anonymous_callers_get_401() -> None:
    assert Client().get(API).status_code == 401
    assert Client().post(API, {"label": "x"}, content_type="application/json").status_code == 401
    assert not AuthToken.objects.exists()

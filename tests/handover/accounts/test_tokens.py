"""Personal API tokens: the services (create shown once and stored hashed, revoke, audit) and the
person's own page at /account/tokens/ (only their tokens; another's answers 404; revoked and
expired tokens get 401)."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from io import StringIO

import pytest
import time_machine
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.sessions.models import Session
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.test import Client, override_settings
from django.utils import timezone
from knox.crypto import hash_token
from knox.models import AuthToken

from handover.accounts import services as token_services
from handover.accounts.models import ApiTokenLabel, ApiTokenUse
from handover.accounts.services import (
    api_token_create,
    api_token_expiry_choices,
    api_token_revoke,
    api_token_use_record,
)
from handover.core.errors import Conflict, DomainError, NotFound
from runs.audit.models import AuditEvent
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

LIST = "/account/tokens/"
CREATE = "/account/tokens/new/"
API = "/api/v1/tokens/"


@pytest.fixture
def alice() -> AbstractBaseUser:
    return UserFactory(username="alice")


@pytest.fixture
def bob() -> AbstractBaseUser:
    return UserFactory(username="bob")


def signed_in(user: AbstractBaseUser) -> Client:
    client = Client()
    client.force_login(user)
    return client


def token_client(raw: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Token {raw}")


def revoke_url(token: AuthToken) -> str:
    return f"/account/tokens/{token.token_key}/revoke/"


def rows_of_every_token_table() -> str:
    """Everything stored about tokens, the audit trail and every session (decoded), as one string."""
    rows = [
        *AuthToken.objects.values(),
        *ApiTokenLabel.objects.values(),
        *ApiTokenUse.objects.values(),
        *AuditEvent.objects.values(),
        *(session.get_decoded() for session in Session.objects.all()),
    ]
    return json.dumps(rows, default=str)


# --- services ----------------------------------------------------------------------------------


def test_create_returns_the_raw_token_once_and_stores_only_its_hash(alice: AbstractBaseUser) -> None:
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        issued = api_token_create(user=alice, label="  nightly export check ", expires_in_days=30, actor=alice)

    token = AuthToken.objects.get()
    assert issued.token == token and issued.label == "nightly export check"
    assert issued.raw.startswith("ho_") and token.token_key == issued.raw[:15]
    assert token.digest == hash_token(issued.raw) and token.user == alice
    assert token.expiry == start + timedelta(days=30)
    assert ApiTokenLabel.objects.get(token=token).label == "nightly export check"
    assert issued.raw not in rows_of_every_token_table()


def test_create_writes_an_audit_event_naming_the_prefix_never_the_secret(alice: AbstractBaseUser) -> None:
    issued = api_token_create(user=alice, label="nightly export check", expires_in_days=7, actor=alice)

    event = AuditEvent.objects.get()
    assert event.action == "api_token_create" and event.object_type == "knox.authtoken"
    assert event.actor == alice and event.actor_name == "alice" and event.subject == alice
    assert event.object_ref == issued.token.token_key
    assert issued.token.token_key in event.summary and "alice" in event.summary and "nightly" in event.summary
    assert event.data["prefix"] == issued.token.token_key and event.data["label"] == "nightly export check"
    assert event.data["expires_at"] == issued.token.expiry.isoformat()
    assert issued.raw not in json.dumps(event.data) + event.summary
    assert issued.token.digest not in json.dumps(event.data) + event.summary + event.object_ref


def test_create_defaults_to_the_sites_lifetime_and_refuses_one_off_the_list(alice: AbstractBaseUser) -> None:
    assert api_token_expiry_choices() == [7, 30, 90]  # HANDOVER_API_TOKEN_DAYS: 90
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        issued = api_token_create(user=alice)
    assert issued.token.expiry == start + timedelta(days=90)
    assert not ApiTokenLabel.objects.exists()  # no label given, none stored

    for days in (0, 8, 91, 365):
        with pytest.raises(DomainError) as refused:
            api_token_create(user=alice, label="x", expires_in_days=days)
        assert "expires_in_days" in refused.value.errors
    with pytest.raises(DomainError) as refused:
        api_token_create(user=alice, label="x" * 101)
    assert "label" in refused.value.errors
    assert AuthToken.objects.count() == 1 and AuditEvent.objects.count() == 1


def test_the_lifetimes_follow_the_sites_maximum(alice: AbstractBaseUser) -> None:
    with override_settings(REST_KNOX={"TOKEN_TTL": timedelta(days=45), "TOKEN_PREFIX": "ho_"}):
        assert api_token_expiry_choices() == [7, 30, 45]
    with override_settings(REST_KNOX={"TOKEN_TTL": timedelta(days=400), "TOKEN_PREFIX": "ho_"}):
        assert api_token_expiry_choices() == [7, 30, 90, 180, 365, 400]


def test_a_token_made_with_a_token_expires_no_later_than_it(alice: AbstractBaseUser) -> None:
    not_after = timezone.now() + timedelta(days=3)

    issued = api_token_create(user=alice, label="child", expires_in_days=30, not_after=not_after)

    assert issued.token.expiry is not None and issued.token.expiry <= not_after
    assert issued.token.expiry > not_after - timedelta(seconds=5)
    with pytest.raises(DomainError):
        api_token_create(user=alice, label="late", not_after=timezone.now() - timedelta(seconds=1))


def test_a_person_holds_a_bounded_number_of_unexpired_tokens(
    alice: AbstractBaseUser, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(token_services, "TOKEN_MAX_PER_PERSON", 2)
    api_token_create(user=alice, label="one")
    expired = api_token_create(user=alice, label="two").token
    AuthToken.objects.filter(pk=expired.pk).update(expiry=timezone.now() - timedelta(seconds=1))
    api_token_create(user=alice, label="three")  # the expired one does not count

    with pytest.raises(Conflict):
        api_token_create(user=alice, label="four")
    assert AuthToken.objects.filter(user=alice).count() == 3
    assert not ApiTokenLabel.objects.filter(label="four").exists()


def test_revoke_deletes_the_token_its_label_and_use_and_audits_it(
    alice: AbstractBaseUser, bob: AbstractBaseUser
) -> None:
    issued = api_token_create(user=alice, label="nightly", actor=alice)
    keep = api_token_create(user=alice, label="keep", actor=alice).token
    api_token_use_record(token=issued.token)

    api_token_revoke(token=issued.token, actor=alice)

    assert list(AuthToken.objects.all()) == [keep]
    assert list(ApiTokenLabel.objects.values_list("label", flat=True)) == ["keep"]
    assert not ApiTokenUse.objects.exists()
    event = AuditEvent.objects.get(action="api_token_revoke")
    assert (event.actor, event.subject, event.object_type) == (alice, alice, "knox.authtoken")
    assert event.object_ref == issued.token.token_key and event.data["label"] == "nightly"
    # a second revoke finds nothing and records nothing
    with pytest.raises(NotFound):
        api_token_revoke(token=issued.token, actor=alice)
    assert AuditEvent.objects.filter(action="api_token_revoke").count() == 1


def test_a_label_cannot_be_blank_in_the_database(alice: AbstractBaseUser) -> None:
    token, _ = AuthToken.objects.create(user=alice)
    with pytest.raises(IntegrityError), transaction.atomic():
        ApiTokenLabel.objects.create(token=token, label="")


def test_create_api_token_command_uses_the_service(alice: AbstractBaseUser) -> None:
    out = StringIO()
    call_command("create_api_token", "alice", "--label", "deploy script", "--days", "7", stdout=out)

    raw = out.getvalue().strip().splitlines()[-1]
    token = AuthToken.objects.get()
    assert token.digest == hash_token(raw) and token.token_key in out.getvalue().splitlines()[0]
    assert ApiTokenLabel.objects.get(token=token).label == "deploy script"
    event = AuditEvent.objects.get(action="api_token_create")
    assert event.actor is None and event.subject == alice and event.object_ref == token.token_key
    assert token_client(raw).get(API).status_code == 200


# --- the page -------------------------------------------------------------------------------------


def test_the_list_shows_only_the_persons_own_tokens(alice: AbstractBaseUser, bob: AbstractBaseUser) -> None:
    mine = api_token_create(user=alice, label="nightly export check").token
    theirs = api_token_create(user=bob, label="bob's private script").token
    used_at = timezone.now() - timedelta(hours=2)
    api_token_use_record(token=mine, at=used_at)

    page = signed_in(alice).get(LIST)

    html = page.content.decode()
    assert page.status_code == 200 and "no-store" in page["Cache-Control"]
    assert mine.token_key in html and "nightly export check" in html
    assert used_at.replace(microsecond=0).isoformat() in html  # last used, as a <time datetime=...>
    assert theirs.token_key not in html and "private script" not in html
    assert mine.digest not in html
    assert revoke_url(mine) in html and revoke_url(theirs) not in html


def test_the_nav_links_to_the_page(alice: AbstractBaseUser) -> None:
    assert f'href="{LIST}"' in signed_in(alice).get(LIST).content.decode()


def test_creating_on_the_page_shows_the_token_once_and_keeps_it_nowhere(
    alice: AbstractBaseUser, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    client = signed_in(alice)

    posted = client.post(CREATE, {"label": "nightly export check", "expires_in_days": "30"})
    assert posted.status_code == 302 and posted["Location"] == CREATE  # POST → redirect → GET
    page = client.get(CREATE)

    token = AuthToken.objects.get(user=alice)
    html = page.content.decode()
    assert page.status_code == 200 and "no-store" in page["Cache-Control"]
    raw = html.split('<code class="secret">')[1].split("</code>")[0]
    assert token.digest == hash_token(raw)
    assert ApiTokenLabel.objects.get(token=token).label == "nightly export check"
    assert AuditEvent.objects.get(action="api_token_create").actor == alice
    # never again: not on the list, not in the session, not in the logs, not in any table
    assert raw not in client.get(LIST).content.decode()
    reloaded = client.get(CREATE, follow=True)  # reloading the "token issued" page
    assert raw not in reloaded.content.decode() and "shown only once" in reloaded.content.decode()
    assert AuthToken.objects.filter(user=alice).count() == 1  # and no second token
    assert raw not in rows_of_every_token_table()
    assert not any(raw in s.session_data or raw in str(s.get_decoded()) for s in Session.objects.all())
    assert all(raw not in cookie.value for cookie in client.cookies.values())
    assert raw not in caplog.text
    assert token_client(raw).get(API).status_code == 200


def test_creating_with_a_lifetime_off_the_list_creates_nothing(alice: AbstractBaseUser) -> None:
    page = signed_in(alice).post(CREATE, {"label": "x", "expires_in_days": "3650"})

    assert page.status_code == 400 and "Select a valid choice" in page.content.decode()
    assert not AuthToken.objects.exists() and not AuditEvent.objects.exists()


def test_revoking_asks_first_then_the_token_gets_401(alice: AbstractBaseUser) -> None:
    issued = api_token_create(user=alice, label="nightly")
    client = signed_in(alice)
    assert token_client(issued.raw).get(API).status_code == 200

    confirm = client.get(revoke_url(issued.token))
    assert confirm.status_code == 200 and issued.token.token_key in confirm.content.decode()
    assert AuthToken.objects.filter(pk=issued.token.pk).exists()  # asking revokes nothing

    done = client.post(revoke_url(issued.token))

    assert done.status_code == 302 and done["Location"] == LIST
    assert not AuthToken.objects.filter(pk=issued.token.pk).exists()
    event = AuditEvent.objects.get(action="api_token_revoke")
    assert event.actor == alice and event.object_ref == issued.token.token_key
    assert token_client(issued.raw).get(API).status_code == 401
    assert "revoked" in client.get(LIST).content.decode()


def test_revoking_needs_the_csrf_token(alice: AbstractBaseUser) -> None:
    issued = api_token_create(user=alice, label="nightly")
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)

    assert client.post(revoke_url(issued.token)).status_code == 403
    assert AuthToken.objects.filter(pk=issued.token.pk).exists()


def test_another_persons_token_answers_404_even_to_an_admin(alice: AbstractBaseUser) -> None:
    theirs = api_token_create(user=alice, label="alice's").token
    for person in (UserFactory(username="bob"), UserFactory(username="root", admin=True)):
        client = signed_in(person)
        assert client.get(revoke_url(theirs)).status_code == 404
        assert client.post(revoke_url(theirs)).status_code == 404
    assert AuthToken.objects.filter(pk=theirs.pk).exists()
    assert not AuditEvent.objects.filter(action="api_token_revoke").exists()


def test_an_expired_token_gets_401_and_is_marked_expired_on_the_page(alice: AbstractBaseUser) -> None:
    issued = api_token_create(user=alice, label="old", expires_in_days=7)
    keep = api_token_create(user=alice, label="current").token
    assert token_client(issued.raw).get(API).status_code == 200

    with time_machine.travel(timezone.now() + timedelta(days=8)):
        page = signed_in(alice).get(LIST).content.decode()
        assert page.count("badge-expired") == 1
        assert token_client(issued.raw).get(API).status_code == 401

    # knox clears an expired token when it is presented: the page lists only the live one
    assert list(AuthToken.objects.all()) == [keep]

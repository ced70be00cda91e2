"""One-time secrets across POST -> redirect -> GET: bound to the person and the scope, read once."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import RequestFactory

from handover.core.one_time import one_time_pop, one_time_stash
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _request(user: object) -> object:
    request = RequestFactory().get("/")
    request.user = user
    return request


def test_a_stashed_payload_is_popped_once_by_the_same_person_in_the_same_scope() -> None:
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    nonce = one_time_stash(_request(alice), scope="demo", payload={"secret": "s3cr3t"})

    assert "s3cr3t" not in nonce
    assert one_time_pop(_request(bob), scope="demo", nonce=nonce) is None  # another person
    assert one_time_pop(_request(alice), scope="other", nonce=nonce) is None  # another scope
    assert one_time_pop(_request(AnonymousUser()), scope="demo", nonce=nonce) is None
    assert one_time_pop(_request(alice), scope="demo", nonce=nonce) == {"secret": "s3cr3t"}
    assert one_time_pop(_request(alice), scope="demo", nonce=nonce) is None  # deleted when read


@pytest.mark.parametrize("nonce", ["", "x" * 65, "never-stashed"])
def test_a_missing_or_malformed_nonce_gives_nothing(nonce: str) -> None:
    assert one_time_pop(_request(UserFactory()), scope="demo", nonce=nonce) is None

"""Regressions found by breaking the personal API tokens: garbage credentials and racing creates."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection  # noqa: F401 - read by the skipif condition
from django.test import Client
from knox.models import AuthToken

from handover.accounts.services import TOKEN_MAX_PER_PERSON, api_token_create
from handover.core.errors import Conflict
from tests.concurrency import run_concurrently
from tests.factories import UserFactory

API = "/api/v1/tokens/"


@pytest.mark.django_db
@pytest.mark.parametrize("suffix", ["\xff\xfe", "é", "\x00", "abc\x00def", "\x7f"])
def test_a_token_header_that_is_not_plain_ascii_gets_401_not_a_server_error(suffix: str) -> None:
    # The header arrives as Latin-1 text; knox decoded it as UTF-8 (UnicodeDecodeError -> 500), and a NUL
    # reached the token_key query (PostgreSQL refuses NUL in text -> 500). A real token is "ho_" + hex.
    issued = api_token_create(user=UserFactory(username="alice"), label="x")
    for raw in (f"ho_{suffix}", issued.raw[:15] + suffix, issued.raw + suffix):
        response = Client(HTTP_AUTHORIZATION=f"Token {raw}").get(API)
        assert response.status_code == 401, (raw, response.status_code)


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="SQLite serialises writers (IMMEDIATE transactions)")
def test_concurrent_creates_never_exceed_the_cap() -> None:
    alice: AbstractBaseUser = UserFactory(username="alice")
    for i in range(TOKEN_MAX_PER_PERSON - 1):
        api_token_create(user=alice, label=f"t{i}")
    count = 6

    def create() -> str:
        try:
            api_token_create(user=alice, label="race")
        except Conflict:
            return "refused"
        return "created"

    outcomes = run_concurrently([create] * count)

    assert sorted(outcomes) == ["created"] + ["refused"] * (count - 1)
    assert AuthToken.objects.filter(user=alice).count() == TOKEN_MAX_PER_PERSON

"""``submission_once``: a create form's token is claimed for the block, recorded on success, forgotten on failure."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.cache import cache
from django.http import HttpRequest
from django.test import RequestFactory

from handover.core.errors import DomainError
from handover.core.once import ALREADY_SENT, FIELD, STILL_SAVING, submission_once, submission_token


@pytest.fixture(autouse=True)
def _empty_cache() -> None:
    cache.clear()


def _sent(token: str | None) -> HttpRequest:
    request = RequestFactory().post("/problems/new/", {FIELD: token} if token is not None else {})
    request.user = AnonymousUser()
    return request


def test_a_form_sent_twice_answers_the_second_sending_with_the_first_ones_place() -> None:
    token = submission_token()
    with submission_once(_sent(token)) as first:
        assert first.earlier is None
        first.record("/problems/1/")

    with submission_once(_sent(token)) as second:
        assert (second.earlier, second.notice) == ("/problems/1/", ALREADY_SENT)


@pytest.mark.parametrize("error", [DomainError("refused"), RuntimeError("crashed")], ids=["refusal", "crash"])
def test_a_sending_that_fails_forgets_its_token_and_the_error_goes_on(error: Exception) -> None:
    token = submission_token()
    with pytest.raises(type(error)), submission_once(_sent(token)) as first:
        assert first.earlier is None
        raise error

    with submission_once(_sent(token)) as again:
        assert again.earlier is None  # the same page may be sent again


def test_a_first_sending_that_recorded_nothing_keeps_the_token_claimed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("handover.core.once.WAIT_SECONDS", 0.0)
    token = submission_token()
    with submission_once(_sent(token)):
        pass

    with submission_once(_sent(token)) as second:
        assert (second.earlier, second.notice) == ("", STILL_SAVING)


@pytest.mark.parametrize("token", [None, "not-a-token"], ids=["no token", "malformed"])
def test_a_post_without_a_valid_token_creates_every_time(token: str | None) -> None:
    for _ in range(2):
        with submission_once(_sent(token)) as sent:
            assert sent.earlier is None
            sent.record("/problems/1/")

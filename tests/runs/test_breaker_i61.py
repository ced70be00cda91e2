"""Hostile inputs nobody here wrote (i61): each test is a fault found by probing, fixed at its rule."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runs.alerts.models import Alert, Delivery
from runs.catalog.models import Tenant
from tests.conftest import PostAlert, fixture_path

pytestmark = pytest.mark.django_db

SECRET = "hunter2-Sup3rS3cretValue-xyz"
URL_PASSWORD = "pa55w0rd-in-the-userinfo"


def _generic_with_repeats() -> bytes:
    """The generic story's first file, with two keys repeated before its own fields: a secret-named
    key whose first value is the secret, and ``error`` whose first value holds a URL with a password."""
    body = fixture_path("generic", "01-first-failure.json").read_text()
    repeats = (
        f'"password": "{SECRET}", "password": "other-secret-value-1234", '
        f'"error": "cannot reach postgres://etl:{URL_PASSWORD}@db.internal/ledger", '
    )
    return body.replace("{", "{" + repeats, 1).encode()


def test_a_repeated_key_never_stores_its_earlier_secret_value(
    story_tenants: dict[str, Tenant], make_key: Any, post_alert: PostAlert
) -> None:
    """JSON keeps a repeated key's last value; the earlier one is in the text alone, where the in-place
    redaction never looked: it was stored verbatim. Such a body is written out whole from the document."""
    key = make_key("generic", all_tenants=True)
    response = post_alert("generic", _generic_with_repeats(), key)
    assert response.status_code == 202
    delivery = Delivery.objects.get(public_id=response.json()["delivery"])
    assert delivery.outcome == Delivery.Outcome.PROCESSED
    assert SECRET not in delivery.body
    assert URL_PASSWORD not in delivery.body
    stored = json.loads(delivery.body)  # what the parser read: the last values, the secret's redacted
    assert stored["error"] == "Timeout waiting for acknowledgement from ledger gateway"
    assert stored["password"] != "other-secret-value-1234"
    (alert,) = delivery.alerts.all()
    assert alert.outcome == Alert.Outcome.ACCEPTED

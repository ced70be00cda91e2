"""Shared helpers of the custom-integration tests: the stories' data, an admin API client, posting at a time."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import time_machine
from django.test import Client
from knox.models import AuthToken

from runs.catalog.models import Integration
from tests.conftest import PostAlert
from tests.factories import UserFactory

DATA = Path(__file__).resolve().parent.parent / "data" / "custom"
BERLIN = ZoneInfo("Europe/Berlin")


def berlin(*parts: int) -> datetime:
    """An aware Berlin wall-clock time (November: +01:00)."""
    return datetime(*parts, tzinfo=BERLIN)  # type: ignore[arg-type, misc]


DAY_27 = (berlin(2026, 11, 27), berlin(2026, 11, 28))
DAY_28 = (berlin(2026, 11, 28), berlin(2026, 11, 29))
FIRE_28 = berlin(2026, 11, 28, 2)
FIRE_29 = berlin(2026, 11, 29, 2)


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[arg-type, misc]


def data_path(fmt: str, name: str) -> Path:
    return DATA / fmt / name


def load_mapping(fmt: str) -> dict[str, Any]:
    """The mapping an admin pastes for this format (``tests/data/custom/<fmt>/mapping.json``)."""
    mapping: dict[str, Any] = json.loads(data_path(fmt, "mapping.json").read_text())
    return mapping


def admin_api(user: Any = None) -> Client:
    """An API client with a staff member's token."""
    _, token = AuthToken.objects.create(user=user or UserFactory(admin=True))
    return Client(HTTP_AUTHORIZATION=f"Token {token}")


@dataclass
class CustomStory:
    """A custom integration created through the API from a format's mapping, with its key."""

    fmt: str
    key: str
    integration: Integration
    post_alert: PostAlert

    def post(self, name: str, *, at: datetime) -> Any:
        with time_machine.travel(at, tick=False):
            return self.post_alert("custom", data_path(self.fmt, name), self.key)


def create_custom_story(fmt: str, tenants: list[str], post_alert: PostAlert, *, mapping: Any = None) -> CustomStory:
    """Create the ``custom`` integration for ``fmt`` through ``POST /api/v1/integrations/`` with a key."""
    response = admin_api().post(
        "/api/v1/integrations/",
        data={
            "name": f"{fmt}-prod",
            "mapping": mapping if mapping is not None else load_mapping(fmt),
            "key": {"tenants": tenants, "label": "story"},
        },
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    integration = Integration.objects.get(public_id=body["id"])
    return CustomStory(fmt=fmt, key=body["issued_key"]["key"], integration=integration, post_alert=post_alert)

"""Settling an unknown dispatch on the page: no outcome is preselected, and the person must confirm it."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.test import Client

from approvals.replays.delivery import replay_sweep
from approvals.replays.models import Dispatch, ReplayRequest
from tests.approvals.conftest import World

pytestmark = pytest.mark.django_db


def test_settle_has_no_preselected_outcome_and_asks_for_confirmation(world: World, approved: ReplayRequest) -> None:
    Client().post(f"/api/v1/replays/{approved.public_id}/claim/", HTTP_AUTHORIZATION=f"Bearer {world.credential_key}")
    dispatch = Dispatch.objects.get()
    with time_machine.travel(dispatch.lease_expires_at + timedelta(seconds=1)):
        replay_sweep()
    client = Client()
    client.force_login(world.support)
    url = f"/replays/{approved.public_id}/"

    html = client.get(url).content.decode()
    settle = html.split('name="outcome"', 1)[1].split("</select>", 1)[0]
    assert '<option value="" selected>' in settle  # nothing destructive preselected
    assert 'name="confirm"' in html and "it cannot be undone" in html

    unconfirmed = client.post(url + "settle/", {"outcome": "failed", "reason": "looked"}, follow=True)
    assert "nothing was settled" in unconfirmed.content.decode()
    assert ReplayRequest.objects.get(pk=approved.pk).status == "dispatched"  # still waiting for a person

    client.post(url + "settle/", {"outcome": "failed", "reason": "the runner was down", "confirm": "on"})
    assert ReplayRequest.objects.get(pk=approved.pk).status == "failed"

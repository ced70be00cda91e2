"""The ledger's forms answer next to themselves: a refusal is shown inside the ledger section (where the page
scrolls to), not at the top of the page; length limits are mirrored in the inputs and named in the message."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from runs.ledger.models import WorkItem
from tests.runs.ledger_support import POPULATION, LedgerWorld, csv, ledger_world, load

pytestmark = pytest.mark.django_db
__all__ = ["ledger_world"]


def ledger_part(html: str) -> str:
    return html.split('<section id="ledger"', 1)[1]


def top_part(html: str) -> str:
    return html.split('<section id="ledger"', 1)[0]


def client_of(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_refused_verification_is_shown_next_to_the_ledger_form(ledger_world: LedgerWorld) -> None:
    load(ledger_world, population=POPULATION, runner_report=csv("record_id,status", "A1,completed"))
    client = client_of(ledger_world.support)
    url = f"/runs/{ledger_world.run.public_id}/items/verify/"

    answer = client.post(url, {"record_id": "A1", "found": "yes", "reference": ""}, follow=True)

    html = answer.content.decode()
    assert answer.redirect_chain[-1][0].endswith("#ledger")
    assert "needs the provider&#x27;s reference" in ledger_part(html)
    assert "needs the provider" not in top_part(html)


def test_a_provider_reference_over_300_characters_gets_the_right_message(ledger_world: LedgerWorld) -> None:
    load(ledger_world, population=POPULATION, runner_report=csv("record_id,status", "A1,completed"))
    client = client_of(ledger_world.support)
    page = client.get(f"/runs/{ledger_world.run.public_id}/").content.decode()
    assert 'name="reference" placeholder="provider ref" size="10" maxlength="300"' in page

    answer = client.post(
        f"/runs/{ledger_world.run.public_id}/items/verify/",
        {"record_id": "A1", "found": "yes", "reference": "r" * 301},
        follow=True,
    )

    html = ledger_part(answer.content.decode())
    assert "at most 300 characters (it has 301)" in html
    assert WorkItem.objects.get(run=ledger_world.run, record_id="A1").outcome == "uncertain"

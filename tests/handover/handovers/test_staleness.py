"""Generated text records the evidence it came from (ledger version, attempts, counts) and is marked stale, with
a one-click diff, once that evidence changes; regenerating makes it current again."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from knox.models import AuthToken

from handover.handovers.models import Handover
from handover.handovers.services import handover_create
from runs.attempts.models import Run
from runs.ledger.items import work_item_change
from runs.ledger.totals import run_totals_refresh
from tests.factories import AttemptFactory
from tests.handover.helpers import World

pytestmark = pytest.mark.django_db


def test_generated_text_is_stale_when_its_evidence_changes(world: World, load_ledger: Any) -> None:
    load_ledger(world.run, completed=["INV-1", "INV-2"], absent=["INV-3"], duplicates=["INV-9"])
    run_totals_refresh(run=world.run)
    run = Run.objects.get(pk=world.run.pk)
    handover = handover_create(actor=world.support, runs=[run])
    recorded = handover.generated_evidence[str(run.public_id)]
    assert recorded["ledger_version"] == run.ledger_version
    assert (recorded["attempt_count"], recorded["latest_attempt"]) == (2, 2)
    assert recorded["counts"]["absent"] == 1 and recorded["counts"]["possible_duplicates"] == 1
    client = Client()
    client.force_login(world.support)
    url = f"/handovers/{handover.public_id}/"
    fresh = client.get(url).content.decode()
    assert "generated text is stale" not in fresh and "Generated text from: ledger version" in fresh

    # the replay runs as attempt 3 and INV-3 is found after all
    AttemptFactory(run=run, execution_id="replay-1", number=3, status="succeeded", trigger="manual_replay")
    work_item_change(actor=world.support, run=run, record_id="INV-3", outcome="completed", note="found it")

    page = client.get(url).content.decode()
    assert "generated text is stale" in page
    assert "latest attempt #2 → #3" in page and "absent 1 → 0" in page and "completed 3 → 4" in page
    diff = client.get(f"{url}generated-diff/").content.decode()
    assert 'class="diff-removed"' in diff or 'class="diff-added"' in diff
    assert "Regenerate the generated text" in diff
    _, token = AuthToken.objects.create(user=world.support)
    api = Client(HTTP_AUTHORIZATION=f"Token {token}").get(f"/api/v1/handovers/{handover.public_id}/").json()
    assert any("latest attempt #2 → #3" in c for c in api["generated_stale"])

    client.post(f"{url}refresh/")

    assert "generated text is stale" not in client.get(url).content.decode()
    now = Handover.objects.get(pk=handover.pk).generated_evidence[str(run.public_id)]
    assert (now["latest_attempt"], now["counts"]["absent"]) == (3, 0)


def test_confirmed_text_is_never_called_stale(world: World) -> None:
    handover = handover_create(actor=world.support, runs=[world.run])
    Handover.objects.filter(pk=handover.pk).update(generated_sections=[])
    AttemptFactory(run=world.run, execution_id="later", number=3, status="failed")
    client = Client()
    client.force_login(world.support)
    assert "generated text is stale" not in client.get(f"/handovers/{handover.public_id}/").content.decode()

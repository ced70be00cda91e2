"""Handover versions: every write raises ``version`` (the ETag); an edit names its base version; a stale
body version answers 409 edit-conflict with the current texts, a stale If-Match 412, neither 428; the page
never writes a stale tab's text back and shows both texts side by side when two people changed one section;
residual exceptions are versioned alike; an active handover always says what is safe to do next."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from knox.models import AuthToken

from handover.core.errors import DomainError
from handover.handovers.models import Handover, HandoverRevision, ResidualException
from handover.handovers.services import (
    handover_hand_over,
    handover_refresh_generated,
    handover_update,
    residual_exception_create,
)
from handover.handovers.versions import EditConflict
from tests.handover.helpers import World, edit_form_data, force_status

pytestmark = pytest.mark.django_db
BASE = "/api/v1/handovers/"


def api(user: Any) -> Client:
    _, token = AuthToken.objects.create(user=user)
    return Client(HTTP_AUTHORIZATION=f"Token {token}")


def page(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_every_write_raises_the_version_and_the_detail_sends_it_as_etag(world: World, draft: Handover) -> None:
    assert draft.version == 1
    handover_update(handover=draft, actor=world.support, sections={"deadlines": "09:00"})
    handover_update(handover=draft, actor=world.support, confirm=["affected"])
    handover_update(handover=draft, actor=world.support, fields={"escalation_owner": world.owner})
    moved = handover_hand_over(handover=Handover.objects.get(pk=draft.pk), actor=world.support)
    assert (moved.status, moved.version) == ("handed_over", 5)

    detail = api(world.support).get(f"{BASE}{draft.public_id}/")

    assert detail["ETag"] == '"5"' and detail.json()["version"] == 5
    handover_update(handover=draft, actor=world.support, sections={"deadlines": "09:00"})  # no change
    assert Handover.objects.get(pk=draft.pk).version == 5


def test_a_regeneration_raises_the_version(world: World, draft: Handover, load_ledger: Any) -> None:
    load_ledger(world.run, completed=["INV-1"], absent=["INV-2"])
    before = Handover.objects.get(pk=draft.pk).version
    handover_refresh_generated(handover=draft, actor=world.support)
    assert Handover.objects.get(pk=draft.pk).version == before + 1


def test_a_patch_names_its_base_version_stale_409_if_match_412_neither_428(world: World, draft: Handover) -> None:
    client = api(world.support)
    url = f"{BASE}{draft.public_id}/"
    first = client.patch(url, {"deadlines": "tab one", "version": 1}, content_type="application/json")
    assert first.status_code == 200 and first["ETag"] == '"2"'

    stale = client.patch(url, {"recent_changes": "tab two", "version": 1}, content_type="application/json")
    assert stale.status_code == 409
    body = stale.json()
    assert body["type"].endswith("/edit-conflict")
    assert body["current_version"] == 2 and body["current"]["deadlines"] == "tab one"
    assert stale["Content-Type"] == "application/problem+json"

    precondition = client.patch(
        url, {"recent_changes": "tab two"}, content_type="application/json", HTTP_IF_MATCH='"1"'
    )
    assert precondition.status_code == 412
    required = client.patch(url, {"recent_changes": "tab two"}, content_type="application/json")
    assert required.status_code == 428

    handover = Handover.objects.get(pk=draft.pk)
    assert (handover.version, handover.deadlines) == (2, "tab one")
    assert not HandoverRevision.objects.filter(handover=draft, section="recent_changes", created_by=world.support)
    ok = client.patch(url, {"recent_changes": "tab two"}, content_type="application/json", HTTP_IF_MATCH='W/"2"')
    assert ok.status_code == 200 and ok.json()["deadlines"] == "tab one" and ok.json()["recent_changes"] == "tab two"


def test_the_service_refuses_a_stale_base_with_the_current_texts(world: World, draft: Handover) -> None:
    handover_update(handover=draft, actor=world.support, sections={"deadlines": "09:00"}, base_version=1)
    with pytest.raises(EditConflict) as conflict:
        handover_update(handover=draft, actor=world.owner, sections={"deadlines": "10:00"}, base_version=1)
    assert conflict.value.current_version == 2 and conflict.value.current["deadlines"] == "09:00"
    assert Handover.objects.get(pk=draft.pk).deadlines == "09:00"


def test_two_tabs_on_the_edit_page_never_revert_each_other(world: World, draft: Handover) -> None:
    tab_one, tab_two = edit_form_data(draft), edit_form_data(draft)  # both opened on version 1
    client = page(world.support)
    url = f"/handovers/{draft.public_id}/edit/"

    client.post(url, {**tab_one, "deadlines": "New deadlines: 09:00 billing run"})
    second = client.post(url, {**tab_two, "recent_changes": "Deployed 4.2 yesterday"}, follow=True)

    handover = Handover.objects.get(pk=draft.pk)
    assert handover.deadlines == "New deadlines: 09:00 billing run"  # tab one's text is kept
    assert handover.recent_changes == "Deployed 4.2 yesterday"
    assert handover.version == 3
    assert "your changes did not overlap theirs" in second.content.decode()


def test_a_section_both_tabs_changed_is_shown_side_by_side_and_nothing_is_saved(world: World, draft: Handover) -> None:
    tab_one, tab_two = edit_form_data(draft), edit_form_data(draft)
    client = page(world.support)
    url = f"/handovers/{draft.public_id}/edit/"
    client.post(url, {**tab_one, "deadlines": "theirs: 09:00"})

    conflict = client.post(url, {**tab_two, "deadlines": "mine: 10:00", "recent_changes": "mine too"})

    assert conflict.status_code == 200  # the form again, both texts shown (like any form to correct)
    html = conflict.content.decode()
    assert "Someone else saved this handover" in html
    assert 'class="conflict-mine">mine: 10:00' in html and 'class="conflict-theirs">theirs: 09:00' in html
    assert 'name="resolve_deadlines" value="mine"' in html and 'name="resolve_deadlines" value="theirs"' in html
    handover = Handover.objects.get(pk=draft.pk)
    assert (handover.deadlines, handover.recent_changes, handover.version) == ("theirs: 09:00", draft.recent_changes, 2)

    # the person keeps theirs for deadlines; their own other change goes through
    resolved = edit_form_data(handover)
    resolved.update(
        recent_changes="mine too",
        conflict="deadlines",
        resolve_deadlines="theirs",
        mine_deadlines="mine: 10:00",
        theirs_deadlines="theirs: 09:00",
        deadlines="mine: 10:00",
    )
    client.post(url, resolved)
    handover = Handover.objects.get(pk=draft.pk)
    assert (handover.deadlines, handover.recent_changes, handover.version) == ("theirs: 09:00", "mine too", 3)

    # unresolved: asked again, nothing saved
    again = edit_form_data(handover)
    again.update(conflict="deadlines", mine_deadlines="x", theirs_deadlines="y", deadlines="x")
    refused = client.post(url, again)
    assert "Choose for each section shown twice" in refused.content.decode()
    assert Handover.objects.get(pk=draft.pk).version == 3


def test_residual_exceptions_carry_their_own_version(world: World, draft: Handover, load_ledger: Any) -> None:
    load_ledger(world.run, absent=["INV-7"])
    exception = residual_exception_create(
        handover=draft,
        actor=world.support,
        description="INV-7 by hand",
        record_ids=["INV-7"],
        owner=None,
        due_date=None,
    )
    client = api(world.support)
    url = f"{BASE}{draft.public_id}/residual-exceptions/{exception.public_id}/"

    first = client.patch(url, {"owner": "olga-owner", "due_date": None, "version": 1}, content_type="application/json")
    assert first.status_code == 200 and first.json()["version"] == 2 and first["ETag"] == '"2"'
    stale = client.patch(url, {"owner": None, "due_date": None, "version": 1}, content_type="application/json")
    assert stale.status_code == 409 and stale.json()["current"]["owner"] == "olga-owner"
    assert client.patch(url, {"owner": None, "due_date": None}, content_type="application/json").status_code == 428
    precondition = client.patch(
        url, {"owner": None, "due_date": None}, content_type="application/json", HTTP_IF_MATCH='"1"'
    )
    assert precondition.status_code == 412
    assert ResidualException.objects.get(pk=exception.pk).owner == world.owner


def test_what_is_safe_to_do_next_cannot_be_emptied_on_an_active_handover(world: World, draft: Handover) -> None:
    active = force_status(draft, "handed_over", world.support)
    with pytest.raises(DomainError) as refused:
        handover_update(handover=active, actor=world.support, sections={"next_action": "  "})
    assert "next_action" in refused.value.errors

    data = edit_form_data(active)
    data["next_action"] = ""
    answer = page(world.support).post(f"/handovers/{draft.public_id}/edit/", data)
    assert answer.status_code == 200 and Handover.objects.get(pk=draft.pk).next_action == active.next_action
    assert 'name="next_action"' in answer.content.decode() and "required" in answer.content.decode()

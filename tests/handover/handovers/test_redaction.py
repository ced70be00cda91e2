"""Handover text a person typed (or the pre-fill wrote) is stored redacted, and the person is told."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from handover.handovers.models import Handover, HandoverRevision
from handover.handovers.services import handover_create, handover_update
from runs.alerts.redaction import redaction_token
from runs.timeline.models import TimelineEvent
from tests.handover.helpers import World, edit_form_data

pytestmark = pytest.mark.django_db
SECRET = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dcFAKE0123"


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_an_edit_with_a_secret_is_stored_redacted_everywhere_and_named(world: World, draft: Handover) -> None:
    handover = handover_update(
        handover=draft,
        actor=world.support,
        sections={"business_impact": f"Billing down; the key was {SECRET}, mail ops@acme.example"},
        fields={"defect_ref": "https://tracker.example/ISSUE-9?token=abc123abc123"},
    )

    assert handover.redacted_sections == ["business_impact", "defect_ref"]  # type: ignore[attr-defined]
    stored = Handover.objects.get(pk=draft.pk)
    assert SECRET not in stored.business_impact and redaction_token(SECRET) in stored.business_impact
    assert "ops@acme.example" not in stored.business_impact and "abc123abc123" not in stored.defect_ref
    revision = HandoverRevision.objects.get(handover=draft, section="business_impact", created_by=world.support)
    assert SECRET not in revision.text
    event = TimelineEvent.objects.get(run=world.run, kind="handover_edited")
    assert event.data["redacted"] == ["business_impact", "defect_ref"]
    assert SECRET not in event.summary


def test_the_edit_page_says_what_was_removed(world: World, draft: Handover) -> None:
    client = client_for(world.support)
    data = edit_form_data(draft)
    data.update(deadlines="Before 09:00; password=Hunter2Hunter2 for the sftp", escalation_owner="", confirm=[])

    response = client.post(f"/handovers/{draft.public_id}/edit/", data, follow=True)

    assert response.status_code == 200
    notices = [str(m) for m in get_messages(response.wsgi_request)] + [response.content.decode()]
    assert any("We removed what looked like a secret from deadlines" in n for n in notices)
    assert "Hunter2Hunter2" not in Handover.objects.get(pk=draft.pk).deadlines


def test_an_edit_without_a_secret_says_nothing(world: World, draft: Handover) -> None:
    client = client_for(world.support)
    data = edit_form_data(draft)
    data.update(deadlines="Before 09:00 for order ORD-2026-000123", escalation_owner="", confirm=[])

    response = client.post(f"/handovers/{draft.public_id}/edit/", data, follow=True)

    assert "looked like a secret" not in response.content.decode()
    assert Handover.objects.get(pk=draft.pk).deadlines == "Before 09:00 for order ORD-2026-000123"


def test_the_api_answer_names_the_redacted_sections(world: World, draft: Handover) -> None:
    client = client_for(world.support)

    response = client.patch(
        f"/api/v1/handovers/{draft.public_id}/",
        {"affected": "acme-foods; Authorization: Bearer abcDEF123456ghiJKL789", "version": draft.version},
        content_type="application/json",
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["redacted_sections"] == ["affected"]
    assert "abcDEF123456ghiJKL789" not in body["affected"] and "‹redacted:" in body["affected"]
    assert client.get(f"/api/v1/handovers/{draft.public_id}/").json()["redacted_sections"] == []


def test_the_pre_fill_names_what_it_redacted(world: World) -> None:
    world.first.error_summary = "mail to alice@example.com failed"
    world.first.save()

    handover = handover_create(actor=world.support, runs=[world.run])

    assert handover.redacted_sections == ["definitely_happened"]  # type: ignore[attr-defined]
    assert "alice@example.com" not in handover.definitely_happened

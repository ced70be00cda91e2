"""A post's JSON is parsed once (redaction, its secrets and the parser share the document); an
integration's redaction is compiled once per version of its settings."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runs.alerts import redaction
from runs.alerts.parsers.base import JsonBody, json_body, json_preparsed, load_json
from runs.alerts.redaction import integration_redaction, redact_body, redact_body_secrets, secret_values
from runs.catalog.models import Integration
from runs.catalog.services import integration_get_or_create
from tests.conftest import fixture_path

BODY = fixture_path("generic", "01-first-failure.json")


@pytest.mark.django_db
def test_a_post_parses_its_body_once(post_alert: Any, make_key: Any, story_tenants: dict, monkeypatch) -> None:
    key = make_key("generic", tenants=story_tenants.values())
    raw = BODY.read_bytes()
    loads = json.loads
    parsed: list[Any] = []

    def counting(text: Any, *args: Any, **kwargs: Any) -> Any:
        if text in (raw, raw.decode()):
            parsed.append(text)
        return loads(text, *args, **kwargs)

    monkeypatch.setattr(json, "loads", counting)
    assert post_alert("generic", raw, key).status_code == 202
    assert len(parsed) == 1


def test_the_preparsed_document_is_handed_once_and_only_for_that_body() -> None:
    body = b'{"a": [1, 2.5, "x"]}'
    parsed = json_body(body)
    assert parsed == JsonBody(True, {"a": [1, 2.5, "x"]})
    with json_preparsed(body, parsed):
        assert load_json(b'{"b": 1}') == {"b": 1}
        assert load_json(body) is parsed.document
        second = load_json(body)
        assert second == parsed.document and second is not parsed.document
    assert load_json(body) is not parsed.document


@pytest.mark.parametrize("text", [b"[NaN]", b"[1e400]", b"[" * 70 + b"]" * 70, b"not json", b"{"])
def test_a_body_the_loader_refuses_is_refused_alike_and_still_redacted(text: bytes) -> None:
    assert json_body(text) == JsonBody(False)
    with json_preparsed(text, json_body(text)), pytest.raises(ValueError):
        load_json(text)
    assert redact_body_secrets(text, parsed=json_body(text)) == (redact_body(text), [])


def test_redaction_from_the_parsed_document_matches_parsing_it_again() -> None:
    text = json.dumps(
        {"job": "x", "password": "hunter2-is-long", "labels": {"api_token": 12345678}, "note": "mail a@b.io"}
    ).encode()
    stored, secrets = redact_body_secrets(text, ("labels.*",), (), parsed=json_body(text))
    assert stored == redact_body(text, ("labels.*",))
    assert sorted(secrets) == sorted(secret_values(json.loads(text), ("labels.*",)))
    assert "hunter2-is-long" not in stored and "a@b.io" not in stored


@pytest.mark.django_db
def test_an_integrations_redaction_is_compiled_once_per_settings_version() -> None:
    integration = integration_get_or_create(source="generic", name="compiled")
    integration.settings = {"redact_names": ["Ticket"]}
    integration.save(update_fields=["settings", "updated_at"])
    first = integration_redaction(integration)
    assert first.names == frozenset({"ticket"}) and first.rules.is_secret_name("TICKET")
    assert integration_redaction(Integration.objects.get(pk=integration.pk)) is first  # same version
    integration.settings = {"redact_names": ["order"]}  # edited in memory: compiled again
    assert integration_redaction(integration).names == frozenset({"order"})
    integration.save(update_fields=["settings", "updated_at"])
    again = integration_redaction(Integration.objects.get(pk=integration.pk))
    assert again is not first and again.names == frozenset({"order"})
    assert len(redaction._COMPILED) <= redaction._COMPILED_SIZE

"""Two people editing the same settings page: a save never puts back what the other saved meanwhile.

Each page carries the values it was rendered with (``based_on``, ``handover.core.edits``): a field the
person left as shown keeps the other person's value; a field both changed is refused (409 rule, shown
on the page) and nothing is saved.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from handover.core.edits import EditedMeanwhile, edit_base_read, edit_merge
from runs.catalog.keys import integration_security
from runs.catalog.models import Integration, Tenant
from runs.catalog.services import integration_get_or_create
from runs.catalog.transport import integration_transport
from tests.conftest import PostAlert
from tests.factories import UserFactory
from tests.page_forms import page_form
from tests.runs.custom_support import create_custom_story, data_path, load_mapping, utc


def test_the_merge_keeps_what_only_someone_else_changed_and_writes_what_only_this_person_changed() -> None:
    base = {"a": 1, "b": 2, "c": 3}
    current = {"a": 10, "b": 2, "c": 3}  # someone else changed a

    kept = edit_merge(posted={"a": 1, "b": 20, "c": 3}, based_on=base, current=current)

    assert kept == {"b": 20, "c": 3}  # a keeps the other person's 10


def test_the_merge_refuses_a_field_both_changed_to_different_values_and_accepts_the_same_change() -> None:
    base, current = {"a": 1, "b": 2}, {"a": 10, "b": 20}

    with pytest.raises(EditedMeanwhile) as refused:
        edit_merge(posted={"a": 11, "b": 20}, based_on=base, current=current, labels={"a": "the alpha"}, what="X")

    assert refused.value.status == 409
    assert list(refused.value.errors) == ["a"]
    assert "the alpha of X" in refused.value.detail
    assert edit_merge(posted={"a": 10, "b": 2}, based_on=base, current=current) == {"a": 10}


def test_a_post_without_a_base_writes_every_field_as_before() -> None:
    assert edit_merge(posted={"a": 1}, based_on=None, current={"a": 5}) == {"a": 1}


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '"text"', "{" * 5000, None])
def test_an_unreadable_base_is_read_as_none(text: str | None) -> None:
    assert edit_base_read({} if text is None else {"based_on": text}, ["a"]) is None


@pytest.fixture
def generic(story_tenants: dict[str, Tenant]) -> Integration:
    return integration_get_or_create(source="generic", name="generic-edits")


def _admin() -> Client:
    client = Client()
    client.force_login(UserFactory(admin=True))
    return client


def _security_changed_meanwhile(integration: Integration, names: str) -> tuple[Client, dict[str, str], str]:
    """Two admins open the security page; the second saves ``names`` as the redaction names. Returns the
    first admin's client, the form as their (now stale) page holds it, and the page's address."""
    url = f"/manage/integrations/{integration.public_id}/security/"
    first, second = _admin(), _admin()
    stale = page_form(first, url)
    fresh = page_form(second, url)
    fresh["redact_names"] = names
    assert second.post(url, fresh).status_code == 302
    return first, stale, url


@pytest.mark.django_db
def test_a_stale_security_page_does_not_remove_a_redaction_name_another_admin_added(generic: Integration) -> None:
    """Admin A opens the security page; admin B adds a redaction name and saves; A changes the timestamp
    age only and saves: B's name stays (it would otherwise have been removed, and its values stored)."""
    first, stale, url = _security_changed_meanwhile(generic, "customer_email")

    stale["signature_tolerance_seconds"] = "600"
    assert first.post(url, stale).status_code == 302

    security = integration_security(integration=Integration.objects.get(pk=generic.pk))
    assert security.redact_names == ("customer_email",)
    assert security.signature_tolerance_seconds == 600


@pytest.mark.django_db
def test_two_admins_changing_the_same_security_field_the_second_is_refused_and_nothing_is_saved(
    generic: Integration,
) -> None:
    first, stale, url = _security_changed_meanwhile(generic, "customer_email")

    stale["redact_names"] = "api_secret"
    stale["signature_tolerance_seconds"] = "900"
    response = first.post(url, stale)

    assert response.status_code == 400
    assert "Someone changed the redaction names" in response.content.decode()
    security = integration_security(integration=Integration.objects.get(pk=generic.pk))
    assert security.redact_names == ("customer_email",)
    assert security.signature_tolerance_seconds == 300  # nothing of the refused save was written


@pytest.mark.django_db
def test_a_stale_transport_form_keeps_the_decoder_another_admin_chose(generic: Integration) -> None:
    detail = f"/integrations/{generic.public_id}/"
    action = f"/integrations/{generic.public_id}/transport/"
    first, second = _admin(), _admin()
    stale = page_form(first, detail, action)
    fresh = page_form(second, detail, action)
    fresh["decoder_kind"] = "ndjson"
    second.post(action, fresh)

    stale["allow_get"] = "on"
    first.post(action, stale)

    transport = integration_transport(integration=Integration.objects.get(pk=generic.pk))
    assert transport.decoder == {"kind": "ndjson"} and transport.allow_get is True


@pytest.mark.django_db
def test_a_stale_conventions_form_keeps_another_admins_path_and_refuses_a_clash(story_tenants: object) -> None:
    alertmanager = integration_get_or_create(source="alertmanager", name="am-edits")
    detail = f"/integrations/{alertmanager.public_id}/"
    action = f"/integrations/{alertmanager.public_id}/conventions/"
    first, second = _admin(), _admin()
    stale = page_form(first, detail, action)
    fresh = page_form(second, detail, action)
    keys = [name for name in fresh if name.startswith("conv_")]
    one, other = keys[0], keys[1]
    fresh[one] = "labels.team_tenant"
    assert second.post(action, fresh).status_code == 302

    stale[other] = "labels.other_place"
    first.post(action, stale)
    settings = Integration.objects.get(pk=alertmanager.pk).settings
    assert settings[one.removeprefix("conv_")] in ("labels.team_tenant", ["labels.team_tenant"])
    assert settings[other.removeprefix("conv_")] in ("labels.other_place", ["labels.other_place"])

    stale[one] = "labels.clashing"
    page = first.post(action, stale, follow=True).content.decode()
    assert "Someone changed" in page
    settings = Integration.objects.get(pk=alertmanager.pk).settings
    assert settings[one.removeprefix("conv_")] in ("labels.team_tenant", ["labels.team_tenant"])


@pytest.mark.django_db
def test_a_stale_mapping_editor_does_not_overwrite_a_mapping_saved_meanwhile(
    story_tenants: dict[str, Tenant], post_alert: PostAlert
) -> None:
    """Two admins open the mapping editor; one saves a fix; the other, who typed their own change on the
    page they opened before, is refused rather than silently replacing the first fix."""
    nomad = create_custom_story("nomad", ["borealis-retail"], post_alert)
    nomad.post("01-first-failure.json", at=utc(2026, 11, 28, 1, 19, 41))
    url = f"/integrations/{nomad.integration.public_id}/mapping/"
    sample = data_path("nomad", "04-next-run-ok.json").read_text()
    first, second = _admin(), _admin()
    stale = page_form(first, url, url)
    fresh = page_form(second, url, url)
    fixed = load_mapping("nomad")
    fixed["status_map"]["lost"] = "failed"
    fresh.update(mapping=json.dumps(fixed), sample=sample, action="save")
    assert second.post(url, fresh).status_code == 302

    other = load_mapping("nomad")
    other["status_map"]["lost"] = "running"
    stale.update(mapping=json.dumps(other), sample=sample, action="save")
    refused = first.post(url, stale)

    assert refused.status_code == 400
    assert "Someone changed the mapping" in refused.content.decode()
    nomad.integration.refresh_from_db()
    assert nomad.integration.settings["mapping"]["status_map"]["lost"] == "failed"


@pytest.mark.django_db
def test_saving_a_mapping_keeps_security_settings_saved_while_the_editor_was_open(
    story_tenants: dict[str, Tenant], post_alert: PostAlert
) -> None:
    nomad = create_custom_story("nomad", ["borealis-retail"], post_alert)
    url = f"/integrations/{nomad.integration.public_id}/mapping/"
    security = f"/manage/integrations/{nomad.integration.public_id}/security/"
    first, second = _admin(), _admin()
    editor = page_form(first, url, url)
    form = page_form(second, security)
    form["redact_names"] = "customer_email"
    assert second.post(security, form).status_code == 302

    fixed = load_mapping("nomad")
    fixed["status_map"]["lost"] = "failed"
    sample = data_path("nomad", "04-next-run-ok.json").read_text()
    editor.update(mapping=json.dumps(fixed), sample=sample, action="save")
    assert first.post(url, editor).status_code == 302

    nomad.integration.refresh_from_db()
    assert nomad.integration.settings["redact_names"] == ["customer_email"]
    assert nomad.integration.settings["mapping"]["status_map"]["lost"] == "failed"


@pytest.mark.django_db
def test_redaction_names_stored_out_of_order_are_not_taken_for_a_change_on_an_untouched_page(
    generic: Integration,
) -> None:
    """Names written around the page (["b", "A", "b"]) are shown and compared as the page stores them
    (each once, sorted without regard to case): saving an untouched page while someone else changed the
    names keeps theirs instead of refusing or reverting."""
    Integration.objects.filter(pk=generic.pk).update(settings={"redact_names": ["zeta_key", "Alpha_key", "zeta_key"]})
    first, stale, url = _security_changed_meanwhile(generic, "alpha_key\nzeta_key\ncustomer_email")

    stale["signature_tolerance_seconds"] = "120"
    assert first.post(url, stale).status_code == 302

    security = integration_security(integration=Integration.objects.get(pk=generic.pk))
    assert security.redact_names == ("alpha_key", "customer_email", "zeta_key")
    assert security.signature_tolerance_seconds == 120

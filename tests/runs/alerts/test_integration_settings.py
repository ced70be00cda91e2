"""An integration's settings are free JSON (the Django admin edits them raw): a value of the wrong shape
never leaves a post stuck or places an alert by a default instead. The alerts are stored ``unmatched``
with a reason naming the setting, the admin and the conventions editor refuse the shape, and a
reprocess after the correction places them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.utils.html import escape

from runs.alerts.models import Alert, Delivery
from runs.alerts.parsers import airflow, generic, kubernetes
from runs.alerts.parsers.base import settings_in_force, settings_problems
from runs.alerts.redaction import integration_redact_names
from runs.alerts.triage import alert_reprocess
from runs.attempts.models import Run
from runs.catalog.models import Integration, Tenant
from runs.catalog.services import integration_get_or_create, job_get_or_create
from tests.conftest import UNICODE_TENANT, fixture_files
from tests.factories import UserFactory
from tests.runs.alerts.test_sources import StoryFactory, alerts_of, delivery_of
from tests.runs.alerts.test_sources import story as story  # noqa: F401  (the fixture)

K8S = kubernetes.DEFAULT_SETTINGS


@pytest.fixture
def admin(client: Client) -> Client:
    client.force_login(UserFactory(admin=True))
    return client


@pytest.mark.parametrize(
    ("defaults", "own", "expected"),
    [
        (K8S, {"tenant_aliases": {"cafe": "cafe-lumiere"}, "tenant_from": ["label:a", "label:b"]}, {}),
        (K8S, {"tenant_from": "label:a", "default_tenant": None, "not_a_setting": 5}, {}),
        (
            K8S,
            {"tenant_aliases": {"cafe": 3}},
            {"tenant_aliases": "maps 'cafe' to a value that is the number 3, not a text"},
        ),
        (K8S, {"tenant_aliases": ["cafe"]}, {"tenant_aliases": "is a list, not a table of names to values"}),
        (K8S, {"default_tenant": 5}, {"default_tenant": "is the number 5, not a text"}),
        (K8S, {"default_tenant": ["a"]}, {"default_tenant": "is a list, not a text"}),
        (K8S, {"tenant_from": 9}, {"tenant_from": "is the number 9, not a text or a list of texts"}),
        (K8S, {"tenant_from": ["a", {"b": 1}]}, {"tenant_from": "holds an item that is a table, not a text"}),
        (K8S, {"timeout_reasons": "DeadlineExceeded"}, {}),
        (K8S, {"timeout_reasons": [True]}, {"timeout_reasons": "holds an item that is a true/false value, not a text"}),
        (
            generic.DEFAULT_SETTINGS,
            ["default_tenant"],
            {"": "are a list, not a JSON object of setting names to values"},
        ),
        (generic.DEFAULT_SETTINGS, "x", {"": "are a text, not a JSON object of setting names to values"}),
        (generic.DEFAULT_SETTINGS, None, {}),
        (airflow.DEFAULT_SETTINGS, {"window_from": [["a", "b"]], "status_map": {"up_for_retry": "failed"}}, {}),
        (airflow.DEFAULT_SETTINGS, {"window_from": ["a"]}, {"window_from": "holds an item that is a text, not a list"}),
        (
            airflow.DEFAULT_SETTINGS,
            {"status_map": {"failed": None}},
            {"status_map": "maps 'failed' to a value that is empty, not a text"},
        ),
    ],
)
def test_settings_problems_name_each_key_of_the_wrong_shape(defaults: Any, own: Any, expected: dict[str, str]) -> None:
    assert settings_problems(defaults, own) == expected


def test_settings_in_force_drop_the_wrong_keys_and_say_why() -> None:
    settings, sentences = settings_in_force(K8S, {"tenant_aliases": {"cafe": 3}, "default_environment": "qa"})

    assert settings["tenant_aliases"] == {} and settings["default_environment"] == "qa"
    assert sentences == [
        "this integration's setting `tenant_aliases` maps 'cafe' to a value that is the number 3, not a text: "
        "correct it (the integration's conventions, or its settings in the admin), then reprocess"
    ]
    whole, said = settings_in_force(generic.DEFAULT_SETTINGS, [1])
    assert whole == generic.DEFAULT_SETTINGS
    assert said == [
        "this integration's settings are a list, not a JSON object of setting names to values: correct them "
        "(the integration's conventions, or its settings in the admin), then reprocess"
    ]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "wrong",
    [
        {"tenant_aliases": {"cafe-lumiere-muenchen": 3}},  # once left the delivery "received", retried for ever
        {"tenant_aliases": {"cafe-lumiere-muenchen": UNICODE_TENANT}, "default_environment": ["prod"]},
        ["tenant_aliases"],
    ],
)
def test_a_wrong_setting_stores_the_alert_unmatched_and_the_corrected_setting_places_it(
    story: StoryFactory, wrong: Any
) -> None:
    job_get_or_create(
        key="rechnungsexport", defaults={"schedule": "0 2 * * *", "timezone": "UTC", "window_alignment": "day"}
    )
    k8s = story("kubernetes")
    k8s.key_record.tenants.add(Tenant.objects.get(slug=UNICODE_TENANT))
    Integration.objects.filter(name="kubernetes").update(settings=wrong)

    response = k8s.post("91-no-timezone-utc-deadline-exceeded.json")

    assert response.status_code == 202
    assert delivery_of(response).outcome == Delivery.Outcome.PROCESSED  # answered, not left to the sweep
    [alert] = alerts_of(response)
    assert alert.outcome == Alert.Outcome.UNMATCHED
    assert "this integration's setting" in alert.reason and "then reprocess" in alert.reason
    assert Run.objects.count() == 0  # never placed by the adapter's default instead

    Integration.objects.filter(name="kubernetes").update(
        settings={"tenant_aliases": {"cafe-lumiere-muenchen": UNICODE_TENANT}}
    )
    alert = alert_reprocess(alert=Alert.objects.get(pk=alert.pk))

    assert (alert.outcome, alert.reason) == (Alert.Outcome.ACCEPTED, "")
    run = Run.objects.get()
    assert (run.job.key, run.tenant.slug, run.environment) == ("rechnungsexport", UNICODE_TENANT, "prod")


@pytest.mark.django_db
def test_reprocess_keeps_an_alert_unmatched_while_its_setting_is_still_wrong(story: StoryFactory) -> None:
    k8s = story("kubernetes")
    Integration.objects.filter(name="kubernetes").update(settings={"default_environment": 7})
    [alert] = alerts_of(k8s.post("91-no-timezone-utc-deadline-exceeded.json"))

    alert = alert_reprocess(alert=Alert.objects.get(pk=alert.pk))

    assert alert.outcome == Alert.Outcome.UNMATCHED
    assert "setting `default_environment` is the number 7, not a text" in alert.reason


@pytest.mark.django_db
def test_the_admin_refuses_settings_of_the_wrong_shape_and_saves_the_right_ones(admin: Client) -> None:
    integration = integration_get_or_create(source="kubernetes", name="k8s-admin")
    url = f"/admin/runs/integration/{integration.pk}/change/"
    form = {"name": "k8s-admin", "source": "kubernetes", "is_active": "on"}

    refused = admin.post(url, data={**form, "settings": '{"tenant_aliases": {"cafe": 3}, "default_tenant": [1]}'})

    assert refused.status_code == 200  # the form again, with its errors
    errors = refused.context["adminform"].form.errors["settings"]
    assert errors == [
        "default_tenant is a list, not a text.",
        "tenant_aliases maps 'cafe' to a value that is the number 3, not a text.",
    ]
    integration.refresh_from_db()
    assert integration.settings == {}

    saved = admin.post(url, data={**form, "settings": '{"tenant_aliases": {"cafe": "cafe-lumiere"}}'})

    assert saved.status_code == 302
    integration.refresh_from_db()
    assert integration.settings == {"tenant_aliases": {"cafe": "cafe-lumiere"}}


@pytest.mark.django_db
def test_the_conventions_editor_refuses_a_list_where_one_text_is_read(admin: Client) -> None:
    integration = integration_get_or_create(source="alertmanager", name="am-shapes")

    bad = admin.post(
        f"/api/v1/integrations/{integration.public_id}/conventions/",
        data={"values": {"default_tenant": ["a", "b"], "tenant_from": ["labels.tenant", "labels.customer"]}},
        content_type="application/json",
    )

    assert bad.status_code == 400
    assert bad.json()["errors"] == {"default_tenant": ["is a list, not a text"]}
    integration.refresh_from_db()
    assert integration.settings == {}


@pytest.mark.parametrize(
    ("settings", "names"),
    [
        ({"redact_names": ["Customer_Email", "", 3]}, {"customer_email"}),
        ({"redact_names": "Customer_Email"}, {"customer_email"}),  # one name without its list: never ignored
        ({"redact_names": {"customer_email": True}}, set()),
        (["redact_names"], set()),
    ],
)
def test_extra_redaction_names_are_read_from_any_shape_a_person_could_type(settings: Any, names: set[str]) -> None:
    assert integration_redact_names(settings) == frozenset(names)


@pytest.mark.django_db
@pytest.mark.parametrize("wrong", [["tenant_aliases"], {"tenant_aliases": {"cafe": 3}, "default_environment": "qa"}])
def test_the_integration_page_and_api_show_what_is_not_used_and_why(admin: Client, wrong: Any) -> None:
    integration = integration_get_or_create(source="kubernetes", name="k8s-page")
    Integration.objects.filter(pk=integration.pk).update(settings=wrong)

    page = admin.get(f"/integrations/{integration.public_id}/")
    api = admin.get(f"/api/v1/integrations/{integration.public_id}/")

    assert page.status_code == 200 and api.status_code == 200
    [problem] = page.context["settings_problems"]
    assert problem.startswith("this integration's setting") and escape(problem) in page.content.decode()
    in_force = api.json()["settings_in_force"]
    assert in_force["tenant_aliases"] == {}  # the adapter's default, not the wrong value
    assert in_force["default_environment"] == ("qa" if isinstance(wrong, dict) else None)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("source", "wrong", "expected"),
    [
        ("generic", {"transport": {"decoder": {"kind": ["json"]}}}, "transport.decoder: A decoder is one of"),
        ("generic", {"transport": {"allow_get": "yes"}}, "transport.allow_get: true or false."),
        ("generic", {"transport": "form"}, 'transport: An object: {"allow_get"'),
        ("generic", {"redact_names": ["customer email"]}, "redact_names: Not a key name: customer email"),
        (
            "generic",
            {"signing_secret_env": "MY_SECRET"},
            "signing_secret_env: Name a variable",
        ),
        ("alertmanager", {"signing_secret_env": "HANDOVER_SIGNING_SECRET_AM"}, "cannot sign their posts"),
        ("generic", {"signature_tolerance_seconds": "300"}, "signature_tolerance_seconds: Between 30 and 3600"),
        ("generic", {"signature_algorithm": "md5"}, "signature_algorithm: One of:"),
        ("custom", {"mapping": [1]}, "mapping: the mapping must be a JSON object"),
        ("custom", {"mapping": {"fields": {"job_key": 5}}}, "mapping.fields.job_key: give a JMESPath expression"),
    ],
)
def test_the_admin_checks_raw_settings_as_the_product_editors_do(
    admin: Client, source: str, wrong: dict[str, Any], expected: str
) -> None:
    integration = integration_get_or_create(source=source, name=f"{source}-raw")
    before = integration.settings
    form = {"name": integration.name, "source": source, "is_active": "on"}

    refused = admin.post(
        f"/admin/runs/integration/{integration.pk}/change/", data={**form, "settings": json.dumps(wrong)}
    )

    assert refused.status_code == 200
    errors = refused.context["adminform"].form.errors["settings"]
    assert any(expected in error for error in errors), errors
    integration.refresh_from_db()
    assert integration.settings == before


@pytest.mark.django_db
@pytest.mark.parametrize("decoder", [{"kind": ["json"]}, {"kind": {"ndjson": 1}}, "ndjson"])
def test_a_transport_decoder_of_the_wrong_shape_is_read_as_json_and_the_post_answered(
    make_key: Any, post_alert: Any, decoder: Any
) -> None:
    # the admin now refuses such a decoder (``transport_errors``); one stored before is read as JSON
    key = make_key("generic", all_tenants=True)
    Integration.objects.filter(source="generic").update(settings={"transport": {"decoder": decoder}})

    response = post_alert("generic", fixture_files("generic")[0], key)

    assert response.status_code == 202
    delivery = delivery_of(response)
    assert delivery.outcome == Delivery.Outcome.PROCESSED
    assert delivery.alerts.count() >= 1  # recorded, whatever their placement

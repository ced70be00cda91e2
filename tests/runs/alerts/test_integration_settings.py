"""An integration's settings are free JSON (the Django admin edits them raw): a value of the wrong shape
never leaves a post stuck or places an alert by a default instead. The alerts are stored ``unmatched``
with a reason naming the setting, the admin and the conventions editor refuse the shape, and a
reprocess after the correction places them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils.html import escape

from runs.alerts.mapping import integration_mapping
from runs.alerts.models import Alert, Delivery
from runs.alerts.parsers import airflow, generic, kubernetes
from runs.alerts.parsers.base import settings_in_force, settings_problems
from runs.alerts.redaction import integration_redact_names
from runs.alerts.triage import alert_reprocess
from runs.attempts.models import Run
from runs.catalog.keys import signing_secret
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


@pytest.mark.django_db
def test_the_conventions_editor_names_any_value_that_is_not_text_by_the_shape_rule(admin: Client) -> None:
    # one message per wrong value, the shape rule's (``settings_problems``), whatever the value holds
    integration = integration_get_or_create(source="alertmanager", name="am-kinds")

    bad = admin.post(
        f"/api/v1/integrations/{integration.public_id}/conventions/",
        data={"values": {"default_tenant": 5, "tenant_from": ["labels.tenant", {"a": 1}], "job_from": "bad path!"}},
        content_type="application/json",
    )

    assert bad.status_code == 400
    assert bad.json()["errors"] == {
        "default_tenant": ["is the number 5, not a text"],
        "tenant_from": ["holds an item that is a table, not a text"],
        "job_from": ["not a path, template or name: 'bad path!'"],
    }
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
def test_a_transport_decoder_stored_in_the_wrong_shape_is_read_as_json_and_named_on_the_integration_page(
    make_key: Any, post_alert: Any, admin: Client, decoder: Any
) -> None:
    # the admin refuses such a decoder (``transport_errors``); one stored before the check is read as
    # JSON, and the integration page says so instead of leaving the admin to find out from deliveries
    key = make_key("generic", all_tenants=True)
    Integration.objects.filter(source="generic").update(settings={"transport": {"decoder": decoder}})
    integration = Integration.objects.get(source="generic")

    response = post_alert("generic", fixture_files("generic")[0], key)

    assert response.status_code == 202
    delivery = delivery_of(response)
    assert delivery.outcome == Delivery.Outcome.PROCESSED
    assert delivery.alerts.count() >= 1  # recorded, whatever their placement
    page = admin.get(f"/integrations/{integration.public_id}/")
    problems = page.context["field_problems"]
    assert len(problems) == 1 and problems[0].startswith("transport"), problems
    assert "Not read as written; its default is used" in page.content.decode()


@pytest.mark.django_db
def test_security_and_mapping_values_stored_around_the_admin_are_named_on_the_integration_page(
    admin: Client,
) -> None:
    generic_ = integration_get_or_create(source="generic", name="generic-raw")
    custom = integration_get_or_create(source="custom", name="custom-raw")
    Integration.objects.filter(pk=generic_.pk).update(
        settings={"signature_tolerance_seconds": "soon", "redact_names": ["x-api-key"]}
    )
    Integration.objects.filter(pk=custom.pk).update(settings={"mapping": {"fields": {"job": "[unclosed"}}})

    generic_page = admin.get(f"/integrations/{generic_.public_id}/")
    custom_page = admin.get(f"/integrations/{custom.public_id}/")

    generic_problems = generic_page.context["field_problems"]
    assert [p.split(":")[0] for p in generic_problems] == ["signature_tolerance_seconds"], generic_problems
    assert custom_page.context["field_problems"], "a mapping that does not compile is named"
    assert all(p.startswith("mapping") for p in custom_page.context["field_problems"])
    # the same sentences the admin refuses the value with
    form = {"name": custom.name, "source": "custom", "is_active": "on"}
    refused = admin.post(
        f"/admin/runs/integration/{custom.pk}/change/",
        data={**form, "settings": json.dumps({"mapping": {"fields": {"job": "[unclosed"}}})},
    )
    assert set(custom_page.context["field_problems"]) <= set(refused.context["adminform"].form.errors["settings"])


# --- found by tests/runs/alerts/test_settings_fuzz.py --------------------------------------------------


@pytest.mark.django_db
def test_eventbridge_parts_may_be_listed_like_every_from_setting_and_never_leave_the_post_received(
    story: StoryFactory,
) -> None:
    eb = story("eventbridge-scheduler")
    # ``environment_from: []`` (a list, which every ``*_from`` may be) once raised "unhashable type: 'list'"
    Integration.objects.filter(name="eventbridge-scheduler").update(settings={"environment_from": []})

    response = eb.post("01-exhausted-retries-receive-message.json")

    assert response.status_code == 202 and delivery_of(response).outcome == Delivery.Outcome.PROCESSED
    [alert] = alerts_of(response)
    assert alert.outcome == Alert.Outcome.UNMATCHED and "setting environment_from [] is not one of" in alert.reason
    assert Run.objects.count() == 0

    # a list is tried in order: the first part the ARN has
    integration = Integration.objects.get(name="eventbridge-scheduler")
    integration.settings = {"environment_from": ["no_such_part", "group_after_separator"]}
    integration.save()  # a new ``updated_at``: the key cached by the first post is read again
    [alert] = alerts_of(eb.post("04-next-run-permanent-error.json"))
    assert alert.outcome == Alert.Outcome.ACCEPTED
    assert (alert.run.tenant.slug, alert.run.environment) == ("fjord-freight", "prod")


@pytest.mark.django_db
def test_one_text_for_a_list_of_texts_is_read_as_that_list_not_by_its_letters(story: StoryFactory) -> None:
    eb = story("eventbridge-scheduler")
    # ``"" in "MaximumEventAgeInSeconds"`` is true: a message with no condition was read as timed out
    Integration.objects.filter(name="eventbridge-scheduler").update(
        settings={"timeout_conditions": "MaximumEventAgeInSeconds"}
    )
    [alert] = alerts_of(eb.post("04-next-run-permanent-error.json"))
    assert alert.outcome == Alert.Outcome.ACCEPTED and alert.attempt.status == "failed"

    grafana = story("grafana")
    # ``None in "DatasourceError"`` raised: the delivery was left ``received`` for the sweep
    Integration.objects.filter(name="grafana").update(
        settings={"evaluation_alertnames": "DatasourceError", "alertname_from": "labels.no_such_label"}
    )
    response = grafana.post("01-first-failure.json")
    assert response.status_code == 202 and delivery_of(response).outcome == Delivery.Outcome.PROCESSED
    assert all(alert.outcome in (Alert.Outcome.ACCEPTED, Alert.Outcome.UNMATCHED) for alert in alerts_of(response))
    assert settings_in_force(kubernetes.DEFAULT_SETTINGS, {"timeout_reasons": "X"})[0]["timeout_reasons"] == ["X"]


@pytest.mark.django_db
def test_a_resolve_with_nothing_to_resolve_names_the_wrong_setting_too(story: StoryFactory) -> None:
    pd = story("pagerduty")
    Integration.objects.filter(name="pagerduty").update(settings=[])

    alerts = alerts_of(pd.post("04-resolve-next-run-ok.json"))

    resolves = [alert for alert in alerts if alert.reason.startswith("nothing to resolve")]
    assert resolves and all(alert.outcome == Alert.Outcome.UNMATCHED for alert in alerts)
    assert all("this integration's settings are a list" in alert.reason for alert in alerts)
    assert Run.objects.count() == 0


@pytest.mark.parametrize("name", ["", "\x00", "\ud800", "DJANGO_SECRET_KEY", "HANDOVER_SIGNING_SECRET_X\n"])
def test_only_a_handover_signing_secret_variable_is_ever_read(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DJANGO_SECRET_KEY", "not-a-signing-secret")
    monkeypatch.setenv("HANDOVER_SIGNING_SECRET_X", "s3cret")

    assert signing_secret(name) == ""  # a NUL or a lone surrogate once raised in os.environ: a 500
    assert signing_secret("HANDOVER_SIGNING_SECRET_X") == "s3cret"


@pytest.mark.django_db
@pytest.mark.parametrize("named", [True, 5, "DJANGO_SECRET_KEY"])
def test_a_signing_secret_named_in_a_wrong_shape_refuses_posts_with_503_and_stores_nothing(
    story: StoryFactory, named: Any
) -> None:
    generic_story = story("generic")
    Integration.objects.filter(name="generic").update(settings={"signing_secret_env": named})

    response = generic_story.post("01-first-failure.json")

    assert response.status_code == 503  # fail closed: never accepted unsigned, never read from another variable
    assert Delivery.objects.count() == 0 and Alert.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("typed", "error"),
    [
        ('{"x": NaN}', "NaN is not a JSON number"),  # once a database error: a 500
        ("[" * 5000 + "]" * 5000, "nested more than"),  # once a RecursionError: a 500
        ('{"default_tenant": "a\\u0000b"}', "U+0000"),
        ('{"tenant_aliases": {"\\ud800": "x"}}', "U+D800"),
    ],
)
def test_the_admin_refuses_json_handover_does_not_store_with_a_form_error(
    admin: Client, typed: str, error: str
) -> None:
    integration = integration_get_or_create(source="generic", name="generic-admin")
    form = {"name": "generic-admin", "source": "generic", "is_active": "on"}

    refused = admin.post(f"/admin/runs/integration/{integration.pk}/change/", data={**form, "settings": typed})

    assert refused.status_code == 200
    [message] = refused.context["adminform"].form.errors["settings"]
    assert error in message
    integration.refresh_from_db()
    assert integration.settings == {}


@pytest.mark.django_db
@pytest.mark.parametrize("typed", ["", "null"])
def test_empty_or_null_settings_typed_in_the_admin_are_no_settings(admin: Client, typed: str) -> None:
    integration = integration_get_or_create(source="generic", name="generic-admin")
    Integration.objects.filter(pk=integration.pk).update(settings={"default_environment": "qa"})
    form = {"name": "generic-admin", "source": "generic", "is_active": "on"}

    saved = admin.post(f"/admin/runs/integration/{integration.pk}/change/", data={**form, "settings": typed})

    assert saved.status_code == 302  # once a NOT NULL violation: a 500
    integration.refresh_from_db()
    assert integration.settings == {}


@pytest.mark.django_db
@pytest.mark.parametrize("wrong", ["x", 5, ["mapping"], {"mapping": 5}, {"mapping": ["a"]}])
def test_a_custom_integration_with_settings_of_any_shape_shows_its_pages(admin: Client, wrong: Any) -> None:
    integration = integration_get_or_create(source="custom", name="custom-shapes")
    Integration.objects.filter(pk=integration.pk).update(settings=wrong)

    api = admin.get(f"/api/v1/integrations/{integration.public_id}/")
    mapping_page = admin.get(f"/integrations/{integration.public_id}/mapping/")

    assert api.status_code == 200 and mapping_page.status_code == 200  # once AttributeError / TypeError: 500s
    assert api.json()["mapping"] == {}
    assert integration_mapping(Integration.objects.get(pk=integration.pk)) == {}


@pytest.mark.django_db
def test_pages_show_a_lone_surrogate_stored_by_other_means_as_a_replacement(admin: Client) -> None:
    integration = integration_get_or_create(source="kubernetes", name="k8s-surrogate")
    own = (
        {"signing_secret_env": "\ud800", "tenant_aliases": {"\ud800": "x"}}
        if connection.vendor == "sqlite"  # PostgreSQL's jsonb cannot hold one: only SQLite ever does
        else {"signing_secret_env": "\ufffd", "tenant_aliases": {"\ufffd": "x"}}
    )
    Integration.objects.filter(pk=integration.pk).update(settings=own)

    responses = [
        admin.get(f"/integrations/{integration.public_id}/"),
        admin.get(f"/api/v1/integrations/{integration.public_id}/"),
        admin.get(f"/manage/integrations/{integration.public_id}/security/"),
        admin.get(f"/admin/runs/integration/{integration.pk}/change/"),
    ]

    assert [response.status_code for response in responses] == [200, 200, 200, 200]
    assert responses[1].json()["settings_in_force"]["tenant_aliases"] == {"\ufffd": "x"}

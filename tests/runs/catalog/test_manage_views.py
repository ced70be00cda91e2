"""The admin pages (/manage/): roles, integration keys (shown once), integration security; the audit page."""

from __future__ import annotations

import pytest
from django.test import Client

from runs.audit.models import AuditEvent
from runs.catalog.authentication import integration_key_authenticate
from runs.catalog.keys import integration_security
from runs.catalog.models import IntegrationKey
from runs.catalog.services import integration_get_or_create, integration_key_create, role_grant
from tests.factories import JobFactory, TenantFactory, UserFactory
from tests.page_forms import page_form

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin() -> object:
    return UserFactory(username="ada-admin", admin=True)


@pytest.fixture
def admin_client(admin: object) -> Client:
    client = Client()
    client.force_login(admin)
    return client


def test_non_staff_are_sent_to_the_admin_login(client: Client) -> None:
    person = UserFactory()
    role_grant(user=person, role="support", obj=TenantFactory())
    client.force_login(person)
    for path in ("/manage/roles/", "/manage/keys/"):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/")


def test_admin_grants_and_revokes_a_role_through_the_page(admin_client: Client, admin: object) -> None:
    person, tenant, job = UserFactory(username="sam"), TenantFactory(slug="acme"), JobFactory(key="export")

    response = admin_client.post(
        "/manage/roles/grant/", {"user": "sam", "role": "support", "tenant": str(tenant.public_id)}
    )
    assert response.status_code == 302
    assert person.has_perm("runs.act_as_support", tenant)
    admin_client.post("/manage/roles/grant/", {"user": "sam", "role": "technical_owner", "job": str(job.public_id)})
    page = admin_client.get("/manage/roles/").content.decode()
    assert "sam" in page and "technical owner" in page and "acme" in page

    admin_client.post("/manage/roles/revoke/", {"user": "sam", "role": "support", "object_id": str(tenant.public_id)})
    person = type(person).objects.get(pk=person.pk)  # guardian caches permissions per instance
    assert not person.has_perm("runs.act_as_support", tenant)
    assert person.has_perm("runs.act_as_technical_owner", job)
    admin_client.post(
        "/manage/roles/revoke/", {"user": "sam", "role": "technical_owner", "object_id": str(job.public_id)}
    )
    person = type(person).objects.get(pk=person.pk)
    assert not person.has_perm("runs.act_as_technical_owner", job)
    actions = list(AuditEvent.objects.filter(actor=admin).order_by("id").values_list("action", flat=True))
    assert actions == ["role_grant", "role_grant", "role_revoke", "role_revoke"]


def test_a_tenant_role_needs_a_tenant(admin_client: Client) -> None:
    UserFactory(username="sam")
    response = admin_client.post("/manage/roles/grant/", {"user": "sam", "role": "auditor"}, follow=True)
    assert "Choose the tenant" in response.content.decode()
    assert AuditEvent.objects.count() == 0


def test_a_new_key_is_shown_once_stored_hashed_and_audited(admin_client: Client, admin: object) -> None:
    integration = integration_get_or_create(source="generic")
    tenant = TenantFactory(slug="acme")

    posted = admin_client.post(
        "/manage/keys/create/",
        {"integration": str(integration.public_id), "tenants": [str(tenant.public_id)], "label": "prom"},
    )
    assert posted.status_code == 302 and posted["Location"].startswith("/manage/keys/?issued=")
    response = admin_client.get(posted["Location"])

    assert response.status_code == 200
    assert response["Cache-Control"].startswith("no-store") or "no-store" in response["Cache-Control"]
    record = IntegrationKey.objects.get()
    secret = response.context["issued"].key
    assert secret in response.content.decode()
    assert record.secret_hash != secret and secret not in record.prefix + record.secret_hash
    assert integration_key_authenticate(secret) == record
    assert secret not in admin_client.get("/manage/keys/").content.decode()  # never again
    assert secret not in admin_client.get(posted["Location"]).content.decode()  # not on a reload either
    assert IntegrationKey.objects.count() == 1
    assert AuditEvent.objects.get().action == "key_create"


def test_the_keys_page_shows_a_rotated_secret_once_and_a_reload_issues_nothing(admin_client: Client) -> None:
    integration = integration_get_or_create(source="generic")
    old = integration_key_create(integration=integration, all_tenants=True)

    posted = admin_client.post(f"/manage/keys/{old.record.public_id}/rotate/", {"grace_seconds": "60"})
    assert posted.status_code == 302 and "?issued=" in posted["Location"]
    shown = admin_client.get(posted["Location"])
    reloaded = admin_client.get(posted["Location"])

    new = IntegrationKey.objects.exclude(pk=old.record.pk)
    assert new.count() == 1  # the rotate made one key; the GETs made none
    secret = shown.context["issued"].key
    assert shown.status_code == 200 and "no-store" in shown["Cache-Control"]
    assert shown.content.decode().count(secret) == 1 and integration_key_authenticate(secret) == new.get()
    assert reloaded.status_code == 200 and reloaded.context["issued"] is None
    assert secret not in reloaded.content.decode() and "shown only once" in reloaded.content.decode()


def test_a_key_issued_on_the_keys_page_is_not_shown_to_another_admin(admin_client: Client) -> None:
    integration = integration_get_or_create(source="generic")
    posted = admin_client.post("/manage/keys/create/", {"integration": str(integration.public_id), "all_tenants": "on"})
    other = Client()
    other.force_login(UserFactory(username="other-admin", is_staff=True, is_superuser=True))

    assert other.get(posted["Location"]).context["issued"] is None
    assert admin_client.get(posted["Location"]).context["issued"] is not None  # the other's GET did not spend it


def test_a_key_needs_tenants_or_an_explicit_all(admin_client: Client) -> None:
    integration = integration_get_or_create(source="generic")
    response = admin_client.post("/manage/keys/create/", {"integration": str(integration.public_id)})
    assert response.status_code == 400
    assert IntegrationKey.objects.count() == 0


def test_rotate_and_revoke_from_the_keys_page(admin_client: Client) -> None:
    integration = integration_get_or_create(source="generic")
    old = integration_key_create(integration=integration, all_tenants=True)

    rotated = admin_client.post(f"/manage/keys/{old.record.public_id}/rotate/", {"grace_seconds": "0"})
    assert rotated.status_code == 302
    new_secret = admin_client.get(rotated["Location"]).context["issued"].key
    assert integration_key_authenticate(old.key) is None
    assert integration_key_authenticate(new_secret) is not None

    new_record = IntegrationKey.objects.exclude(pk=old.record.pk).get()
    admin_client.post(f"/manage/keys/{new_record.public_id}/revoke/")
    assert integration_key_authenticate(new_secret) is None
    page = admin_client.get("/manage/keys/").content.decode()
    assert new_record.prefix in page and "Last used" in page


def test_integration_security_page_saves_names_and_names_the_missing_secret(
    admin_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    integration = integration_get_or_create(source="generic")
    monkeypatch.delenv("HANDOVER_SIGNING_SECRET_PROM", raising=False)
    url = f"/manage/integrations/{integration.public_id}/security/"

    response = admin_client.post(
        url,
        {
            "redact_names": "customer_email, api_secret\nssn",
            "signing_secret_env": "HANDOVER_SIGNING_SECRET_PROM",
            "signature_header": "X-Handover-Signature",
            "timestamp_header": "X-Handover-Timestamp",
            "signature_tolerance_seconds": "300",
        },
    )

    assert response.status_code == 302
    integration.refresh_from_db()
    security = integration_security(integration=integration)
    assert security.redact_names == ("api_secret", "customer_email", "ssn")
    assert "not set on this server" in admin_client.get(url).content.decode()
    bad = admin_client.post(
        url,
        {
            "signing_secret_env": "DJANGO_SECRET_KEY",
            "signature_tolerance_seconds": "300",
            "signature_header": "X",
            "timestamp_header": "Y",
        },
    )
    assert bad.status_code == 400
    integration.refresh_from_db()
    assert integration_security(integration=integration).signing_secret_env == "HANDOVER_SIGNING_SECRET_PROM"


def test_audit_page_for_admins_and_auditors_only(client: Client, admin: object) -> None:
    mine, other = TenantFactory(slug="mine"), TenantFactory(slug="theirs")
    auditor, support = UserFactory(), UserFactory()
    role_grant(user=auditor, role="auditor", obj=mine, actor=admin)
    role_grant(user=support, role="support", obj=other, actor=admin)

    client.force_login(auditor)
    page = client.get("/audit/").content.decode()
    assert "mine" in page and "theirs" not in page and "ada-admin" in page
    client.force_login(support)
    assert client.get("/audit/").status_code == 403
    assert client.get("/api/v1/audit-events/").status_code == 403
    client.force_login(auditor)
    listed = client.get("/api/v1/audit-events/").json()
    assert listed["count"] == 1 and listed["results"][0]["tenants"] == ["mine"]


def test_a_key_form_sent_twice_issues_one_key_and_the_second_click_is_shown_it(admin_client: Client) -> None:
    """A double click: the browser drops the first answer and follows the second. One key is issued,
    and the second answer leads to the page that shows that key's secret (once)."""
    integration = integration_get_or_create(source="generic")
    tenant = TenantFactory(slug="acme")
    form = page_form(admin_client, "/manage/keys/", "/manage/keys/create/")
    form.update(integration=str(integration.public_id), tenants=str(tenant.public_id), label="prom")

    first = admin_client.post("/manage/keys/create/", form)
    second = admin_client.post("/manage/keys/create/", form)

    assert IntegrationKey.objects.count() == 1
    assert second.status_code == 302 and second["Location"] == first["Location"]
    shown = admin_client.get(second["Location"])
    assert integration_key_authenticate(shown.context["issued"].key) == IntegrationKey.objects.get()
    assert AuditEvent.objects.filter(action="key_create").count() == 1


def test_a_rotate_button_clicked_twice_rotates_once_and_shows_the_new_key(admin_client: Client) -> None:
    integration = integration_get_or_create(source="generic")
    old = integration_key_create(integration=integration, all_tenants=True)
    action = f"/manage/keys/{old.record.public_id}/rotate/"
    form = page_form(admin_client, "/manage/keys/", action)

    first = admin_client.post(action, form)
    second = admin_client.post(action, form)

    new = IntegrationKey.objects.exclude(pk=old.record.pk)
    assert new.count() == 1
    assert second["Location"] == first["Location"]
    shown = admin_client.get(second["Location"])
    assert integration_key_authenticate(shown.context["issued"].key) == new.get()

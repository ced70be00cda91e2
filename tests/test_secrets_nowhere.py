"""A secret posted in an alert appears nowhere: not in any table, not in the logs, not on any page or export.

One post carries every kind of secret rule 8 (docs/architecture.md) names -- a password and a token under secret
key names, an authorization value, a bearer token, an e-mail address and a Luhn-valid card number
in free text, a value under an integration's own redaction name -- plus the integration key itself
in the header. Then every table is read row by row, the captured logs are searched, and every page,
API answer and export the URL conf has is fetched as an admin and as an auditor (the world of the
authorisation matrix, with this alert's run at its centre).
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import pytest
from django.apps import apps
from django.test import Client

from handover.handovers.services import handover_create
from runs.alerts.models import Alert, Delivery
from runs.catalog.keys import integration_security_update
from runs.catalog.models import Integration, IntegrationKey
from runs.catalog.services import integration_key_create
from tests.authz_rules import RULES
from tests.test_authz_matrix import World, build_path, endpoints, rule_for

SECRETS = {
    "password": "hunter2-pw-5f1e9a",
    "token": "tok-9c2d7e41b3a8f6",
    "authorization": "Basic dXNlcjpwYXNzLTdkM2U=",
    "bearer": "eyJhbGciOiJIUzI1NiJ9secretbearer81",
    "email": "jane.doe.7731@example.com",
    "card": "4111 1111 1111 1111",
    "customer_ref": "CUSTREF-7788-2291",
}
CARD_DIGITS = SECRETS["card"].replace(" ", "")


def _post_body(world: World) -> dict[str, Any]:
    return {
        "schema": "handover.alert/v1",
        "job": world.obj("job", "own").key,
        "tenant": world.obj("tenant", "own").slug,
        "environment": "prod",
        "window_start": "2026-12-01T00:00:00+00:00",
        "window_end": "2026-12-02T00:00:00+00:00",
        "scheduled_for": "2026-12-02T01:00:00+00:00",
        "execution_id": "exec-secret-run-1",
        "status": "failed",
        "error": (
            f"login as {SECRETS['email']} refused: Authorization: Bearer {SECRETS['bearer']}; "
            f"card {SECRETS['card']} declined; ref {SECRETS['customer_ref']}"
        ),
        "log_url": "javascript:alert(document.cookie)",
        "password": SECRETS["password"],
        "credentials": {"token": SECRETS["token"], "authorization": SECRETS["authorization"]},
        "customer_ref": SECRETS["customer_ref"],
    }


def _leaks(text: str, key: str) -> list[str]:
    found = [name for name, value in SECRETS.items() if value in text]
    if CARD_DIGITS in text:
        found.append("card (digits)")
    if key in text:
        found.append("integration key")
    return found


def _admin_path(endpoint: Any, objects: dict[str, Any]) -> str | None:
    """An admin URL filled with the secret rows' ids (their change, history and delete pages)."""
    match = re.match(r"admin:(\w+?)_(\w+)_(change|history|delete)$", endpoint.name)
    if not match:
        return build_path(endpoint, {})
    model = apps.get_model(match.group(1), match.group(2)) if match.group(1) in ("runs", "handover") else None
    obj = objects.get(model.__name__) if model is not None else None
    return build_path(endpoint, {"object_id": str(obj.pk)}) if obj is not None else None


@pytest.mark.django_db
def test_a_redacted_secret_appears_nowhere(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    world = World()
    integration = Integration.objects.get(name="matrix-generic")
    integration_security_update(integration=integration, actor=None, redact_names=["customer_ref"])
    key = integration_key_create(integration=integration, tenants=[world.obj("tenant", "own")]).key

    response = Client().post(
        "/api/v1/alerts/generic/",
        json.dumps(_post_body(world)),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
        HTTP_X_API_KEY=SECRETS["token"],
    )

    assert response.status_code == 202, response.content
    assert _leaks(response.content.decode(), key) == []
    alert = Alert.objects.select_related("run", "delivery").get(execution_id="exec-secret-run-1")
    assert alert.outcome == "accepted" and alert.run is not None
    handover = handover_create(actor=world.users["admin"], runs=[alert.run])
    world.objects[("run", "own")] = alert.run
    world.objects[("alert", "own")] = alert
    world.objects[("handover", "own")] = handover
    rows = {"Delivery": alert.delivery, "Alert": alert, "Run": alert.run, "Handover": handover}
    rows["Attempt"] = alert.attempt
    rows["IntegrationKey"] = IntegrationKey.objects.filter(integration=integration).last()

    # every table, every row, every column
    for model in apps.get_models(include_auto_created=True):
        for row in model.objects.all().values():
            leaked = _leaks(json.dumps(row, default=str, ensure_ascii=False), key)
            assert not leaked, f"{model._meta.label} row {row.get('id')} holds {leaked}"
    assert "‹redacted:" in Delivery.objects.get(pk=alert.delivery_id).body

    # every page, API answer and export, as an admin and as the tenant's auditor
    fetched = 0
    for role in ("admin", "auditor"):
        client = Client(raise_request_exception=False)
        client.force_login(world.users[role])
        for endpoint in endpoints():
            rule = rule_for(endpoint)
            if rule is None or "GET" not in rule.methods:
                continue
            if endpoint.is_admin:
                if role != "admin" or endpoint.key in RULES:
                    continue
                path = _admin_path(endpoint, rows)
                if path is None:
                    continue
            else:
                path = build_path(endpoint, world.url_kwargs(rule.obj, "own"))
            query = rule.query(world, "own") if rule.query else {}
            page = client.get(path, query)
            fetched += 1
            assert page.status_code < 500, (path, page.status_code)
            leaked = _leaks(page.content.decode(errors="replace"), key)
            assert not leaked, f"{path} as {role} shows {leaked}"
            if not endpoint.is_api and 'href="javascript:' in page.content.decode(errors="replace"):
                pytest.fail(f"{path} links a javascript: URL from a payload")
    assert fetched > 100

    # the logs of all of it
    assert _leaks(caplog.text, key) == [], "the logs hold a secret"

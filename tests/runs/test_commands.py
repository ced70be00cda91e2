"""Management commands: keys and tokens printed once on their last line, the demo idempotent and guarded."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import override_settings

from runs.alerts.models import Alert, Delivery
from runs.attempts.models import Attempt, Run
from runs.catalog.authentication import integration_key_authenticate
from runs.catalog.models import Integration, IntegrationKey
from runs.timeline.models import TimelineEvent
from tests.factories import TenantFactory, UserFactory

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_create_integration_key_prints_a_working_key_alone_on_the_last_line() -> None:
    tenant = TenantFactory(slug="acme-foods")

    key = run("create_integration_key", "generic", "--tenant", "acme-foods").strip().splitlines()[-1]
    again = run("create_integration_key", "generic", "--all-tenants").strip().splitlines()[-1]

    record = integration_key_authenticate(key)
    assert record is not None and list(record.tenants.all()) == [tenant] and not record.all_tenants
    assert integration_key_authenticate(again).all_tenants
    assert Integration.objects.count() == 1 and IntegrationKey.objects.count() == 2
    assert key not in IntegrationKey.objects.get(pk=record.pk).secret_hash


def test_create_integration_key_refuses_unknown_sources_and_tenants() -> None:
    with pytest.raises(CommandError, match="Unknown source"):
        run("create_integration_key", "nagios", "--all-tenants")
    with pytest.raises(CommandError, match="No tenant"):
        run("create_integration_key", "generic", "--tenant", "nobody")


def test_create_api_token_prints_a_token_that_authenticates() -> None:
    from django.test import Client

    UserFactory(username="ops", admin=True)
    token = run("create_api_token", "ops").strip().splitlines()[-1]

    assert Client(HTTP_AUTHORIZATION=f"Token {token}").get("/api/v1/runs/").status_code == 200


@override_settings(DEBUG=False)
def test_load_demo_refuses_without_debug_or_demo_flag() -> None:
    with pytest.raises(CommandError, match="DEBUG"):
        run("load_demo")


@override_settings(DEBUG=False)
def test_load_demo_posts_every_story_once_and_a_second_run_changes_nothing() -> None:
    first = run("load_demo", "--demo")
    counts = [m.objects.count() for m in (Delivery, Alert, Run, Attempt, TimelineEvent)]
    second = run("load_demo", "--demo")

    assert "passwords are shown only now" in first and "support" in first
    assert "already loaded" in second and "passwords are shown only now" not in second
    assert [m.objects.count() for m in (Delivery, Alert, Run, Attempt, TimelineEvent)] == counts
    assert Run.objects.filter(tenant__slug="acme-foods").exists()
    assert Alert.objects.filter(outcome="unmatched", job_key="quarterly-vat-filing").exists()
    assert set(Integration.objects.values_list("source", flat=True)) >= {"generic", "alertmanager", "pagerduty"}


@override_settings(DEBUG=False)
def test_load_demo_reset_passwords_prints_new_ones_that_work_and_demo_people_have_addresses() -> None:
    from django.contrib.auth import authenticate

    from handover.notifications.services import notification_email_address

    first = run("load_demo", "--demo")
    old = next(line.split()[2] for line in first.splitlines() if line.strip(" |").startswith("support "))
    reset = run("load_demo", "--demo", "--reset-passwords")
    new = next(line.split()[2] for line in reset.splitlines() if line.strip(" |").startswith("support "))
    assert new != old
    assert authenticate(username="support", password=new) is not None
    assert authenticate(username="support", password=old) is None
    user = get_user_model().objects.get(username="support")
    assert notification_email_address(user=user) == "support@handover.example"


def test_reprocess_alerts_dry_run_changes_nothing(story_tenants: Any, make_key: Any, post_alert: Any) -> None:
    from tests.conftest import fixture_path

    post_alert("generic", fixture_path("generic", "93-unknown-job-key.json"), make_key("generic", all_tenants=True))
    output = run("reprocess_alerts", "--dry-run")

    assert "would reprocess" in output
    assert Alert.objects.get().outcome == "unmatched"

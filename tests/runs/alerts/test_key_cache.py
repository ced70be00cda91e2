"""The ingest path's cache of verified keys: a post that starts after a revocation (or a deactivation, or
a change of the integration) commits sees it, whichever process cached the key; SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runs.alerts.models import Delivery
from runs.catalog import authentication
from runs.catalog.authentication import integration_key_authenticate_cached
from runs.catalog.models import Integration, IntegrationKey
from runs.catalog.services import integration_get_or_create, integration_key_create, integration_key_revoke
from tests.conftest import fixture_path

pytestmark = pytest.mark.django_db(transaction=True)

BODY = fixture_path("generic", "01-first-failure.json")


@pytest.fixture
def issued(story_tenants: dict[str, Any]) -> Any:
    integration = integration_get_or_create(source="generic")
    return integration_key_create(integration=integration, tenants=list(story_tenants.values()))


def test_a_cached_key_costs_one_query_and_hands_each_post_its_own_copy(issued: Any) -> None:
    first = integration_key_authenticate_cached(issued.key)
    with CaptureQueriesContext(connection) as queries:
        second = integration_key_authenticate_cached(issued.key)
    assert first is not None and second is not None and first.pk == second.pk == issued.record.pk
    assert len(queries.captured_queries) == 1  # the state read by primary key, not the lookup by prefix
    assert second is not first and second.integration is not first.integration
    assert integration_key_authenticate_cached(issued.key[:-1] + "x") is None
    assert integration_key_authenticate_cached(issued.key, kind=IntegrationKey.Kind.URL) is None


def test_a_post_after_the_revocation_commits_is_refused_though_the_key_was_cached(post_alert: Any, issued: Any) -> None:
    assert post_alert("generic", BODY, issued.key).status_code == 202  # cached now
    integration_key_revoke(key=issued.record)
    assert post_alert("generic", BODY, issued.key).status_code == 401
    assert Delivery.objects.count() == 1


def test_a_revocation_by_another_process_is_seen_at_once(post_alert: Any, issued: Any) -> None:
    """Another process's revocation sends no signal here: a bare UPDATE, as its commit would leave the row
    (``updated_at`` untouched too, the worst case: the cached version still matches)."""
    assert post_alert("generic", BODY, issued.key).status_code == 202
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {IntegrationKey._meta.db_table} SET revoked_at = %s WHERE id = %s",
            [connection.ops.adapt_datetimefield_value(timezone.now()), issued.record.pk],
        )
    assert post_alert("generic", BODY, issued.key).status_code == 401


def test_a_deactivated_integration_refuses_a_cached_key(post_alert: Any, issued: Any) -> None:
    assert post_alert("generic", BODY, issued.key).status_code == 202
    Integration.objects.filter(pk=issued.record.integration_id).update(is_active=False)  # updated_at untouched
    assert post_alert("generic", BODY, issued.key).status_code == 401


def test_a_rotation_grace_ends_on_time_for_a_cached_key(post_alert: Any, issued: Any) -> None:
    soon = timezone.now() + timedelta(minutes=5)
    integration_key_revoke(key=issued.record, at=soon)
    assert post_alert("generic", BODY, issued.key).status_code == 202  # in its grace: cached
    with time_machine.travel(soon + timedelta(seconds=1)):
        assert post_alert("generic", BODY, issued.key).status_code == 401


def test_a_changed_integration_is_read_again(issued: Any) -> None:
    assert integration_key_authenticate_cached(issued.key).integration.settings == {}
    integration = Integration.objects.get(pk=issued.record.integration_id)
    integration.settings = {"redact_names": ["ticket"]}
    integration.save(update_fields=["settings", "updated_at"])
    assert integration_key_authenticate_cached(issued.key).integration.settings == {"redact_names": ["ticket"]}


def test_an_entry_past_its_time_is_looked_up_again(issued: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    integration_key_authenticate_cached(issued.key)
    monkeypatch.setattr(authentication, "KEY_CACHE_SECONDS", 0.0)
    authentication._KEY_CACHE.clear()
    integration_key_authenticate_cached(issued.key)  # cached with no time left
    with CaptureQueriesContext(connection) as queries:
        assert integration_key_authenticate_cached(issued.key) is not None
    assert len(queries.captured_queries) == 1  # the lookup by prefix only: it reads the state it caches

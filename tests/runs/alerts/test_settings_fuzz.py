"""Property-based: an integration's ``settings`` are free JSON (the Django admin edits them raw), and no
shape of them may break a post (``runs.alerts.parsers.base.settings_in_force``).

For every built-in source (``custom`` keeps its ``mapping``, checked when it is saved, and is left out)
the settings are drawn as arbitrary JSON: the adapter's own ``DEFAULT_SETTINGS`` keys (and the keys read
beside them: ``redact_names``, ``transport``, the signature settings) with values of any shape -- numbers,
flags, null, texts (NUL and lone surrogates on SQLite only: PostgreSQL's ``jsonb`` cannot hold them),
nested lists and tables, or the default itself -- or settings that are not a JSON object at all. One or
two of the source's fixture files are posted through ``POST /api/v1/alerts/<source>/`` and, per example:

- the answer is never a server error, the Delivery never stays ``received``, every Alert row is final;
- when ``settings_problems`` names a problem, no Run is created, every alert not ``rejected`` (nor a
  ``duplicate`` of one of the post's own) is ``unmatched`` with a reason naming "this integration's
  setting", and reprocessing one keeps it so;
- otherwise the post is processed as any other.

Each example runs in a savepoint rolled back at its end (a fresh integration and key each time), so the
examples never see each other's rows.
"""

from __future__ import annotations

import os
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest
import time_machine
from django.db import connection, transaction
from django.db.models import JSONField, Value
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runs.alerts.models import Alert, Delivery
from runs.alerts.parsers.base import settings_problems
from runs.alerts.parsers.registry import available_sources, get_adapter
from runs.alerts.triage import alert_reprocess
from runs.attempts.models import Run
from runs.catalog.keys import SECURITY_KEYS, integration_security, signing_secret
from runs.catalog.models import Integration, Tenant
from runs.catalog.services import integration_get_or_create, integration_key_create
from tests.conftest import fixture_files

pytestmark = pytest.mark.django_db

SOURCES = [source for source in available_sources() if source != "custom"]
RECEIVED = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)  # the fixtures' night is two days before
PAGERDUTY_PLACEHOLDER = b"R0ACMEF00DSPR0DBATCHJ0BS00000001"
# Read from an integration's settings beside the adapter's conventions (redaction, transport, signing).
EXTRA_KEYS = ["transport", "mapping", *SECURITY_KEYS]
FINAL_DELIVERY = {Delivery.Outcome.PROCESSED, Delivery.Outcome.REJECTED}
FINAL_ALERT = set(Alert.Outcome) - {Alert.Outcome.PENDING}
REFUSED = {401, 403, 404, 429}
SETTING_NAMED = "this integration's setting"
EXAMPLES = int(os.environ.get("HANDOVER_SETTINGS_FUZZ_EXAMPLES", "40"))


class _RolledBack(Exception):
    """Ends an example's savepoint: what it wrote is undone."""


def texts(*, sqlite: bool) -> st.SearchStrategy[str]:
    """Texts a database can hold in JSON: on SQLite also NUL and lone surrogates (``jsonb`` refuses them)."""
    if sqlite:
        return st.one_of(st.text(max_size=12), st.sampled_from(["\x00", "a\x00b", "\ud800", "tail \udfff", ""]))
    return st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=12)


def json_values(*, sqlite: bool) -> st.SearchStrategy[Any]:
    """Any JSON value, nested a little (``texts`` for its texts and keys)."""
    text = texts(sqlite=sqlite)
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        text,
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)),
        max_leaves=8,
    )


@st.composite
def hostile_settings(draw: st.DrawFn, defaults: dict[str, Any], *, sqlite: bool) -> Any:
    """Settings as a person could type them raw: mostly an object of known keys, sometimes not an object."""
    value = json_values(sqlite=sqlite)
    if draw(st.integers(0, 9)) == 0:  # the settings as a whole are not an object (or JSON null)
        return draw(
            st.one_of(st.just(None), st.lists(value, max_size=3), value.filter(lambda v: not isinstance(v, dict)))
        )
    keys = st.one_of(st.sampled_from(sorted(defaults)), st.sampled_from(EXTRA_KEYS), texts(sqlite=sqlite))
    chosen = draw(st.lists(keys, max_size=4, unique=True))
    own: dict[str, Any] = {}
    for key in chosen:
        kind = draw(st.integers(0, 3))
        if kind == 0:  # the default itself
            own[key] = defaults.get(key)
        elif kind == 1:  # the default in the other shape a person would type: a list for a text, and back
            default = defaults.get(key)
            own[key] = (
                draw(st.sampled_from([[default], [], default[0] if default else ""]))
                if isinstance(default, list)
                else draw(st.sampled_from([[default], [default, default], []]))
            )
        else:
            own[key] = draw(value)
    return own


def store_settings(integration: Integration, own: Any) -> None:
    """Store ``own`` as the integration's settings as the admin would (``updated_at`` moves); JSON null too."""
    integration.settings = Value(None, JSONField()) if own is None else own
    integration.save()
    integration.refresh_from_db()


def signing_secret_missing(integration: Integration) -> bool:
    """Whether the settings name a signing secret (as the endpoint reads them) that the environment lacks."""
    named = integration_security(integration=integration).signing_secret_env
    return bool(named) and not signing_secret(named)


def post_body(source: str, name: str, key: str) -> bytes:
    """A fixture file as its sender posts it (PagerDuty's carry the issued key as their routing key)."""
    raw = next(path for path in fixture_files(source) if path.name == name).read_bytes()
    return raw.replace(PAGERDUTY_PLACEHOLDER, key.encode()) if source == "pagerduty" else raw


@pytest.mark.parametrize("source", SOURCES)
def test_any_settings_shape_ends_every_post_final_and_never_places_a_run_by_a_default(
    source: str, story_tenants: dict[str, Tenant], request: pytest.FixtureRequest
) -> None:
    adapter = get_adapter(source)
    assert adapter is not None
    defaults = dict(adapter.DEFAULT_SETTINGS)
    names = [path.name for path in fixture_files(source)]
    sqlite = connection.vendor == "sqlite"
    client = Client()
    seen: Counter[str] = Counter()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        own=hostile_settings(defaults, sqlite=sqlite), files=st.lists(st.sampled_from(names), min_size=1, max_size=2)
    )
    def run(own: Any, files: list[str]) -> None:
        try:
            with transaction.atomic():
                check(own, files)
                raise _RolledBack
        except _RolledBack:
            pass

    def check(own: Any, files: list[str]) -> None:
        integration = integration_get_or_create(source=source, name=f"fuzz-settings-{source}")
        key = integration_key_create(integration=integration, all_tenants=True).key
        store_settings(integration, own)
        problems = settings_problems(defaults, integration.settings)
        seen["wrong" if problems else "usable"] += 1
        said = f"settings={own!r} files={files}"
        stored = 0
        for name in files:
            bearer = {} if source == "pagerduty" else {"HTTP_AUTHORIZATION": f"Bearer {key}"}
            with time_machine.travel(RECEIVED, tick=False):
                response = client.post(
                    f"/api/v1/alerts/{source}/",
                    data=post_body(source, name, key),
                    content_type="application/json",
                    **bearer,
                )
            if response.status_code == 503 and signing_secret_missing(integration):
                seen["status 503 (signing secret named, not set)"] += 1
                continue  # the designed answer (fail closed, the sender retries); nothing is stored
            assert response.status_code < 500, f"{name} answered {response.status_code}: {said}"
            seen[f"status {response.status_code}"] += 1
            stored += response.status_code not in REFUSED  # refused before anything is stored
        deliveries = list(Delivery.objects.filter(integration=integration))
        assert len(deliveries) == stored, said
        for delivery in deliveries:
            assert delivery.outcome in FINAL_DELIVERY, f"delivery {delivery.outcome} ({delivery.last_error}): {said}"
        alerts = list(Alert.objects.filter(delivery__integration=integration).order_by("id"))
        for alert in alerts:
            assert alert.outcome in FINAL_ALERT, f"alert {alert.index} {alert.outcome}: {said}"
        seen["alerts"] += len(alerts)
        if not problems:
            return
        assert Run.objects.count() == 0, f"a run was placed despite {problems}: {said}"
        for alert in alerts:
            if alert.outcome == Alert.Outcome.REJECTED or (
                alert.outcome == Alert.Outcome.DUPLICATE and alert.duplicate_of in alerts
            ):
                continue
            assert alert.outcome == Alert.Outcome.UNMATCHED, f"alert {alert.index} {alert.outcome}: {said}"
            assert SETTING_NAMED in alert.reason, f"alert {alert.index} reason {alert.reason!r}: {said}"
        unmatched = [alert for alert in alerts if alert.outcome == Alert.Outcome.UNMATCHED]
        if unmatched:
            again = alert_reprocess(alert=unmatched[0])
            assert again.outcome == Alert.Outcome.UNMATCHED and SETTING_NAMED in again.reason, said
            assert Run.objects.count() == 0, said

    run()
    line = f"settings fuzz source={source} {dict(sorted(seen.items()))}"
    print(line)
    assert seen["wrong"] and seen["usable"], line  # both sides of the rule were exercised

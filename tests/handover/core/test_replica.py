"""The read-replica router: list pages and reports read from ``replica`` when it is configured,
never inside a transaction, never for writes; without it everything stays on ``default``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from django.conf import settings
from django.db import connections, transaction
from django.test import Client

from handover.core.replica import (
    REPLICA,
    ReplicaRouter,
    reading_from_replica,
    replica_reads,
    replica_reads_active,
)
from runs.attempts.models import Run
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def replica() -> Iterator[None]:
    """A ``replica`` alias with default's settings (the same database), as DATABASE_REPLICA_URL adds."""
    with mock.patch.dict(connections.settings, {REPLICA: {**connections.settings["default"]}}):
        yield


def test_the_router_is_installed() -> None:
    assert "handover.core.replica.ReplicaRouter" in settings.DATABASE_ROUTERS


def test_reads_stay_on_default_outside_a_replica_scope(replica: None) -> None:
    assert ReplicaRouter().db_for_read(Run) is None


@pytest.mark.django_db(transaction=True)  # no test transaction around it: a view's reads run outside one
def test_reads_in_a_replica_scope_go_to_the_replica(replica: None) -> None:
    with reading_from_replica():
        assert ReplicaRouter().db_for_read(Run) == REPLICA
        assert Run.objects.all().db == REPLICA  # what a queryset of a list page uses
    assert not replica_reads_active()


def test_reads_in_a_transaction_stay_on_default(replica: None) -> None:
    with reading_from_replica(), transaction.atomic():
        assert ReplicaRouter().db_for_read(Run) is None


def test_without_a_replica_everything_stays_on_default() -> None:
    with reading_from_replica():
        assert ReplicaRouter().db_for_read(Run) is None
        assert Run.objects.all().db == "default"


def test_writes_are_never_routed_and_the_replica_is_never_migrated(replica: None) -> None:
    router = ReplicaRouter()
    with reading_from_replica():
        assert router.db_for_write(Run) is None
    assert router.allow_migrate(REPLICA, "runs") is False
    assert router.allow_migrate("default", "runs") is None


def test_relations_between_default_and_replica_rows_are_allowed() -> None:
    one, other = Run(), Run()
    one._state.db, other._state.db = "default", REPLICA
    assert ReplicaRouter().allow_relation(one, other) is True
    other._state.db = "elsewhere"
    assert ReplicaRouter().allow_relation(one, other) is None


def test_the_scope_ends_with_the_view_even_when_it_raises() -> None:
    seen: list[bool] = []

    @replica_reads
    def view(request: Any) -> None:
        seen.append(replica_reads_active())
        raise ValueError("boom")

    with pytest.raises(ValueError):
        view(mock.Mock())
    assert seen == [True] and not replica_reads_active()


@pytest.mark.parametrize(
    ("url", "module", "selector"),
    [
        ("/runs/", "runs.attempts.views", "run_list"),
        ("/inbox/", "runs.alerts.views", "alert_inbox"),
        ("/handovers/", "handover.handovers.views", "handover_list"),
    ],
)
def test_list_pages_read_in_a_replica_scope(url: str, module: str, selector: str) -> None:
    import importlib

    views = importlib.import_module(module)
    real = getattr(views, selector)
    scopes: list[bool] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        scopes.append(replica_reads_active())
        return real(*args, **kwargs)

    client = Client()
    client.force_login(UserFactory(admin=True))
    with mock.patch.object(views, selector, spy):
        assert client.get(url).status_code == 200
    assert scopes and all(scopes)

"""Schemathesis over the work ledger's paths (``^/api/v1/.*items``) as support on a run with a ledger.

Checks every response against the schema: no server error, documented status codes and content
types, and strict input handling (schema-violating input refused, schema-valid input accepted).
Seeded and bounded; marked ``slow`` so it runs once, on PostgreSQL (``scripts/test.sh``).
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, seed, settings
from knox.models import AuthToken

from handover.wsgi import application
from tests.runs.ledger_support import POPULATION, LedgerWorld, csv, ledger_world, load

schema = schemathesis.openapi.from_wsgi("/api/schema/", application).include(path_regex=r"^/api/v1/.*items")
schema.config.generation.update(allow_x00=False, max_examples=20)
__all__ = ["ledger_world"]


@pytest.fixture
def token(ledger_world: LedgerWorld) -> str:
    load(ledger_world, population=POPULATION, runner_report=csv("record_id,status", "A1,completed"))
    _, secret = AuthToken.objects.create(user=ledger_world.support)
    return secret


@pytest.mark.slow
@pytest.mark.django_db
@schema.parametrize()
@settings(suppress_health_check=list(HealthCheck), deadline=None, database=None)
@seed(20261130)
def test_ledger_api_conforms_to_its_schema(case: Any, token: str, in_process_connections: None) -> None:
    case.call_and_validate(headers={"Authorization": f"Token {token}"})

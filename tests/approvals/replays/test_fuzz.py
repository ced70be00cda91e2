"""Schemathesis over ``/api/v1/replays/``: whatever a caller sends, the answer is documented and never a 500."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from django.db import connection
from hypothesis import HealthCheck, settings

from approvals.replays.models import ReplayRequest
from handover.wsgi import application
from tests.approvals.conftest import World

schema = schemathesis.openapi.from_wsgi("/api/schema/", application).include(path_regex="^/api/v1/replays")

pytestmark = [
    pytest.mark.slow,
    # evaluated at import (schemathesis' generated tests do not see this module's names in a string condition)
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the fuzzing suite runs once, on PostgreSQL"),
]


@pytest.fixture
def token(world: World, approved: ReplayRequest, in_process_connections: None) -> dict[str, str]:
    """A person's API token (requests are served in-process: see ``in_process_connections``)."""
    from knox.models import AuthToken

    _, key = AuthToken.objects.create(world.support)
    return {"Authorization": f"Token {key}"}


@schema.parametrize()
@settings(max_examples=10, suppress_health_check=list(HealthCheck), deadline=None)
@pytest.mark.django_db
def test_replay_endpoints_never_answer_500(case: Any, token: dict[str, str]) -> None:
    response = case.call(headers=token)
    assert response.status_code < 500, (case.method, case.path, response.text[:300])

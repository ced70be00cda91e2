"""Schemathesis against ``/api/schema/``: zero server errors and zero responses that break the schema.

Seeded and bounded (``FUZZ_EXAMPLES`` cases per operation) to fit the CI budget; marked ``slow`` so it
runs once, on PostgreSQL (``scripts/test.sh``). It calls the WSGI application in-process as an admin
with a personal API token (the widest view), ingestion with an integration key, against a small world
(a tenant, a run, an alert, a handover) so that some generated ids hit rows. The number of cases run is
printed at the end. Each failure it found is pinned as a regression test in ``test_api_regressions.py``.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, seed, settings
from knox.models import AuthToken
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from handover.wsgi import application
from runs.catalog.services import integration_get_or_create, integration_key_create
from tests.factories import AttemptFactory, JobTargetFactory, RunFactory, TenantFactory, UserFactory

FUZZ_EXAMPLES = int(os.environ.get("HANDOVER_FUZZ_EXAMPLES", "12"))
FUZZ_SEED = 20261129

schema = schemathesis.openapi.from_wsgi("/api/schema/", application)
schema.config.generation.update(allow_x00=False, max_examples=FUZZ_EXAMPLES)
# The runner endpoints (replay claims) take a runner credential, not a person's token; they are
# covered by the approvals tests. Everything else is fuzzed.
schema = schema.exclude(path_regex=r"^/api/v1/replays/(claimable|[^/]+/claim|[^/]+/runner-report)/$")
# The ``.json`` twins DRF's routers add to every route (``/api/v1/handovers/{id}/close{format}``): the
# runs router no longer has them; those of the handover and approvals routers answer 500 on custom
# actions (reported; pinned in test_api_regressions.py) and are left out until they go.
schema = schema.exclude(path_regex=r"\{format\}")

# What is checked: no server error, documented status codes, content types, headers and response
# bodies. Not checked: whether every schema-violating input is refused and every schema-valid one
# accepted -- list filters ignore unknown values (``?status=AAA`` lists nothing) and forms need more
# than their schema can say (a target that exists); those answers are deliberate, not breakage.
LENIENT_INPUT = [negative_data_rejection, positive_data_acceptance]

CASES: Counter[str] = Counter()


@pytest.fixture(scope="module", autouse=True)
def _report_count(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    total = sum(CASES.values())
    # printed in the run's summary by tests/conftest.py (output written during a fixture's teardown is captured)
    request.config.handover_summary_lines = [  # type: ignore[attr-defined]
        *getattr(request.config, "handover_summary_lines", []),
        f"schemathesis: {total} cases over {len(CASES)} operations (seed {FUZZ_SEED}, {FUZZ_EXAMPLES} a operation)",
    ]


@pytest.fixture
def credentials(db: None) -> dict[str, str]:
    """An admin's API token, an ingestion key, and a few rows for generated ids to meet."""
    tenant = TenantFactory(slug="fuzz-tenant")
    target = JobTargetFactory(tenant=tenant)
    run = RunFactory(job=target.job, tenant=tenant, target=target, status="failed")
    AttemptFactory(run=run, status="failed")
    admin = UserFactory(username="fuzz-admin", admin=True)
    _, token = AuthToken.objects.create(user=admin)
    key = integration_key_create(integration=integration_get_or_create(source="generic"), tenants=[tenant]).key
    return {"token": token, "key": key}


@pytest.mark.slow
@pytest.mark.django_db
@schema.parametrize()
@settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
    deadline=None,
    database=None,
)
@seed(FUZZ_SEED)
def test_api_conforms_to_its_schema(case: Any, credentials: dict[str, str], in_process_connections: None) -> None:
    CASES[case.operation.label] += 1
    if case.path.startswith("/api/v1/alerts/{source}/"):
        headers = {"Authorization": f"Bearer {credentials['key']}"}
    else:
        headers = {"Authorization": f"Token {credentials['token']}"}
    case.call_and_validate(headers=headers, excluded_checks=LENIENT_INPUT)

"""Answers keep their own schema: rows with empty enums, null links and empty log links, served and
validated against ``/api/schema/`` (schemathesis' response validation, in-process over WSGI).

An enum stored as ``""`` is answered as null (documented nullable), never ``""``; a log link is an http(s)
URL or null, never ``""``; a string documented non-nullable is never null.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import schemathesis
from knox.models import AuthToken
from werkzeug.test import Client as WsgiClient

from handover.handovers.services import handover_create
from handover.wsgi import application
from runs.attempts.models import Attempt
from runs.checks.models import NextRunCheck
from runs.ledger.models import WorkItem
from tests.factories import AttemptFactory, JobTargetFactory, NextRunCheckFactory, RunFactory, UserFactory

pytestmark = pytest.mark.django_db

schema = schemathesis.openapi.from_wsgi("/api/schema/", application)

Get = Callable[[str, str], Any]


@pytest.fixture
def served(in_process_connections: None) -> Get:
    """GET ``url`` as an admin with a personal token; validate the answer against operation ``path``."""
    admin = UserFactory(username="schema-admin", admin=True)
    _, token = AuthToken.objects.create(user=admin)
    client = WsgiClient(application)

    def get(path: str, url: str) -> Any:
        response = client.get(url, headers={"Authorization": f"Token {token}", "Host": "localhost"})
        assert response.status_code == 200, response.get_data(as_text=True)[:300]
        schema[path]["GET"].validate_response(response)
        return response.get_json()

    get.admin = admin  # type: ignore[attr-defined]
    return get


@pytest.fixture
def sparse_run() -> Any:
    """A failed run with no failure class, attempts with an empty, a non-http and an http log link."""
    target = JobTargetFactory()
    run = RunFactory(job=target.job, tenant=target.tenant, target=target, failed=True)
    AttemptFactory(run=run, status=Attempt.Status.FAILED, log_url="")
    AttemptFactory(run=run, status=Attempt.Status.FAILED, log_url="ftp://files.example/log.txt", number=2)
    AttemptFactory(run=run, status=Attempt.Status.FAILED, log_url="https://logs.example/q/3", number=3)
    WorkItem.objects.create(run=run, record_id="INV-1")  # no runner status, no evidence yet
    return run


def test_a_run_with_empty_links_and_enums_matches_its_schema(served: Get, sparse_run: Any) -> None:
    run = served("/api/v1/runs/{id}/", f"/api/v1/runs/{sparse_run.public_id}/")

    assert sorted(a["log_url"] or "" for a in run["attempts"]) == ["", "", "https://logs.example/q/3"]
    assert [a["log_url"] for a in run["attempts"]].count(None) == 2
    served("/api/v1/runs/", "/api/v1/runs/")


def test_ledger_answers_with_empty_enums_match_their_schema(served: Get, sparse_run: Any) -> None:
    summary = served("/api/v1/runs/{id}/items/summary/", f"/api/v1/runs/{sparse_run.public_id}/items/summary/")
    items = served("/api/v1/runs/{id}/items/", f"/api/v1/runs/{sparse_run.public_id}/items/")
    found = served("/api/v1/items/", "/api/v1/items/?record_id=INV-1")

    assert summary["failure_class"] is None and summary["failure_class_suggested"] is None
    assert items["results"][0]["runner_status"] is None and items["results"][0]["evidence_kind"] is None
    assert found["results"][0]["evidence_kind"] is None


def test_checks_with_empty_enums_and_null_links_match_their_schema(served: Get) -> None:
    scheduled = NextRunCheckFactory()
    NextRunCheckFactory(failed=True, target=scheduled.target)

    checks = served("/api/v1/checks/", "/api/v1/checks/")
    one = served("/api/v1/checks/{id}/", f"/api/v1/checks/{scheduled.public_id}/")

    assert one["failure_reason"] is None
    assert {c["failure_reason"] for c in checks["results"]} == {None, NextRunCheck.FailureReason.DEADLINE_PASSED}


def test_a_fresh_handover_and_the_audit_trail_match_their_schema(served: Get, sparse_run: Any) -> None:
    handover = handover_create(actor=served.admin, runs=[sparse_run])  # type: ignore[attr-defined]

    served("/api/v1/handovers/", "/api/v1/handovers/")
    detail = served("/api/v1/handovers/{id}/", f"/api/v1/handovers/{handover.public_id}/")
    served("/api/v1/handovers/{id}/revisions/", f"/api/v1/handovers/{handover.public_id}/revisions/")
    served("/api/v1/audit-events/", "/api/v1/audit-events/")
    served("/api/v1/tokens/", "/api/v1/tokens/")

    assert detail["escalation_owner"] is None

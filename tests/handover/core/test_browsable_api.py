"""The browsable API (``?format=api``, DEBUG on) answers the project's refusals as they are, never a 500."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework import exceptions, renderers

from handover.core.errors import DomainError, Forbidden, NotFound
from runs.audit.api import AuditEventViewSet
from runs.catalog.services import role_grant
from tests.factories import TenantFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def browsable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The renderers a DEBUG site has, whatever DEBUG was when the views were defined."""
    monkeypatch.setattr(AuditEventViewSet, "renderer_classes", [renderers.JSONRenderer, renderers.BrowsableAPIRenderer])


def test_the_projects_refusals_are_drfs_own_refusals_too() -> None:
    """DRF's renderers and views take only their own errors as a refusal (the browsable API's forms)."""
    assert issubclass(Forbidden, DomainError) and issubclass(Forbidden, exceptions.PermissionDenied)
    assert issubclass(NotFound, DomainError) and issubclass(NotFound, exceptions.NotFound)
    refused = Forbidden("Only admins.")
    assert (refused.status, refused.status_code, refused.detail, str(refused)) == (
        403,
        403,
        "Only admins.",
        "Only admins.",
    )


@pytest.mark.usefixtures("browsable")
def test_the_audit_trail_in_the_browsable_api_refuses_someone_neither_admin_nor_auditor_with_a_403() -> None:
    client = Client(raise_request_exception=False)
    client.force_login(UserFactory(username="browsing-support"))

    answer = client.get("/api/v1/audit-events/", {"format": "api"})

    assert answer.status_code == 403  # the project's problem details, as without ?format=api (was a 500)
    assert b"Only admins and auditors read the audit trail." in answer.content


@pytest.mark.usefixtures("browsable")
def test_the_audit_trail_in_the_api_still_answers_a_problem_for_someone_refused() -> None:
    client = Client()
    client.force_login(UserFactory(username="json-support"))

    answer = client.get("/api/v1/audit-events/")

    assert answer.status_code == 403 and answer["Content-Type"].startswith("application/problem+json")
    assert answer.json()["type"].endswith("/forbidden")
    assert answer.json()["detail"] == "Only admins and auditors read the audit trail."


@pytest.mark.usefixtures("browsable")
def test_the_audit_trail_in_the_browsable_api_answers_an_auditor() -> None:
    auditor = UserFactory(username="browsing-auditor")
    role_grant(user=auditor, role="auditor", obj=TenantFactory())
    client = Client()
    client.force_login(auditor)

    answer = client.get("/api/v1/audit-events/", {"format": "api"})

    assert answer.status_code == 200 and answer["Content-Type"].startswith("text/html")

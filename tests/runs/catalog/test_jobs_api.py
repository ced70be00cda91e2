"""``/api/v1/jobs/``: the jobs a person may see, filtered and paged; others answer 404 as problem details."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from runs.catalog.models import Job
from runs.catalog.services import role_grant
from tests.factories import JobFactory, JobTargetFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db


def _client(user: object) -> Client:
    client = Client()
    client.force_login(user)  # type: ignore[arg-type]
    return client


@pytest.fixture
def jobs() -> dict[str, Job]:
    acme, other = TenantFactory(slug="acme-foods"), TenantFactory(slug="borealis-retail")
    export = JobFactory(key="nightly-invoice-export", name="Nightly invoice export", schedule="0 1 * * *")
    sync = JobFactory(key="Stock-Sync", name="Warehouse stock sync", grace_seconds=600)
    hidden = JobFactory(key="nightly-payroll", name="Payroll")
    JobTargetFactory(job=export, tenant=acme)
    JobTargetFactory(job=sync, tenant=acme)
    JobTargetFactory(job=hidden, tenant=other)
    Job.objects.filter(pk=sync.pk).update(paused_at=timezone.now(), pause_reason="warehouse move")
    return {"export": export, "sync": sync, "hidden": hidden, "tenant": acme}  # type: ignore[dict-item]


def test_support_lists_the_jobs_of_their_tenant_only(jobs: dict[str, Job]) -> None:
    support = UserFactory(username="sam-support")
    role_grant(user=support, role="support", obj=jobs["tenant"])  # type: ignore[arg-type]

    body = _client(support).get("/api/v1/jobs/").json()

    assert body["count"] == 2 and body["next"] is None and body["previous"] is None
    assert [job["key"] for job in body["results"]] == ["Stock-Sync", "nightly-invoice-export"]
    export = body["results"][1]
    assert export["id"] == str(jobs["export"].public_id)
    assert export["url"] == f"http://testserver/api/v1/jobs/{jobs['export'].public_id}/"
    assert export["schedule"] == "0 1 * * *" and export["grace_seconds"] == 1800
    assert export["is_paused"] is False and export["paused_by"] is None
    assert body["results"][0]["is_paused"] is True and body["results"][0]["pause_reason"] == "warehouse move"


def test_search_is_a_case_insensitive_prefix_of_key_or_name(jobs: dict[str, Job]) -> None:
    client = _client(UserFactory(is_superuser=True))

    def keys(query: str) -> list[str]:
        return [job["key"] for job in client.get(f"/api/v1/jobs/?{query}").json()["results"]]

    assert keys("search=NIGHTLY") == ["nightly-invoice-export", "nightly-payroll"]
    assert keys("search=stock") == ["Stock-Sync"]
    assert keys("search=warehouse") == ["Stock-Sync"]  # the name
    assert keys("search=invoice") == []  # a prefix, not a substring
    assert keys("paused=true") == ["Stock-Sync"]
    assert keys("paused=false&search=nightly") == ["nightly-invoice-export", "nightly-payroll"]


def test_bad_and_unknown_parameters_answer_400_problem_details(jobs: dict[str, Job]) -> None:
    client = _client(UserFactory(is_superuser=True))

    bad = client.get("/api/v1/jobs/?paused=maybe")
    unknown = client.get("/api/v1/jobs/?owner=me")

    assert bad.status_code == 400 and bad["Content-Type"] == "application/problem+json"
    assert list(bad.json()["errors"]) == ["paused"]
    assert unknown.status_code == 400 and list(unknown.json()["errors"]) == ["owner"]


def test_detail_answers_a_visible_job_and_404_problem_details_for_others(jobs: dict[str, Job]) -> None:
    support = UserFactory()
    role_grant(user=support, role="support", obj=jobs["tenant"])  # type: ignore[arg-type]
    client = _client(support)

    seen = client.get(f"/api/v1/jobs/{jobs['sync'].public_id}/")
    hidden = client.get(f"/api/v1/jobs/{jobs['hidden'].public_id}/")

    assert seen.status_code == 200
    assert seen.json()["key"] == "Stock-Sync" and seen.json()["grace_seconds"] == 600
    assert hidden.status_code == 404 and hidden["Content-Type"] == "application/problem+json"
    assert hidden.json()["status"] == 404
    assert Client().get("/api/v1/jobs/").status_code == 401


def test_the_list_pages_and_its_query_count_does_not_grow(jobs: dict[str, Job], django_assert_max_num_queries) -> None:  # type: ignore[no-untyped-def]
    paused_by = UserFactory(username="olga-owner")
    for index in range(5):
        JobFactory(key=f"extra-{index}", paused_at=timezone.now(), pause_reason="x", paused_by=paused_by)
    client = _client(UserFactory(is_superuser=True))

    with django_assert_max_num_queries(6):
        first = client.get("/api/v1/jobs/?page_size=3").json()

    assert first["count"] == 8 and len(first["results"]) == 3
    assert first["next"] == "http://testserver/api/v1/jobs/?page=2&page_size=3"
    assert [job["key"] for job in first["results"]] == ["Stock-Sync", "extra-0", "extra-1"]  # by key, code points
    assert [job["paused_by"] for job in first["results"]] == [None, "olga-owner", "olga-owner"]

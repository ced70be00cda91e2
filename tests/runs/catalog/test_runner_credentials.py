"""Runner credentials per job: issued on the job page (shown once, POST-redirect-GET), over the API and by a
command; listed with prefix, creator and last use; revoked -- by an admin or the job's technical owner only."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.test import Client

from handover.core.errors import Forbidden, NotFound
from runs.audit.models import AuditEvent
from runs.catalog.authentication import runner_credential_authenticate
from runs.catalog.models import Job, RunnerCredential
from runs.catalog.services import role_grant, runner_credential_create, runner_credential_revoke
from tests.factories import JobFactory, JobTargetFactory, TenantFactory, UserFactory
from tests.page_forms import page_form

pytestmark = pytest.mark.django_db
PASSWORD = "correct-horse-battery"


@pytest.fixture(autouse=True)
def _own_cache(settings: Any) -> Iterator[None]:
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "rc"}}
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def job() -> Job:
    return JobFactory(key="nightly-invoice-export")


def signed_in(user: Any) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def test_the_technical_owner_issues_one_on_the_job_page_shown_once(job: Job) -> None:
    owner = UserFactory(username="tom")
    role_grant(user=owner, role="technical_owner", obj=job)
    client = signed_in(owner)

    response = client.post(f"/jobs/{job.public_id}/runner-credentials/", {"label": "invoice runner"})
    assert response.status_code == 302 and "?issued=" in response["Location"]
    assert RunnerCredential.objects.filter(job=job).count() == 1

    page = client.get(response["Location"])
    html = page.content.decode()
    secret = html.split('<code class="secret">')[1].split("</code>")[0]
    assert secret.startswith("rc_") and page["Cache-Control"] == "no-store"
    credential = runner_credential_authenticate(secret)
    assert credential is not None and credential.job == job and credential.created_by == owner
    assert "http://testserver/api/v1/replays/claimable/" in html  # the curl lines use the real base URL

    again = client.get(response["Location"])  # a reload: not shown again, nothing issued
    assert secret not in again.content.decode()
    assert RunnerCredential.objects.filter(job=job).count() == 1
    event = AuditEvent.objects.get(action="runner_credential_create")
    assert event.actor == owner and event.job == job and secret not in str(event.data) + event.summary


def test_support_and_other_owners_may_not_issue_or_see_them(job: Job) -> None:
    tenant = TenantFactory()
    support = UserFactory(username="sam")
    role_grant(user=support, role="support", obj=tenant)
    other_owner = UserFactory(username="otto")
    role_grant(user=other_owner, role="technical_owner", obj=JobFactory())
    assert signed_in(other_owner).post(f"/jobs/{job.public_id}/runner-credentials/").status_code == 404
    api = signed_in(other_owner).get(f"/api/v1/jobs/{job.public_id}/runner-credentials/")
    assert api.status_code == 404
    admin = UserFactory(username="root", admin=True)
    assert signed_in(admin).get(f"/api/v1/jobs/{job.public_id}/runner-credentials/").status_code == 200
    assert RunnerCredential.objects.count() == 0


def test_the_api_issues_lists_and_revokes(job: Job) -> None:
    owner = UserFactory(username="tom")
    role_grant(user=owner, role="technical_owner", obj=job)
    client = signed_in(owner)
    url = f"/api/v1/jobs/{job.public_id}/runner-credentials/"

    created = client.post(url, {"label": "prod runner"}, content_type="application/json")
    assert created.status_code == 201 and created["Cache-Control"] == "no-store"
    body = created.json()
    assert body["credential"].startswith(body["prefix"]) and body["created_by"] == "tom"
    assert body["claimable_url"] == "http://testserver/api/v1/replays/claimable/"

    runner = Client(HTTP_AUTHORIZATION=f"Bearer {body['credential']}")
    assert runner.get("/api/v1/replays/claimable/").status_code == 200
    listed = client.get(url).json()
    assert [row["prefix"] for row in listed] == [body["prefix"]]
    assert listed[0]["last_used_at"] is not None and "credential" not in listed[0]

    revoked = client.delete(f"{url}{body['prefix']}/")
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    assert runner.get("/api/v1/replays/claimable/").status_code == 401
    assert client.delete(f"{url}{body['prefix']}/").status_code == 200  # idempotent
    assert AuditEvent.objects.filter(action="runner_credential_revoke").count() == 1


def test_the_command_prints_the_credential_alone_on_the_last_line(job: Job) -> None:
    out = StringIO()
    call_command("create_runner_credential", job.key, "--label", "cron box", stdout=out)
    secret = out.getvalue().strip().splitlines()[-1]
    credential = runner_credential_authenticate(secret)
    assert credential is not None and credential.job == job and credential.label == "cron box"


def test_the_services_refuse_who_may_not_manage_them_and_write_nothing(job: Job) -> None:
    """Issue #15: issuing and revoking refuse themselves (the page and the API relay the refusal)."""
    owner = UserFactory()
    role_grant(user=owner, role="technical_owner", obj=job)
    credential, _ = runner_credential_create(job=job, created_by=owner, label="kept")
    support = UserFactory()
    role_grant(user=support, role="support", obj=JobTargetFactory(job=job).tenant)  # sees the job, may not manage
    audited = AuditEvent.objects.count()
    for actor, error in ((support, Forbidden), (UserFactory(), NotFound)):
        with pytest.raises(error):
            runner_credential_create(job=job, created_by=actor, label="not issued")
        with pytest.raises(error):
            runner_credential_revoke(credential=credential, actor=actor)
    assert list(RunnerCredential.objects.values_list("label", "revoked_at")) == [("kept", None)]
    assert AuditEvent.objects.count() == audited


def test_the_issue_button_clicked_twice_issues_one_credential_and_shows_it(job: Job) -> None:
    owner = UserFactory(username="tom")
    role_grant(user=owner, role="technical_owner", obj=job)
    client = signed_in(owner)
    action = f"/jobs/{job.public_id}/runner-credentials/"
    form = page_form(client, f"/jobs/{job.public_id}/", action)
    form["label"] = "invoice runner"

    first = client.post(action, form)
    second = client.post(action, form)

    assert RunnerCredential.objects.filter(job=job).count() == 1
    assert second["Location"] == first["Location"]
    html = client.get(second["Location"]).content.decode()
    secret = html.split('<code class="secret">')[1].split("</code>")[0]
    assert runner_credential_authenticate(secret) == RunnerCredential.objects.get(job=job)

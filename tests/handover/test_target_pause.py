"""A target's pause (its tenant's part of a job): support on the tenant pauses it, a stranger may not,
the pause is written on the job's timeline for the tenant, and the API and the page refuse as the service."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from handover.core.errors import DomainError, Forbidden, NotFound
from runs.catalog.models import JobTarget
from runs.catalog.pause import job_pause, target_pause, target_resume
from runs.timeline.models import TimelineEvent
from tests.factories import UserFactory
from tests.handover.helpers import World

pytestmark = pytest.mark.django_db


def test_support_pauses_its_tenants_target_with_a_reason_and_a_tenant_event(world: World) -> None:
    target = target_pause(target=world.target, actor=world.support, reason="tenant migrating its ledger")

    assert (
        target.paused_at and target.paused_by == world.support and target.pause_reason == "tenant migrating its ledger"
    )
    event = TimelineEvent.objects.get(kind=TimelineEvent.Kind.TARGET_PAUSED)
    assert (event.job, event.tenant, event.run) == (world.job, world.tenant, None)
    assert event.actor_user == world.support and event.data["target"] == str(world.target.public_id)
    assert world.job.paused_at is None  # the job itself runs on for every other tenant


def test_target_pause_needs_a_reason_is_idempotent_and_resume_clears_it_once(world: World) -> None:
    with pytest.raises(DomainError):
        target_pause(target=world.target, actor=world.support, reason="  ")
    first = target_pause(target=world.target, actor=world.support, reason="first")
    again = target_pause(target=world.target, actor=world.owner, reason="second")
    assert (again.paused_at, again.pause_reason, again.paused_by) == (first.paused_at, "first", world.support)
    assert TimelineEvent.objects.filter(kind=TimelineEvent.Kind.TARGET_PAUSED).count() == 1

    resumed = target_resume(target=world.target, actor=world.owner, note="done")
    target_resume(target=world.target, actor=world.owner)
    assert resumed.paused_at is None and resumed.paused_by is None and resumed.pause_reason == ""
    assert resumed.resumed_at is not None
    event = TimelineEvent.objects.get(kind=TimelineEvent.Kind.TARGET_RESUMED)
    assert event.tenant == world.tenant and event.data["paused_reason"] == "first" and event.actor_user == world.owner


def test_readers_get_403_strangers_404_and_nothing_changes(world: World) -> None:
    with pytest.raises(Forbidden):
        target_pause(target=world.target, actor=world.auditor, reason="not mine")
    with pytest.raises(NotFound):
        target_pause(target=world.target, actor=world.stranger, reason="other tenant")
    assert JobTarget.objects.get(pk=world.target.pk).paused_at is None
    assert not TimelineEvent.objects.filter(kind=TimelineEvent.Kind.TARGET_PAUSED).exists()


def test_support_still_may_not_pause_the_whole_job(world: World) -> None:
    with pytest.raises(Forbidden):
        job_pause(job=world.job, actor=world.support, reason="everyone")
    with pytest.raises(NotFound):
        job_pause(job=world.job, actor=UserFactory(), reason="nobody")


def test_the_api_pauses_and_resumes_a_target_and_refuses_as_the_service(world: World) -> None:
    client = Client()
    client.force_login(world.support)
    url = reverse("handover-api:target-pause", kwargs={"id": world.target.public_id})
    body = client.post(url, {"reason": "tenant freeze"}, content_type="application/json").json()
    assert body["is_paused"] is True and body["pause_reason"] == "tenant freeze" and body["tenant"] == world.tenant.slug
    assert JobTarget.objects.get(pk=world.target.pk).paused_by == world.support

    client.force_login(world.auditor)
    refused = client.post(reverse("handover-api:target-resume", kwargs={"id": world.target.public_id}))
    assert refused.status_code == 403 and refused["Content-Type"].startswith("application/problem+json")
    client.force_login(world.stranger)
    assert client.post(reverse("handover-api:target-resume", kwargs={"id": world.target.public_id})).status_code == 404
    assert JobTarget.objects.get(pk=world.target.pk).paused_at is not None


def test_the_job_page_lists_targets_and_support_pauses_its_own(world: World) -> None:
    client = Client()
    client.force_login(world.support)
    page = client.get(reverse("handover:job-pause", kwargs={"id": world.job.public_id}))
    assert page.status_code == 200 and f"Pause {world.tenant.slug}" in page.content.decode()

    done = client.post(
        reverse("handover:target-pause", kwargs={"id": world.target.public_id}), {"target-reason": "freeze"}
    )
    assert done.status_code == 302
    assert JobTarget.objects.get(pk=world.target.pk).pause_reason == "freeze"

    client.force_login(world.auditor)
    assert client.post(reverse("handover:target-resume", kwargs={"id": world.target.public_id})).status_code == 403
    assert (
        client.post(reverse("handover:job-pause", kwargs={"id": world.job.public_id}), {"reason": "x"}).status_code
        == 403
    )

"""Job pause and resume: reason required, idempotent, a job-level timeline event with who and when."""

from __future__ import annotations

import pytest

from handover.core.errors import DomainError, Forbidden
from runs.catalog.models import Job
from runs.catalog.pause import job_pause, job_resume
from runs.timeline.models import TimelineEvent
from tests.factories import UserFactory
from tests.handover.helpers import World

pytestmark = pytest.mark.django_db


def test_pause_records_reason_actor_and_a_job_level_event(world: World) -> None:
    job = job_pause(job=world.job, actor=world.owner, reason="ledger gateway maintenance")

    assert job.paused_at and job.paused_by == world.owner and job.pause_reason == "ledger gateway maintenance"
    event = TimelineEvent.objects.get(kind="job_paused")
    assert (event.job, event.tenant, event.run, event.attempt) == (world.job, None, None, None)
    assert event.actor_user == world.owner and "ledger gateway maintenance" in event.summary


def test_pause_needs_a_reason_and_is_idempotent(world: World) -> None:
    with pytest.raises(DomainError):
        job_pause(job=world.job, actor=world.owner, reason=" ")
    first = job_pause(job=world.job, actor=world.owner, reason="first")
    admin = UserFactory(admin=True)
    again = job_pause(job=world.job, actor=admin, reason="second")

    assert again.paused_at == first.paused_at and again.pause_reason == "first" and again.paused_by == world.owner
    assert TimelineEvent.objects.filter(kind="job_paused").count() == 1


def test_resume_clears_the_pause_once(world: World) -> None:
    job_pause(job=world.job, actor=world.owner, reason="maintenance")

    job = job_resume(job=world.job, actor=world.owner, note="gateway back")
    job_resume(job=world.job, actor=world.owner)

    assert job.paused_at is None and job.paused_by is None and job.pause_reason == ""
    event = TimelineEvent.objects.get(kind="job_resumed")
    assert event.actor_user == world.owner and event.run is None and event.data["paused_reason"] == "maintenance"


def test_support_may_not_pause_or_resume_the_whole_job(world: World) -> None:
    """A job-wide pause stops every tenant's replays: its technical owner's or an admin's, not support's."""
    with pytest.raises(Forbidden):
        job_pause(job=world.job, actor=world.support, reason="ledger gateway maintenance")
    assert Job.objects.get(pk=world.job.pk).paused_at is None
    assert not TimelineEvent.objects.filter(kind=TimelineEvent.Kind.JOB_PAUSED).exists()

    job_pause(job=world.job, actor=world.owner, reason="ledger gateway maintenance")
    with pytest.raises(Forbidden):
        job_resume(job=world.job, actor=world.support)
    assert Job.objects.get(pk=world.job.pk).paused_by == world.owner
    assert not TimelineEvent.objects.filter(kind=TimelineEvent.Kind.JOB_RESUMED).exists()

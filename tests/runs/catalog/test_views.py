"""The job page: the DST policy in words, the next five fire times in the job's zone and UTC, targets."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import time_machine
from django.test import Client

from runs.catalog.models import Job, JobTarget
from runs.catalog.services import role_grant
from tests.factories import JobFactory, JobTargetFactory, UserFactory

pytestmark = pytest.mark.django_db


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_job_page_explains_the_dst_policy_and_lists_five_fire_times_across_the_autumn_change(
    story_job: Job, story_tenants: Any
) -> None:
    person = UserFactory()
    role_grant(user=person, role="support", obj=story_tenants["acme-foods"])
    Job.objects.filter(pk=story_job.pk).update(dst_gap_policy="skip", dst_overlap_policy="second")

    with time_machine.travel(datetime(2026, 10, 23, 12, 0, tzinfo=UTC), tick=False):
        response = logged_in(person).get(f"/jobs/{story_job.public_id}/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "fixed-time entry" in page
    assert "does not run that day: the slot is skipped" in page
    assert "runs once, at the second occurrence (winter time)" in page
    times = [(f.local.isoformat(), f.utc.isoformat()) for f in response.context["fire_times"]]
    assert times == [
        ("2026-10-24T02:00:00+02:00", "2026-10-24T00:00:00+00:00"),
        ("2026-10-25T02:00:00+01:00", "2026-10-25T01:00:00+00:00"),  # the repeated hour, second occurrence
        ("2026-10-26T02:00:00+01:00", "2026-10-26T01:00:00+00:00"),
        ("2026-10-27T02:00:00+01:00", "2026-10-27T01:00:00+00:00"),
        ("2026-10-28T02:00:00+01:00", "2026-10-28T01:00:00+00:00"),
    ]
    assert "2026-10-25 02:00:00 CET" in page and "2026-10-25 01:00:00 UTC" in page
    assert [t["target"].tenant.slug for t in response.context["targets"]] == ["acme-foods"]


def test_job_page_for_a_wildcard_schedule_and_a_zone_without_dst() -> None:
    job = JobFactory(schedule="*/15 * * * *", timezone="Asia/Tokyo")
    admin = UserFactory(admin=True)

    page = logged_in(admin).get(f"/jobs/{job.public_id}/").content.decode()

    assert "wildcard entry" in page and "The DST policy does not apply" in page
    assert "Asia/Tokyo has no clock change in the coming year" in page


def test_job_page_shows_a_targets_own_schedule_and_is_hidden_from_strangers(story_job: Job) -> None:
    target = JobTargetFactory(job=story_job, timezone_override="America/New_York", schedule_override="0 7 * * *")
    person = UserFactory()
    role_grant(user=person, role="support", obj=target.tenant)

    with time_machine.travel(datetime(2024, 3, 9, 13, 0, tzinfo=UTC), tick=False):
        response = logged_in(person).get(f"/jobs/{story_job.public_id}/")
    own = response.context["targets"][0]
    assert own["overridden"]
    # C04.B: 07:00 New York on the DST start day is 11:00Z, not 12:00Z (last + 24 h)
    assert own["fire_times"][0].utc == datetime(2024, 3, 10, 11, 0, tzinfo=UTC)
    assert logged_in(UserFactory()).get(f"/jobs/{story_job.public_id}/").status_code == 404


def test_jobs_list_shows_visible_jobs(story_job: Job, story_tenants: Any) -> None:
    JobFactory(key="other-job")
    person = UserFactory()
    role_grant(user=person, role="auditor", obj=story_tenants["acme-foods"])

    response = logged_in(person).get("/jobs/")

    assert [job.key for job in response.context["jobs"]] == ["nightly-invoice-export"]
    assert JobTarget.objects.filter(job=story_job).count() == len(story_tenants) - 1

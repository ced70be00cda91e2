"""Schedules are validated wherever a job or a target is saved: the services (and the demo loader that
uses them), the admin's job and target forms, and any ``full_clean``. One function, ``schedule_validate``,
with errors keyed by field: cronsim's own message, a cron that can never fire, the IANA zone, a window
alignment coarser than the schedule's shortest gap (a target's override included), DST ``both``.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from runs.catalog.models import Job, JobTarget, environment_is_valid, schedule_validate
from runs.catalog.services import job_get_or_create, job_target_get_or_create
from tests.factories import JobFactory, JobTargetFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db

VALID = {"schedule": "0 2 * * *", "timezone": "Europe/Berlin", "window_alignment": "day"}

# (what is wrong, the job's values, the field named, a piece of the message)
BAD_JOBS = [
    ("cronsim refuses a field", {"schedule": "61 * * * *"}, "schedule", "Bad minute"),
    ("cronsim refuses the hour", {"schedule": "0 24 * * *"}, "schedule", "Bad hour"),
    ("six fields", {"schedule": "0 0 2 * * *"}, "schedule", "five fields"),
    ("a macro", {"schedule": "@daily"}, "schedule", "not supported"),
    ("never fires", {"schedule": "0 0 30 2 *"}, "schedule", "can never fire"),
    ("never fires in April or June", {"schedule": "0 0 31 4,6 *"}, "schedule", "can never fire"),
    ("unknown zone", {"timezone": "Mars/Olympus_Mons"}, "timezone", "Unknown time zone"),
    ("server-dependent zone", {"timezone": "localtime"}, "timezone", "not a usable time zone"),
    ("day alignment on an hourly cron", {"schedule": "0 * * * *"}, "window_alignment", "fires more than once"),
    (
        "hour alignment on a 5-minute cron",
        {"schedule": "*/5 * * * *", "window_alignment": "hour"},
        "window_alignment",
        "once in one hour",
    ),
    (
        "month alignment on a weekly cron",
        {"schedule": "0 2 * * 1", "window_alignment": "month"},
        "window_alignment",
        "once in one month",
    ),
    ("DST both with day alignment", {"dst_overlap_policy": "both"}, "dst_overlap_policy", "'none' or 'hour'"),
]
GOOD_JOBS = [
    {},
    {"schedule": "0 * * * *", "window_alignment": "hour"},
    {"schedule": "*/5 * * * *", "window_alignment": "none"},
    {"schedule": "0 2 1 * *", "window_alignment": "month"},
    {"schedule": "0 0 29 2 *", "window_alignment": "month"},  # every fourth year, but it fires
    {"schedule": "30 2 * * *", "dst_overlap_policy": "both", "window_alignment": "hour"},
    {"schedule": "30 2 * * *", "dst_overlap_policy": "both", "window_alignment": "none"},
]


def errors_of(exc: pytest.ExceptionInfo[ValidationError]) -> dict[str, list[str]]:
    return exc.value.message_dict


@pytest.mark.parametrize(
    ("values", "field", "message"), [pytest.param(v, f, m, id=label) for label, v, f, m in BAD_JOBS]
)
def test_the_service_refuses_a_bad_schedule_and_writes_nothing(
    values: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(ValidationError) as exc:
        job_get_or_create(key="nightly-export", defaults={**VALID, **values})

    assert message in " ".join(errors_of(exc)[field])
    assert not Job.objects.exists()


@pytest.mark.parametrize("values", GOOD_JOBS)
def test_the_service_saves_a_good_schedule(values: dict[str, Any]) -> None:
    job, created = job_get_or_create(key="nightly-export", defaults={**VALID, **values})

    assert created and Job.objects.get(key="nightly-export").schedule == job.schedule


def test_cronsims_own_message_is_shown() -> None:
    with pytest.raises(ValidationError) as exc:
        job_get_or_create(key="k", defaults={**VALID, "schedule": "61 * * * *"})

    assert errors_of(exc)["schedule"] == [
        "Bad minute in the cron expression '61 * * * *' (cronsim: minute hour day-of-month month day-of-week)."
    ]


def test_an_existing_job_is_returned_unchanged() -> None:
    existing = JobFactory(key="k")

    job, created = job_get_or_create(key="k", defaults={**VALID, "schedule": "61 * * * *"})

    assert (job.pk, created) == (existing.pk, False)


def test_a_target_override_finer_than_the_jobs_alignment_is_refused() -> None:
    job = JobFactory(**VALID)
    tenant = TenantFactory()

    with pytest.raises(ValidationError) as exc:
        job_target_get_or_create(job=job, tenant=tenant, defaults={"schedule_override": "0 * * * *"})

    assert "fires more than once in one day" in errors_of(exc)["schedule_override"][0]
    assert not JobTarget.objects.exists()


@pytest.mark.parametrize(
    ("defaults", "field", "message"),
    [
        ({"schedule_override": "61 * * * *"}, "schedule_override", "Bad minute"),
        ({"schedule_override": "0 0 30 2 *"}, "schedule_override", "can never fire"),
        ({"timezone_override": "Europe/Atlantis"}, "timezone_override", "Unknown time zone"),
        ({"dst_overlap_override": "both"}, "dst_overlap_override", "'none' or 'hour'"),
    ],
)
def test_the_target_service_refuses_bad_overrides(defaults: dict[str, str], field: str, message: str) -> None:
    job = JobFactory(**VALID)

    with pytest.raises(ValidationError) as exc:
        job_target_get_or_create(job=job, tenant=TenantFactory(), defaults=defaults)

    assert message in errors_of(exc)[field][0]
    assert not JobTarget.objects.exists()


def test_a_target_environment_that_is_not_a_slug_is_refused() -> None:
    with pytest.raises(ValidationError) as exc:
        job_target_get_or_create(job=JobFactory(**VALID), tenant=TenantFactory(), environment="prod/eu")

    assert "environment" in errors_of(exc)
    assert not JobTarget.objects.exists()


def test_a_coarser_job_alignment_is_refused_when_a_targets_override_fires_more_often() -> None:
    job = JobFactory(schedule="0 2 * * *", timezone="UTC", window_alignment="hour")
    JobTargetFactory(job=job, schedule_override="0 * * * *")
    job.window_alignment = "day"

    with pytest.raises(ValidationError) as exc:
        job.full_clean()

    (message,) = errors_of(exc)["window_alignment"]
    assert message.startswith(f"Target {job.key} / ") and "fires more than once in one day" in message
    assert Job.objects.get(pk=job.pk).window_alignment == "hour"


def test_schedule_validate_passes_a_job_and_its_fitting_targets() -> None:
    job = JobFactory(schedule="0 * * * *", timezone="UTC", window_alignment="hour")
    target = JobTargetFactory(job=job, schedule_override="15 3 * * *", timezone_override="Asia/Tokyo")

    schedule_validate(job=job)
    schedule_validate(job=job, target=target)


@pytest.mark.parametrize(
    ("value", "valid"),
    [("prod", True), ("staging-2", True), ("eu_west", True), ("", False), ("prod/eu", False), ("prød", False)]
    + [("x" * 50, True), ("x" * 51, False), ("pr\x00od", False), (None, False)],
)
def test_environment_is_valid(value: Any, valid: bool) -> None:
    assert environment_is_valid(value) is valid


# --- the admin's forms -------------------------------------------------------------------------------------


@pytest.fixture
def admin_client() -> Client:
    client = Client()
    client.force_login(UserFactory(admin=True))
    return client


def job_form(**values: str) -> dict[str, str]:
    return {
        "key": "nightly-export",
        "name": "",
        "schedule": "0 2 * * *",
        "timezone": "Europe/Berlin",
        "dst_gap_policy": "next_existing",
        "dst_overlap_policy": "first",
        "grace_seconds": "1800",
        "window_alignment": "day",
        "missed_run_policy": "catch_up_all",
        "missed_run_expire_after_seconds": "",
        "overlap_policy": "allow",
        "early_tolerance_seconds": "60",
        "starting_deadline_seconds": "",
        "expected_output": "",
        "verification": "",
        "side_effects-TOTAL_FORMS": "0",
        "side_effects-INITIAL_FORMS": "0",
        "side_effects-MIN_NUM_FORMS": "0",
        "side_effects-MAX_NUM_FORMS": "1000",
        **values,
    }


@pytest.mark.parametrize(
    ("values", "field", "message"), [pytest.param(v, f, m, id=label) for label, v, f, m in BAD_JOBS]
)
def test_the_admin_job_form_refuses_a_bad_schedule(
    admin_client: Client, values: dict[str, str], field: str, message: str
) -> None:
    response = admin_client.post("/admin/runs/job/add/", job_form(**values))

    assert response.status_code == 200  # the form again, with its errors
    errors = response.context["adminform"].form.errors
    assert message in " ".join(errors[field])
    assert not Job.objects.exists()


def test_the_admin_job_form_saves_a_good_schedule(admin_client: Client) -> None:
    response = admin_client.post("/admin/runs/job/add/", job_form())

    assert response.status_code == 302
    assert Job.objects.get(key="nightly-export").schedule == "0 2 * * *"


def test_the_admin_job_form_refuses_an_alignment_a_target_override_breaks(admin_client: Client) -> None:
    job = JobFactory(key="nightly-export", schedule="0 2 * * *", timezone="Europe/Berlin", window_alignment="hour")
    JobTargetFactory(job=job, schedule_override="0 * * * *")

    response = admin_client.post(f"/admin/runs/job/{job.pk}/change/", job_form(window_alignment="day"))

    assert response.status_code == 200
    assert "fires more than once in one day" in " ".join(response.context["adminform"].form.errors["window_alignment"])
    job.refresh_from_db()
    assert job.window_alignment == "hour"


def target_form(job: Job, **values: str) -> dict[str, str]:
    return {
        "job": str(job.pk),
        "tenant": str(TenantFactory().pk),
        "environment": "prod",
        "schedule_override": "",
        "timezone_override": "",
        "dst_gap_override": "",
        "dst_overlap_override": "",
        "reports_successes": "on",
        "is_active": "on",
        **values,
    }


@pytest.mark.parametrize(
    ("values", "field", "message"),
    [
        ({"schedule_override": "61 * * * *"}, "schedule_override", "Bad minute"),
        ({"schedule_override": "0 * * * *"}, "schedule_override", "fires more than once in one day"),
        ({"schedule_override": "0 0 30 2 *"}, "schedule_override", "can never fire"),
        ({"timezone_override": "Nowhere/Special"}, "timezone_override", "Unknown time zone"),
        ({"dst_overlap_override": "both"}, "dst_overlap_override", "'none' or 'hour'"),
    ],
)
def test_the_admin_target_form_refuses_a_bad_override(
    admin_client: Client, values: dict[str, str], field: str, message: str
) -> None:
    job = JobFactory(**VALID)

    response = admin_client.post("/admin/runs/jobtarget/add/", target_form(job, **values))

    assert response.status_code == 200
    assert message in " ".join(response.context["adminform"].form.errors[field])
    assert not JobTarget.objects.exists()


def test_the_admin_target_form_saves_a_fitting_override(admin_client: Client) -> None:
    job = JobFactory(**VALID)

    response = admin_client.post("/admin/runs/jobtarget/add/", target_form(job, schedule_override="30 4 * * *"))

    assert response.status_code == 302
    assert JobTarget.objects.get().schedule_override == "30 4 * * *"


def test_the_demo_jobs_schedule_passes() -> None:
    from runs.demo.loader import DEMO_JOB

    job, _ = job_get_or_create(key=DEMO_JOB["key"], defaults=DEMO_JOB["defaults"])

    schedule_validate(job=job)

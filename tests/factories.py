"""factory-boy factories: the defaults build the smallest valid object; traits give states."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import factory
from django.contrib.auth import get_user_model

from runs.attempts.models import Attempt, Run
from runs.catalog.models import Job, JobTarget, Tenant
from runs.checks.models import NextRunCheck


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"person{n}")
    password = factory.django.Password("correct-horse-battery")

    class Params:
        admin = factory.Trait(is_staff=True, is_superuser=True)


class TenantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tenant

    slug = factory.Sequence(lambda n: f"tenant-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())


class JobFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Job

    key = factory.Sequence(lambda n: f"job-{n}")
    schedule = "0 2 * * *"
    timezone = "Europe/Berlin"
    window_alignment = "day"


class JobTargetFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = JobTarget

    job = factory.SubFactory(JobFactory)
    tenant = factory.SubFactory(TenantFactory)
    environment = "prod"


class RunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Run

    job = factory.SubFactory(JobFactory)
    tenant = factory.SubFactory(TenantFactory)
    environment = "prod"
    window_start = factory.Sequence(lambda n: datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=n))
    window_end = factory.LazyAttribute(lambda o: o.window_start + timedelta(days=1))
    scheduled_for = factory.LazyAttribute(lambda o: o.window_end + timedelta(hours=1))
    status = Run.Status.UNKNOWN

    class Params:
        failed = factory.Trait(status=Run.Status.FAILED)


class AttemptFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Attempt

    run = factory.SubFactory(RunFactory)
    execution_id = factory.Sequence(lambda n: f"exec-{n}")
    number = 1
    status = Attempt.Status.RUNNING

    class Params:
        failed = factory.Trait(status=Attempt.Status.FAILED)
        queued = factory.Trait(status=Attempt.Status.QUEUED)


class NextRunCheckFactory(factory.django.DjangoModelFactory):
    """A scheduled check of a target's fire time (deadline = expected + 30 min); traits for the other states."""

    class Meta:
        model = NextRunCheck

    target = factory.SubFactory(JobTargetFactory)
    expected_at = factory.Sequence(lambda n: datetime(2026, 6, 1, 0, 0, tzinfo=UTC) + timedelta(days=n))
    deadline_at = factory.LazyAttribute(lambda o: o.expected_at + timedelta(minutes=30))
    status = NextRunCheck.Status.SCHEDULED

    class Params:
        passed = factory.Trait(
            status=NextRunCheck.Status.PASSED,
            passed_at=factory.LazyAttribute(lambda o: o.expected_at + timedelta(minutes=10)),
            evidence_attempt=factory.SubFactory(AttemptFactory, status=Attempt.Status.SUCCEEDED),
            duplicate_check=NextRunCheck.DuplicateCheck.CHECKED,
        )
        failed = factory.Trait(
            status=NextRunCheck.Status.FAILED,
            failed_at=factory.LazyAttribute(lambda o: o.deadline_at),
            failure_reason=NextRunCheck.FailureReason.DEADLINE_PASSED,
        )
        waived = factory.Trait(
            status=NextRunCheck.Status.WAIVED,
            waived_at=factory.LazyAttribute(lambda o: o.expected_at - timedelta(days=1)),
            waived_by=factory.SubFactory(UserFactory),
            waiver_owner=factory.SubFactory(UserFactory),
            waiver_checkpoint=factory.LazyAttribute(lambda o: o.expected_at.date()),
            waiver_reason="the next run is a quarter away",
        )

"""The demo's owners (``load_demo``): team "Invoicing platform" owns the demo job with ``tech-owner`` as
escalation owner; dunmore-pharmacy's target is owned by team "Pharmacy desk" with ``support``.

Set through the ownership services on a fixed date (2026-11-20 09:00 UTC), after the runs app's loader
registered the job, targets and people. Idempotent: a second load finds everything as it was and
writes nothing (no new timeline event).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from django.contrib.auth import get_user_model
from django.db import transaction

from handover.notifications.models import Team
from handover.ownership.services import job_ownership_set, target_ownership_set
from runs.catalog.models import Job, JobTarget

DEMO_JOB_KEY = "nightly-invoice-export"
DEMO_SET_AT = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
# team name -> member usernames
DEMO_TEAMS = {"Invoicing platform": ["tech-owner", "support"], "Pharmacy desk": ["support"]}
DEMO_TARGET_TENANT = "dunmore-pharmacy"


def demo_ownership_load(*, log: Callable[[str], None] = lambda _: None) -> bool:
    """Create the demo teams and name the demo job's and dunmore-pharmacy target's owners.

    Returns False (nothing changed) when the job or the demo people are missing. The acting person is
    the demo admin (``admin``), who may set any job's owners.
    """
    User = get_user_model()
    people = {u.get_username(): u for u in User.objects.filter(username__in=["admin", "tech-owner", "support"])}
    job = Job.objects.filter(key=DEMO_JOB_KEY).first()
    if job is None or len(people) < 3:
        log("  ownership: the demo job or people are missing; no owners named")
        return False
    with transaction.atomic():
        teams = {}
        for name, members in DEMO_TEAMS.items():
            teams[name], _ = Team.objects.get_or_create(name=name)
            teams[name].members.add(*[people[m] for m in members])
        job_ownership_set(
            actor=people["admin"],
            job=job,
            team=teams["Invoicing platform"],
            escalation_owner=people["tech-owner"],
            at=DEMO_SET_AT,
        )
        target = JobTarget.objects.filter(job=job, tenant__slug_key=DEMO_TARGET_TENANT, environment="prod").first()
        if target is not None:
            target_ownership_set(
                actor=people["admin"],
                target=target,
                team=teams["Pharmacy desk"],
                escalation_owner=people["support"],
                at=DEMO_SET_AT,
            )
    log("  ownership: Invoicing platform owns nightly-invoice-export (escalation owner tech-owner)")
    return True

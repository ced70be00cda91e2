"""Follow-ups of failed next-run checks, swept from their outbox: reopen the handover, tell the
people responsible (``handover.notifications``: e-mail and the channels each person chose).

The outbox is the failed checks themselves: a ``failed`` NextRunCheck whose ``failure_notified_at``
is empty has a follow-up to run (as a Healthchecks ``Flip`` with ``processed`` empty has alerts to
send). The runs app only writes the failed check; this module, on the handover side, sweeps the
outbox every beat tick, so the runs app never reaches into the handover app (docs/architecture.md
"Layout rules": apps depend one way). A lost message loses nothing: the next tick finds the row.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import cast

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from guardian.shortcuts import get_users_with_perms

from handover.core.people import Person
from handover.handovers.checks import handover_escalation_owners_for_check, handover_reopen_for_failed_check
from runs.checks.events import local_text, utc_text
from runs.checks.models import NextRunCheck
from runs.permissions import TECHNICAL_OWNER_CODENAME

logger = logging.getLogger(__name__)

# A failed check's follow-up is tried on every tick for this long after the failure, then given up
# (a mail server down for longer would otherwise be retried for ever); the failure stays on the
# check's page and timeline.
FOLLOW_UP_WINDOW = timedelta(hours=1)
FOLLOW_UP_SWEEP_LIMIT = 1000


def next_run_check_follow_ups_due(*, now: datetime | None = None) -> list[int]:
    """Ids of the outbox: failed checks without ``failure_notified_at`` that failed within
    ``FOLLOW_UP_WINDOW`` before ``now`` (UTC), oldest first, at most ``FOLLOW_UP_SWEEP_LIMIT``. Queries: one."""
    now = now or timezone.now()
    return list(
        NextRunCheck.objects.filter(
            status=NextRunCheck.Status.FAILED,
            failure_notified_at__isnull=True,
            failed_at__gt=now - FOLLOW_UP_WINDOW,
        )
        .order_by("failed_at", "pk")
        .values_list("pk", flat=True)[:FOLLOW_UP_SWEEP_LIMIT]
    )


def next_run_check_follow_ups_sweep(*, now: datetime | None = None) -> tuple[int, int]:
    """Run the follow-up of every check in the outbox (``next_run_check_follow_ups_due``).

    Each check is followed up on its own (``next_run_check_notify_failed``): one whose mail fails
    is released for the next tick and does not hold up the others. Safe to overlap: each check is
    claimed once. Returns ``(notified, failed)`` counts.
    """
    notified = failed = 0
    for check_id in next_run_check_follow_ups_due(now=now):
        try:
            notified += next_run_check_notify_failed(check_ids=[check_id])
        except Exception:  # the claim was released: the next tick tries again
            logger.warning("follow-up of failed next-run check %s failed; retried next tick", check_id, exc_info=True)
            failed += 1
    return notified, failed


def next_run_check_failure_people(*, check: NextRunCheck) -> list[Person]:
    """The people told about a failed check: its creator, the escalation owners of the handovers that
    asked for it, and the job's technical owners. Distinct, active, in that order."""
    people: list[Person] = []
    if check.created_by_id and check.created_by is not None:
        people.append(check.created_by)
    people.extend(handover_escalation_owners_for_check(check=check))
    # guardian's stubs say "a list of names" for one of its modes; with these arguments it is a QuerySet of users
    owners = cast(
        "QuerySet[Person]",
        get_users_with_perms(check.target.job, only_with_perms_in=[TECHNICAL_OWNER_CODENAME], with_group_users=True),
    )
    people.extend(owners.order_by("pk"))
    found: list[Person] = []
    for person in people:
        if person.is_active and all(p.pk != person.pk for p in found):
            found.append(person)
    return found


def _tell_check_failed(*, check: NextRunCheck, people: list[Person]) -> None:
    """One ``check_failed`` notification per person (once per check), through ``handover.notifications``."""
    from django.urls import reverse

    from handover.notifications.services import notify

    target = check.target
    zone = target.timezone_override or target.job.timezone
    with transaction.atomic():
        notify(
            event="check_failed",
            recipients=people,
            dedup_key=f"check:{check.public_id}",
            subject=f"Next-run check failed: {target.job.key} / {target.tenant.slug} / {target.environment}",
            body=(
                f"The next run of {target.job.key} for {target.tenant.slug} ({target.environment}), "
                f"expected at {local_text(check.expected_at, zone)} ({utc_text(check.expected_at)}), "
                f"did not pass its check.\n\n{check.result_summary}\n\nCheck: {check.public_id}"
            ),
            link=reverse("runs:check-detail", kwargs={"id": check.public_id}),
            job_key=target.job.key,
            tenant_slug=target.tenant.slug,
        )


def next_run_check_notify_failed(*, check_ids: Iterable[int]) -> int:
    """Run the follow-ups of failed checks: reopen the handover and tell the people responsible.

    Each check is claimed by setting ``failure_notified_at`` with a guarded UPDATE, so a repeated
    call does nothing twice; if a follow-up fails the claim is released and the error re-raised (the
    next sweep tick tries again). The notifications are written in a short transaction and delivered after it, each
    channel with its own retries (no mail call here). Returns how many checks were followed up.
    """
    done = 0
    for check in NextRunCheck.objects.filter(
        pk__in=list(check_ids), status=NextRunCheck.Status.FAILED, failure_notified_at__isnull=True
    ).select_related("target__job", "target__tenant", "created_by"):
        claimed = NextRunCheck.objects.filter(pk=check.pk, failure_notified_at__isnull=True).update(
            failure_notified_at=timezone.now()
        )
        if not claimed:
            continue
        try:
            handover_reopen_for_failed_check(check=check)
            people = next_run_check_failure_people(check=check)
            if people:
                _tell_check_failed(check=check, people=people)
            else:
                logger.warning("failed next-run check %s has nobody to notify", check.public_id)
        except Exception:
            NextRunCheck.objects.filter(pk=check.pk).update(failure_notified_at=None)
            raise
        done += 1
    return done

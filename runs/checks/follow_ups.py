"""Follow-ups of a failed check (the Celery task calls these): reopen the handover, e-mail the
people responsible, and enqueue again the follow-ups whose message was lost."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from runs.checks.events import local_text, utc_text
from runs.checks.models import NextRunCheck
from runs.checks.transitions import failed_follow_ups_enqueue
from runs.permissions import TECHNICAL_OWNER_CODENAME

logger = logging.getLogger(__name__)


# A failed check whose follow-up has not run this long after it failed lost its message: the worker
# died between the batch's commit and the publish, or was killed holding the message (the filesystem
# broker then drops it; Redis gives it back only after its visibility timeout, two hours). The sweep
# (``next_run_check_sweep``, its last step) enqueues it again -- for an hour after the failure, so a
# follow-up that keeps failing (its mail server down past its own retries) is not retried for ever.
FOLLOW_UP_GRACE = timedelta(minutes=2)
FOLLOW_UP_RESEND_WINDOW = timedelta(hours=1)
FOLLOW_UP_RESEND_LIMIT = 1000


def next_run_check_follow_ups_resend(*, now: datetime | None = None, batch_size: int = 100) -> int:
    """Enqueue again the follow-ups of failed checks that never ran; returns how many checks.

    One set query: failed checks without ``failure_notified_at`` that failed between
    ``FOLLOW_UP_RESEND_WINDOW`` and ``FOLLOW_UP_GRACE`` ago (at most ``FOLLOW_UP_RESEND_LIMIT``); on
    commit, one ``runs.next_run_check_notify_failed`` task per ``batch_size`` of them. Safe to repeat
    and to overlap: the follow-up claims each check, so a resent twin of a message still queued
    notifies once.
    """
    now = now or timezone.now()
    ids = list(
        NextRunCheck.objects.filter(
            status=NextRunCheck.Status.FAILED,
            failure_notified_at__isnull=True,
            failed_at__lte=now - FOLLOW_UP_GRACE,
            failed_at__gt=now - FOLLOW_UP_RESEND_WINDOW,
        )
        .order_by("failed_at", "pk")
        .values_list("pk", flat=True)[:FOLLOW_UP_RESEND_LIMIT]
    )
    for start in range(0, len(ids), batch_size):
        chunk = ids[start : start + batch_size]
        transaction.on_commit(lambda chunk=chunk: failed_follow_ups_enqueue(chunk))  # type: ignore[misc]
    return len(ids)


def handover_reopen_for_failed_check(*, check: NextRunCheck) -> None:
    """Reopen the open handover of the recovered run to ``recovering`` (the hook for the handover app).

    Delegates to ``handover.handovers.checks.handover_reopen_for_failed_check`` when the handover app
    provides it (imported here, lazily: the handover app imports this module); does nothing
    otherwise. Idempotent on both sides: the follow-up task may run twice.
    """
    try:
        from handover.handovers.checks import handover_reopen_for_failed_check as reopen
    except ImportError:  # the handover app without handovers yet
        return None
    reopen(check=check)
    return None


def next_run_check_failure_recipients(*, check: NextRunCheck) -> list[str]:
    """E-mail addresses told about a failed check: its creator, the escalation owner of the handover
    that asked for it, and the job's technical owners.

    Returns distinct, non-empty addresses in a stable order.
    """
    from guardian.shortcuts import get_users_with_perms

    from handover.handovers.checks import handover_escalation_owners_for_check

    people: list[AbstractBaseUser] = []
    if check.created_by_id:
        people.append(check.created_by)
    people.extend(handover_escalation_owners_for_check(check=check))
    owners = get_users_with_perms(
        check.target.job, only_with_perms_in=[TECHNICAL_OWNER_CODENAME], with_group_users=True
    )
    people.extend(owners)
    emails: list[str] = []
    for person in people:
        address = getattr(person, "email", "")
        if address and person.is_active and address not in emails:
            emails.append(address)
    return emails


def next_run_check_notify_failed(*, check_ids: Iterable[int]) -> int:
    """Run the follow-ups of failed checks: reopen the handover (hook) and e-mail the people responsible.

    Each check is claimed by setting ``failure_notified_at`` with a guarded UPDATE, so a repeated
    task does nothing twice; if sending fails the claim is released and the error re-raised (the
    task retries). No transaction is held across the mail call. Returns how many checks were
    notified. Mail: one message per check, no secrets or personal data beyond names.
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
            recipients = next_run_check_failure_recipients(check=check)
            if recipients:
                target = check.target
                zone = target.timezone_override or target.job.timezone
                send_mail(
                    subject=f"[Handover] Next-run check failed: {target.job.key} / {target.tenant.slug} / "
                    f"{target.environment}",
                    message=(
                        f"The next run of {target.job.key} for {target.tenant.slug} ({target.environment}), "
                        f"expected at {local_text(check.expected_at, zone)} ({utc_text(check.expected_at)}), "
                        f"did not pass its check.\n\n{check.result_summary}\n\n"
                        f"Check: {check.public_id}\n"
                    ),
                    from_email=None,
                    recipient_list=recipients,
                )
            else:
                logger.warning("failed next-run check %s has nobody to notify", check.public_id)
        except Exception:
            NextRunCheck.objects.filter(pk=check.pk).update(failure_notified_at=None)
            raise
        done += 1
    return done

"""Handovers and next-run checks: scheduling on ``verifying``, resolving when they pass, reopening when they fail.

- ``handover_checks_schedule`` asks ``runs.checks.scheduling.next_run_check_schedule`` for the check of each
  run's target (requested by the handover) and links it to the run.
- ``handover_resolve_if_settled`` resolves a verifying handover whose checks all passed or were waived.
- ``handover_reopen_for_failed_check`` is the hook the next-run check follow-up calls for a failed
  check: the open handover of the recovered run goes back to ``recovering`` (idempotent) and its
  escalation owner is told; ``handover_escalation_owners_for_check`` names who else to mail.
- ``handover_sweep_verifying`` (Celery beat) does both for every verifying handover, so nothing
  depends on a single message arriving.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC

from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from handover.core.errors import DomainError, InvalidTransition
from handover.core.people import Person
from handover.handovers.closing import SETTLED_CHECK_STATUSES, handover_checks_settled
from handover.handovers.models import Handover, HandoverRun
from handover.handovers.notifications import handover_notifications_create
from handover.handovers.services import handover_reopen, handover_resolve
from runs.checks.models import NextRunCheck
from runs.checks.scheduling import CheckRequester, next_run_check_schedule

logger = logging.getLogger(__name__)


def handover_checks_schedule(*, handover: Handover, actor: Person | None) -> list[NextRunCheck]:
    """Schedule (or find) the next-run check of every run of ``handover`` and link it to the run.

    The check is the first fire time of the run's target after now, with the handover as requester
    and the run as the recovered run. Raises InvalidTransition (409) when a run has no job target,
    DomainError (400) from the check service. Call inside the transaction of the move to verifying.
    Returns the checks in the order of the runs.
    """
    now = timezone.now()
    links = list(HandoverRun.objects.filter(handover=handover).select_related("run__target__job", "run__tenant"))
    missing = [link.run for link in links if link.run.target_id is None]
    if missing:
        names = ", ".join(f"{run.tenant.slug} / {run.environment}" for run in missing)
        raise InvalidTransition(
            f"No job target expects a next run for {names}: register the target before verifying.",
            errors={"runs": [f"no job target: {names}"]},
        )
    checks = []
    for link in links:
        target = link.run.target
        assert target is not None  # refused above (missing)
        try:
            check, _ = next_run_check_schedule(
                target=target,
                after=now,
                requested_by=CheckRequester.handover(handover.public_id),
                recovered_run=link.run,
                actor=actor,
            )
        except DomainError as exc:
            raise DomainError(
                f"{link.run.tenant.slug} / {link.run.environment}: {exc.detail}", errors=exc.errors
            ) from exc
        HandoverRun.objects.filter(pk=link.pk).update(next_run_check=check)
        checks.append(check)
    return checks


def handover_resolve_if_settled(*, handover: Handover) -> Handover | None:
    """Resolve ``handover`` when it is verifying and every check passed or was waived; None otherwise."""
    if handover.status != Handover.Status.VERIFYING or not handover_checks_settled(handover=handover):
        return None
    try:
        return handover_resolve(handover=handover)
    except InvalidTransition:  # moved meanwhile (reopened, closed): nothing to resolve
        return None


def _failure_reason(check: NextRunCheck) -> str:
    expected = f"{check.expected_at.astimezone(UTC):%Y-%m-%d %H:%M}Z"
    return f"The next-run check (expected {expected}) failed: {check.result_summary or check.failure_reason}"


def handover_reopen_for_failed_check(*, check: NextRunCheck) -> list[Handover]:
    """Reopen to ``recovering`` every verifying or resolved handover linked to the failed ``check``.

    Handovers are found through their run links (the check the handover scheduled) or, for a check
    another party scheduled, through its recovered run's open handover. Idempotent: a handover
    already recovering is left alone; the system is the actor and the check's result the reason.
    Side effects: the transition and its events; a notification of the escalation owner (sent
    after commit). Returns the handovers reopened now.
    """
    if check.status != NextRunCheck.Status.FAILED:
        return []
    match = Q(links__next_run_check=check)
    if check.recovered_run_id:
        match |= Q(links__run_id=check.recovered_run_id, links__is_open=True)
    reopened = []
    for handover in (
        Handover.objects.filter(match, status__in=[Handover.Status.VERIFYING, Handover.Status.RESOLVED])
        .distinct()
        .order_by("id")
    ):
        with transaction.atomic():
            try:
                moved = handover_reopen(handover=handover, actor=None, reason=_failure_reason(check))
            except InvalidTransition:  # moved meanwhile
                continue
            if moved.escalation_owner_id:
                # once per reopening: the key carries the reopen count
                handover_notifications_create(
                    handover=moved,
                    reason=f"reopened_{moved.reopen_count}",
                    recipient=moved.escalation_owner,
                )
        reopened.append(moved)
    return reopened


def handover_escalation_owners_for_check(*, check: NextRunCheck) -> list[Person]:
    """The escalation owners of the handovers a next-run check is about (for the check's failure e-mail).

    Handovers linked to the check, or open handovers of its recovered run; distinct, active, in
    handover order. Queries: one.
    """
    match = Q(links__next_run_check=check)
    if check.recovered_run_id:
        match |= Q(links__run_id=check.recovered_run_id, links__is_open=True)
    owners: dict[int, Person] = {}
    for handover in (
        Handover.objects.filter(match, escalation_owner__is_active=True)
        .select_related("escalation_owner")
        .distinct()
        .order_by("id")
    ):
        if handover.escalation_owner is not None:  # always, by the filter; for the type checker
            owners.setdefault(handover.escalation_owner.pk, handover.escalation_owner)
    return list(owners.values())


@dataclass
class VerifyingSweepResult:
    resolved: int = 0
    reopened: int = 0


def handover_sweep_verifying() -> VerifyingSweepResult:
    """Beat tick: resolve verifying handovers whose checks all passed or were waived, and reopen those
    with a failed check. Set-based: one query each finds the candidates; each is moved by the guarded
    transition, so overlapping sweeps are harmless. Returns the counts.
    """
    result = VerifyingSweepResult()
    links = HandoverRun.objects.filter(handover=OuterRef("pk"))
    unsettled = links.filter(Q(next_run_check__isnull=True) | ~Q(next_run_check__status__in=SETTLED_CHECK_STATUSES))
    failed = links.filter(next_run_check__status=NextRunCheck.Status.FAILED)
    verifying = Handover.objects.filter(status=Handover.Status.VERIFYING)
    for handover in verifying.filter(Exists(links), ~Exists(unsettled)).select_related("job").order_by("id"):
        if handover_resolve_if_settled(handover=handover):
            result.resolved += 1
    for link in (
        HandoverRun.objects.filter(
            handover__in=verifying.filter(Exists(failed)), next_run_check__status=NextRunCheck.Status.FAILED
        )
        .select_related("next_run_check")
        .order_by("handover_id", "id")
    ):
        if link.next_run_check is not None:  # the filter asks for a failed one
            result.reopened += len(handover_reopen_for_failed_check(check=link.next_run_check))
    if result.resolved or result.reopened:
        logger.info("verifying sweep: resolved=%d reopened=%d", result.resolved, result.reopened)
    return result

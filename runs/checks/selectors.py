"""Next-run checks a person may see: the filtered list, one check, a run's checks, the page sections."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from django.db.models import Q, QuerySet

from runs.attempts.models import Run
from runs.checks.models import NextRunCheck
from runs.permissions import User, is_admin, job_list_owned, tenant_list_visible


def check_visibility_filter(*, user: User) -> Q:
    """A Q object limiting next-run checks to targets ``user`` may see."""
    if is_admin(user):
        return Q()
    tenants = tenant_list_visible(user=user).values("pk")
    jobs = job_list_owned(user=user).values("pk")
    return Q(target__tenant__in=tenants) | Q(target__job__in=jobs)


def check_list(
    *,
    user: User,
    status: str | None = None,
    job: str | None = None,
    tenant: str | None = None,
    target: object | None = None,
) -> QuerySet[NextRunCheck]:
    """Next-run checks ``user`` may see, earliest deadline first, filterable by status, job key,
    tenant slug (case-insensitive) and target public id. Queries: one (everything shown is joined)."""
    checks = NextRunCheck.objects.filter(check_visibility_filter(user=user))
    if status:
        checks = checks.filter(status=status)
    if job:
        checks = checks.filter(target__job__key=job)
    if tenant:
        checks = checks.filter(target__tenant__slug_key=tenant.casefold())
    if target:
        checks = checks.filter(target__public_id=str(target))
    return checks.select_related(
        "target__job",
        "target__tenant",
        "recovered_run",
        "next_run",
        "evidence_attempt",
        "late_success_attempt",
        "created_by",
        "waived_by",
        "waiver_owner",
        "confirmed_by",
    ).order_by("deadline_at", "id")


def check_get(*, user: User, public_id: UUID | str) -> NextRunCheck | None:
    """One next-run check ``user`` may see (None when missing or not visible)."""
    return check_list(user=user).filter(public_id=public_id).first()


def check_list_for_run(*, run: Run) -> QuerySet[NextRunCheck]:
    """Checks about ``run``: those verifying its recovery, and the one expecting it as the next run."""
    expecting = Q(next_run=run)
    if run.target_id and run.scheduled_for:
        expecting |= Q(target_id=run.target_id, expected_at=run.scheduled_for)
    return (
        NextRunCheck.objects.filter(Q(recovered_run=run) | expecting)
        .select_related("target__job", "target__tenant", "waiver_owner", "evidence_attempt", "late_success_attempt")
        .order_by("expected_at", "id")
    )


CHECK_SECTION_LIMIT = 100


def check_sections(*, user: User, now: datetime) -> dict[str, list[NextRunCheck]]:
    """The checks page: ``due`` (deadline passed, or a person must confirm), ``upcoming``, ``failed``,
    ``waived`` and recently ``passed``; at most 100 each. Queries: five, one per section."""
    visible = check_list(user=user)
    scheduled = visible.filter(status=NextRunCheck.Status.SCHEDULED)
    awaiting = Q(evidence_attempt__isnull=False, duplicate_check=NextRunCheck.DuplicateCheck.NO_LEDGER)
    newest = ("-status_changed_at", "-id")
    return {
        "due": list(scheduled.filter(Q(deadline_at__lte=now) | awaiting)[:CHECK_SECTION_LIMIT]),
        "upcoming": list(scheduled.filter(deadline_at__gt=now).exclude(awaiting)[:CHECK_SECTION_LIMIT]),
        "failed": list(visible.filter(status=NextRunCheck.Status.FAILED).order_by(*newest)[:CHECK_SECTION_LIMIT]),
        "waived": list(
            visible.filter(status=NextRunCheck.Status.WAIVED).order_by("waiver_checkpoint", "id")[:CHECK_SECTION_LIMIT]
        ),
        "passed": list(visible.filter(status=NextRunCheck.Status.PASSED).order_by(*newest)[:20]),
    }

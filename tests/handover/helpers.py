"""Shared pieces of the handover tests (importable, unlike conftest)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from handover.handovers.models import Handover
from runs.attempts.models import Attempt, Run
from runs.catalog.models import Job, JobTarget, Tenant
from runs.checks.models import NextRunCheck

LedgerLoader = Callable[..., Run]
WINDOW_START = datetime(2026, 11, 26, 23, 0, tzinfo=UTC)
WINDOW_END = datetime(2026, 11, 27, 23, 0, tzinfo=UTC)


@dataclass
class World:
    """One failed run (two failed attempts) of a not-idempotent job, and the people around it."""

    job: Job
    tenant: Tenant
    target: JobTarget
    run: Run
    first: Attempt
    retry: Attempt
    support: AbstractBaseUser
    auditor: AbstractBaseUser
    owner: AbstractBaseUser  # technical owner of the job, with an e-mail address
    stranger: AbstractBaseUser  # support on another tenant only
    other_tenant: Tenant


def force_status(handover: Handover, status: str, actor: AbstractBaseUser) -> Handover:
    """Put ``handover`` into ``status`` with the stamps its constraints want (for the transition matrix)."""
    now = timezone.now()
    values: dict[str, Any] = {"status": status, "status_changed_at": now}
    if status != "draft":
        values.update(handed_over_at=now, handed_over_by=actor)
    if status in ("verifying",):
        values["verifying_at"] = now
    if status == "resolved":
        values.update(verifying_at=now, resolved_at=now)
    if status == "closed":
        values.update(verifying_at=now, resolved_at=now, closed_at=now, closed_by=actor)
    Handover.objects.filter(pk=handover.pk).update(**values)
    handover.links.update(is_open=status != "closed")
    handover.refresh_from_db()
    return handover


def settle_check(check: NextRunCheck, status: str, **values: Any) -> NextRunCheck:
    """Put a next-run check into ``passed`` or ``failed`` as the check sweep would (test data only)."""
    now = timezone.now()
    if status == "passed":
        values = {"passed_at": now, "evidence_at": now, **values}
    elif status == "failed":
        values = {"failed_at": now, "failure_reason": "deadline_passed", **values}
    NextRunCheck.objects.filter(pk=check.pk).update(status=status, status_changed_at=now, **values)
    check.refresh_from_db()
    return check


def edit_form_data(handover: Handover) -> dict[str, Any]:
    """What the edit page posts when nothing is changed: every section and field, the version and the base texts."""
    from handover.handovers.forms import HandoverEditForm

    form = HandoverEditForm(handover=Handover.objects.get(pk=handover.pk))
    data = {name: value for name, value in form.initial.items() if value is not None}
    data["is_supportability_defect"] = "on" if data.get("is_supportability_defect") else ""
    if not data["is_supportability_defect"]:
        del data["is_supportability_defect"]
    return data

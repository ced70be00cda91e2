"""A person's corrections to attempts: explaining a duplicate trigger (docs/slots.md).

Who may correct: support on the run's tenant, the job's technical owners and admins — the same
people who change the run's work ledger (``runs.ledger.selectors.run_ledger_writable``).
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from handover.core.errors import DomainError, InvalidTransition, NotFound
from runs.alerts.redaction import redact_text
from runs.attempts.models import Attempt, Run
from runs.ledger.selectors import run_ledger_writable
from runs.permissions import run_visibility_filter
from runs.timeline.services import timeline_event_record

EVIDENCE_REF_MAX = Attempt._meta.get_field("duplicate_evidence_ref").max_length or 300


class AttemptCorrectionDenied(DomainError):
    """The person may see the run but not correct its attempts (auditors, business owners)."""

    status = 403
    type = "forbidden"
    title = "Forbidden"


def attempt_correction_require(*, user: AbstractBaseUser, run: Run) -> None:
    """Check that ``user`` may correct ``run``'s attempts; return None when they may.

    Raises NotFound (404) for a run the person may not see, AttemptCorrectionDenied (403) for one
    they may only read. Queries: the guardian checks, plus one when refused.
    """
    if run_ledger_writable(user=user, run=run):
        return
    if not Run.objects.filter(run_visibility_filter(user=user), pk=run.pk).exists():
        raise NotFound("No such run.")
    raise AttemptCorrectionDenied(
        "Only support (on this tenant), the job's technical owners and admins correct a run's attempts."
    )


def attempt_duplicate_trigger_explain(
    *, attempt: Attempt, actor: AbstractBaseUser, reason: str, evidence_ref: str
) -> Attempt:
    """A person explains a duplicate trigger: the reason and a reference to the evidence.

    ``reason`` and ``evidence_ref`` (at most 300 characters: a ticket, a log link, a scheduler's
    audit entry) are required; both are redacted on save. One transaction: the attempt row is
    locked, ``duplicate_explained_at``/``_by``/``duplicate_explanation``/``duplicate_evidence_ref``
    are set and a ``duplicate_trigger_explained`` timeline event is written. Afterwards the run's
    replays and next-run check no longer wait on it (docs/slots.md, "Duplicate triggers").
    Raises NotFound / AttemptCorrectionDenied (see ``attempt_correction_require``), DomainError
    (400) for a missing reason or evidence reference, InvalidTransition (409) when the attempt is
    not a duplicate trigger or is already explained. Returns the attempt, reloaded.
    """
    attempt_correction_require(user=actor, run=attempt.run)
    reason, evidence_ref = redact_text(reason.strip()), redact_text(evidence_ref.strip())
    errors: dict[str, list[str]] = {}
    if not reason:
        errors["reason"] = ["say why the second trigger happened"]
    if not evidence_ref:
        errors["evidence_ref"] = ["name the evidence (a ticket, a log link, the scheduler's audit entry)"]
    elif len(evidence_ref) > EVIDENCE_REF_MAX:
        errors["evidence_ref"] = [f"at most {EVIDENCE_REF_MAX} characters"]
    if errors:
        raise DomainError("An explanation needs a reason and an evidence reference.", errors=errors)
    with transaction.atomic():
        locked = Attempt.objects.select_for_update().select_related("run__job", "run__tenant").get(pk=attempt.pk)
        if not locked.is_duplicate_trigger:
            raise InvalidTransition(f"Attempt {locked.number} is not a duplicate trigger: there is nothing to explain.")
        if locked.duplicate_explained_at is not None:
            raise InvalidTransition(
                f"The duplicate trigger of attempt {locked.number} was already explained "
                f"on {locked.duplicate_explained_at:%Y-%m-%d %H:%M}Z."
            )
        now = timezone.now()
        Attempt.objects.filter(pk=locked.pk).update(
            duplicate_explained_at=now,
            duplicate_explained_by=actor,
            duplicate_explanation=reason,
            duplicate_evidence_ref=evidence_ref,
            updated_at=now,
        )
        timeline_event_record(
            job=locked.run.job,
            run=locked.run,
            attempt=locked,
            kind="duplicate_trigger_explained",
            summary=f"Duplicate trigger of attempt {locked.number} ({locked.execution_id}) explained by "
            f"{actor.get_username()}: {reason} (evidence: {evidence_ref})",
            occurred_at=now,
            actor_user=actor,
            data={"evidence_ref": evidence_ref},
        )
    attempt.refresh_from_db()
    return attempt

"""Writing problems: create, edit, link and unlink handovers, the transitions, the verify sweep.

Every write is one transaction with one ``ProblemEvent`` (the problem's append-only history,
docs/problems.md "History"). ``problem_transition`` is the one function that changes a problem's status
(``handover.core.transitions``). Who may write (docs/problems.md "Who may do what"), refused here with
Forbidden (403) so the page, the API and a script get one answer:

- create: support or technical owner somewhere, or an admin (``may_act_anywhere``); each handover
  linked at creation must be writable by the creator (``may_act_on_runs`` on its runs);
- edit and transitions: support of a linked tenant, technical owner of a linked job, or an admin
  (``may_act_on_any_run`` on the runs of the linked handovers); a problem with no linked handover
  only its creator (while they hold an acting role) or an admin;
- link and unlink a handover: the above, and writing that handover (``may_act_on_runs``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from handover.core.edits import edit_merge, edit_precondition
from handover.core.errors import Conflict, DomainError, Forbidden, InvalidTransition, NotFound
from handover.core.people import Person
from handover.core.transitions import Transitioned, transition
from handover.handovers.models import Handover
from handover.notifications.models import Team
from handover.problems.clean_runs import problem_clean_runs
from handover.problems.models import MAX_CLEAN_RUNS_REQUIRED, Problem, ProblemEvent, ProblemHandover
from runs.alerts.redaction import redact_text
from runs.attempts.models import Run
from runs.permissions import may_act_anywhere, may_act_on_any_run, may_act_on_runs

UNSET: Any = object()  # "not given" for the optional fields of an edit (None clears the team)
EDITABLE_FIELDS = ("title", "defect_ref", "description", "owning_team", "clean_runs_required")
STATUS_WORDS = dict(Problem.Status.choices)


def _name(user: Person | None) -> str:
    return user.get_username() if user is not None else "the system"


def _clean(text: str) -> str:
    """Normalise line endings and trailing space, redact secrets and personal data (rule 8)."""
    return redact_text((text or "").replace("\r\n", "\n").strip())


def problem_event_record(
    *,
    problem: Problem,
    kind: str,
    summary: str,
    actor: Person | None = None,
    handover: Handover | None = None,
    from_status: str = "",
    to_status: str = "",
    reason: str = "",
    data: dict[str, Any] | None = None,
    occurred_at: datetime | None = None,
) -> ProblemEvent:
    """Append one entry to ``problem``'s history (call inside the transaction of the change).

    ``summary`` is redacted and cut to 500 characters; ``occurred_at`` (UTC) defaults to now.
    """
    return ProblemEvent.objects.create(
        problem=problem,
        kind=kind,
        summary=redact_text(summary)[:500],
        actor=actor,
        handover=handover,
        from_status=from_status,
        to_status=to_status,
        reason=reason,
        data=data or {},
        occurred_at=occurred_at or timezone.now(),
    )


def problem_linked_runs(problem: Problem) -> list[Run]:
    """Every run of the handovers linked to ``problem`` (with tenant and job): what the write rule reads.

    Queries: one."""
    return list(
        Run.objects.filter(handover_links__handover__problem_links__problem=problem)
        .select_related("tenant", "job")
        .distinct()
    )


def may_write_problem(*, user: Person, problem: Problem) -> bool:
    """Whether ``user`` may edit, link to, unlink from and move ``problem`` (module docstring)."""
    runs = problem_linked_runs(problem)
    if runs:
        return may_act_on_any_run(user=user, runs=runs)
    return may_act_on_any_run(user=user, runs=[]) or (problem.created_by_id == user.pk and may_act_anywhere(user=user))


def problem_require_writer(actor: Person | None, *, problem: Problem) -> None:
    """Refuse a person who may not edit, move, link to or unlink from ``problem`` (Forbidden, 403).

    The rule is ``may_write_problem`` (module docstring); the system (``actor`` None, the verify sweep)
    may. Every writing service calls it; pages and the API call it too before they read a form or body,
    so a reader learns nothing from a 400. ``problem`` must already be visible to ``actor`` (the callers
    fetch it through ``problem_get``, which answers None otherwise). Queries: the linked runs, then the
    guardian checks.
    """
    if actor is not None and not may_write_problem(user=actor, problem=problem):
        raise Forbidden(
            "Only support of a linked tenant, the technical owners of a linked job and admins change this problem."
        )


def problem_require_handover_writer(actor: Person, *, handover: Handover) -> None:
    """Refuse a person who may not link ``handover`` to a problem or unlink it (Forbidden, 403).

    The rule is ``runs.permissions.may_act_on_runs`` on the handover's runs (support on each run's
    tenant, the job's technical owners, admins). Queries: the runs, then the guardian checks.
    """
    runs = list(Run.objects.filter(handover_links__handover=handover).select_related("tenant", "job"))
    if not may_act_on_runs(user=actor, runs=runs):
        raise Forbidden(
            "Only support on each of the handover's tenants, its job's technical owners and admins link it."
        )


def problem_require_creator(actor: Person, *, handovers: Iterable[Handover] = ()) -> None:
    """Refuse a person who may not open a problem, or may not link one of ``handovers`` to it (Forbidden, 403).

    The rules are ``runs.permissions.may_act_anywhere`` (support somewhere, a technical owner, an admin)
    and ``problem_require_handover_writer`` for each handover. ``problem_create`` calls it; the new-problem
    page calls it before it shows or reads the form.
    """
    if not may_act_anywhere(user=actor):
        raise Forbidden("Only support, technical owners and admins open problems.")
    for handover in handovers:
        problem_require_handover_writer(actor, handover=handover)


def _check_clean_runs(value: int) -> int:
    if not 1 <= value <= MAX_CLEAN_RUNS_REQUIRED:
        raise DomainError(
            f"Clean runs required must be between 1 and {MAX_CLEAN_RUNS_REQUIRED}.",
            errors={"clean_runs_required": [f"Between 1 and {MAX_CLEAN_RUNS_REQUIRED}."]},
        )
    return value


def _link(*, problem: Problem, handover: Handover, actor: Person, now: datetime) -> ProblemHandover:
    link, created = ProblemHandover.objects.get_or_create(
        problem=problem, handover=handover, defaults={"linked_by": actor, "linked_at": now}
    )
    if created:
        problem_event_record(
            problem=problem,
            kind=ProblemEvent.Kind.HANDOVER_LINKED,
            summary=f"Handover linked by {_name(actor)}",
            actor=actor,
            handover=handover,
            data={"handover": str(handover.public_id)},
            occurred_at=now,
        )
    return link


def problem_create(
    *,
    actor: Person,
    title: str,
    defect_ref: str = "",
    description: str = "",
    owning_team: Team | None = None,
    clean_runs_required: int | None = None,
    handovers: Iterable[Handover] = (),
    at: datetime | None = None,
) -> Problem:
    """Open a problem (status ``open``), optionally linked at once to ``handovers``.

    Raises Forbidden (403) when ``actor`` holds no acting role anywhere or may not write one of the
    handovers; DomainError (400) for an empty title or ``clean_runs_required`` outside 1..100. Side
    effects: the problem, its links, a ``created`` event and one ``handover_linked`` event per handover.
    ``at`` (UTC, default now): when it was opened, for a story replayed on fixed dates (the demo).
    """
    handovers = list(dict.fromkeys(handovers))
    problem_require_creator(actor, handovers=handovers)
    title = _clean(title)[:300]
    if not title:
        raise DomainError("Give the problem a title.", errors={"title": ["This field is required."]})
    required = _check_clean_runs(clean_runs_required) if clean_runs_required is not None else None
    now = at or timezone.now()
    with transaction.atomic():
        problem = Problem.objects.create(
            title=title,
            defect_ref=_clean(defect_ref)[:500],
            description=_clean(description),
            owning_team=owning_team,
            created_by=actor,
            created_at=now,
            status_changed_at=now,
            **({"clean_runs_required": required} if required is not None else {}),
        )
        problem_event_record(
            problem=problem,
            kind=ProblemEvent.Kind.CREATED,
            summary=f"Problem opened by {_name(actor)}",
            actor=actor,
            to_status=Problem.Status.OPEN,
            data={"title": problem.title, "defect_ref": problem.defect_ref},
            occurred_at=now,
        )
        for handover in handovers:
            _link(problem=problem, handover=handover, actor=actor, now=now)
    return problem


def _shown(value: Any) -> Any:
    if isinstance(value, Team):
        return value.name
    return value


def problem_edit_text(name: str, value: Any) -> str:
    """A problem field's value as an edit compares it: a team by its id (a Team, its id or None), a number
    as its digits, line breaks as ``\n``, trimmed; ``""`` for None. ``name`` is one of ``EDITABLE_FIELDS``."""
    if isinstance(value, Team):
        value = value.pk
    return ("" if value is None else str(value)).replace("\r\n", "\n").strip()


def problem_edit_values(problem: Problem) -> dict[str, str]:
    """What an edit of ``problem`` can change, as ``problem_update`` compares it (``problem_edit_text``), for
    the problem's ``ETag`` (``handover.core.edits.edit_etag``): field -> text, every ``EDITABLE_FIELDS`` one
    (the team by its id). Reads the row only (no query)."""
    return {
        name: problem_edit_text(name, problem.owning_team_id if name == "owning_team" else getattr(problem, name))
        for name in EDITABLE_FIELDS
    }


EDIT_LABELS = {
    "title": "the title",
    "defect_ref": "the defect reference",
    "description": "the description",
    "owning_team": "the owning team",
    "clean_runs_required": "the clean runs required",
}


def problem_update(
    *,
    problem: Problem,
    actor: Person,
    title: str = UNSET,
    defect_ref: str = UNSET,
    description: str = UNSET,
    owning_team: Team | None = UNSET,
    clean_runs_required: int = UNSET,
    based_on: Mapping[str, Any] | None = None,
    if_match: str | None = None,
) -> Problem:
    """Change the title, defect reference, description, owning team (None: no team) or N of a problem.

    Only the fields given are changed; an edit that changes nothing writes nothing. ``based_on`` maps
    field names (``EDITABLE_FIELDS``) to the values the edit started from, as the person read them (a team
    as a Team, its id or None; compared as ``problem_edit_text``): a given field equal to its base is one
    the person left alone and is not written, so it never reverts another's change; a given field whose
    stored value is now neither its base nor the value given was changed by someone else meanwhile, and
    the whole edit is refused with ``EditedMeanwhile`` (a Conflict, 409), nothing written. Fields without
    a base are written as given. The comparison is made under the row's lock, so no edit slips in between.
    ``if_match``: the API's ``If-Match`` header (None: none), compared under the same lock with the problem's
    ``ETag`` (``problem_edit_values``): any change since it was read refuses the whole edit with
    PreconditionFailed (412), nothing written (``handover.core.edits.edit_precondition``).

    A closed problem is not edited (InvalidTransition, 409: reopen it first). Raises Forbidden (403) for a
    person who may not write it; DomainError (400) for an empty title or N outside 1..100. Side effects:
    one ``edited`` event with the old and new values.
    """
    problem_require_writer(actor, problem=problem)
    based_on = based_on or {}
    asked: dict[str, Any] = {
        "title": title,
        "defect_ref": defect_ref,
        "description": description,
        "owning_team": owning_team,
        "clean_runs_required": clean_runs_required,
    }
    # a field the person left at the value they read is not theirs to write
    asked = {
        name: value
        for name, value in asked.items()
        if value is not UNSET
        and not (name in based_on and problem_edit_text(name, value) == problem_edit_text(name, based_on[name]))
    }
    given: dict[str, Any] = {}
    if "title" in asked:
        given["title"] = _clean(asked["title"])[:300]
        if not given["title"]:
            raise DomainError("Give the problem a title.", errors={"title": ["This field is required."]})
    if "defect_ref" in asked:
        given["defect_ref"] = _clean(asked["defect_ref"])[:500]
    if "description" in asked:
        given["description"] = _clean(asked["description"])
    if "owning_team" in asked:
        given["owning_team"] = asked["owning_team"]
    if "clean_runs_required" in asked:
        given["clean_runs_required"] = _check_clean_runs(asked["clean_runs_required"])
    with transaction.atomic():
        # no select_related: PostgreSQL locks no nullable side of an outer join (the team is optional)
        current = Problem.objects.select_for_update().get(pk=problem.pk)
        if current.status == Problem.Status.CLOSED:
            raise InvalidTransition("The problem is closed: reopen it before editing it.")
        edit_precondition(if_match=if_match, current=problem_edit_values(current), what="this problem")
        # the one rule of edit pages (handover.core.edits): a field both changed refuses the whole edit
        edit_merge(
            posted={name: problem_edit_text(name, value) for name, value in asked.items()},
            based_on={name: problem_edit_text(name, based_on[name]) for name in asked if name in based_on},
            current={name: problem_edit_text(name, getattr(current, name)) for name in asked},
            labels=EDIT_LABELS,
            what="this problem",
        )
        changes = {
            name: {"from": _shown(getattr(current, name)), "to": _shown(value)}
            for name, value in given.items()
            if getattr(current, name) != value
        }
        if not changes:
            return current
        for name in changes:
            setattr(current, name, given[name])
        current.save(update_fields=[*changes, "updated_at"])
        problem_event_record(
            problem=current,
            kind=ProblemEvent.Kind.EDITED,
            summary=f"Problem edited by {_name(actor)}: {', '.join(n.replace('_', ' ') for n in changes)}",
            actor=actor,
            data={"changes": changes},
        )
    return current


def problem_link_handover(*, problem: Problem, handover: Handover, actor: Person) -> ProblemHandover:
    """Link ``handover`` to ``problem`` (linking it twice changes nothing).

    Refused: Forbidden (403) unless ``actor`` may write the problem (or, for a problem with no link yet,
    opened it) and the handover; InvalidTransition (409) for a closed problem. Side effects: the link and
    a ``handover_linked`` event.
    """
    problem_require_handover_writer(actor, handover=handover)
    problem_require_writer(actor, problem=problem)
    with transaction.atomic():
        current = Problem.objects.select_for_update().get(pk=problem.pk)
        if current.status == Problem.Status.CLOSED:
            raise InvalidTransition("The problem is closed: reopen it before linking handovers.")
        return _link(problem=current, handover=handover, actor=actor, now=timezone.now())


def problem_unlink_handover(*, problem: Problem, handover: Handover, actor: Person) -> Problem:
    """Remove the link between ``problem`` and ``handover``.

    Raises NotFound (404) when they are not linked, Forbidden (403) as for linking, InvalidTransition
    (409) for a closed problem. Side effects: the link row deleted and a ``handover_unlinked`` event
    (the history keeps both).
    """
    problem_require_handover_writer(actor, handover=handover)
    problem_require_writer(actor, problem=problem)
    with transaction.atomic():
        current = Problem.objects.select_for_update().get(pk=problem.pk)
        if current.status == Problem.Status.CLOSED:
            raise InvalidTransition("The problem is closed: reopen it before unlinking handovers.")
        deleted, _ = ProblemHandover.objects.filter(problem=current, handover=handover).delete()
        if not deleted:
            raise NotFound("This handover is not linked to the problem.")
        problem_event_record(
            problem=current,
            kind=ProblemEvent.Kind.HANDOVER_UNLINKED,
            summary=f"Handover unlinked by {_name(actor)}",
            actor=actor,
            handover=handover,
            data={"handover": str(handover.public_id)},
        )
    return current


def _stamps(action: str, now: datetime, actor: Person | None) -> dict[str, Any]:
    if action == "deploy_fix":
        return {"fix_deployed_at": now, "verified_at": None}
    if action == "verify":
        return {"verified_at": now}
    if action == "close":
        return {"closed_at": now, "closed_by": actor}
    if action == "reopen":
        return {"fix_deployed_at": None, "verified_at": None, "closed_at": None, "closed_by": None}
    return {}


def problem_transition(
    *,
    problem: Problem,
    action: str,
    actor: Person | None,
    reason: str = "",
    at: datetime | None = None,
) -> Transitioned[Problem]:
    """Move ``problem`` by ``action`` (a key of ``Problem.TRANSITIONS``) with a guarded UPDATE.

    Rules beyond the table (docs/problems.md "States"): ``reopen`` needs a reason, and so does
    ``close`` from anything but ``verified``; ``close`` is a person's act; ``verify`` needs the
    clean-run rule to hold over every target (``problem_clean_runs``), else InvalidTransition (409)
    with the counts. An already-reached target status returns ``moved`` False (idempotent); any other
    disallowed move raises InvalidTransition (409), nothing written. Raises DomainError (400) for a
    missing reason, Forbidden (403) for a person who may not write it, KeyError for an unknown action.
    ``actor`` None is the system (the verify sweep). Side effects: the status with its stamps and one
    ``transitioned`` event (actor, from, to, reason, the clean-run counts for ``verify``). ``at`` (UTC,
    default now): when the move happened, for a story replayed on fixed dates (the demo).
    """
    problem_require_writer(actor, problem=problem)
    allowed_from, target = Problem.TRANSITIONS[action]
    reason = _clean(reason)[:2000]
    with transaction.atomic():
        current = Problem.objects.select_for_update().get(pk=problem.pk)
        data: dict[str, Any] = {}
        if current.status in allowed_from:
            if action == "close" and actor is None:
                raise InvalidTransition("Only a person closes a problem.")
            needs_reason = action in Problem.REASON_REQUIRED or (
                action == "close" and current.status != Problem.Status.VERIFIED
            )
            if needs_reason and not reason:
                raise DomainError(
                    "Say why: a reason is required to "
                    + ("reopen a problem." if action == "reopen" else "close a problem whose fix is not verified."),
                    errors={"reason": ["This field is required."]},
                )
            if action == "verify":
                figures = problem_clean_runs(problem=current)
                data = {
                    "clean_runs": figures.clean,
                    "required": figures.required,
                    "targets": [
                        {"job": t.job.key, "tenant": t.tenant.slug, "environment": t.environment, "clean": t.clean}
                        for t in figures.targets
                    ],
                }
                if not figures.satisfied:
                    raise InvalidTransition(
                        f"Not verified yet: {figures.clean} of {figures.required} clean runs of every linked "
                        "target since the fix was deployed"
                        + ("" if figures.targets else " (no handover is linked, so no target can prove it)")
                        + ".",
                        errors={"clean_runs": [f"{figures.clean} of {figures.required}"]},
                    )
        now = at or timezone.now()
        values = {"status_changed_at": now, "updated_at": now, **_stamps(action, now, actor)}

        def record(moved: Problem, before: str) -> None:
            summary = f"{STATUS_WORDS[target]} ({_name(actor)})"
            if reason:
                summary += f": {reason}"
            problem_event_record(
                problem=moved,
                kind=ProblemEvent.Kind.TRANSITIONED,
                summary=summary,
                actor=actor,
                from_status=before,
                to_status=target,
                reason=reason,
                data={"action": action, **data},
                occurred_at=now,
            )

        return transition(
            queryset=Problem.objects.select_related("owning_team"),
            pk=current.pk,
            table=Problem.TRANSITIONS,
            action=action,
            values=values,
            noun="the problem",
            on_moved=record,
        )


@dataclass(frozen=True)
class SweepResult:
    """What one verify sweep did: problems looked at, and those it moved to ``verified``."""

    checked: int
    verified: int


def problem_verify_sweep(*, limit: int = 500) -> SweepResult:
    """The system's act: verify every ``fix_deployed`` problem whose clean-run rule holds.

    Each problem is its own transaction (one that cannot be verified yet is left as it is); safe to run
    concurrently (the transition is a guarded UPDATE and ``verify`` twice is idempotent). ``limit``
    bounds one tick (oldest deployments first). Returns the counts.
    """
    checked = verified = 0
    pending = Problem.objects.filter(status=Problem.Status.FIX_DEPLOYED).order_by("fix_deployed_at", "id")[:limit]
    for problem in pending:
        checked += 1
        if not problem_clean_runs(problem=problem).satisfied:
            continue
        try:
            _, moved = problem_transition(problem=problem, action="verify", actor=None)
        except (InvalidTransition, Conflict):  # moved or no longer clean meanwhile: the next tick looks again
            continue
        verified += int(moved)
    return SweepResult(checked=checked, verified=verified)

"""Writing handovers: create (pre-filled), edit (with revisions), the transitions, residual exceptions.

Every edit and transition writes a TimelineEvent on the timeline of each run the handover covers,
with who and when. ``handover_transition`` is the one function that changes a handover's status
(docs/architecture.md "State machines"); the verbs (hand over, start recovery, verify, resolve, close, reopen) wrap it.
Every write by a person is refused here unless they may act on each run of the handover
(``runs.permissions.may_act_on_runs``: support on its tenant or technical owner of its job); the system may.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import date, datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from handover.core.errors import Conflict, DomainError, Forbidden, InvalidTransition
from handover.core.people import Person
from handover.core.transitions import Transitioned, transition
from handover.handovers.closing import handover_closing_missing
from handover.handovers.evidence import handover_evidence
from handover.handovers.models import Handover, HandoverRevision, HandoverRun, ResidualException
from handover.handovers.notifications import handover_notifications_create
from handover.handovers.prefill import handover_prefill, handover_title
from handover.handovers.staleness import run_evidence_snapshot
from handover.handovers.versions import version_check
from runs.alerts.redaction import redact_text
from runs.attempts.models import Run
from runs.ledger.models import WorkItem
from runs.permissions import may_act_on_runs, run_visibility_filter
from runs.timeline.models import TimelineEvent, TimelineEventKind
from runs.timeline.services import timeline_event_record

S = Handover.Section
SECTION_WORDS = dict(Handover.Section.choices)
# simple (non-section) fields a person may edit; their old and new values go into the event
EDITABLE_FIELDS = (
    "escalation_owner",
    "customer_update_owner",
    "defect_ref",
    "is_supportability_defect",
    "supportability_ticket",
)
# action -> the columns its move stamps, given the instant (UTC) and the acting person (None: the system)
STATUS_STAMPS: dict[str, Callable[[datetime, Person | None], dict[str, Any]]] = {
    "hand_over": lambda now, actor: {"handed_over_at": now, "handed_over_by": actor},
    "start_recovery": lambda now, actor: {},
    "verify": lambda now, actor: {"verifying_at": now},
    "resolve": lambda now, actor: {"resolved_at": now},
    "close": lambda now, actor: {"closed_at": now, "closed_by": actor},
    "reopen": lambda now, actor: {
        "reopened_at": now,
        "reopened_by": actor,
        "reopen_count": F("reopen_count") + 1,
        "closed_at": None,
        "closed_by": None,
        "resolved_at": None,
    },
}
EVENT_KINDS = {
    "hand_over": TimelineEvent.Kind.HANDOVER_HANDED_OVER,
    "start_recovery": TimelineEvent.Kind.HANDOVER_RECOVERING,
    "verify": TimelineEvent.Kind.HANDOVER_VERIFYING,
    "resolve": TimelineEvent.Kind.HANDOVER_RESOLVED,
    "close": TimelineEvent.Kind.HANDOVER_CLOSED,
    "reopen": TimelineEvent.Kind.HANDOVER_REOPENED,
}


def _name(user: Person | None) -> str:
    return user.get_username() if user is not None else "the system"


def _clean(text: str, *, label: str = "", redacted: list[str] | None = None) -> str:
    """Normalise line endings and trailing space, and redact secrets and personal data (rule 8).

    When redaction changed the text and ``redacted`` is given, ``label`` (what the person calls the
    field) is added to it, so the page and the API can say what was removed.
    """
    plain = (text or "").replace("\r\n", "\n").strip()
    clean = redact_text(plain)
    if redacted is not None and clean != plain and label not in redacted:
        redacted.append(label)
    return clean


def redacted_notice(labels: Iterable[str]) -> str:
    """The sentence that tells a person what redaction removed: ``labels`` are sections or fields."""
    names = [SECTION_WORDS.get(label, label.replace("_", " ")).lower() for label in labels]
    if not names:
        return ""
    where = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"We removed what looked like a secret from {where}: it is stored as ‹redacted:…›."


def handover_event_record(
    *,
    handover: Handover,
    kind: TimelineEventKind,
    summary: str,
    actor: Person | None = None,
    data: dict[str, Any] | None = None,
    occurred_at: datetime | None = None,
) -> int:
    """Write one timeline event per run of ``handover`` (who, when, what). Returns how many were written.

    Call inside the transaction of the change. ``data`` gets the handover's public id added.
    """
    links = HandoverRun.objects.filter(handover=handover).select_related("run__tenant").order_by("id")
    payload = {"handover": str(handover.public_id), **(data or {})}
    written = 0
    for link in links:
        timeline_event_record(
            job=handover.job,
            tenant=link.run.tenant,
            run=link.run,
            kind=kind,
            summary=summary,
            occurred_at=occurred_at,
            actor=actor,
            data=payload,
        )
        written += 1
    return written


# --------------------------------------------------------------------------------------------------
# Create, edit, confirm, refresh


def handover_create(*, actor: Person, runs: Iterable[Run], at: datetime | None = None) -> Handover:
    """Draft a handover for ``runs`` (one or several runs of one job), pre-filled from the evidence.

    Each run is linked with its latest attempt (the execution the handover is about). The generated
    sections (``prefill.GENERATED_SECTIONS``) are stored as revisions marked generated until a
    person confirms or edits them. Raises DomainError (400) for no runs or runs of several jobs,
    Conflict (409) when a run already has an open handover. Side effects: the handover, its run
    links, one revision per generated section, and a ``handover_created`` event on each run. The
    returned handover's ``redacted_sections`` lists the sections whose pre-filled text lost a secret.
    ``at`` (UTC, default now): when it was drafted, for a story replayed on fixed dates (the demo).
    """
    runs = list({run.pk: run for run in runs}.values())
    if not runs:
        raise DomainError("Name at least one run.", errors={"runs": ["This field is required."]})
    if len({run.job_id for run in runs}) > 1:
        raise DomainError(
            "A handover covers runs of one job only.", errors={"runs": ["The runs belong to different jobs."]}
        )
    handover_require_writer(actor, runs=runs)
    now = at or timezone.now()
    with transaction.atomic():
        existing = (
            HandoverRun.objects.filter(run__in=runs, is_open=True).select_related("handover", "run__tenant").first()
        )
        if existing is not None:
            raise Conflict(
                f"The run for {existing.run.tenant.slug} already has an open handover: {existing.handover.title}"
                f" ({existing.handover.public_id})."
            )
        job_evidence, run_evidence = handover_evidence(runs=runs)
        redacted: list[str] = []
        texts = {
            section: _clean(text, label=section, redacted=redacted)
            for section, text in handover_prefill(job=job_evidence, runs=run_evidence).items()
        }
        handover = Handover.objects.create(
            job=job_evidence.job,
            title=handover_title(job=job_evidence, runs=run_evidence),
            status=Handover.Status.DRAFT,
            status_changed_at=now,
            created_at=now,
            created_by=actor,
            generated_sections=list(texts),
            generated_evidence=_evidence_of(run_evidence),
            **texts,
        )
        try:
            with transaction.atomic():
                HandoverRun.objects.bulk_create(
                    HandoverRun(handover=handover, run=e.run, attempt=e.latest_attempt, is_open=True, created_at=now)
                    for e in run_evidence
                )
        except IntegrityError as exc:  # another handover for one of the runs was opened meanwhile
            raise Conflict("One of the runs already has an open handover.") from exc
        HandoverRevision.objects.bulk_create(
            HandoverRevision(handover=handover, section=section, text=text, is_generated=True, created_at=now)
            for section, text in texts.items()
        )
        handover_event_record(
            handover=handover,
            kind=TimelineEvent.Kind.HANDOVER_CREATED,
            summary=f"Handover drafted by {_name(actor)}: {handover.title}",
            actor=actor,
            data={"generated_sections": list(texts), "redacted": redacted},
            occurred_at=now,
        )
    handover.redacted_sections = redacted  # type: ignore[attr-defined]  # for this answer only
    return handover


def _evidence_of(run_evidence: Iterable[Any]) -> dict[str, Any]:
    """The snapshot of the evidence generated text is made from, per run public id (``staleness``)."""
    return {
        str(e.run.public_id): run_evidence_snapshot(
            e.run,
            attempt_count=len(e.attempts),
            latest_attempt=max((a.number for a in e.attempts), default=None),
        )
        for e in run_evidence
    }


def _field_value(value: Any) -> Any:
    if isinstance(value, Person):
        return value.get_username()
    return value


def handover_texts(handover: Handover) -> dict[str, Any]:
    """The handover's current sections and editable fields (owners by username), as an edit conflict shows them."""
    texts: dict[str, Any] = {s: getattr(handover, s) for s in Handover.Section.values}
    for name in EDITABLE_FIELDS:
        value = getattr(handover, name)
        texts[name] = value.get_username() if isinstance(value, Person) else value
    return texts


def handover_update(
    *,
    handover: Handover,
    actor: Person,
    sections: Mapping[str, str] | None = None,
    confirm: Iterable[str] = (),
    fields: Mapping[str, Any] | None = None,
    base_version: int | None = None,
    via_if_match: bool = False,
    at: datetime | None = None,
) -> Handover:
    """Edit sections and fields of ``handover``, and confirm generated sections as they are.

    ``base_version``: the handover version the edit was based on (``handover.versions``); when it
    is not the current one nothing is saved: EditConflict (409, with the current version and
    texts), or PreconditionFailed (412) when it came from ``If-Match`` alone (``via_if_match``).
    Every saving edit raises ``version`` by one.

    ``sections``: section name → new text (only changed texts count; each becomes a revision by ``actor`` and is no
    longer marked generated). ``confirm``: generated sections a person accepts unchanged. ``fields``: any of
    ``EDITABLE_FIELDS`` (owners are users or None). Free text is redacted. Raises DomainError (400) for an unknown
    section or field or an owner who may not see every run of the handover, InvalidTransition (409) for a closed
    handover (reopen first). Side effects: the row, the revisions, one ``handover_edited`` event per run naming what
    changed (old → new for fields), and — when the escalation owner changes after the hand-over — a notification of
    the new owner (on commit). Returns the handover (unchanged and without an event when nothing changed); its
    ``redacted_sections`` lists the sections and fields whose new text lost what looked like a secret
    (``redacted_notice`` words it).
    ``at`` (UTC, default now): when the edit happened, for a story replayed on fixed dates (the demo).
    """
    handover_require_writer(actor, handover=handover)
    sections = dict(sections or {})
    fields = dict(fields or {})
    confirm = list(dict.fromkeys(confirm))
    unknown = sorted((set(sections) | set(confirm)) - set(Handover.Section.values))
    unknown_fields = sorted(set(fields) - set(EDITABLE_FIELDS))
    if unknown or unknown_fields:
        raise DomainError(
            "Unknown sections or fields: " + ", ".join(unknown + unknown_fields) + ".",
            errors={name: ["unknown"] for name in unknown + unknown_fields},
        )
    now = at or timezone.now()
    with transaction.atomic():
        locked = Handover.objects.select_for_update().select_related("job").get(pk=handover.pk)
        version_check(
            current_version=locked.version,
            base_version=base_version,
            via_if_match=via_if_match,
            current=handover_texts(locked),
            what="handover",
        )
        if locked.status == Handover.Status.CLOSED:
            raise InvalidTransition("The handover is closed: reopen it before editing.")
        redacted: list[str] = []
        cleaned = {s: _clean(t, label=s, redacted=redacted) for s, t in sections.items()}
        changed = {s: t for s, t in cleaned.items() if t != getattr(locked, s)}
        if "next_action" in changed and not changed["next_action"].strip() and locked.status != Handover.Status.DRAFT:
            raise DomainError(
                "An active handover always says what is safe to do next: this section cannot be emptied.",
                errors={"next_action": ["required on an active handover"]},
            )
        generated = list(locked.generated_sections or [])
        confirmed = [s for s in confirm if s in generated and s not in changed]
        field_changes: dict[str, dict[str, Any]] = {}
        for name, value in fields.items():
            if isinstance(value, str) and name != "is_supportability_defect":
                value = _clean(value, label=name, redacted=redacted)[:500]
            current = getattr(locked, name)
            same = (
                (getattr(current, "pk", None) == getattr(value, "pk", None))
                if name.endswith("_owner")
                else (current == value)
            )
            if not same:
                if name.endswith("_owner"):  # as a residual exception's owner: someone who may see every run
                    _check_owner(value, list(Run.objects.filter(handover_links__handover=locked)))
                field_changes[name] = {"from": _field_value(current), "to": _field_value(value)}
                setattr(locked, name, value)
        locked.redacted_sections = redacted  # type: ignore[attr-defined]  # for this answer only
        if not changed and not confirmed and not field_changes:
            return locked
        for section, text in changed.items():
            setattr(locked, section, text)
        locked.generated_sections = [s for s in generated if s not in changed and s not in confirmed]
        locked.version += 1
        locked.save(update_fields=[*changed, *field_changes, "generated_sections", "version", "updated_at"])
        if at is not None:  # ``updated_at`` is stamped on save; a replayed story keeps its own time
            Handover.objects.filter(pk=locked.pk).update(updated_at=at)
            locked.updated_at = at
        revisions = HandoverRevision.objects.bulk_create(
            HandoverRevision(handover=locked, section=s, text=t, is_generated=False, created_by=actor, created_at=now)
            for s, t in changed.items()
        )
        parts = []
        if changed:
            parts.append("edited " + ", ".join(SECTION_WORDS[s].lower() for s in changed))
        if confirmed:
            parts.append("confirmed the generated " + ", ".join(SECTION_WORDS[s].lower() for s in confirmed))
        for name, change in field_changes.items():
            parts.append(f"{name.replace('_', ' ')}: {change['from'] or '—'} → {change['to'] or '—'}")
        handover_event_record(
            handover=locked,
            kind=TimelineEvent.Kind.HANDOVER_EDITED,
            summary=f"{_name(actor)} " + "; ".join(parts),
            actor=actor,
            data={
                "sections": list(changed),
                "confirmed": confirmed,
                "fields": field_changes,
                "revisions": [r.pk for r in revisions if r.pk],
                "redacted": redacted,
            },
            occurred_at=now,
        )
        if "escalation_owner" in field_changes and locked.status != Handover.Status.DRAFT and locked.escalation_owner:
            handover_notifications_create(handover=locked, reason="handed_over", recipient=locked.escalation_owner)
    return locked


def handover_generated_preview(*, handover: Handover) -> dict[str, str]:
    """The text each still-generated section would get from the current evidence (writes nothing).

    Returns section → text (redacted like stored text); the diff page compares it with the stored text.
    """
    runs = [link.run for link in HandoverRun.objects.filter(handover=handover).select_related("run").order_by("id")]
    job_evidence, run_evidence = handover_evidence(runs=runs)
    texts = handover_prefill(job=job_evidence, runs=run_evidence)
    return {s: _clean(texts.get(s, getattr(handover, s))) for s in handover.generated_sections or []}


def handover_refresh_generated(*, handover: Handover, actor: Person | None = None) -> Handover:
    """Generate the still-generated sections again from the current evidence (e.g. after a ledger load).

    Records the evidence the text now comes from (``generated_evidence``), so it is no longer stale.

    Sections a person edited or confirmed are left alone. Each section whose text changes gets a
    generated revision; one ``handover_regenerated`` event per run names them. Raises
    InvalidTransition (409) for a closed handover. Returns the handover.
    """
    handover_require_writer(actor, handover=handover)
    now = timezone.now()
    with transaction.atomic():
        locked = Handover.objects.select_for_update().select_related("job").get(pk=handover.pk)
        if locked.status == Handover.Status.CLOSED:
            raise InvalidTransition("The handover is closed: reopen it before refreshing it.")
        runs = [link.run for link in HandoverRun.objects.filter(handover=locked).select_related("run").order_by("id")]
        job_evidence, run_evidence = handover_evidence(runs=runs)
        texts = handover_prefill(job=job_evidence, runs=run_evidence)
        changed = {}
        for section in locked.generated_sections or []:
            text = _clean(texts.get(section, getattr(locked, section)))
            if text != getattr(locked, section):
                changed[section] = text
                setattr(locked, section, text)
        evidence = _evidence_of(run_evidence)
        if not changed and evidence == locked.generated_evidence:
            return locked
        locked.generated_evidence = evidence
        locked.version += 1
        locked.save(update_fields=[*changed, "generated_evidence", "version", "updated_at"])
        if not changed:
            return locked  # the same text from newer evidence: no longer stale, nothing to revise
        HandoverRevision.objects.bulk_create(
            HandoverRevision(handover=locked, section=s, text=t, is_generated=True, created_at=now)
            for s, t in changed.items()
        )
        handover_event_record(
            handover=locked,
            kind=TimelineEvent.Kind.HANDOVER_REGENERATED,
            summary="Generated text refreshed from the evidence: "
            + ", ".join(SECTION_WORDS[s].lower() for s in changed),
            actor=actor,
            data={"sections": list(changed)},
            occurred_at=now,
        )
    return locked


# --------------------------------------------------------------------------------------------------
# The one transition function and its verbs


def handover_transition(
    *,
    handover: Handover,
    action: str,
    actor: Person | None = None,
    reason: str = "",
    data: dict[str, Any] | None = None,
    at: datetime | None = None,
) -> Transitioned[Handover]:
    """Move ``handover`` by ``action`` (a key of ``Handover.TRANSITIONS``) with a guarded UPDATE.

    The UPDATE is filtered on the primary key and the status read just before (which must be an
    allowed source), and sets the status with its ``*_at`` / ``*_by`` stamps. If nothing changed
    and the handover already has the target status it is returned (idempotent); otherwise
    InvalidTransition (409) names the current status. Closing clears the runs' open flags and
    reopening a closed handover sets them again (Conflict, 409, when another handover is open for
    one of its runs). In the same transaction: one event per run (``EVENT_KINDS``) with actor,
    from, to and reason. Follow-up work is the verbs' (notifications, next-run checks). Returns
    ``Transitioned(handover, moved)`` (``handover.core.transitions``); Forbidden (403) for a person who
    may not write the handover. ``at`` (UTC, default now): when the move happened, for a story replayed on
    fixed dates (the demo).
    """
    handover_require_writer(actor, handover=handover)
    target = Handover.TRANSITIONS[action][1]
    if action == "reopen" and not reason.strip():  # the one place the rule lives: every reopen passes here
        raise DomainError("Say why the handover is reopened.", errors={"reason": ["This field is required."]})
    now = at or timezone.now()
    values: dict[str, Any] = {"status_changed_at": now, "updated_at": now, "version": F("version") + 1}
    values.update(STATUS_STAMPS[action](now, actor))
    if action == "reopen":
        values["reopen_reason"] = reason

    def record(moved: Handover, before: str) -> None:
        if target == Handover.Status.CLOSED:
            HandoverRun.objects.filter(handover_id=moved.pk).update(is_open=False)
        elif before == Handover.Status.CLOSED:
            try:
                with transaction.atomic():
                    HandoverRun.objects.filter(handover_id=moved.pk).update(is_open=True)
            except IntegrityError as exc:
                raise Conflict(
                    "Another handover is open for one of its runs: close that one before reopening this one."
                ) from exc
        words = moved.get_status_display().lower()
        summary = f"Handover {'reopened' if action == 'reopen' else words} by {_name(actor)}"
        if reason:
            summary += f": {reason}"
        handover_event_record(
            handover=moved,
            kind=EVENT_KINDS[action],
            summary=summary,
            actor=actor,
            data={"from": before, "to": target, "reason": reason, **(data or {})},
            occurred_at=now,
        )

    return transition(
        queryset=Handover.objects.select_related("job"),
        pk=handover.pk,
        table=Handover.TRANSITIONS,
        action=action,
        values=values,
        noun="the handover",
        on_moved=record,
    )


def handover_hand_over(*, handover: Handover, actor: Person, at: datetime | None = None) -> Handover:
    """Hand a draft over: it needs an escalation owner, who is told by e-mail (and chat) after commit.

    Raises InvalidTransition (409) without an escalation owner or when it is not a draft (a
    handed-over handover is returned as it is). Side effects: the transition and its events;
    notification rows, their send tasks enqueued on commit. Refuses a person who may not write it
    first (``handover_require_writer``, Forbidden 403). ``at``: as ``handover_transition``'s.
    """
    handover_require_writer(actor, handover=handover)
    with transaction.atomic():
        current = Handover.objects.select_related("escalation_owner").get(pk=handover.pk)
        if current.status == Handover.Status.DRAFT and current.escalation_owner_id is None:
            raise InvalidTransition(
                "Name the escalation owner before handing over.",
                errors={"escalation_owner": ["Required to hand over."]},
            )
        moved, changed = handover_transition(handover=current, action="hand_over", actor=actor, at=at)
        if changed:
            handover_notifications_create(handover=moved, reason="handed_over", recipient=current.escalation_owner)
    return moved


def handover_start_recovery(*, handover: Handover, actor: Person) -> Handover:
    """Mark a handed-over handover as ``recovering`` (someone works on getting the output right)."""
    return handover_transition(handover=handover, action="start_recovery", actor=actor).obj


def handover_verify(*, handover: Handover, actor: Person) -> Handover:
    """Move to ``verifying`` and schedule the next-run check of each run's target.

    Uses ``runs.checks.scheduling.next_run_check_schedule`` (the first fire time after now; one check per
    target and fire time serves every requester) and links each check to its run. When every check
    has already passed or was waived, the handover is resolved at once. Raises InvalidTransition
    (409) when not ``recovering`` (a verifying handover is returned as it is) or when a run has no
    job target (no next run is expected: register one first); DomainError (400) from the check
    service (inactive target, no next fire time). Side effects: the transition, checks and their events.
    """
    from handover.handovers.checks import handover_checks_schedule, handover_resolve_if_settled

    with transaction.atomic():
        moved, changed = handover_transition(handover=handover, action="verify", actor=actor)
        if changed:
            handover_checks_schedule(handover=moved, actor=actor)
    if changed:
        moved = handover_resolve_if_settled(handover=moved) or moved
    return moved


def handover_resolve(*, handover: Handover) -> Handover:
    """The system's act: ``verifying`` → ``resolved`` once every run's next-run check passed or was waived.

    Raises InvalidTransition (409) while a check is missing, scheduled or failed, or when the
    handover is not verifying (a resolved one is returned as it is).
    """
    from handover.handovers.closing import handover_checks_settled

    with transaction.atomic():
        if handover.status != Handover.Status.RESOLVED and not handover_checks_settled(handover=handover):
            raise InvalidTransition("Not every next-run check has passed or been waived yet.")
        return handover_transition(handover=handover, action="resolve", actor=None).obj


def handover_close(*, handover: Handover, actor: Person) -> Handover:
    """Close ``handover``: a person's act, refused with the list of what is missing.

    Allowed from ``verifying`` and ``resolved`` when the closing conditions hold
    (``handover.handovers.closing``). Raises InvalidTransition (409): from another status; or with
    ``errors["closing_conditions"]`` listing every missing item. A closed handover is returned as
    it is. Side effects: the transition, the runs' open flags cleared, one event per run.
    """
    handover_require_writer(actor, handover=handover)  # before what is missing: a reader learns nothing
    with transaction.atomic():
        current = Handover.objects.select_for_update().select_related("job").get(pk=handover.pk)
        allowed_from, _ = Handover.TRANSITIONS["close"]
        if current.status in allowed_from:
            missing = handover_closing_missing(handover=current)
            if missing:
                raise InvalidTransition(
                    "The handover cannot close yet: " + " ".join(missing),
                    errors={"closing_conditions": missing},
                )
        return handover_transition(handover=current, action="close", actor=actor).obj


def handover_reopen(*, handover: Handover, actor: Person | None, reason: str) -> Handover:
    """Reopen a verifying, resolved or closed handover: back to ``recovering``, with a reason.

    ``actor`` None means the system (a failed next-run check). Raises DomainError (400) without a
    reason, InvalidTransition (409) from draft or handed over (a recovering handover is returned as it
    is), Conflict (409) when another handover has been opened for one of its runs meanwhile.
    """
    return handover_transition(handover=handover, action="reopen", actor=actor, reason=_clean(reason)[:2000]).obj


# --------------------------------------------------------------------------------------------------
# Residual exceptions


def handover_require_writer(
    actor: Person | None, *, handover: Handover | None = None, runs: list[Run] | None = None
) -> None:
    """Refuse a person who may not act on every run of the handover (Forbidden, 403); the system (None) may.

    The rule is ``runs.permissions.may_act_on_runs`` (support on each run's tenant, the job's technical
    owners, admins). Every writing service calls it; pages and the API call it too before they read a
    body, so a reader learns nothing from a 400. The handover (or runs) must already be visible to
    ``actor``: the callers fetch through the selectors, which answer 404 otherwise.
    """
    if actor is None:
        return
    if runs is None:
        assert handover is not None
        runs = list(Run.objects.filter(handover_links__handover_id=handover.pk))
    if not may_act_on_runs(user=actor, runs=runs):
        raise Forbidden("Only support on each run's tenant, the job's technical owners and admins write this handover.")


def _require_editable(handover: Handover) -> None:
    if Handover.objects.filter(pk=handover.pk, status=Handover.Status.CLOSED).exists():
        raise InvalidTransition("The handover is closed: reopen it before changing its residual exceptions.")


def _check_owner(owner: Person | None, runs: list[Run]) -> None:
    if owner is None:
        return
    if not owner.is_active:
        raise DomainError("The owner must be an active person.", errors={"owner": ["inactive"]})
    if Run.objects.filter(run_visibility_filter(user=owner), pk__in=[r.pk for r in runs]).count() != len(runs):
        raise DomainError(
            f"{owner.get_username()} may not see every run of this handover.",
            errors={"owner": ["no role on these runs"]},
        )


def residual_exception_create(
    *,
    handover: Handover,
    actor: Person,
    description: str,
    record_ids: Iterable[str] = (),
    run: Run | None = None,
    owner: Person | None = None,
    due_date: date | None = None,
) -> ResidualException:
    """Record what is knowingly left over, covering the ledger items named by ``record_ids``.

    ``record_ids`` are looked up in the ledger of ``run`` (or of every run of the handover); an id
    that is not there is refused (DomainError, 400, listing them). ``owner`` must be an active
    person who may see every run. The description is required. Raises InvalidTransition (409) for a
    closed handover. Side effects: the exception, its covered items, a ``residual_exception_added``
    event per run. Returns the exception; its ``redacted_sections`` is ``["description"]`` when the
    description lost what looked like a secret.
    """
    redacted: list[str] = []
    description = _clean(description, label="description", redacted=redacted)
    if not description:
        raise DomainError("Describe what is left over.", errors={"description": ["This field is required."]})
    ids = list(dict.fromkeys(str(i).strip() for i in record_ids if str(i).strip()))
    _require_editable(handover)
    runs = [link.run for link in HandoverRun.objects.filter(handover=handover).select_related("run").order_by("id")]
    handover_require_writer(actor, runs=runs)
    if run is not None and run.pk not in {r.pk for r in runs}:
        raise DomainError("The run is not part of this handover.", errors={"run": ["not in this handover"]})
    _check_owner(owner, runs)
    scope = [run] if run is not None else runs
    items = list(WorkItem.objects.filter(run__in=scope, record_id__in=ids)) if ids else []
    unknown = sorted(set(ids) - {item.record_id for item in items})
    if unknown:
        raise DomainError(
            f"Not in the ledger of this handover's runs: {', '.join(unknown[:20])}.",
            errors={"record_ids": [f"unknown: {', '.join(unknown[:20])}"]},
        )
    with transaction.atomic():
        exception = ResidualException.objects.create(
            handover=handover,
            run=run,
            description=description,
            owner=owner,
            due_date=due_date,
            created_by=actor,
        )
        if items:
            exception.work_items.add(*items)
        handover_event_record(
            handover=handover,
            kind=TimelineEvent.Kind.RESIDUAL_EXCEPTION_ADDED,
            summary=f"{_name(actor)} recorded a residual exception"
            + (f" covering {len(items)} item(s)" if items else "")
            + f", owner {owner.get_username() if owner else '— (none yet)'}"
            + (f", due {due_date:%Y-%m-%d}" if due_date else "")
            + f": {description[:200]}",
            actor=actor,
            data={
                "exception": str(exception.public_id),
                "record_ids": ids[:100],
                "item_count": len(items),
                "owner": owner.get_username() if owner else None,
                "due_date": due_date.isoformat() if due_date else None,
            },
        )
    exception.redacted_sections = redacted  # type: ignore[attr-defined]  # for this answer only
    return exception


def residual_exception_update(
    *,
    exception: ResidualException,
    actor: Person,
    owner: Person | None,
    due_date: date | None,
    description: str | None = None,
    base_version: int | None = None,
    via_if_match: bool = False,
) -> ResidualException:
    """Name the owner and due date of a residual exception (and optionally reword it).

    Same rules as ``residual_exception_create``. ``base_version``/``via_if_match``: the exception's
    own version the change was based on, as for ``handover_update`` (409 with its current owner,
    due date and description, or 412); a saving change raises ``version``. Side effects: the row
    and a ``residual_exception_changed`` event per run with old → new. Returns the exception.
    """
    handover = exception.handover
    _require_editable(handover)
    runs = [link.run for link in HandoverRun.objects.filter(handover=handover).select_related("run").order_by("id")]
    handover_require_writer(actor, runs=runs)
    _check_owner(owner, runs)
    text = _clean(description) if description is not None else exception.description
    if not text:
        raise DomainError("Describe what is left over.", errors={"description": ["This field is required."]})
    before = {
        "owner": exception.owner.get_username() if exception.owner is not None else None,
        "due_date": exception.due_date.isoformat() if exception.due_date else None,
        "description": exception.description,
    }
    after = {
        "owner": owner.get_username() if owner else None,
        "due_date": due_date.isoformat() if due_date else None,
        "description": text,
    }
    with transaction.atomic():
        current = ResidualException.objects.select_for_update().get(pk=exception.pk)
        version_check(
            current_version=current.version,
            base_version=base_version,
            via_if_match=via_if_match,
            current={**before, "version": current.version},
            what="residual exception",
        )
        if before == after:
            return exception
        exception.owner, exception.due_date, exception.description = owner, due_date, text
        exception.version = current.version + 1
        exception.save(update_fields=["owner", "due_date", "description", "version", "updated_at"])
        changes = {k: {"from": before[k], "to": after[k]} for k in before if before[k] != after[k]}
        handover_event_record(
            handover=handover,
            kind=TimelineEvent.Kind.RESIDUAL_EXCEPTION_CHANGED,
            summary=f"{_name(actor)} changed a residual exception: "
            + "; ".join(f"{k.replace('_', ' ')} {v['from'] or '—'} → {v['to'] or '—'}" for k, v in changes.items())[
                :400
            ],
            actor=actor,
            data={"exception": str(exception.public_id), "changes": changes},
        )
    return exception

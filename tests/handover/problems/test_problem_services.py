"""Problems: the state machine, the clean-run rule, the verify sweep, links, and who may write."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from handover.core.errors import Conflict, DomainError, Forbidden, InvalidTransition, NotFound
from handover.handovers.models import Handover
from handover.problems.clean_runs import problem_clean_runs
from handover.problems.models import Problem, ProblemEvent, ProblemHandover
from handover.problems.services import (
    EDITABLE_FIELDS,
    problem_create,
    problem_link_handover,
    problem_require_creator,
    problem_require_handover_writer,
    problem_require_writer,
    problem_transition,
    problem_unlink_handover,
    problem_update,
    problem_verify_sweep,
)
from runs.attempts.models import Run
from tests.handover.helpers import force_status
from tests.handover.problems.conftest import NIGHT, ProblemWorld


def _problem(pw: ProblemWorld, **kwargs: object) -> Problem:
    return problem_create(
        actor=pw.admin,
        title="Ledger gateway drops acknowledgements",
        defect_ref="PRB-2041",
        handovers=[pw.acme_handover, pw.borealis_handover],
        **kwargs,  # type: ignore[arg-type]
    )


def _deploy(problem: Problem, actor: object) -> Problem:
    """Move to fix_deployed, the deployment stamped just after the failed night's slot (before the later runs)."""
    problem_transition(problem=problem, action="start_fix", actor=actor)  # type: ignore[arg-type]
    moved = problem_transition(problem=problem, action="deploy_fix", actor=actor).obj  # type: ignore[arg-type]
    Problem.objects.filter(pk=problem.pk).update(fix_deployed_at=NIGHT + timedelta(days=1, hours=3))
    moved.refresh_from_db()
    return moved


def _kinds(problem: Problem) -> list[str]:
    return list(ProblemEvent.objects.filter(problem=problem).order_by("id").values_list("kind", flat=True))


def test_create_links_handovers_and_writes_history(pw: ProblemWorld) -> None:
    problem = _problem(pw, clean_runs_required=2)

    assert problem.status == "open" and problem.clean_runs_required == 2
    assert set(problem.handovers.all()) == {pw.acme_handover, pw.borealis_handover}
    assert _kinds(problem) == ["created", "handover_linked", "handover_linked"]
    assert ProblemEvent.objects.filter(problem=problem, kind="created").get().actor == pw.admin


def test_the_lifecycle_moves_one_step_at_a_time_with_one_event_each(pw: ProblemWorld) -> None:
    problem = _problem(pw)
    problem_transition(problem=problem, action="start_fix", actor=pw.support)
    moved = problem_transition(problem=problem, action="deploy_fix", actor=pw.owner).obj

    assert moved.status == "fix_deployed" and moved.fix_deployed_at is not None
    events = ProblemEvent.objects.filter(problem=problem, kind="transitioned").order_by("id")
    assert [(e.from_status, e.to_status, e.actor) for e in events] == [
        ("open", "fix_in_progress", pw.support),
        ("fix_in_progress", "fix_deployed", pw.owner),
    ]


@pytest.mark.parametrize(
    ("status", "action"),
    [
        ("open", "verify"),
        ("verified", "deploy_fix"),
        ("verified", "start_fix"),
        ("closed", "start_fix"),
        ("closed", "deploy_fix"),
        ("closed", "verify"),
        ("fix_in_progress", "verify"),
    ],
)
def test_illegal_transitions_are_refused_and_write_nothing(pw: ProblemWorld, status: str, action: str) -> None:
    problem = _problem(pw)
    now = timezone.now()
    stamps: dict[str, object] = {"status": status}
    if status == "verified":
        stamps.update(fix_deployed_at=now, verified_at=now)
    if status == "closed":
        stamps.update(closed_at=now, closed_by=pw.admin)
    Problem.objects.filter(pk=problem.pk).update(**stamps)
    before = ProblemEvent.objects.count()

    with pytest.raises(InvalidTransition):
        problem_transition(problem=problem, action=action, actor=pw.admin, reason="because")

    problem.refresh_from_db()
    assert problem.status == status
    assert ProblemEvent.objects.count() == before


def test_a_repeated_transition_is_idempotent(pw: ProblemWorld) -> None:
    problem = _problem(pw)
    problem_transition(problem=problem, action="start_fix", actor=pw.admin)
    again = problem_transition(problem=problem, action="start_fix", actor=pw.admin)

    assert again.moved is False and again.obj.status == "fix_in_progress"
    assert _kinds(problem).count("transitioned") == 1


def test_reopen_and_unverified_close_need_a_reason(pw: ProblemWorld) -> None:
    problem = _problem(pw)
    with pytest.raises(DomainError) as refused:
        problem_transition(problem=problem, action="close", actor=pw.admin)
    assert "reason" in refused.value.errors
    closed = problem_transition(problem=problem, action="close", actor=pw.admin, reason="duplicate of PRB-1").obj
    assert closed.status == "closed" and closed.closed_by == pw.admin

    with pytest.raises(DomainError):
        problem_transition(problem=problem, action="reopen", actor=pw.admin, reason="  ")
    reopened = problem_transition(problem=problem, action="reopen", actor=pw.admin, reason="came back").obj
    assert reopened.status == "open" and reopened.closed_at is None and reopened.fix_deployed_at is None
    assert ProblemEvent.objects.filter(problem=problem, to_status="open", reason="came back").exists()


def test_verified_only_after_n_clean_runs_of_every_linked_target(pw: ProblemWorld) -> None:
    problem = _deploy(_problem(pw, clean_runs_required=2), pw.admin)
    pw.next_run(pw.acme, day=1)
    pw.next_run(pw.acme, day=2)
    pw.next_run(pw.borealis, day=1)

    figures = problem_clean_runs(problem=problem)
    assert [(t.tenant.slug, t.clean) for t in figures.targets] == [("acme-foods", 2), ("borealis-retail", 1)]
    assert figures.clean == 1 and not figures.satisfied
    with pytest.raises(InvalidTransition) as refused:
        problem_transition(problem=problem, action="verify", actor=pw.support)
    assert refused.value.errors == {"clean_runs": ["1 of 2"]}
    assert problem_verify_sweep().verified == 0

    pw.next_run(pw.borealis, day=2)
    result = problem_verify_sweep()

    problem.refresh_from_db()
    assert (result.checked, result.verified) == (1, 1)
    assert problem.status == "verified" and problem.verified_at is not None
    event = ProblemEvent.objects.get(problem=problem, to_status="verified")
    assert event.actor is None and event.data["clean_runs"] == 2 and len(event.data["targets"]) == 2


def test_a_bad_run_after_the_fix_resets_the_count_and_unfinished_runs_do_not(pw: ProblemWorld) -> None:
    problem = _deploy(_problem(pw, clean_runs_required=2), pw.admin)
    for tenant in (pw.acme, pw.borealis):
        pw.next_run(tenant, day=1)
        pw.next_run(tenant, day=2)
    failed = pw.next_run(pw.acme, day=3, status=Run.Status.FAILED)
    pw.next_run(pw.acme, day=4)
    pw.next_run(pw.acme, day=5, status=Run.Status.RUNNING)

    acme = problem_clean_runs(problem=problem).targets[0]
    assert (acme.clean, acme.pending, acme.reset_by) == (1, 1, failed)
    assert problem_verify_sweep().verified == 0

    pw.next_run(pw.acme, day=6)
    assert problem_verify_sweep().verified == 1


def test_a_succeeded_run_needing_attention_is_not_clean(pw: ProblemWorld) -> None:
    problem = _deploy(_problem(pw, clean_runs_required=1), pw.admin)
    pw.next_run(pw.borealis, day=1)
    attention = pw.next_run(pw.acme, day=1)
    Run.objects.filter(pk=attention.pk).update(unresolved_count=3)

    assert problem_clean_runs(problem=problem).targets[0].clean == 0
    assert problem_verify_sweep().verified == 0


def test_runs_before_the_deployment_do_not_count(pw: ProblemWorld) -> None:
    problem = _problem(pw, clean_runs_required=1)
    pw.next_run(pw.acme, day=1)
    pw.next_run(pw.borealis, day=1)
    problem_transition(problem=problem, action="deploy_fix", actor=pw.admin)  # now: after those slots

    assert problem_clean_runs(problem=problem).clean == 0
    assert problem_verify_sweep().verified == 0


def test_a_handover_closes_while_its_problem_stays_open(pw: ProblemWorld) -> None:
    problem = _problem(pw)
    force_status(pw.acme_handover, "closed", pw.admin)

    problem.refresh_from_db()
    assert pw.acme_handover.status == Handover.Status.CLOSED
    assert problem.status == "open"
    assert problem.handovers.filter(pk=pw.acme_handover.pk).exists()


def test_edit_records_old_and_new_values(pw: ProblemWorld) -> None:
    problem = _problem(pw)
    problem_update(problem=problem, actor=pw.support, title="Gateway acks lost", defect_ref="PRB-2041")

    event = ProblemEvent.objects.get(problem=problem, kind="edited")
    assert event.data["changes"] == {
        "title": {"from": "Ledger gateway drops acknowledgements", "to": "Gateway acks lost"}
    }
    problem_update(problem=problem, actor=pw.support, title="Gateway acks lost")
    assert _kinds(problem).count("edited") == 1  # nothing changed: nothing written
    with pytest.raises(DomainError):
        problem_update(problem=problem, actor=pw.support, clean_runs_required=0)


def _read(problem: Problem) -> dict[str, object]:
    """The editable fields as a person read them (what a page or a client sends as ``based_on``)."""
    return {name: getattr(problem, name) for name in EDITABLE_FIELDS}


def test_an_edit_based_on_what_was_read_writes_only_what_the_person_changed(pw: ProblemWorld) -> None:
    problem = _problem(pw)
    read = _read(problem)
    problem_update(problem=problem, actor=pw.admin, based_on=_read(problem), defect_ref="PRB-9")

    # another edit, read before that one: its defect_ref is the old one, left alone, so it is not reverted
    edited = problem_update(problem=problem, actor=pw.support, based_on=read, **{**read, "title": "Acks lost"})

    assert (edited.title, edited.defect_ref) == ("Acks lost", "PRB-9")
    assert ProblemEvent.objects.filter(problem=problem, kind="edited").order_by("id").last().data["changes"] == {
        "title": {"from": "Ledger gateway drops acknowledgements", "to": "Acks lost"}
    }


def test_an_edit_of_a_field_someone_changed_meanwhile_is_refused_and_writes_nothing(pw: ProblemWorld) -> None:
    problem = _problem(pw)
    read = _read(problem)
    problem_update(problem=problem, actor=pw.admin, title="Gateway acks lost")
    events = _kinds(problem)

    with pytest.raises(
        Conflict, match="Someone changed the title of this problem after you opened the page: nothing was saved"
    ):
        problem_update(
            problem=problem, actor=pw.support, based_on=read, title="Ledger acks dropped", description="more"
        )

    problem.refresh_from_db()
    assert (problem.title, problem.description) == ("Gateway acks lost", "")
    assert _kinds(problem) == events
    # the same change as the one made meanwhile is no conflict
    problem_update(problem=problem, actor=pw.support, based_on=read, title="Gateway acks lost", description="more")
    problem.refresh_from_db()
    assert problem.description == "more"


def test_link_and_unlink(pw: ProblemWorld) -> None:
    problem = problem_create(actor=pw.support, title="Acks lost", handovers=[pw.acme_handover])
    with pytest.raises(Forbidden):  # sam is not support on borealis: may not write that handover
        problem_link_handover(problem=problem, handover=pw.borealis_handover, actor=pw.support)
    problem_link_handover(problem=problem, handover=pw.borealis_handover, actor=pw.owner)
    problem_link_handover(problem=problem, handover=pw.borealis_handover, actor=pw.owner)  # twice: once

    assert ProblemHandover.objects.filter(problem=problem).count() == 2
    problem_unlink_handover(problem=problem, handover=pw.borealis_handover, actor=pw.borealis_support)
    with pytest.raises(NotFound):
        problem_unlink_handover(problem=problem, handover=pw.borealis_handover, actor=pw.owner)
    assert _kinds(problem) == ["created", "handover_linked", "handover_linked", "handover_unlinked"]


@pytest.mark.parametrize(
    ("who", "may"),
    [("support", True), ("owner", True), ("borealis_support", False), ("auditor", False), ("business", False)],
)
def test_who_may_move_a_problem_linked_to_acme(pw: ProblemWorld, who: str, may: bool) -> None:
    problem = problem_create(actor=pw.admin, title="Acks lost", handovers=[pw.acme_handover])
    actor = getattr(pw, who)
    if may:
        assert problem_transition(problem=problem, action="start_fix", actor=actor).moved
    else:
        with pytest.raises(Forbidden):
            problem_transition(problem=problem, action="start_fix", actor=actor)
        assert _kinds(problem).count("transitioned") == 0


def test_readers_and_strangers_may_not_open_problems(pw: ProblemWorld) -> None:
    for person in (pw.auditor, pw.business, pw.nobody):
        with pytest.raises(Forbidden):
            problem_create(actor=person, title="x")
    with pytest.raises(Forbidden):  # borealis support may not link acme's handover
        problem_create(actor=pw.borealis_support, title="x", handovers=[pw.acme_handover])
    assert not Problem.objects.exists()


def _written() -> tuple[int, int, int]:
    """What a problem write leaves: problems, links, history entries."""
    return Problem.objects.count(), ProblemHandover.objects.count(), ProblemEvent.objects.count()


@pytest.mark.parametrize("who", ["auditor", "nobody"])  # a reader of acme's handover, and an outsider
def test_the_guards_the_pages_and_api_call_refuse_readers_and_outsiders(pw: ProblemWorld, who: str) -> None:
    """The refusals the problem pages used to make themselves, asked of the services directly."""
    problem = problem_create(actor=pw.admin, title="Acks lost", handovers=[pw.acme_handover])
    person = getattr(pw, who)
    before = _written()

    with pytest.raises(Forbidden):
        problem_require_writer(person, problem=problem)
    with pytest.raises(Forbidden):
        problem_require_creator(person)
    with pytest.raises(Forbidden):
        problem_require_creator(person, handovers=[pw.acme_handover])
    with pytest.raises(Forbidden):
        problem_require_handover_writer(person, handover=pw.acme_handover)
    with pytest.raises(Forbidden):
        problem_create(actor=person, title="Mine", handovers=[pw.acme_handover])
    with pytest.raises(Forbidden):
        problem_update(problem=problem, actor=person, title="Renamed")
    with pytest.raises(Forbidden):
        problem_link_handover(problem=problem, handover=pw.borealis_handover, actor=person)
    with pytest.raises(Forbidden):
        problem_unlink_handover(problem=problem, handover=pw.acme_handover, actor=person)
    with pytest.raises(Forbidden):
        problem_transition(problem=problem, action="start_fix", actor=person)

    assert _written() == before
    problem.refresh_from_db()
    assert (problem.title, problem.status) == ("Acks lost", "open")


def test_the_guards_let_writers_through_and_the_system_edit(pw: ProblemWorld) -> None:
    problem = problem_create(actor=pw.admin, title="Acks lost", handovers=[pw.acme_handover])

    problem_require_writer(pw.support, problem=problem)  # support of the linked tenant
    problem_require_writer(None, problem=problem)  # the verify sweep
    problem_require_creator(pw.borealis_support)  # support somewhere opens an unlinked problem
    problem_require_handover_writer(pw.owner, handover=pw.borealis_handover)
    with pytest.raises(Forbidden):  # borealis support writes neither acme's problem nor acme's handover
        problem_require_writer(pw.borealis_support, problem=problem)
    with pytest.raises(Forbidden):
        problem_require_creator(pw.borealis_support, handovers=[pw.acme_handover])


@pytest.mark.postgres
def test_the_history_is_append_only_on_postgres(pw: ProblemWorld) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    problem = _problem(pw)
    with pytest.raises(IntegrityError), transaction.atomic():
        ProblemEvent.objects.filter(problem=problem).update(summary="rewritten")

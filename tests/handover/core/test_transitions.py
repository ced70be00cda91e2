"""The one transition helper: a guarded UPDATE from a model's table, one return shape, its side effect
written only when the row moved."""

from __future__ import annotations

import pytest

from handover.core.errors import InvalidTransition
from handover.core.transitions import Transitioned, transition
from runs.attempts.models import Attempt
from tests.factories import AttemptFactory

pytestmark = pytest.mark.django_db


def test_a_transition_moves_once_and_then_returns_the_row_unmoved() -> None:
    attempt = AttemptFactory(status="queued")
    seen: list[tuple[int, str]] = []

    first = transition(
        queryset=Attempt.objects.all(),
        pk=attempt.pk,
        table=Attempt.TRANSITIONS,
        action="start",
        noun="the attempt",
        on_moved=lambda row, before: seen.append((row.pk, before)),
    )
    again = transition(
        queryset=Attempt.objects.all(),
        pk=attempt.pk,
        table=Attempt.TRANSITIONS,
        action="start",
        noun="the attempt",
        on_moved=lambda row, before: seen.append((row.pk, before)),
    )

    assert isinstance(first, Transitioned) and first.moved and first.obj.status == "running"
    assert not again.moved and again.obj.status == "running"
    assert seen == [(attempt.pk, "queued")]  # the side effect ran once, with the status it had
    row, moved = again  # a pair, as every performer returns it
    assert (row.pk, moved) == (attempt.pk, False)


def test_a_transition_from_a_status_the_table_does_not_allow_is_refused_and_changes_nothing() -> None:
    attempt = AttemptFactory(status="succeeded")
    with pytest.raises(InvalidTransition, match="The attempt is succeeded; it cannot start") as raised:
        transition(
            queryset=Attempt.objects.all(), pk=attempt.pk, table=Attempt.TRANSITIONS, action="start", noun="the attempt"
        )
    assert raised.value.errors == {"status": ["succeeded"]}
    assert Attempt.objects.get(pk=attempt.pk).status == "succeeded"


def test_a_guard_that_does_not_match_refuses_like_a_wrong_status() -> None:
    attempt = AttemptFactory(status="queued", execution_id="exec-1")
    with pytest.raises(InvalidTransition):
        transition(
            queryset=Attempt.objects.all(),
            pk=attempt.pk,
            table=Attempt.TRANSITIONS,
            action="start",
            noun="the attempt",
            guard={"execution_id": "another"},
        )
    assert Attempt.objects.get(pk=attempt.pk).status == "queued"

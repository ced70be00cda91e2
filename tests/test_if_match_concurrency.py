"""Two writes sent with the same ``If-Match`` at the same instant: exactly one is saved, the other answers
412 (PostgreSQL: real row locks). The tag is compared under the row's lock inside the write's transaction
(``handover.core.edits.edit_precondition``), so the second write sees the first one's change. Threads are
released together by one Barrier (``tests.concurrency``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection  # noqa: F401 - read by the skipif condition

from handover.core.edits import edit_etag
from handover.core.errors import PreconditionFailed
from handover.ownership.models import JobOwnership
from handover.ownership.services import job_ownership_set, ownership_values
from handover.problems.models import Problem, ProblemEvent
from handover.problems.services import problem_create, problem_edit_values, problem_update
from runs.timeline.models import TimelineEvent
from tests.concurrency import run_concurrently
from tests.factories import JobFactory, UserFactory

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif("connection.vendor != 'postgresql'", reason="real row locks need PostgreSQL"),
]


def _saved_or_refused(write: Callable[[], Any]) -> Callable[[], str]:
    def call() -> str:
        try:
            write()
        except PreconditionFailed:
            return "412"
        return "saved"

    return call


def test_two_problem_edits_with_the_same_etag_at_once_save_one_and_refuse_the_other() -> None:
    admin = UserFactory(admin=True)
    problem = problem_create(actor=admin, title="Gateway acks lost")
    tag = edit_etag(problem_edit_values(problem))  # both clients read it before either wrote: the race

    results = run_concurrently(
        [
            _saved_or_refused(
                lambda title=title: problem_update(problem=problem, actor=admin, title=title, if_match=tag)
            )
            for title in ("Acks lost at the gateway", "Gateway drops acks")
        ]
    )

    assert sorted(results) == ["412", "saved"]
    saved = Problem.objects.get(pk=problem.pk).title
    assert saved == ("Acks lost at the gateway" if results[0] == "saved" else "Gateway drops acks")
    assert ProblemEvent.objects.filter(problem=problem, kind=ProblemEvent.Kind.EDITED).count() == 1


def test_two_first_ownership_writes_with_the_same_etag_at_once_save_one_and_refuse_the_other() -> None:
    """No ownership row exists yet, so the job's row is what the writes queue on."""
    admin = UserFactory(admin=True)
    job = JobFactory()
    people = [UserFactory(username="ann-owner"), UserFactory(username="bob-owner")]
    tag = edit_etag(ownership_values(None))

    results = run_concurrently(
        [
            _saved_or_refused(
                lambda person=person: job_ownership_set(
                    actor=admin, job=job, team=None, escalation_owner=person, if_match=tag
                )
            )
            for person in people
        ]
    )

    assert sorted(results) == ["412", "saved"]
    row = JobOwnership.objects.get(job=job)
    assert row.escalation_owner == people[results.index("saved")]
    assert TimelineEvent.objects.filter(kind=TimelineEvent.Kind.OWNERSHIP_CHANGED).count() == 1

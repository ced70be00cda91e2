"""Every (source status, action) pair of the attempt transition table, and the run status it implies."""

from __future__ import annotations

import pytest

from handover.core.errors import InvalidTransition, NotFound
from runs.attempts.models import Attempt, Run
from runs.attempts.services import attempt_abandon, attempt_transition
from runs.catalog.services import role_grant
from runs.timeline.models import TimelineEvent
from tests.factories import AttemptFactory, UserFactory

pytestmark = pytest.mark.django_db
STATUSES = ["queued", "running", "succeeded", "failed", "timed_out", "abandoned"]
TARGETS = ["queued", "running", "succeeded", "failed", "timed_out"]
ALLOWED = {
    ("queued", "running"),
    ("queued", "succeeded"),
    ("queued", "failed"),
    ("queued", "timed_out"),
    ("running", "succeeded"),
    ("running", "failed"),
    ("running", "timed_out"),
}


@pytest.mark.parametrize("source", STATUSES)
@pytest.mark.parametrize("target", TARGETS)
def test_transition_matrix(source: str, target: str) -> None:
    attempt = AttemptFactory(status=source, abandon_reason="gone" if source == "abandoned" else "")
    events_before = TimelineEvent.objects.count()

    if (source, target) in ALLOWED:
        moved, changed = attempt_transition(attempt=attempt, status=target)
        assert changed and moved.status == target
        assert TimelineEvent.objects.count() == events_before + 1
        event = TimelineEvent.objects.latest("id")
        assert event.kind == f"attempt_{target}" and event.attempt == attempt
        expected_run = {"queued": "running", "running": "running", "succeeded": "succeeded"}.get(target, "failed")
        assert Run.objects.get(pk=attempt.run_id).status == expected_run
    elif source == target:
        same, changed = attempt_transition(attempt=attempt, status=target)
        assert same.status == source and not changed  # idempotent
        assert TimelineEvent.objects.count() == events_before
    else:
        with pytest.raises(InvalidTransition):
            attempt_transition(attempt=attempt, status=target)
        assert Attempt.objects.get(pk=attempt.pk).status == source
        assert TimelineEvent.objects.count() == events_before


def test_abandon_needs_a_person_and_a_reason_and_is_recorded() -> None:
    attempt = AttemptFactory(status="running")
    person = UserFactory()
    with pytest.raises(NotFound):  # no role on the run's tenant or job: the run is not theirs to see
        attempt_abandon(attempt=attempt, actor=person, reason="worker node was deleted")
    role_grant(user=person, role="support", obj=attempt.run.tenant)

    abandoned = attempt_abandon(attempt=attempt, actor=person, reason="worker node was deleted")

    assert abandoned.status == "abandoned" and abandoned.abandoned_by == person and abandoned.ended_at
    event = TimelineEvent.objects.get(attempt=attempt)
    assert event.actor_user == person and "worker node was deleted" in event.summary
    with pytest.raises(InvalidTransition):
        attempt_abandon(attempt=AttemptFactory(run=attempt.run, number=2, status="running"), actor=person, reason="")


def test_run_status_follows_the_highest_numbered_attempt() -> None:
    first = AttemptFactory(status="running", number=1)
    second = AttemptFactory(run=first.run, status="queued", number=2)
    attempt_transition(attempt=second, status="failed")
    attempt_transition(attempt=first, status="succeeded")

    assert Run.objects.get(pk=first.run_id).status == Run.Status.FAILED

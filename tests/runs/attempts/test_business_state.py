"""A run's business state: ``ok`` only when the technical success is also a business one; the runs list, the
run header, the handover and the API all show it with its reasons, the technical status beside it."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from knox.models import AuthToken

from handover.core.errors import InvalidTransition
from handover.handovers.services import handover_create
from runs.attempts.business_state import run_business_state, run_business_state_annotate
from runs.attempts.corrections import run_conflicting_report_explain, run_refire_explain
from runs.attempts.models import Attempt, Run
from runs.catalog.services import role_grant
from runs.timeline.services import timeline_event_record
from tests.factories import AttemptFactory, RunFactory, UserFactory
from tests.handover.helpers import force_status

pytestmark = pytest.mark.django_db


def succeeded_run(**counts: int) -> Run:
    run = RunFactory(status=Run.Status.SUCCEEDED, **counts)
    AttemptFactory(run=run, status=Attempt.Status.SUCCEEDED)
    return run


def state_of(run: Run) -> tuple[str, tuple[str, ...]]:
    annotated = run_business_state_annotate(Run.objects.filter(pk=run.pk)).get()
    found = run_business_state(annotated)
    return found.state, found.reasons


def test_ok_only_when_the_success_is_also_a_business_success() -> None:
    assert state_of(succeeded_run()) == ("ok", ())
    assert state_of(succeeded_run(unresolved_count=6, eligible_count=11)) == ("attention", ("unresolved:6",))
    assert state_of(succeeded_run(possible_duplicate_count=2)) == ("attention", ("possible_duplicates:2",))
    assert state_of(RunFactory(status=Run.Status.FAILED, unresolved_count=1)) == ("failed", ("unresolved:1",))


def test_duplicate_triggers_conflicting_reports_and_open_handovers_need_attention() -> None:
    run = succeeded_run()
    AttemptFactory(run=run, execution_id="dup", number=2, status="succeeded", is_duplicate_trigger=True)
    assert state_of(run) == ("attention", ("duplicate_trigger",))
    Attempt.objects.filter(run=run, is_duplicate_trigger=True).update(
        duplicate_explained_at=run.created_at, duplicate_explained_by=UserFactory(), duplicate_explanation="ok"
    )
    assert state_of(run) == ("ok", ())

    timeline_event_record(job=run.job, run=run, kind="conflicting_report", summary="a late alert")
    assert state_of(run) == ("attention", ("conflicting_report",))
    explainer = UserFactory(admin=True)
    run_conflicting_report_explain(run=run, actor=explainer, reason="the monitor lagged", evidence_ref="OPS-9")
    assert state_of(run) == ("ok", ())
    with pytest.raises(InvalidTransition):  # nothing left to explain
        run_conflicting_report_explain(run=run, actor=explainer, reason="again", evidence_ref="OPS-9")
    timeline_event_record(job=run.job, run=run, kind="conflicting_report", summary="another late alert")
    assert state_of(run) == ("attention", ("conflicting_report",))  # a later report needs its own explanation

    other = succeeded_run()
    support = UserFactory()
    role_grant(user=support, role="support", obj=other.tenant)
    handover = handover_create(actor=support, runs=[other])
    assert state_of(other) == ("attention", ("handover:draft",))
    force_status(handover, "verifying", support)
    assert state_of(other) == ("attention", ("handover:verifying",))
    force_status(handover, "resolved", support)
    assert state_of(other) == ("ok", ())


def test_an_unexplained_refire_on_the_same_execution_needs_attention_until_explained() -> None:
    """A re-fire on the execution the payload named again is a flag a person explains; a re-fire that
    became a new attempt (an adapter-derived id) is not."""
    run = succeeded_run()
    timeline_event_record(job=run.job, run=run, kind="refire", summary="fired again", data={"same_attempt": False})
    assert state_of(run) == ("ok", ())
    timeline_event_record(job=run.job, run=run, kind="refire", summary="fired again", data={"same_attempt": True})
    assert state_of(run) == ("attention", ("refire",))
    assert run_business_state(Run.objects.get(pk=run.pk)).reasons == ("refire",)  # without the annotations
    run_refire_explain(run=run, actor=UserFactory(admin=True), reason="flapping exporter", evidence_ref="OPS-7")
    assert state_of(run) == ("ok", ())
    failed = RunFactory(status=Run.Status.FAILED)
    timeline_event_record(job=failed.job, run=failed, kind="refire", summary="x", data={"same_attempt": True})
    assert state_of(failed) == ("failed", ("refire",))


def test_the_run_page_explains_a_conflicting_report() -> None:
    run = succeeded_run()
    timeline_event_record(job=run.job, run=run, kind="conflicting_report", summary="a late alert")
    support = UserFactory()
    role_grant(user=support, role="support", obj=run.tenant)
    client = Client()
    client.force_login(support)
    page = client.get(f"/runs/{run.public_id}/").content.decode()
    assert "contradicts this run" in page and "Explain the conflicting report" in page

    client.post(f"/runs/{run.public_id}/explain-conflicting-report/", {"reason": "lag", "evidence_ref": "OPS-1"})

    assert state_of(run) == ("ok", ())
    event = run.timeline.get(kind="conflicting_report_explained")
    assert event.actor_user == support and event.data == {"evidence_ref": "OPS-1"}
    assert "Explain the conflicting report" not in client.get(f"/runs/{run.public_id}/").content.decode()


def test_list_header_handover_and_api_show_the_business_state(django_assert_max_num_queries: Any) -> None:
    run = succeeded_run(unresolved_count=6, eligible_count=11, completed_count=5)
    support = UserFactory()
    role_grant(user=support, role="support", obj=run.tenant)
    handover = handover_create(actor=support, runs=[run])
    force_status(handover, "verifying", support)
    client = Client()
    client.force_login(support)

    listing = client.get("/runs/").content.decode()
    header = client.get(f"/runs/{run.public_id}/").content.decode()
    page = client.get(f"/handovers/{handover.public_id}/").content.decode()

    for html in (listing, header, page):
        assert "badge-attention" in html and "6 ledger items unresolved" in html and "handover verifying" in html
        assert "technical: succeeded" in html
    assert "badge-succeeded" not in listing  # the technical success is never the first thing shown
    _, token = AuthToken.objects.create(user=support)
    api = Client(HTTP_AUTHORIZATION=f"Token {token}")
    detail = api.get(f"/api/v1/runs/{run.public_id}/").json()
    assert (detail["business_state"], detail["business_state_reasons"], detail["status"]) == (
        "attention",
        ["unresolved:6", "handover:verifying"],
        "succeeded",
    )
    for _ in range(4):
        succeeded_run().tenant  # noqa: B018
    with django_assert_max_num_queries(6):  # session, user, count, the page with its annotations, …
        listed = api.get("/api/v1/runs/").json()["results"]
    assert [r["business_state"] for r in listed if r["id"] == str(run.public_id)] == ["attention"]
